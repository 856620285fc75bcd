"""The scheduling queue with a fake clock: priority then age, back-off doubling from
1 s to 10 s, unschedulable pods moved back only by events that can help them, and the
move request that arrives while a pod is being scheduled."""

from __future__ import annotations

from controlplane.scheduler import queue as q
from controlplane.scheduler.framework import PodInfo
from controlplane.scheduler.metrics import Metrics

from .builders import pod


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def new_queue() -> tuple[q.SchedulingQueue, Clock]:
    clock = Clock()
    return q.SchedulingQueue(Metrics(), clock=clock), clock


def names(queue: q.SchedulingQueue, n: int) -> list[str]:
    out = []
    for _ in range(n):
        qp = queue.pop(0)
        assert qp is not None
        out.append(qp.info.pod["metadata"]["name"])
        queue.done(qp.info.key)
    return out


def test_higher_priority_first_then_older() -> None:
    queue, clock = new_queue()
    for name, priority in (("old-low", 0), ("high", 100), ("new-low", 0), ("mid", 50)):
        queue.add(PodInfo.of(pod(name, priority=priority)))
        clock.now += 1
    assert names(queue, 4) == ["high", "mid", "old-low", "new-low"]
    assert queue.pop(0) is None


def test_a_priority_change_reorders_a_queued_pod() -> None:
    queue, clock = new_queue()
    queue.add(PodInfo.of(pod("a")))
    clock.now += 1
    b = pod("b")
    queue.add(PodInfo.of(b))
    b["spec"] = {**b["spec"], "priority": 10}
    queue.update(PodInfo.of(b))
    assert names(queue, 2) == ["b", "a"]


def test_backoff_doubles_from_one_second_up_to_ten() -> None:
    queue, clock = new_queue()
    queue.add(PodInfo.of(pod("p")))
    qp = queue.pop(0)
    waits = []
    for _ in range(6):
        assert qp is not None
        queue.requeue_failed(qp, queue.scheduling_cycle, unschedulable=False)
        started = clock.now
        while (qp := queue.pop(0)) is None:
            clock.now += 0.25
        waits.append(clock.now - started)
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_unschedulable_pods_move_only_for_events_that_can_help() -> None:
    queue, clock = new_queue()
    queue.add(PodInfo.of(pod("tainted-out")))
    qp = queue.pop(0)
    assert qp is not None
    qp.rejected_by = frozenset({"TaintToleration"})
    cycle = queue.scheduling_cycle
    queue.requeue_failed(qp, cycle, unschedulable=True)
    assert queue.depths()["unschedulable"] == 1
    assert queue.move_for_event(q.POD_DELETE) == 0  # freed room does not remove a taint
    assert queue.move_for_event(q.NODE_UPDATE) == 1
    assert queue.depths()["backoff"] == 1  # its first back-off (1 s) is not over yet
    clock.now += 1
    assert queue.pop(0) is qp


def test_an_event_during_the_attempt_sends_the_pod_to_backoff_not_unschedulable() -> None:
    queue, _ = new_queue()
    queue.add(PodInfo.of(pod("p")))
    qp = queue.pop(0)
    assert qp is not None
    cycle = queue.scheduling_cycle
    queue.move_for_event(q.NODE_ADD)  # a node registers while we filter
    queue.requeue_failed(qp, cycle, unschedulable=True)
    assert queue.depths()["unschedulable"] == 0
    assert queue.depths()["backoff"] == 1


def test_a_deleted_pod_leaves_the_queue() -> None:
    queue, _ = new_queue()
    queue.add(PodInfo.of(pod("p")))
    queue.delete("default/p")
    assert queue.pop(0) is None
