"""The ReplicaSet controller (kube-controller-manager's replicaset-controller), and the
ReplicationController controller, which is the same code over the older kind whose
selector is a plain label map. It keeps `spec.replicas` pods matching the selector:
the seeds' "delete a pod, a replacement appears".

A sync of one ReplicaSet (keyed "namespace/name"):

1. claims the active pods of its namespace (`podcontrol.RefManager`): adopts orphans its
   selector matches, releases its pods that no longer match;
2. if its expectations are satisfied (`podcontrol.Expectations`: every create and
   delete of the last sync has reached the cache), creates the missing pods in
   slow-start bursts (1, 2, 4, ...) or deletes the surplus, the pods Kubernetes ranks
   first (unscheduled, pending, not ready, ..., newest), at most `BURST_REPLICAS` at a
   time; each with an Event (SuccessfulCreate, SuccessfulDelete, FailedCreate, ...);
3. writes the status: replicas, fullyLabeledReplicas (pods with all the template's
   labels), readyReplicas, availableReplicas (ready for `minReadySeconds`),
   observedGeneration, and the ReplicaFailure condition while creates or deletes fail.
   A pod that is ready but not yet available brings the ReplicaSet back when it will be.

Handlers: ReplicaSet events queue it; a pod event queues its controller (found by its
controller reference, uid checked) and ticks off expectations; an orphan pod queues
every ReplicaSet whose selector matches it, which may adopt it.
"""

from __future__ import annotations

import copy
import datetime
import threading
from dataclasses import dataclass
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource
from kubelab.api.selectors import Selector, selector_from_set
from kubelab.client import (
    NAMESPACE_INDEX,
    REAL_CLOCK,
    Clock,
    DeletedFinalStateUnknown,
    Object,
    SharedInformer,
    WorkQueue,
    namespace_index,
    object_key,
    resource_for,
)
from kubelab.client.record import NORMAL, WARNING, EventRecorder

from . import podcontrol as pc
from .base import ControllerContext, SyncError, SyncResult, Workers, controller_logger

REPLICASET_CONTROLLER = "replicaset-controller"
REPLICATION_CONTROLLER = "replicationcontroller-controller"

PODS = resource_for("v1", "Pod")
REPLICA_SETS = resource_for("apps/v1", "ReplicaSet")
REPLICATION_CONTROLLERS = resource_for("v1", "ReplicationController")

REPLICA_FAILURE = "ReplicaFailure"


@dataclass(frozen=True)
class Failure:
    """A create or delete of a sync that failed: the ReplicaFailure condition's reason
    (FailedCreate, FailedDelete) and message."""

    reason: str
    message: str


@dataclass(frozen=True)
class Kind:
    """What differs between the two kinds this controller keeps."""

    name: str
    resource: Resource

    def selector(self, owner: Object) -> Selector:
        if self.resource == REPLICATION_CONTROLLERS:
            return selector_from_set((owner.get("spec") or {}).get("selector"))
        return pc.label_selector(owner)


REPLICA_SET_KIND = Kind(REPLICASET_CONTROLLER, REPLICA_SETS)
REPLICATION_CONTROLLER_KIND = Kind(REPLICATION_CONTROLLER, REPLICATION_CONTROLLERS)


def pod_informer(ctx: ControllerContext) -> SharedInformer:
    """The shared pod informer, indexed by namespace for the workload controllers."""
    informer = ctx.informers.informer(PODS)
    pc.add_index(informer, NAMESPACE_INDEX, namespace_index)
    return informer


def replica_status(
    owner: Object, pods: list[Object], now: datetime.datetime, failure: Failure | None
) -> dict[str, Any]:
    """The status of a ReplicaSet (or ReplicationController) that owns `pods`;
    `failure` is a create or delete that failed in this sync."""
    spec = owner.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    old = owner.get("status") or {}
    status: dict[str, Any] = {
        "replicas": len(pods),
        "fullyLabeledReplicas": sum(
            1 for p in pods if template_labels.items() <= pc.labels(p).items()
        ),
        "readyReplicas": sum(1 for p in pods if pc.pod_ready(p)),
        "availableReplicas": sum(1 for p in pods if pc.pod_available(p, min_ready, now)),
        "observedGeneration": pc.meta(owner).get("generation", 0),
    }
    conditions = [c for c in old.get("conditions") or [] if c.get("type") != REPLICA_FAILURE]
    if failure is not None:
        previous = next(
            (c for c in old.get("conditions") or [] if c.get("type") == REPLICA_FAILURE), None
        )
        conditions.append(
            {
                "type": REPLICA_FAILURE,
                "status": "True",
                "reason": failure.reason,
                "message": failure.message,
                "lastTransitionTime": (previous or {}).get("lastTransitionTime")
                or pc.format_time(now),
            }
        )
    if conditions:
        status["conditions"] = conditions
    return status


class ReplicaSetController:
    """The controller of the module docstring, for one `Kind`."""

    def __init__(
        self, ctx: ControllerContext, kind: Kind = REPLICA_SET_KIND, clock: Clock = REAL_CLOCK
    ) -> None:
        self._tracer = ctx.tracer
        self.name = kind.name
        self._kind = kind
        self._log = controller_logger(kind.name)
        self._client = ctx.client_for(kind.name)
        self._events = EventRecorder(self._client, kind.name)
        self._clock = clock
        self.expectations = pc.Expectations(clock)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._owners = ctx.informers.informer(kind.resource)
        self._pods = pod_informer(ctx)
        self._owners.add_event_handler(
            on_add=self._owner_changed,
            on_update=lambda _old, new: self._owner_changed(new),
            on_delete=self._owner_deleted,
        )
        self._pods.add_event_handler(
            on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(
                self.name,
                self.queue,
                self.sync,
                self._log,
                tracer=self._tracer,
                objects=self._owners,
            ).run(workers, stop)

    # -- handlers ------------------------------------------------------------------------

    def _owner_changed(self, owner: Object) -> None:
        self.queue.add(object_key(owner))

    def _owner_deleted(self, owner: Object | DeletedFinalStateUnknown) -> None:
        key = object_key(owner)
        self.expectations.forget(key)
        self.queue.add(key)

    def _controller_of(self, pod: Object) -> Object | None:
        return pc.resolve_controller(pod, self._kind.resource.kind, self._owners.indexer.get)

    def _matching_owners(self, pod: Object) -> list[Object]:
        return pc.selecting(self._owners.indexer.list(), pod, self._kind.selector)

    def _pod_added(self, pod: Object) -> None:
        if pc.being_deleted(pod):
            # A restarted controller-manager may see a pod first while it is going.
            self._pod_deleted(pod)
            return
        owner = self._controller_of(pod)
        if owner is not None:
            key = object_key(owner)
            self.expectations.creation_observed(key)
            self.queue.add(key)
        elif pc.controller_ref(pod) is None:
            for candidate in self._matching_owners(pod):
                self.queue.add(object_key(candidate))

    def _pod_updated(self, old: Object, new: Object) -> None:
        if pc.meta(old).get("resourceVersion") == pc.meta(new).get("resourceVersion"):
            return
        if pc.being_deleted(new) and not pc.being_deleted(old):
            # Marked for deletion: as good as deleted for counting; the final delete
            # event ticks nothing off twice (deletions are tracked by pod key).
            self._pod_deleted(new)
        old_ref, new_ref = pc.controller_ref(old), pc.controller_ref(new)
        if old_ref is not None and (new_ref is None or old_ref.get("uid") != new_ref.get("uid")):
            previous = self._controller_of(old)
            if previous is not None:
                self.queue.add(object_key(previous))
        owner = self._controller_of(new)
        if owner is not None:
            key = object_key(owner)
            self.queue.add(key)
            # A pod that became ready is available minReadySeconds later: look again then.
            min_ready = int((owner.get("spec") or {}).get("minReadySeconds") or 0)
            if min_ready and pc.pod_ready(new) and not pc.pod_ready(old):
                self.queue.add_after(key, min_ready + 1)
        elif new_ref is None and (
            pc.labels(old) != pc.labels(new) or (old_ref is not None and new_ref is None)
        ):
            for candidate in self._matching_owners(new):
                self.queue.add(object_key(candidate))

    def _pod_deleted(self, pod: Object | DeletedFinalStateUnknown) -> None:
        obj = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        owner = self._controller_of(obj)
        if owner is None:
            return
        key = object_key(owner)
        self.expectations.deletion_observed(key, object_key(pod))
        self.queue.add(key)

    # -- sync ----------------------------------------------------------------------------

    def sync(self, key: str) -> SyncResult:
        cached = self._owners.indexer.get(key)
        if cached is None:
            self.expectations.forget(key)
            return None
        owner = copy.deepcopy(cached)
        namespace = str(pc.meta(owner).get("namespace"))
        satisfied = self.expectations.satisfied(key)
        selector = self._kind.selector(owner)
        candidates = [
            p for p in self._pods.indexer.by_index(NAMESPACE_INDEX, namespace) if pc.pod_active(p)
        ]
        refs = pc.RefManager(self._client, self._kind.resource, owner, PODS, selector, self._log)
        pods = refs.claim(candidates).owned
        failure = None
        if satisfied and not pc.being_deleted(owner):
            failure = self._manage(key, owner, pods)
        now = self._clock.utcnow()
        status = replica_status(owner, pods, now, failure)
        if status != (owner.get("status") or {}):
            owner["status"] = status
            self._client.update_status(self._kind.resource, owner)
        if failure is not None:
            # Retried with the queue's back-off: no event may come to bring it back.
            raise SyncError(f"{self._kind.resource.kind} {key}: {failure.message}")
        min_ready = int((owner.get("spec") or {}).get("minReadySeconds") or 0)
        waits = [w for p in pods if (w := pc.available_in(p, min_ready, now)) is not None]
        return min(waits) + 0.1 if waits else None

    def _manage(self, key: str, owner: Object, pods: list[Object]) -> Failure | None:
        """Create or delete pods towards `spec.replicas`; the first failure, if any."""
        wanted = int((owner.get("spec") or {}).get("replicas", 1))
        diff = len(pods) - wanted
        if diff < 0:
            return self._create(key, owner, min(-diff, pc.BURST_REPLICAS))
        if diff > 0:
            return self._delete(key, owner, pc.pods_to_delete(pods, min(diff, pc.BURST_REPLICAS)))
        return None

    def _create(self, key: str, owner: Object, count: int) -> Failure | None:
        self.expectations.expect_creations(key, count)
        template = (owner.get("spec") or {}).get("template") or {}
        namespace = str(pc.meta(owner)["namespace"])
        self._log.info("%s %s: too few replicas, creating %d", self._kind.resource.kind, key, count)

        def create(_: int) -> None:
            pod = pc.pod_from_template(template, owner)
            try:
                created = self._client.create(PODS, pod, namespace)
            except Exception as exc:
                # No ADDED event will tick this one off.
                self.expectations.creation_observed(key)
                if not (isinstance(exc, StatusError) and _namespace_terminating(exc)):
                    self._events.event(owner, WARNING, "FailedCreate", f"Error creating: {exc}")
                raise
            self._events.event(
                owner, NORMAL, "SuccessfulCreate", f"Created pod: {pc.meta(created)['name']}"
            )

        result = pc.slow_start_batch(count, create)
        # The batches never tried will not be created, and send no event.
        for _ in range(count - result.tried):
            self.expectations.creation_observed(key)
        error = result.error
        if error is None or (isinstance(error, StatusError) and _namespace_terminating(error)):
            return None
        return Failure("FailedCreate", f"failed to create pods: {error}")

    def _delete(self, key: str, owner: Object, victims: list[Object]) -> Failure | None:
        self.expectations.expect_deletions(key, [object_key(p) for p in victims])
        self._log.info(
            "%s %s: too many replicas, deleting %d", self._kind.resource.kind, key, len(victims)
        )
        failures: list[str] = []

        def delete(i: int) -> None:
            pod = victims[i]
            name = str(pc.meta(pod)["name"])
            try:
                self._client.delete(PODS, name, str(pc.meta(pod)["namespace"]))
            except StatusError as exc:
                # No event will tick this one off (a 404: it went already).
                self.expectations.deletion_observed(key, object_key(pod))
                if exc.code != 404:
                    self._events.event(owner, WARNING, "FailedDelete", f"Error deleting: {exc}")
                    failures.append(f"failed to delete pod {name}: {exc}")
                return
            self._events.event(owner, NORMAL, "SuccessfulDelete", f"Deleted pod: {name}")

        # Deletes go all at once, as Kubernetes sends them: there is no admission to
        # refuse them in bulk.
        pc.slow_start_batch(len(victims), delete, initial=len(victims) or 1)
        return Failure("FailedDelete", failures[0]) if failures else None


def _namespace_terminating(exc: StatusError) -> bool:
    return exc.code == 403 and "being terminated" in str(exc)


class ReplicationControllerController(ReplicaSetController):
    """The same controller for ReplicationControllers."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, REPLICATION_CONTROLLER_KIND)
