"""Node lifecycle (kube-controller-manager's node-lifecycle-controller and
taint-eviction-controller): notices nodes whose kubelet has gone quiet, says so in their
status and taints, and moves the pods off them once their tolerations run out: the
seeds' Node Controller, which "marks nodes NotReady after timeout" and "evicts pods from
failed nodes".

How a node is heard from. A kubelet renews its Lease `kube-node-lease/<node>` every few
seconds and posts its status (the Ready condition's lastHeartbeatTime) now and then.
The controller remembers, per node, when (by its own clock, so that the nodes' clocks
do not matter) either of those last changed. A node not heard from for
`--node-monitor-grace-period` (40 s; `--node-startup-grace-period`, 60 s, for a node
that has never posted a Ready condition) is marked:

* its Ready, MemoryPressure, DiskPressure and PIDPressure conditions become Unknown,
  reason NodeStatusUnknown, "Kubelet stopped posting node status." (NodeStatusNeverUpdated,
  "Kubelet never posted node status.", for conditions it never posted); a Normal
  Event NodeNotReady says so;
* its pods' Ready condition becomes False, so that Services stop sending them traffic.

Taints follow the Ready condition, as Kubernetes sets them: Unknown gives
`node.kubernetes.io/unreachable`, False gives `node.kubernetes.io/not-ready`, each with
the NoSchedule effect (the scheduler sends no new pods) and NoExecute (pods that do not
tolerate it leave); True removes both. So a node comes back when its kubelet posts
Ready True again, and loses its taints then.

Taint eviction (`TaintEvictionController`, keyed by pod). A pod on a node with NoExecute
taints is deleted at once if it does not tolerate one of them, else once the shortest
tolerationSeconds of the tolerations it uses has run out since the taint was added
(`kubelab.api.taints.eviction_time`). Pods get 300 s for not-ready and unreachable from
the apiserver's DefaultTolerationSeconds admission, so a node that is back within five
minutes keeps its pods. Before deleting, the controller adds the condition
DisruptionTarget (reason DeletionByTaintManager) to the pod's status and records the
Event TaintManagerEviction, as Kubernetes' taint manager does, so that the pod's
owner and its user can tell an eviction from a failure.
"""

from __future__ import annotations

import argparse
import copy
import threading
from dataclasses import dataclass
from typing import Any

from kubelab.api import podutil, taints
from kubelab.api.errors import StatusError
from kubelab.client import (
    NODE_NAME_INDEX,
    REAL_CLOCK,
    Clock,
    DeletedFinalStateUnknown,
    Object,
    Preconditions,
    WorkQueue,
    node_name_index,
    object_key,
    resource_for,
    rfc3339,
)
from kubelab.client.record import NORMAL, EventRecorder

from .base import ControllerContext, SyncResult, Workers, add_index, controller_logger

NAME = "node-lifecycle-controller"
TAINT_EVICTION = "taint-eviction-controller"

NODES = resource_for("v1", "Node")
PODS = resource_for("v1", "Pod")
LEASES = resource_for("coordination.k8s.io/v1", "Lease")
NODE_LEASE_NAMESPACE = "kube-node-lease"

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
NEVER_MESSAGE = "Kubelet never posted node status."

log = controller_logger(NAME)
eviction_log = controller_logger(TAINT_EVICTION)


@dataclass(frozen=True)
class Settings:
    """The flags of node lifecycle (kube-controller-manager's), in seconds."""

    grace: float = 40.0
    startup_grace: float = 60.0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        return cls(
            grace=getattr(args, "node_monitor_grace_period", cls.grace),
            startup_grace=getattr(args, "node_startup_grace_period", cls.startup_grace),
        )


def unknown_conditions(node: Object, now: str) -> list[dict[str, Any]]:
    """`node`'s conditions once its kubelet is not heard from (module docstring)."""
    conditions = [dict(c) for c in (node.get("status") or {}).get("conditions") or []]
    by_type = {c.get("type"): c for c in conditions}
    created = str(node["metadata"].get("creationTimestamp") or now)
    for kind in CONDITIONS:
        cond = by_type.get(kind)
        if cond is None:
            conditions.append(
                {
                    "type": kind,
                    "status": "Unknown",
                    "reason": "NodeStatusNeverUpdated",
                    "message": NEVER_MESSAGE,
                    "lastHeartbeatTime": created,
                    "lastTransitionTime": now,
                }
            )
        elif cond.get("status") != "Unknown":
            cond.update(
                status="Unknown",
                reason="NodeStatusUnknown",
                message=UNKNOWN_MESSAGE,
                lastTransitionTime=now,
            )
    return conditions


def wanted_taints(ready: str | None) -> list[dict[str, str]]:
    """The taints this controller keeps on a node whose Ready condition is `ready`."""
    key = {"Unknown": UNREACHABLE, "False": NOT_READY}.get(ready or "")
    if key is None:
        return []
    return [{"key": key, "effect": taints.NO_SCHEDULE}, {"key": key, "effect": taints.NO_EXECUTE}]


def reconcile_taints(
    current: list[dict[str, Any]], ready: str | None, now: str
) -> list[dict[str, Any]] | None:
    """`current` with this controller's taints as the Ready status `ready` calls for
    (other taints kept, a taint already there kept as it is); None if nothing changes.
    With no Ready condition at all the node is left as it is."""
    if ready is None:
        return None
    ours = (UNREACHABLE, NOT_READY)
    wanted = wanted_taints(ready)
    kept = [t for t in current if t.get("key") not in ours]
    existing = {(t.get("key"), t.get("effect")): t for t in current if t.get("key") in ours}
    result = list(kept)
    for taint in wanted:
        old = existing.get((taint["key"], taint["effect"]))
        if old is not None:
            result.append(old)
        elif taint["effect"] == taints.NO_EXECUTE:
            result.append({**taint, "timeAdded": now})
        else:
            result.append(dict(taint))
    same = len(result) == len(current) and all(t in current for t in result)
    return None if same else result


def ready_status(node: Object) -> str | None:
    cond = podutil.condition(node, "Ready")
    return None if cond is None else str(cond.get("status"))


class NodeLifecycleController:
    """Marks quiet nodes and taints nodes by their Ready condition; keyed by node name."""

    name = NAME

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._settings = Settings.from_args(ctx.args)
        self._clock = clock
        self._client = ctx.client_for(NAME)
        self._events = EventRecorder(self._client, "node-controller", clock=clock)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._lock = threading.Lock()
        # node -> (what was last heard: lease renewTime and Ready heartbeat, when).
        self._heard: dict[str, tuple[tuple[str, str], float]] = {}
        self._nodes = ctx.informers.informer(NODES)
        self._leases = ctx.informers.informer(LEASES)
        self._pods = ctx.informers.informer(PODS)
        add_index(self._pods, NODE_NAME_INDEX, node_name_index)
        self._nodes.add_event_handler(
            on_add=self._node_changed,
            on_update=lambda _old, new: self._node_changed(new),
            on_delete=self._node_changed,
        )
        self._leases.add_event_handler(
            on_add=self._lease_changed,
            on_update=lambda _old, new: self._lease_changed(new),
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._nodes).run(
                workers, stop
            )

    def _node_changed(self, node: Object | DeletedFinalStateUnknown) -> None:
        self.queue.add(object_key(node))

    def _lease_changed(self, lease: Object) -> None:
        meta = lease.get("metadata") or {}
        if meta.get("namespace") == NODE_LEASE_NAMESPACE:
            self.queue.add(str(meta["name"]))

    def _last_heard(self, name: str, node: Object) -> float:
        """When (our clock) the node's kubelet was last heard from."""
        lease = self._leases.indexer.get(f"{NODE_LEASE_NAMESPACE}/{name}") or {}
        ready = podutil.condition(node, "Ready") or {}
        signal = (
            str((lease.get("spec") or {}).get("renewTime") or ""),
            str(ready.get("lastHeartbeatTime") or ""),
        )
        now = self._clock.now()
        with self._lock:
            previous = self._heard.get(name)
            if previous is None or previous[0] != signal:
                self._heard[name] = (signal, now)
                return now
            return previous[1]

    def sync(self, name: str) -> SyncResult:
        node = self._nodes.indexer.get(name)
        if node is None:
            with self._lock:
                self._heard.pop(name, None)
            return None
        ready = ready_status(node)
        grace = self._settings.startup_grace if ready is None else self._settings.grace
        quiet_for = self._clock.now() - self._last_heard(name, node)
        wait: float | None = grace - quiet_for
        if quiet_for >= grace:
            wait = None  # the next lease renewal or status post brings it back
            if ready != "Unknown":
                node = self._mark_unknown(node)
                ready = "Unknown"
        self._taint(node, ready)
        return wait

    def _mark_unknown(self, node: Object) -> Object:
        name = node["metadata"]["name"]
        updated = copy.deepcopy(node)
        updated.setdefault("status", {})["conditions"] = unknown_conditions(
            node, rfc3339(self._clock.utcnow())
        )
        written = self._client.update_status(NODES, updated)
        log.info(
            "node %s (uid %s): not heard from for %gs: conditions Unknown (resourceVersion %s)",
            name,
            node["metadata"].get("uid"),
            self._settings.grace,
            written["metadata"].get("resourceVersion"),
        )
        self._events.event(
            written, NORMAL, "NodeNotReady", f"Node {name} status is now: NodeNotReady"
        )
        self._mark_pods_not_ready(name)
        return written

    def _mark_pods_not_ready(self, node: str) -> None:
        now = rfc3339(self._clock.utcnow())
        for pod in self._pods.indexer.by_index(NODE_NAME_INDEX, node):
            cond = podutil.condition(pod, "Ready")
            if podutil.pod_terminal(pod) or (cond is not None and cond.get("status") == "False"):
                continue
            updated = copy.deepcopy(pod)
            conditions = [
                c for c in updated["status"].get("conditions") or [] if c.get("type") != "Ready"
            ]
            conditions.append({"type": "Ready", "status": "False", "lastTransitionTime": now})
            updated["status"]["conditions"] = conditions
            try:
                self._client.update_status(PODS, updated)
            except StatusError as exc:
                if exc.code not in (404, 409):
                    raise
                continue  # gone, or changed: its next sync of the node looks again
            log.info("pod %s on node %s: marked not ready", object_key(pod), node)

    def _taint(self, node: Object, ready: str | None) -> None:
        current = list((node.get("spec") or {}).get("taints") or [])
        new = reconcile_taints(current, ready, rfc3339(self._clock.utcnow()))
        if new is None:
            return
        updated = copy.deepcopy(node)
        updated.setdefault("spec", {})["taints"] = new
        written = self._client.update(NODES, updated)
        log.info(
            "node %s: Ready %s, taints now %s (resourceVersion %s)",
            node["metadata"]["name"],
            ready,
            ", ".join(f"{t['key']}:{t['effect']}" for t in new) or "none",
            written["metadata"].get("resourceVersion"),
        )


class TaintEvictionController:
    """Deletes pods whose tolerations of their node's NoExecute taints have run out
    (module docstring); keyed by pod "namespace/name"."""

    name = TAINT_EVICTION

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._clock = clock
        self._client = ctx.client_for(TAINT_EVICTION)
        self._events = EventRecorder(self._client, "taint-eviction-controller", clock=clock)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._nodes = ctx.informers.informer(NODES)
        self._pods = ctx.informers.informer(PODS)
        add_index(self._pods, NODE_NAME_INDEX, node_name_index)
        self._nodes.add_event_handler(
            on_add=self._node_changed,
            on_update=lambda old, new: self._node_changed(new, old),
        )
        self._pods.add_event_handler(
            on_add=self._pod_changed,
            on_update=lambda _old, new: self._pod_changed(new),
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(
                TAINT_EVICTION,
                self.queue,
                self.sync,
                eviction_log,
                tracer=self._tracer,
                objects=self._pods,
            ).run(workers, stop)

    @staticmethod
    def _no_execute(node: Object | None) -> list[dict[str, Any]]:
        return [
            t
            for t in ((node or {}).get("spec") or {}).get("taints") or []
            if t.get("effect") == taints.NO_EXECUTE
        ]

    def _node_changed(self, node: Object, old: Object | None = None) -> None:
        if self._no_execute(node) == self._no_execute(old):
            return
        for pod in self._pods.indexer.by_index(NODE_NAME_INDEX, str(node["metadata"]["name"])):
            self.queue.add(object_key(pod))

    def _pod_changed(self, pod: Object) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and self._no_execute(self._nodes.indexer.get(str(node))):
            self.queue.add(object_key(pod))

    def sync(self, key: str) -> SyncResult:
        pod = self._pods.indexer.get(key)
        if pod is None or podutil.terminating(pod):
            return None
        node = self._nodes.indexer.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        no_execute = self._no_execute(node)
        if not no_execute:
            return None
        now = self._clock.utcnow()
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        at = taints.eviction_time(no_execute, tolerations, now)
        if at is None:
            return None
        if at > now:
            return (at - now).total_seconds()
        self._evict(pod, str(node["metadata"]["name"]) if node else "")
        return None

    def _evict(self, pod: Object, node: str) -> None:
        key = object_key(pod)
        namespace, name = str(pod["metadata"]["namespace"]), str(pod["metadata"]["name"])
        self._events.event(pod, NORMAL, "TaintManagerEviction", f"Marking for deletion Pod {key}")
        marked = copy.deepcopy(pod)
        status = marked.setdefault("status", {})
        conditions = [
            c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"
        ]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": rfc3339(self._clock.utcnow()),
            }
        )
        status["conditions"] = conditions
        try:
            self._client.update_status(PODS, marked)
            self._client.delete(
                PODS, name, namespace, preconditions=Preconditions(uid=pod["metadata"].get("uid"))
            )
        except StatusError as exc:
            if exc.code == 404:
                return
            raise
        eviction_log.info(
            "pod %s (uid %s): evicted from node %s, whose NoExecute taints it no longer tolerates",
            key,
            pod["metadata"].get("uid"),
            node,
        )
