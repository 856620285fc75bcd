"""The StatefulSet controller (kube-controller-manager's statefulset-controller): pods
with a stable identity, `<set>-0`, `<set>-1`, ..., each with its own PersistentVolumeClaim
per `volumeClaimTemplates` entry (`<claim>-<set>-<ordinal>`, kept when the pod goes, so
that its successor of the same ordinal finds the same data).

Revisions (`history.py`). `status.updateRevision` is the ControllerRevision of the
current template, `status.currentRevision` the one the set ran before the update began;
pods carry theirs (by name) in the label `controller-revision-hash`.

A sync (Kubernetes' defaultStatefulSetControl, reduced to what the issue asks):

1. claims the pods of its namespace (adopt/release by selector, as the ReplicaSet
   controller);
2. for each ordinal below `spec.replicas`, in increasing order: a finished pod
   (Succeeded, Failed) is deleted, a missing one created (from the current revision
   below the partition, from the update revision from it on). With `OrderedReady`, the
   sync stops at the first pod it created, or that is not yet Running and Ready (for
   `minReadySeconds`), or is terminating: pod N+1 never starts before pod N is ready.
   With `Parallel` it goes on;
3. pods at or above `spec.replicas` are deleted from the highest ordinal down; with
   OrderedReady one at a time, each once the others are healthy;
4. `RollingUpdate`: from the highest ordinal down to `partition`, the first pod not at
   the update revision is deleted (and is recreated at it by a later sync), one at a
   time, waiting for each to be Running and Ready again. `OnDelete`: pods are only
   recreated at the update revision when a user deletes them;
5. writes the status: replicas, readyReplicas, availableReplicas, currentReplicas,
   updatedReplicas, the two revisions (equal again once every pod is updated and
   ready), observedGeneration.

Names are fixed by ordinal, so a sync that runs on a stale cache gets AlreadyExists (or
NotFound for a delete), never a duplicate: no expectations are needed here.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client import (
    NAMESPACE_INDEX,
    REAL_CLOCK,
    Clock,
    DeletedFinalStateUnknown,
    Object,
    WorkQueue,
    object_key,
    resource_for,
)
from kubelab.client.record import NORMAL, WARNING, EventRecorder

from . import podcontrol as pc
from .base import ControllerContext, SyncResult, Workers, controller_logger
from .history import REVISION_LABEL, History, Revisions, revision_template
from .replicaset import PODS, pod_informer

NAME = "statefulset-controller"

STATEFUL_SETS = resource_for("apps/v1", "StatefulSet")
CLAIMS = resource_for("v1", "PersistentVolumeClaim")

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"

log = controller_logger(NAME)


def ordinal(set_name: str, pod: Object) -> int | None:
    """The ordinal of a pod named `<set>-<n>`, or None if it is not named so."""
    prefix, sep, number = str(pc.meta(pod).get("name") or "").rpartition("-")
    if not sep or prefix != set_name or not number.isdigit():
        return None
    return int(number)


def running_and_ready(pod: Object, min_ready_seconds: int, now: Any) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and pc.pod_available(
        pod, min_ready_seconds, now
    )


def finished(pod: Object) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def claim_name(claim: Object, pod_name: str) -> str:
    return f"{pc.meta(claim).get('name')}-{pod_name}"


class StatefulSetController:
    """The controller of the module docstring."""

    name = NAME

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._client = ctx.client_for(NAME)
        self._events = EventRecorder(self._client, NAME)
        self._clock = clock
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._sets = ctx.informers.informer(STATEFUL_SETS)
        self._history = History(ctx, self._client)
        self._pods = pod_informer(ctx)
        self._sets.add_event_handler(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._enqueue,
        )
        self._pods.add_event_handler(
            on_add=self._pod_changed,
            on_update=lambda old, new: self._pod_updated(old, new),
            on_delete=self._pod_changed,
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._sets).run(
                workers, stop
            )

    # -- handlers ------------------------------------------------------------------------

    def _enqueue(self, obj: Object | DeletedFinalStateUnknown) -> None:
        self.queue.add(object_key(obj))

    def _pod_changed(self, pod: Object | DeletedFinalStateUnknown) -> None:
        obj = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        owner = pc.resolve_controller(obj, STATEFUL_SETS.kind, self._sets.indexer.get)
        if owner is not None:
            self._enqueue(owner)
        elif pc.controller_ref(obj) is None and not isinstance(pod, DeletedFinalStateUnknown):
            for s in pc.selecting(self._sets.indexer.list(), obj, pc.label_selector):
                self._enqueue(s)

    def _pod_updated(self, old: Object, new: Object) -> None:
        if pc.meta(old).get("resourceVersion") == pc.meta(new).get("resourceVersion"):
            return
        old_ref = pc.controller_ref(old)
        if old_ref is not None and old_ref != pc.controller_ref(new):
            self._pod_changed(old)
        self._pod_changed(new)

    # -- sync ----------------------------------------------------------------------------

    def sync(self, key: str) -> SyncResult:
        cached = self._sets.indexer.get(key)
        if cached is None:
            return None
        sts = copy.deepcopy(cached)
        namespace = str(pc.meta(sts)["namespace"])
        name = str(pc.meta(sts)["name"])
        selector = pc.label_selector(sts)

        refs = pc.RefManager(self._client, STATEFUL_SETS, sts, PODS, selector, log)
        candidates = [
            p
            for p in self._pods.indexer.by_index(NAMESPACE_INDEX, namespace)
            if ordinal(name, p) is not None or pc.controller_ref(p) is not None
        ]
        pods = refs.claim(candidates).owned
        revisions = self._history.sync(sts, (sts.get("status") or {}).get("currentRevision"))
        if not pc.being_deleted(sts):
            self._update(sts, revisions, pods)
        pods = [
            p
            for p in self._pods.indexer.by_index(NAMESPACE_INDEX, namespace)
            if (pc.controller_ref(p) or {}).get("uid") == pc.meta(sts).get("uid")
        ]
        self._write_status(sts, revisions, pods)
        self._history.truncate(sts, revisions, (pc.labels(p).get(REVISION_LABEL, "") for p in pods))
        return None

    # -- revisions -----------------------------------------------------------------------

    # -- pods ----------------------------------------------------------------------------

    def _new_pod(self, sts: Object, revisions: Revisions, index: int) -> Object:
        spec = sts.get("spec") or {}
        strategy = spec.get("updateStrategy") or {}
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        use_current = strategy.get("type", "RollingUpdate") == "RollingUpdate" and index < partition
        revision = revisions.current if use_current else revisions.update
        template = revision_template(revision)
        pod_name = f"{pc.meta(sts)['name']}-{index}"
        pod = pc.pod_from_template(
            template,
            sts,
            name=pod_name,
            extra_labels={
                POD_NAME_LABEL: pod_name,
                POD_INDEX_LABEL: str(index),
                REVISION_LABEL: str(pc.meta(revision)["name"]),
            },
        )
        pod["spec"]["hostname"] = pod_name
        if spec.get("serviceName"):
            pod["spec"]["subdomain"] = spec["serviceName"]
        claims = spec.get("volumeClaimTemplates") or []
        if claims:
            mounted = {str(pc.meta(c).get("name")) for c in claims}
            volumes = [v for v in pod["spec"].get("volumes") or [] if v.get("name") not in mounted]
            for claim in claims:
                volumes.append(
                    {
                        "name": pc.meta(claim).get("name"),
                        "persistentVolumeClaim": {"claimName": claim_name(claim, pod_name)},
                    }
                )
            pod["spec"]["volumes"] = volumes
        return pod

    def _create_claims(self, sts: Object, pod_name: str) -> None:
        """The pod's PersistentVolumeClaims, unless they exist (they outlive pods)."""
        namespace = str(pc.meta(sts)["namespace"])
        selector_labels = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        for template in (sts.get("spec") or {}).get("volumeClaimTemplates") or []:
            claim_name_ = claim_name(template, pod_name)
            claim = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": claim_name_,
                    "namespace": namespace,
                    "labels": {**(pc.meta(template).get("labels") or {}), **selector_labels},
                },
                "spec": copy.deepcopy(template.get("spec") or {}),
            }
            try:
                self._client.create(CLAIMS, claim, namespace)
            except StatusError as exc:
                if exc.code != 409:
                    self._events.event(
                        sts,
                        WARNING,
                        "FailedCreate",
                        f"create Claim {claim_name_} for Pod {pod_name} in "
                        f"StatefulSet {pc.meta(sts)['name']} failed error: {exc}",
                    )
                    raise
                continue
            self._events.event(
                sts,
                NORMAL,
                "SuccessfulCreate",
                f"create Claim {claim_name_} Pod {pod_name} in StatefulSet "
                f"{pc.meta(sts)['name']} success",
            )

    def _create_pod(self, sts: Object, revisions: Revisions, index: int) -> None:
        pod = self._new_pod(sts, revisions, index)
        pod_name = pod["metadata"]["name"]
        self._create_claims(sts, pod_name)
        try:
            self._client.create(PODS, pod, str(pc.meta(sts)["namespace"]))
        except StatusError as exc:
            if exc.code == 409:
                return  # the cache had not shown it yet
            self._events.event(
                sts,
                WARNING,
                "FailedCreate",
                f"create Pod {pod_name} in StatefulSet {pc.meta(sts)['name']} failed error: {exc}",
            )
            raise
        self._events.event(
            sts,
            NORMAL,
            "SuccessfulCreate",
            f"create Pod {pod_name} in StatefulSet {pc.meta(sts)['name']} successful",
        )

    def _delete_pod(self, sts: Object, pod: Object) -> None:
        pod_name = str(pc.meta(pod)["name"])
        try:
            self._client.delete(PODS, pod_name, str(pc.meta(pod)["namespace"]))
        except StatusError as exc:
            if exc.code == 404:
                return
            raise
        self._events.event(
            sts,
            NORMAL,
            "SuccessfulDelete",
            f"delete Pod {pod_name} in StatefulSet {pc.meta(sts)['name']} successful",
        )

    def _update(self, sts: Object, revisions: Revisions, pods: list[Object]) -> None:
        """Steps 2 to 4 of the module docstring."""
        spec = sts.get("spec") or {}
        name = str(pc.meta(sts)["name"])
        wanted = int(spec.get("replicas", 1))
        ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self._clock.utcnow()
        by_ordinal: dict[int, Object] = {}
        for pod in pods:
            index = ordinal(name, pod)
            if index is not None:
                by_ordinal[index] = pod

        def healthy(pod: Object) -> bool:
            return running_and_ready(pod, min_ready, now) and not pc.being_deleted(pod)

        for index in range(wanted):
            found = by_ordinal.get(index)
            if found is None:
                self._create_pod(sts, revisions, index)
                if ordered:
                    return
                continue
            if finished(found) and not pc.being_deleted(found):
                log.info("statefulset %s: pod %s-%d finished, recreating it", name, name, index)
                self._delete_pod(sts, found)
                if ordered:
                    return
                continue
            if ordered and not healthy(found):
                return  # pod N+1 waits for pod N
        condemned = sorted((i for i in by_ordinal if i >= wanted), reverse=True)
        unhealthy = [i for i in sorted(by_ordinal) if not healthy(by_ordinal[i])]
        for index in condemned:
            pod = by_ordinal[index]
            if pc.being_deleted(pod):
                if ordered:
                    return
                continue
            if ordered and not healthy(pod) and unhealthy and unhealthy[0] != index:
                return
            self._delete_pod(sts, pod)
            if ordered:
                return
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        update_name = pc.meta(revisions.update)["name"]
        for index in range(wanted - 1, partition - 1, -1):
            member = by_ordinal.get(index)
            if member is None:
                return
            if pc.labels(member).get(REVISION_LABEL) != update_name and not pc.being_deleted(
                member
            ):
                log.info(
                    "statefulset %s: member %s-%d is at an old revision, deleting it",
                    name,
                    name,
                    index,
                )
                self._delete_pod(sts, member)
                return
            if not healthy(member):
                return

    # -- status --------------------------------------------------------------------------

    def _write_status(self, sts: Object, revisions: Revisions, pods: list[Object]) -> None:
        spec = sts.get("spec") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self._clock.utcnow()
        current = pc.meta(revisions.current)["name"]
        update = pc.meta(revisions.update)["name"]
        live = [p for p in pods if not pc.being_deleted(p)]
        status: dict[str, Any] = {
            "observedGeneration": pc.meta(sts).get("generation", 0),
            "replicas": len(live),
            "readyReplicas": sum(1 for p in live if pc.pod_ready(p)),
            "availableReplicas": sum(1 for p in live if pc.pod_available(p, min_ready, now)),
            "currentReplicas": sum(1 for p in live if pc.labels(p).get(REVISION_LABEL) == current),
            "updatedReplicas": sum(1 for p in live if pc.labels(p).get(REVISION_LABEL) == update),
            "currentRevision": current,
            "updateRevision": update,
        }
        old = sts.get("status") or {}
        if old.get("collisionCount") is not None:
            status["collisionCount"] = old["collisionCount"]
        wanted = int(spec.get("replicas", 1))
        rolling = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"
        if (
            rolling
            and status["updatedReplicas"] == status["replicas"] == wanted
            and status["readyReplicas"] == wanted
        ):
            # The update is complete: what was the update is now current.
            status["currentReplicas"] = status["updatedReplicas"]
            status["currentRevision"] = update
        if status != old:
            sts["status"] = status
            self._client.update_status(STATEFUL_SETS, sts)
