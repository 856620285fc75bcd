"""ControllerRevisions: the pod templates a StatefulSet or DaemonSet has had (Kubernetes'
`pkg/controller/history`). Deployments keep theirs in ReplicaSets; these two keep each
template as a ControllerRevision `<owner>-<hash>` whose `data` is a strategic merge patch
that puts the template back in the owner (what `kubectl rollout undo` applies) and whose
`revision` is a number that `kubectl rollout history` lists. Pods carry theirs in the
`controller-revision-hash` label.

A template equal to an older revision's reuses that revision with the next number (a
rollback), so the history never holds two copies of one template. Revisions beyond
`revisionHistoryLimit` that no pod uses are deleted, oldest first.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass

from kubelab.api.errors import StatusError
from kubelab.client import NAMESPACE_INDEX, Object, RestClient, namespace_index, resource_for

from . import podcontrol as pc
from .base import ControllerContext
from .deploymentutil import template_hash

CONTROLLER_REVISIONS = resource_for("apps/v1", "ControllerRevision")

REVISION_LABEL = "controller-revision-hash"


def revision_data(template: Object) -> Object:
    """A ControllerRevision's data: a patch that puts `template` back in its owner."""
    return {"spec": {"template": {**copy.deepcopy(template), "$patch": "replace"}}}


def revision_template(revision: Object) -> Object:
    """The pod template a ControllerRevision holds."""
    template: Object = copy.deepcopy(
        ((revision.get("data") or {}).get("spec") or {}).get("template") or {}
    )
    template.pop("$patch", None)
    return template


def revision_hash(revision: Object) -> str:
    return str(pc.labels(revision).get(REVISION_LABEL) or "")


@dataclass
class Revisions:
    """An owner's revisions: the one of its template now (`update`), the one it ran
    before an update began (`current`; the same when no update is under way), all."""

    current: Object
    update: Object
    all: list[Object]

    def names(self) -> set[str]:
        return {str(pc.meta(self.current)["name"]), str(pc.meta(self.update)["name"])}


class History:
    """The ControllerRevisions of one kind of owner, read from the shared informer."""

    def __init__(self, ctx: ControllerContext, client: RestClient) -> None:
        self._client = client
        self._informer = ctx.informers.informer(CONTROLLER_REVISIONS)
        pc.add_index(self._informer, NAMESPACE_INDEX, namespace_index)

    def owned(self, owner: Object) -> list[Object]:
        """The owner's revisions, by increasing number."""
        uid = pc.meta(owner).get("uid")
        namespace = str(pc.meta(owner)["namespace"])
        owned = [
            r
            for r in self._informer.indexer.by_index(NAMESPACE_INDEX, namespace)
            if (pc.controller_ref(r) or {}).get("uid") == uid
        ]
        return sorted(owned, key=lambda r: int(r.get("revision") or 0))

    def sync(self, owner: Object, current_name: str | None) -> Revisions:
        """The revisions of `owner`, the one of its template created (or renumbered,
        for a rollback) as needed; `current_name` names the current one, if known."""
        owned = self.owned(owner)
        template = (owner.get("spec") or {}).get("template") or {}
        data = revision_data(template)
        top = int(owned[-1].get("revision") or 0) if owned else 0
        update = next((r for r in owned if r.get("data") == data), None)
        if update is None:
            update = self._create(owner, data, top + 1)
            owned.append(update)
        elif int(update.get("revision") or 0) < top:
            changed = copy.deepcopy(update)
            changed["revision"] = top + 1
            update = self._client.update(CONTROLLER_REVISIONS, changed)
            name = pc.meta(update)["name"]
            owned = [update if pc.meta(r)["name"] == name else r for r in owned]
        current = next((r for r in owned if pc.meta(r)["name"] == current_name), update)
        return Revisions(current, update, owned)

    def _create(self, owner: Object, data: Object, number: int) -> Object:
        namespace = str(pc.meta(owner)["namespace"])
        collisions = (owner.get("status") or {}).get("collisionCount")
        template = (owner.get("spec") or {}).get("template") or {}
        hash_ = template_hash(template, collisions)
        name = f"{pc.meta(owner)['name']}-{hash_}"
        template_labels = dict((template.get("metadata") or {}).get("labels") or {})
        revision = {
            "apiVersion": CONTROLLER_REVISIONS.api_version,
            "kind": CONTROLLER_REVISIONS.kind,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {**template_labels, REVISION_LABEL: hash_},
                "ownerReferences": [pc.new_controller_ref(owner)],
            },
            "data": data,
            "revision": number,
        }
        try:
            return self._client.create(CONTROLLER_REVISIONS, revision, namespace)
        except StatusError as exc:
            if exc.code != 409:
                raise
            # Made by an earlier sync whose result the cache has not shown yet.
            existing = self._client.get(CONTROLLER_REVISIONS, name, namespace)
            if existing.get("data") != data:
                raise
            return existing

    def truncate(self, owner: Object, revisions: Revisions, in_use: Iterable[str]) -> None:
        """Delete the oldest revisions beyond the owner's revisionHistoryLimit, except
        the current and update ones and those named (or hashed) in `in_use`."""
        limit = int((owner.get("spec") or {}).get("revisionHistoryLimit", 10))
        live = revisions.names() | set(in_use)
        history = [
            r
            for r in revisions.all
            if pc.meta(r)["name"] not in live and revision_hash(r) not in live
        ]
        for old in history[: max(0, len(history) - limit)]:
            try:
                self._client.delete(
                    CONTROLLER_REVISIONS, str(pc.meta(old)["name"]), str(pc.meta(old)["namespace"])
                )
            except StatusError as exc:
                if exc.code != 404:
                    raise
