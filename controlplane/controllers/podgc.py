"""The pod garbage collector (kube-controller-manager's pod-garbage-collector-controller):
force-deletes the pods nobody else will ever finish deleting.

A pod bound to a node is deleted in two steps: the apiserver marks it (deletionTimestamp)
and its node's kubelet stops the containers and confirms with a delete at grace period 0.
When there is no kubelet to confirm, the pod stays Terminating forever, and keeps its
namespace Terminating with it. Kubernetes' PodGC removes four kinds of pods, and so does
this controller:

* orphaned: bound to a Node that no longer exists. A node missing from the cache is put
  in quarantine for 40 s (`--pod-gc-quarantine`, kubelab's own flag for tests; a
  constant in Kubernetes) in case the cache is only behind, then asked of the apiserver:
  if it answers 404, the node's pods are marked Failed with the condition
  DisruptionTarget (reason DeletionByPodGC, "PodGC: node no longer exists") and deleted;
* unscheduled and terminating: deleted while bound to no node, so no kubelet will
  confirm;
* terminating on a node that is not Ready and carries the `node.kubernetes.io/
  out-of-service` taint (an operator's word that the node is gone for good);
* terminated (Succeeded or Failed) beyond `--terminated-pod-gc-threshold` (12500; 0 turns
  it off): the excess is deleted, pods evicted by a kubelet first (phase Failed, reason
  Evicted), then the oldest, names breaking ties.

Each deletion first sets the phase Failed (if the pod has not finished), so that a Job
replacing failed pods sees the pod as failed, then deletes with grace period 0 and the
pod's uid as precondition (a newer pod of the same name is left alone).

How it runs. Every 20 s (or half the quarantine, when that is shorter) a pass over the
caches finds the candidates, as Kubernetes' loop does; handlers find the new ones sooner
(a pod deleted before it was scheduled, a pod or a Node deletion that leaves pods on a
missing node). Candidates are keyed by pod; the pod's sync decides again on the cache as
it is then, so every deletion is a reconcile of its own pod (its span, its log line).
Missing nodes are keyed by node name in a second queue, where the quarantine is the
delay of their key.
"""

from __future__ import annotations

import argparse
import copy
import threading
from dataclasses import dataclass
from typing import Any

from kubelab.api import podutil
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

from .base import ControllerContext, SyncResult, Workers, add_index, controller_logger, run_workers

NAME = "pod-garbage-collector-controller"

PODS = resource_for("v1", "Pod")
NODES = resource_for("v1", "Node")

DEFAULT_THRESHOLD = 12500
QUARANTINE = 40.0
"""Seconds a node missing from the cache waits before the apiserver is asked about it."""
GC_PERIOD = 20.0
"""Seconds between passes over the caches (Kubernetes' gcCheckPeriod)."""
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"

ORPHANED = "orphaned"
UNSCHEDULED = "unscheduled terminating"
OUT_OF_SERVICE_TERMINATING = "terminating on an out-of-service node"
TERMINATED = "terminated beyond the threshold"

log = controller_logger(NAME)


@dataclass(frozen=True)
class Settings:
    """The flags of PodGC: the threshold of terminated pods and the quarantine."""

    threshold: int = DEFAULT_THRESHOLD
    quarantine: float = QUARANTINE

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        return cls(
            threshold=getattr(args, "terminated_pod_gc_threshold", cls.threshold),
            quarantine=getattr(args, "pod_gc_quarantine", cls.quarantine),
        )

    @property
    def period(self) -> float:
        """Seconds between passes: Kubernetes' 20, shorter with a shorter quarantine."""
        return min(GC_PERIOD, self.quarantine / 2) or GC_PERIOD


def check_settings(args: argparse.Namespace) -> bool:
    """PodGC always runs; a negative threshold or quarantine is refused."""
    settings = Settings.from_args(args)
    if settings.threshold < 0:
        raise ValueError("--terminated-pod-gc-threshold must be 0 (off) or more")
    if settings.quarantine < 0:
        raise ValueError("--pod-gc-quarantine must not be negative")
    return True


def evicted(pod: Object) -> bool:
    """Whether a kubelet evicted the pod (Failed, reason Evicted)."""
    status = pod.get("status") or {}
    return status.get("phase") == "Failed" and status.get("reason") == "Evicted"


def gc_order(pod: Object) -> tuple[bool, str, str]:
    """The order in which terminated pods go: evicted ones, then the oldest, by name."""
    meta = pod["metadata"]
    return (not evicted(pod), str(meta.get("creationTimestamp") or ""), str(meta["name"]))


def excess_terminated(pods: list[Object], threshold: int) -> list[Object]:
    """The terminated pods to delete so that `threshold` are left (none when 0: off)."""
    terminated = [p for p in pods if podutil.pod_terminal(p)]
    count = len(terminated) - threshold
    if threshold <= 0 or count <= 0:
        return []
    return sorted(terminated, key=gc_order)[:count]


def out_of_service(node: Object | None) -> bool:
    """Whether `node` is not Ready and tainted out-of-service."""
    if node is None:
        return False
    ready = podutil.condition(node, "Ready")
    taints = (node.get("spec") or {}).get("taints") or []
    return (ready is None or ready.get("status") != "True") and any(
        t.get("key") == OUT_OF_SERVICE for t in taints
    )


def failed_status(pod: Object, condition: dict[str, Any] | None, now: str) -> dict[str, Any]:
    """The pod's status marked Failed, with `condition` in place of one of its type."""
    status = copy.deepcopy(pod.get("status") or {})
    status["phase"] = "Failed"
    if condition is not None:
        conditions = [
            c for c in status.get("conditions") or [] if c.get("type") != condition["type"]
        ]
        conditions.append({**condition, "lastTransitionTime": now})
        status["conditions"] = conditions
    return status


class PodGCController:
    """Force-deletes orphaned, unscheduled terminating and excess terminated pods
    (module docstring); pods are keyed "namespace/name", missing nodes by name."""

    name = NAME

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._settings = Settings.from_args(ctx.args)
        self._clock = clock
        self._client = ctx.client_for(NAME)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self.node_queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._lock = threading.Lock()
        self._gone: set[str] = set()
        """Nodes the apiserver said (404) do not exist, while the cache agrees."""
        self._excess: set[str] = set()
        """The uids of the terminated pods the last pass found beyond the threshold."""
        self._pods = ctx.informers.informer(PODS)
        self._nodes = ctx.informers.informer(NODES)
        add_index(self._pods, NODE_NAME_INDEX, node_name_index)
        self._pods.add_event_handler(
            on_add=self._pod_changed, on_update=lambda _old, new: self._pod_changed(new)
        )
        self._nodes.add_event_handler(
            on_add=self._node_added,
            on_update=lambda _old, new: self._node_updated(new),
            on_delete=self._node_deleted,
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        sweeper = threading.Thread(target=self._sweep_every_period, args=(stop,), daemon=True)
        sweeper.start()
        run_workers(
            stop,
            workers,
            Workers(NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._pods),
            Workers(f"{NAME}-nodes", self.node_queue, self.sync_node, log, tracer=self._tracer),
        )
        sweeper.join()

    # -- finding candidates --------------------------------------------------------------

    def _pod_changed(self, pod: Object) -> None:
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node:
            if podutil.terminating(pod):
                self.queue.add(object_key(pod))
        elif self._nodes.indexer.get(node) is None:
            self.node_queue.add_after(node, self._settings.quarantine)
        elif podutil.terminating(pod) and out_of_service(self._nodes.indexer.get(node)):
            self.queue.add(object_key(pod))

    def _node_added(self, node: Object) -> None:
        with self._lock:
            self._gone.discard(str(node["metadata"]["name"]))

    def _node_updated(self, node: Object) -> None:
        if out_of_service(node):
            for pod in self._pods.indexer.by_index(NODE_NAME_INDEX, str(node["metadata"]["name"])):
                if podutil.terminating(pod):
                    self.queue.add(object_key(pod))

    def _node_deleted(self, node: Object | DeletedFinalStateUnknown) -> None:
        self.node_queue.add_after(object_key(node), self._settings.quarantine)

    def _sweep_every_period(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.sweep()
            stop.wait(self._settings.period)

    def sweep(self) -> None:
        """One pass over the caches (module docstring): queue every candidate."""
        pods = self._pods.indexer.list()
        excess = excess_terminated(pods, self._settings.threshold)
        with self._lock:
            self._excess = {str(p["metadata"].get("uid")) for p in excess}
            self._gone = {n for n in self._gone if self._pods.indexer.by_index(NODE_NAME_INDEX, n)}
        if excess:
            log.info(
                "%d terminated pods beyond the threshold of %d: deleting the oldest",
                len(excess),
                self._settings.threshold,
            )
        for pod in excess:
            self.queue.add(object_key(pod))
        for pod in pods:
            self._pod_changed(pod)

    # -- syncs ---------------------------------------------------------------------------

    def sync_node(self, name: str) -> SyncResult:
        """A node missing from the cache, its quarantine over: ask the apiserver, and if
        it is gone, queue its pods."""
        if self._nodes.indexer.get(name) is not None:
            return None
        try:
            self._client.get(NODES, name)
        except StatusError as exc:
            if exc.code != 404:
                raise
        else:
            return None  # the cache is behind: the node exists
        pods = self._pods.indexer.by_index(NODE_NAME_INDEX, name)
        log.info("node %s does not exist: its %d pods are orphaned", name, len(pods))
        with self._lock:
            self._gone.add(name)
        for pod in pods:
            self.queue.add(object_key(pod))
        return None

    def verdict(self, pod: Object) -> str | None:
        """Why `pod` is to be force-deleted now, or None if it is not."""
        meta = pod["metadata"]
        if podutil.pod_terminal(pod) and meta.get("deletionGracePeriodSeconds") == 0:
            return None  # force-deleted already: only finalizers (not ours) keep it
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node:
            return UNSCHEDULED if podutil.terminating(pod) else None
        cached = self._nodes.indexer.get(node)
        with self._lock:
            if cached is None and node in self._gone:
                return ORPHANED
            if podutil.pod_terminal(pod) and str(meta.get("uid")) in self._excess:
                return TERMINATED
        if podutil.terminating(pod) and out_of_service(cached):
            return OUT_OF_SERVICE_TERMINATING
        return None

    def sync(self, key: str) -> SyncResult:
        pod = self._pods.indexer.get(key)
        if pod is None:
            return None
        why = self.verdict(pod)
        if why is None:
            return None
        condition = None
        if why == ORPHANED:
            condition = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists",
            }
        self._force_delete(pod, why, condition)
        return None

    def _force_delete(self, pod: Object, why: str, condition: dict[str, Any] | None) -> None:
        meta = pod["metadata"]
        key, uid = object_key(pod), meta.get("uid")
        log.info(
            "pod %s (uid %s, resourceVersion %s) on node %s: %s: force deleting",
            key,
            uid,
            meta.get("resourceVersion"),
            (pod.get("spec") or {}).get("nodeName") or "(none)",
            why,
        )
        try:
            if not podutil.pod_terminal(pod):
                marked = copy.deepcopy(pod)
                marked["status"] = failed_status(pod, condition, rfc3339(self._clock.utcnow()))
                written = self._client.update_status(PODS, marked)
                log.info(
                    "pod %s (uid %s): phase Failed (resourceVersion %s)",
                    key,
                    uid,
                    written["metadata"].get("resourceVersion"),
                )
            self._client.delete(
                PODS,
                str(meta["name"]),
                str(meta["namespace"]),
                grace_period_seconds=0,
                preconditions=Preconditions(uid=uid),
            )
        except StatusError as exc:
            if exc.code != 404:
                raise  # retried with back-off; the verdict stands until then
        else:
            log.info("pod %s (uid %s): forced deletion succeeded", key, uid)
        with self._lock:
            self._excess.discard(str(uid))
