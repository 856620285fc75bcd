"""ClusterRole aggregation (kube-controller-manager's clusterrole-aggregation-controller):
a ClusterRole with an `aggregationRule` holds the rules of every other ClusterRole its
`clusterRoleSelectors` match, and nothing else.

This is how the default `admin`, `edit` and `view` roles get their rules (from the
bootstrap policy's `system:aggregate-to-*` roles, and `edit` and `view` themselves being
labelled for the role above them), and how an add-on extends them: a ClusterRole labelled
`rbac.authorization.k8s.io/aggregate-to-view: "true"` that grants reading a custom
resource makes everyone bound to `view` able to read it.

As in Kubernetes: any change to any ClusterRole queues every aggregated role (a label
change can move a role in or out of any of them); a sync gathers, selector after
selector and within a selector by role name, the matched roles' rules without
duplicates (a role never matches itself) and, when they differ from the role's, writes
them in place of its rules. Hand-written rules of an aggregated role are overwritten.
The write is an update carrying the cached resourceVersion (a 409 is retried on a fresher
cache), where Kubernetes applies the rules server-side under the field manager of the
controller's name.
"""

from __future__ import annotations

import threading
from typing import Any

from kubelab.api.selectors import selector_from_label_selector
from kubelab.client import (
    DeletedFinalStateUnknown,
    Object,
    WorkQueue,
    resource_for,
)

from .base import ControllerContext, SyncResult, Workers, controller_logger

NAME = "clusterrole-aggregation-controller"

CLUSTER_ROLES = resource_for("rbac.authorization.k8s.io/v1", "ClusterRole")

log = controller_logger(NAME)


def aggregated_rules(role: Object, roles: list[Object]) -> list[dict[str, Any]]:
    """The rules of the aggregated `role`: those of the `roles` its selectors match, in
    selector order, then by role name, each rule once."""
    name = role["metadata"]["name"]
    rules: list[dict[str, Any]] = []
    for term in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
        selector = selector_from_label_selector(term)
        matched = sorted(
            (
                r
                for r in roles
                if r["metadata"]["name"] != name
                and selector.matches(r["metadata"].get("labels") or {})
            ),
            key=lambda r: str(r["metadata"]["name"]),
        )
        for other in matched:
            for rule in other.get("rules") or []:
                if rule not in rules:
                    rules.append(rule)
    return rules


class ClusterRoleAggregationController:
    """Keeps each aggregated ClusterRole's rules (module docstring); keyed by role name."""

    name = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        self._tracer = ctx.tracer
        self._client = ctx.client_for(NAME)
        self.queue: WorkQueue[str] = WorkQueue()
        self._roles = ctx.informers.informer(CLUSTER_ROLES)
        self._roles.add_event_handler(
            on_add=self._changed,
            on_update=lambda _old, _new: self._changed(_new),
            on_delete=self._changed,
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._roles).run(
            workers, stop
        )

    def _changed(self, _role: Object | DeletedFinalStateUnknown) -> None:
        for role in self._roles.indexer.list():
            if role.get("aggregationRule") is not None:
                self.queue.add(str(role["metadata"]["name"]))

    def sync(self, name: str) -> SyncResult:
        role = self._roles.indexer.get(name)
        if role is None or role.get("aggregationRule") is None:
            return None
        rules = aggregated_rules(role, self._roles.indexer.list())
        if rules == (role.get("rules") or []):
            return None
        updated = {**role, "rules": rules}
        written = self._client.update(CLUSTER_ROLES, updated)
        meta = written["metadata"]
        log.info(
            "clusterrole %s (uid %s): %d aggregated rules, was %d (resourceVersion %s)",
            name,
            meta.get("uid"),
            len(rules),
            len(role.get("rules") or []),
            meta.get("resourceVersion"),
        )
        return None
