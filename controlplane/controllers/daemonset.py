"""The DaemonSet controller (kube-controller-manager's daemonset-controller): one pod of
the set on each node that should run it (a log shipper, a node agent).

Which nodes (Kubernetes' NodeShouldRunDaemonPod), decided with the scheduler's own
predicates (`kubelab.api.podscheduling`) on the pod the set would create there:

* the pod's nodeSelector and required node affinity must match the node (else no pod
  there, and an existing one is deleted);
* the node's NoSchedule and NoExecute taints must be tolerated, counting the tolerations
  every DaemonSet pod gets (`DAEMON_TOLERATIONS`: a daemon keeps running on a node that
  is not ready, unreachable, under pressure or cordoned). An untolerated NoSchedule
  taint only stops new pods; an untolerated NoExecute taint also deletes the running one.

The pods are not placed by the controller. As Kubernetes does since 1.12, each is
created with a required node affinity for its node (`matchFields` on `metadata.name`)
and the scheduler binds it there, so that the scheduler accounts for its resources
like any other pod's.

A sync (keyed "namespace/name"):

1. claims the pods of its namespace by selector (adopt/release);
2. if its expectations are satisfied (`podcontrol.Expectations`, as the ReplicaSet
   controller's), creates the missing pods in slow-start bursts and deletes the pods
   on nodes that should not run one, on nodes that are gone, failed pods (recreated by
   a later sync) and surplus pods beyond one per node (the oldest is kept);
3. `RollingUpdate`: deletes pods of older revisions, those that are not available at
   once, available ones only while fewer than `maxUnavailable` (of the desired count,
   rounded up; 1 if 0) of the set's pods are unavailable; the next sync creates their
   replacements at the new revision (`history.py`, the `controller-revision-hash`
   label). `OnDelete`: only pods a user deletes are replaced;
4. writes the status: desired, current, misscheduled, ready, available, unavailable and
   updated counts, observedGeneration; `kubectl rollout status daemonset` reads them.

Left out: maxSurge (a new pod beside the old one during a rolling update), the back-off
Kubernetes applies to pods that keep failing on one node.
"""

from __future__ import annotations

import copy
import datetime
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kubelab.api import podscheduling as ps
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
from .base import ControllerContext, SyncError, SyncResult, Workers, controller_logger
from .history import REVISION_LABEL, History, revision_hash, revision_template
from .replicaset import PODS, pod_informer

NAME = "daemonset-controller"

DAEMON_SETS = resource_for("apps/v1", "DaemonSet")
NODES = resource_for("v1", "Node")

DAEMON_TOLERATIONS: tuple[dict[str, str], ...] = tuple(
    {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": effect}
    for key, effect in (
        ("not-ready", ps.NO_EXECUTE),
        ("unreachable", ps.NO_EXECUTE),
        ("disk-pressure", ps.NO_SCHEDULE),
        ("memory-pressure", ps.NO_SCHEDULE),
        ("pid-pressure", ps.NO_SCHEDULE),
        ("unschedulable", ps.NO_SCHEDULE),
    )
)
"""The tolerations the controller adds to every pod it creates (Kubernetes'
AddOrUpdateDaemonPodTolerations)."""

HOST_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": ps.NO_SCHEDULE,
}
"""Added too when the pod uses the host's network: it needs no pod network to run."""

log = controller_logger(NAME)


def with_daemon_tolerations(spec: Object) -> None:
    """Add the DaemonSet tolerations to a pod spec, unless it has them already."""
    tolerations = list(spec.get("tolerations") or [])
    wanted = list(DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        wanted.append(HOST_NETWORK_TOLERATION)
    for toleration in wanted:
        if not any(
            t.get("key") == toleration["key"] and t.get("effect") == toleration["effect"]
            for t in tolerations
        ):
            tolerations.append(dict(toleration))
    spec["tolerations"] = tolerations


def pin_to_node(spec: Object, node: str) -> None:
    """Require the node `node` by affinity, replacing the required node affinity terms
    (they were checked against the node already), as ReplaceDaemonSetPodNodeNameNodeAffinity."""
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }


def target_node(pod: Object) -> str | None:
    """The node a daemon pod is for: where it is bound, else the node its affinity pins."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and values:
                return str(values[0])
    return None


@dataclass(frozen=True)
class Placement:
    """Whether a node should get a daemon pod, and keep one it has."""

    should_run: bool
    should_continue: bool


def placement(template: Object, node: Object) -> Placement:
    """Kubernetes' NodeShouldRunDaemonPod for the pod `template` would make on `node`."""
    spec = copy.deepcopy(template.get("spec") or {})
    node_name = str(pc.meta(node).get("name"))
    if spec.get("nodeName") and spec["nodeName"] != node_name:
        return Placement(False, False)
    with_daemon_tolerations(spec)
    pod = {"spec": spec}
    if not ps.required_node_affinity_matches(pod, node):
        return Placement(False, False)
    taints = ps.node_taints(node)
    tolerations = ps.pod_tolerations(pod)
    if ps.untolerated_taint(taints, tolerations, (ps.NO_EXECUTE,)) is not None:
        return Placement(False, False)
    if ps.untolerated_taint(taints, tolerations, (ps.NO_SCHEDULE,)) is not None:
        return Placement(False, True)
    return Placement(True, True)


def max_unavailable(ds: Object, desired: int) -> int:
    """maxUnavailable of a rolling update in pods, of the desired count rounded up; at
    least 1, or no pod could ever be replaced."""
    rolling = ((ds.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
    value = pc.scaled_value(rolling.get("maxUnavailable", 1), desired, round_up=True)
    return max(1, value)


class DaemonSetController:
    """The controller of the module docstring."""

    name = NAME

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._client = ctx.client_for(NAME)
        self._events = EventRecorder(self._client, NAME)
        self._clock = clock
        self.expectations = pc.Expectations(clock)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._sets = ctx.informers.informer(DAEMON_SETS)
        self._nodes = ctx.informers.informer(NODES)
        self._pods = pod_informer(ctx)
        self._history = History(ctx, self._client)
        self._sets.add_event_handler(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._set_deleted,
        )
        self._nodes.add_event_handler(
            on_add=lambda _node: self._enqueue_all(),
            on_update=self._node_updated,
            on_delete=lambda _node: self._enqueue_all(),
        )
        self._pods.add_event_handler(
            on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._sets).run(
                workers, stop
            )

    # -- handlers ------------------------------------------------------------------------

    def _enqueue(self, obj: Object | DeletedFinalStateUnknown) -> None:
        self.queue.add(object_key(obj))

    def _set_deleted(self, ds: Object | DeletedFinalStateUnknown) -> None:
        self.expectations.forget(object_key(ds))
        self._enqueue(ds)

    def _enqueue_all(self) -> None:
        for ds in self._sets.indexer.list():
            self._enqueue(ds)

    def _node_updated(self, old: Object, new: Object) -> None:
        """Only what decides placement: labels, taints, the node's name."""

        def placement_inputs(node: Object) -> Any:
            return (pc.labels(node), (node.get("spec") or {}).get("taints"))

        if placement_inputs(old) != placement_inputs(new):
            self._enqueue_all()

    def _controller_of(self, pod: Object) -> Object | None:
        return pc.resolve_controller(pod, DAEMON_SETS.kind, self._sets.indexer.get)

    def _pod_added(self, pod: Object) -> None:
        if pc.being_deleted(pod):
            self._pod_deleted(pod)
            return
        owner = self._controller_of(pod)
        if owner is not None:
            self.expectations.creation_observed(object_key(owner))
            self._enqueue(owner)
        elif pc.controller_ref(pod) is None:
            self._enqueue_matching(pod)

    def _enqueue_matching(self, pod: Object) -> None:
        for ds in pc.selecting(self._sets.indexer.list(), pod, pc.label_selector):
            self._enqueue(ds)

    def _pod_updated(self, old: Object, new: Object) -> None:
        if pc.meta(old).get("resourceVersion") == pc.meta(new).get("resourceVersion"):
            return
        if pc.being_deleted(new) and not pc.being_deleted(old):
            self._pod_deleted(new)
        old_ref = pc.controller_ref(old)
        if old_ref is not None and old_ref != pc.controller_ref(new):
            previous = self._controller_of(old)
            if previous is not None:
                self._enqueue(previous)
        owner = self._controller_of(new)
        if owner is not None:
            self._enqueue(owner)
            min_ready = int((owner.get("spec") or {}).get("minReadySeconds") or 0)
            if min_ready and pc.pod_ready(new) and not pc.pod_ready(old):
                self.queue.add_after(object_key(owner), min_ready + 1)
        elif pc.controller_ref(new) is None and pc.labels(old) != pc.labels(new):
            self._enqueue_matching(new)

    def _pod_deleted(self, pod: Object | DeletedFinalStateUnknown) -> None:
        obj = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        owner = self._controller_of(obj)
        if owner is None:
            return
        key = object_key(owner)
        self.expectations.deletion_observed(key, object_key(pod))
        self._enqueue(owner)

    # -- sync ----------------------------------------------------------------------------

    def sync(self, key: str) -> SyncResult:
        cached = self._sets.indexer.get(key)
        if cached is None:
            self.expectations.forget(key)
            return None
        ds = copy.deepcopy(cached)
        namespace = str(pc.meta(ds)["namespace"])
        selector = pc.label_selector(ds)

        refs = pc.RefManager(self._client, DAEMON_SETS, ds, PODS, selector, log)
        candidates = [
            p
            for p in self._pods.indexer.by_index(NAMESPACE_INDEX, namespace)
            if not pc.being_deleted(p)
        ]
        pods = refs.claim(candidates).owned
        revisions = self._history.sync(ds, None)
        hash_ = revision_hash(revisions.update)
        by_node: dict[str, list[Object]] = defaultdict(list)
        for pod in pods:
            node = target_node(pod)
            if node is not None:
                by_node[node].append(pod)
        nodes = {str(pc.meta(n)["name"]): n for n in self._nodes.indexer.list()}
        template = revision_template(revisions.update)
        placements = {name: placement(template, node) for name, node in nodes.items()}
        if self.expectations.satisfied(key) and not pc.being_deleted(ds):
            deleted = self._manage(key, ds, template, hash_, placements, by_node, pods)
            if not deleted:
                self._rolling_update(key, ds, hash_, placements, by_node)
        self._write_status(ds, hash_, placements, by_node)
        self._history.truncate(ds, revisions, (pc.labels(p).get(REVISION_LABEL, "") for p in pods))
        return None

    def _manage(
        self,
        key: str,
        ds: Object,
        template: Object,
        hash_: str,
        placements: dict[str, Placement],
        by_node: dict[str, list[Object]],
        pods: list[Object],
    ) -> bool:
        """Create the missing pods and delete those that should not be; whether any
        delete was sent (the rolling update then waits for the next sync)."""
        to_create: list[str] = []
        to_delete: list[Object] = []
        for node_name, place in sorted(placements.items()):
            on_node = by_node.get(node_name, [])
            if place.should_run and not on_node:
                to_create.append(node_name)
            elif not place.should_continue:
                to_delete.extend(on_node)
            else:
                failed = [p for p in on_node if (p.get("status") or {}).get("phase") == "Failed"]
                to_delete.extend(failed)
                running = [p for p in on_node if p not in failed]
                # One per node: the oldest stays.
                running.sort(key=lambda p: str(pc.meta(p).get("creationTimestamp") or ""))
                to_delete.extend(running[1:])
        for pod in pods:
            node = target_node(pod)
            if node is None or node not in placements:
                to_delete.append(pod)  # its node is gone
        to_create = to_create[: pc.BURST_REPLICAS]
        to_delete = to_delete[: pc.BURST_REPLICAS]
        if to_delete:
            self._delete(key, ds, to_delete)
        elif to_create:
            self._create(key, ds, template, hash_, to_create)
        return bool(to_delete)

    def _create(self, key: str, ds: Object, template: Object, hash_: str, nodes: list[str]) -> None:
        self.expectations.expect_creations(key, len(nodes))
        namespace = str(pc.meta(ds)["namespace"])
        log.info("daemonset %s: creating pods for %d nodes", key, len(nodes))

        def create(i: int) -> None:
            pod = pc.pod_from_template(template, ds, extra_labels={REVISION_LABEL: hash_})
            with_daemon_tolerations(pod["spec"])
            pin_to_node(pod["spec"], nodes[i])
            try:
                created = self._client.create(PODS, pod, namespace)
            except Exception as exc:
                self.expectations.creation_observed(key)
                self._events.event(ds, WARNING, "FailedCreate", f"Error creating: {exc}")
                raise
            self._events.event(
                ds,
                NORMAL,
                "SuccessfulCreate",
                f"Created pod: {pc.meta(created)['name']}",
            )

        result = pc.slow_start_batch(len(nodes), create)
        for _ in range(len(nodes) - result.tried):
            self.expectations.creation_observed(key)
        if result.error is not None:
            # Retried with the queue's back-off: no event may come to bring it back.
            raise SyncError(f"daemonset {key}: failed to create pods: {result.error}")

    def _delete(self, key: str, ds: Object, victims: list[Object]) -> None:
        self.expectations.expect_deletions(key, [object_key(p) for p in victims])
        log.info("daemonset %s: deleting %d pods", key, len(victims))
        for pod in victims:
            name = str(pc.meta(pod)["name"])
            try:
                self._client.delete(PODS, name, str(pc.meta(pod)["namespace"]))
            except StatusError as exc:
                self.expectations.deletion_observed(key, object_key(pod))
                if exc.code != 404:
                    self._events.event(ds, WARNING, "FailedDelete", f"Error deleting: {exc}")
                continue
            self._events.event(ds, NORMAL, "SuccessfulDelete", f"Deleted pod: {name}")

    def _rolling_update(
        self,
        key: str,
        ds: Object,
        hash_: str,
        placements: dict[str, Placement],
        by_node: dict[str, list[Object]],
    ) -> None:
        """Step 3 of the module docstring (Kubernetes' rollingUpdate without surge)."""
        spec = ds.get("spec") or {}
        if (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") != "RollingUpdate":
            return
        desired = sum(1 for p in placements.values() if p.should_run)
        limit = max_unavailable(ds, desired)
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self._clock.utcnow()
        unavailable = 0
        at_once: list[Object] = []
        candidates: list[Object] = []
        # Nodes that should run a pod and have none count too: theirs is on its way.
        wanted = {name for name, place in placements.items() if place.should_run}
        for node_name in sorted(wanted | set(by_node)):
            on_node = by_node.get(node_name, [])
            if len(on_node) != 1:
                unavailable += 1  # being created or cleaned up by _manage
                continue
            (pod,) = on_node
            available = pc.pod_available(pod, min_ready, now)
            if pc.labels(pod).get(REVISION_LABEL) == hash_:
                if not available:
                    unavailable += 1
            elif not available:
                at_once.append(pod)
            elif unavailable < limit:
                candidates.append(pod)
        room = min(max(0, limit - unavailable), len(candidates))
        victims = at_once + candidates[:room]
        if victims:
            log.info(
                "daemonset %s: rolling update replaces %d pods (%d unavailable of at most %d)",
                key,
                len(victims),
                unavailable,
                limit,
            )
            self._delete(key, ds, victims)

    def _write_status(
        self,
        ds: Object,
        hash_: str,
        placements: dict[str, Placement],
        by_node: dict[str, list[Object]],
    ) -> None:
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        now: datetime.datetime = self._clock.utcnow()
        counts: defaultdict[str, int] = defaultdict(int)
        for node_name, place in placements.items():
            on_node = by_node.get(node_name, [])
            if not place.should_run:
                if on_node:
                    counts["numberMisscheduled"] += 1
                continue
            counts["desiredNumberScheduled"] += 1
            if not on_node:
                continue
            counts["currentNumberScheduled"] += 1
            pod = min(on_node, key=lambda p: str(pc.meta(p).get("creationTimestamp") or ""))
            counts["numberReady"] += pc.pod_ready(pod)
            counts["numberAvailable"] += pc.pod_available(pod, min_ready, now)
            counts["updatedNumberScheduled"] += pc.labels(pod).get(REVISION_LABEL) == hash_
        status: dict[str, Any] = {
            field: counts[field]
            for field in (
                "currentNumberScheduled",
                "numberMisscheduled",
                "desiredNumberScheduled",
                "numberReady",
                "updatedNumberScheduled",
                "numberAvailable",
            )
        }
        status["numberUnavailable"] = status["desiredNumberScheduled"] - status["numberAvailable"]
        status["observedGeneration"] = pc.meta(ds).get("generation", 0)
        old = ds.get("status") or {}
        if old.get("collisionCount") is not None:
            status["collisionCount"] = old["collisionCount"]
        if status != old:
            ds["status"] = status
            self._client.update_status(DAEMON_SETS, ds)
