"""The scheduling queue: the pending pods, in three parts, as kube-scheduler's
PriorityQueue.

* activeQ: pods ready to be tried, ordered by the profile's queue-sort plugin
  (priority, then the time they were queued). `pop` blocks on it.
* backoffQ: pods that failed recently, each waiting out its back-off (1 s, doubling per
  attempt up to 10 s, by default) before going back to activeQ; an apiserver error or a
  pod that just became schedulable again should not be retried in a tight loop.
* unschedulable: pods no node fits. Retrying them cannot help until the cluster
  changes, so they wait for an event that could make them fit: a node added, a node
  changed, a pod deleted (room freed), a pod added (pod affinity). Each plugin declares
  which events can resolve its rejections (`HINTS`); an event moves only the pods
  rejected by a plugin it can help, to backoffQ if their back-off is not over, else to
  activeQ (kube-scheduler's queueing hints, in spirit). A pod waits at most
  `MAX_UNSCHEDULABLE_SECONDS` and is then retried anyway.

An event that arrives while a pod is being scheduled could be the one it needs; had the
pod been parked as unschedulable after the event, it would wait for the next one. So
the queue counts move requests per scheduling cycle, and a pod that fails in a cycle
during which a move request happened goes to backoffQ instead.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from .framework import PodInfo, QueuedPod
from .metrics import Metrics
from .plugins import (
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    podtopologyspread,
    queuesort,
    tainttoleration,
    volumebinding,
)

STORAGE_CHANGE = "StorageChange"
"""A claim, volume or class was added or changed (the VolumeBinding plugin's caches)."""
NODE_ADD, NODE_UPDATE, POD_ADD, POD_DELETE, POD_UPDATE = (
    "NodeAdd",
    "NodeUpdate",
    "AssignedPodAdd",
    "AssignedPodDelete",
    "UnschedulablePodUpdate",
)
MAX_UNSCHEDULABLE_SECONDS = 300.0

HINTS: dict[str, frozenset[str]] = {
    NODE_ADD: frozenset(
        {
            nodename.NAME,
            nodeunschedulable.NAME,
            noderesources.NAME,
            nodeaffinity.NAME,
            tainttoleration.NAME,
            nodeports.NAME,
            volumebinding.NAME,
            interpodaffinity.NAME,
            podtopologyspread.NAME,
        }
    ),
    NODE_UPDATE: frozenset(
        {
            nodeunschedulable.NAME,
            noderesources.NAME,
            nodeaffinity.NAME,
            tainttoleration.NAME,
            interpodaffinity.NAME,
            podtopologyspread.NAME,
        }
    ),
    POD_DELETE: frozenset(
        {noderesources.NAME, nodeports.NAME, interpodaffinity.NAME, podtopologyspread.NAME}
    ),
    POD_ADD: frozenset({interpodaffinity.NAME, podtopologyspread.NAME}),
    STORAGE_CHANGE: frozenset({volumebinding.NAME}),
}
"""Which plugins' rejections each cluster event may resolve."""

Less = Callable[[QueuedPod, QueuedPod], bool]


class _Entry:
    """A pod in activeQ's heap, ordered by the queue-sort plugin. An entry is never
    changed in place (that would break the heap): a pod that changes gets a new entry
    and the old one is marked dead, to be skipped when it surfaces."""

    __slots__ = ("less", "live", "qp")

    def __init__(self, qp: QueuedPod, less: Less) -> None:
        self.qp = qp
        self.less = less
        self.live = True

    def __lt__(self, other: _Entry) -> bool:
        return self.less(self.qp, other.qp)


class SchedulingQueue:
    """activeQ, backoffQ and the unschedulable pods (module docstring). Thread-safe."""

    def __init__(
        self,
        metrics: Metrics,
        less: Less = queuesort.less,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self._less = less
        self._initial = initial_backoff
        self._max = max_backoff
        self._clock = clock
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._active: list[_Entry] = []
        self._active_keys: dict[str, _Entry] = {}
        self._backoff: list[tuple[float, int, str]] = []
        self._backoff_keys: dict[str, QueuedPod] = {}
        self._unschedulable: dict[str, tuple[QueuedPod, float]] = {}
        self._in_flight: dict[str, QueuedPod] = {}
        self.scheduling_cycle = 0
        self._move_request_cycle = -1
        self._closed = False

    # -- adding ---------------------------------------------------------------------------

    def _push_active(self, qp: QueuedPod, event: str) -> None:
        entry = _Entry(qp, self._less)
        heapq.heappush(self._active, entry)
        self._active_keys[qp.info.key] = entry
        self._metrics.incoming_pods.labels("active", event).inc()
        self._cond.notify()

    def _push_backoff(self, qp: QueuedPod, event: str) -> None:
        key = qp.info.key
        heapq.heappush(self._backoff, (self._backoff_expiry(qp), next(self._seq), key))
        self._backoff_keys[key] = qp
        self._metrics.incoming_pods.labels("backoff", event).inc()
        self._cond.notify()

    def _backoff_expiry(self, qp: QueuedPod) -> float:
        duration = min(self._initial * 2.0 ** max(qp.attempts - 1, 0), self._max)
        return qp.timestamp + duration

    def _remove(self, key: str) -> QueuedPod | None:
        """Take the pod out of whichever part holds it (lazily, for the heaps)."""
        entry = self._active_keys.pop(key, None)
        if entry is not None:
            entry.live = False
            return entry.qp
        qp = self._backoff_keys.pop(key, None)
        if qp is None:
            held = self._unschedulable.pop(key, None)
            qp = held[0] if held else None
        return qp

    def add(self, pod: PodInfo) -> None:
        """A new pending pod (or one seen again after a relist)."""
        with self._cond:
            key = pod.key
            if key in self._in_flight:
                self._in_flight[key].info = pod
                return
            qp = self._remove(key)
            if qp is None:
                qp = QueuedPod(pod, self._clock())
            else:
                qp.info = pod
            self._push_active(qp, "PodAdd")
            self._update_gauges()

    def update(self, pod: PodInfo) -> None:
        """A pending pod changed: its spec may fit now, so an unschedulable one is tried
        again; one in activeQ or backoffQ keeps its place with the new state."""
        with self._cond:
            key = pod.key
            if key in self._in_flight:
                self._in_flight[key].info = pod
                return
            if key in self._active_keys:
                old = self._active_keys[key]
                old.live = False
                self._push_active(replace(old.qp, info=pod), POD_UPDATE)
            elif key in self._backoff_keys:
                self._backoff_keys[key].info = pod
            else:
                held = self._unschedulable.pop(key, None)
                qp = held[0] if held else QueuedPod(pod, self._clock())
                qp.info = pod
                self._push_active(qp, POD_UPDATE)
            self._update_gauges()

    def delete(self, key: str) -> None:
        with self._cond:
            self._remove(key)
            self._in_flight.pop(key, None)
            self._update_gauges()

    def requeue_failed(self, qp: QueuedPod, pod_cycle: int, unschedulable: bool) -> None:
        """After a failed attempt: unschedulable pods wait for an event (unless one came
        during the attempt), others (errors) back off."""
        with self._cond:
            key = qp.info.key
            if self._in_flight.pop(key, None) is None:
                return  # deleted meanwhile
            qp.timestamp = self._clock()
            if unschedulable and self._move_request_cycle < pod_cycle:
                self._unschedulable[key] = (qp, self._clock())
                self._metrics.incoming_pods.labels("unschedulable", "ScheduleAttemptFailure").inc()
            else:
                self._push_backoff(qp, "ScheduleAttemptFailure")
            self._update_gauges()

    def done(self, key: str) -> None:
        """The pod was scheduled (or dropped): it leaves the in-flight set."""
        with self._cond:
            self._in_flight.pop(key, None)
            self._update_gauges()

    # -- cluster events -------------------------------------------------------------------

    def move_for_event(self, event: str) -> int:
        """Move the unschedulable pods `event` may help; how many moved."""
        helps = HINTS.get(event, frozenset())
        with self._cond:
            self._move_request_cycle = self.scheduling_cycle
            moved = 0
            now = self._clock()
            for key, (qp, _) in list(self._unschedulable.items()):
                if qp.rejected_by and not (qp.rejected_by & helps):
                    continue
                del self._unschedulable[key]
                if self._backoff_expiry(qp) > now:
                    self._push_backoff(qp, event)
                else:
                    self._push_active(qp, event)
                moved += 1
            if moved:
                self._update_gauges()
            return moved

    # -- popping -------------------------------------------------------------------------

    def _flush(self) -> float | None:
        """Move due backoff and long-waiting unschedulable pods to activeQ; the seconds
        until the next backoff expiry (None: nothing waiting)."""
        now = self._clock()
        while self._backoff:
            expiry, _, key = self._backoff[0]
            qp = self._backoff_keys.get(key)
            if qp is None or self._backoff_expiry(qp) != expiry:
                heapq.heappop(self._backoff)  # stale entry
                continue
            if expiry > now:
                break
            heapq.heappop(self._backoff)
            del self._backoff_keys[key]
            self._push_active(qp, "BackoffComplete")
        for key, (qp, since) in list(self._unschedulable.items()):
            if now - since >= MAX_UNSCHEDULABLE_SECONDS:
                del self._unschedulable[key]
                self._push_active(qp, "UnschedulableTimeout")
        return self._backoff[0][0] - now if self._backoff else None

    def pop(self, timeout: float) -> QueuedPod | None:
        """The next pod to schedule, waiting up to `timeout` s; None on timeout or close.
        Starts a scheduling cycle."""
        deadline = self._clock() + timeout
        with self._cond:
            while not self._closed:
                wait = self._flush()
                while self._active:
                    entry = heapq.heappop(self._active)
                    if not entry.live:
                        continue
                    qp = entry.qp
                    del self._active_keys[qp.info.key]
                    qp.attempts += 1
                    if qp.initial_attempt is None:
                        qp.initial_attempt = self._clock()
                    self._in_flight[qp.info.key] = qp
                    self.scheduling_cycle += 1
                    self._update_gauges()
                    return qp
                left = deadline - self._clock()
                if left <= 0:
                    return None
                self._cond.wait(min(left, wait) if wait is not None else left)
            return None

    def waited(self, qp: QueuedPod) -> float:
        """Seconds since `qp` was last queued (back-off included): its queue wait."""
        return self._clock() - qp.timestamp

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- introspection -------------------------------------------------------------------

    def _update_gauges(self) -> None:
        g = self._metrics.pending_pods
        g.labels("active").set(len(self._active_keys))
        g.labels("backoff").set(len(self._backoff_keys))
        g.labels("unschedulable").set(len(self._unschedulable))
        g.labels("gated").set(0)

    def depths(self) -> dict[str, int]:
        with self._cond:
            return {
                "active": len(self._active_keys),
                "backoff": len(self._backoff_keys),
                "unschedulable": len(self._unschedulable),
                "in_flight": len(self._in_flight),
            }
