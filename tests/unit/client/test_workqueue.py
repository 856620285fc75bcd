"""The work queue: fair and stingy, never one key in two workers, delays and rate-limited
back-off on a fake clock, shutdown."""

from __future__ import annotations

import queue
import random
import threading
import time
from collections import Counter

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from kubelab.client.clock import FakeClock
from kubelab.client.flowcontrol import TokenBucket
from kubelab.client.workqueue import (
    MAX_CAUSES,
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ShutDown,
    WorkQueue,
    default_controller_rate_limiter,
)
from tests.unit.client.conftest import eventually


def drain(q: WorkQueue[str]) -> list[str]:
    """Take and finish every ready item."""
    out = []
    while len(q):
        item = q.get()
        q.done(item)
        out.append(item)
    return out


def start_getter(q: WorkQueue[str]) -> queue.Queue[str]:
    """A worker that reports each item it gets (and is done with it at once)."""
    got: queue.Queue[str] = queue.Queue()

    def work() -> None:
        while True:
            try:
                item = q.get()
            except ShutDown:
                return
            got.put(item)
            q.done(item)

    threading.Thread(target=work, daemon=True).start()
    return got


def nothing_within(got: queue.Queue[str], seconds: float = 0.05) -> bool:
    try:
        got.get(timeout=seconds)
    except queue.Empty:
        return True
    return False


def test_an_item_is_queued_once_and_items_come_out_in_order() -> None:
    q: WorkQueue[str] = WorkQueue()
    for item in ["b", "a", "b", "c", "a"]:
        q.add(item)
    assert len(q) == 3
    assert drain(q) == ["b", "a", "c"]


def test_an_item_added_during_processing_waits_for_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert q.get() == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0, "not handed to a second worker while the first has it"
    q.done("a")
    assert len(q) == 1 and q.get() == "a"
    q.done("a")
    assert len(q) == 0, "processed once more, not once per add"


def test_no_key_is_ever_processed_by_two_workers_at_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    in_flight: Counter[str] = Counter()
    lock = threading.Lock()
    overlaps: list[str] = []
    processed: Counter[str] = Counter()
    keys = [f"k{i}" for i in range(5)]

    def worker() -> None:
        while True:
            try:
                key = q.get()
            except ShutDown:
                return
            with lock:
                in_flight[key] += 1
                if in_flight[key] > 1:
                    overlaps.append(key)
            time.sleep(0.001)
            with lock:
                in_flight[key] -= 1
                processed[key] += 1
            q.done(key)

    workers = [threading.Thread(target=worker) for _ in range(8)]
    for w in workers:
        w.start()
    rng = random.Random(7)
    for i in range(1000):
        q.add(rng.choice(keys))
        if i % 10 == 0:
            time.sleep(0.001)  # let workers take keys, so that adds land mid-processing
    eventually(lambda: len(q) == 0 and sum(in_flight.values()) == 0)
    q.shut_down()
    for w in workers:
        w.join(5)
    assert overlaps == []
    assert set(processed) == set(keys)


def test_shutdown_wakes_blocked_workers_after_the_queue_is_drained() -> None:
    q: WorkQueue[str] = WorkQueue()
    got = start_getter(q)
    q.add("last")
    assert got.get(timeout=2) == "last"
    q.shut_down()
    q.add("ignored")
    with pytest.raises(ShutDown):
        q.get()
    assert q.shutting_down

    q2: WorkQueue[str] = WorkQueue()
    q2.add("queued-before")
    q2.shut_down()
    assert q2.get() == "queued-before"
    with pytest.raises(ShutDown):
        q2.get()


def test_add_after_hands_the_item_out_when_the_clock_gets_there() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    got = start_getter(q)
    q.add_after("later", 10)
    q.add_after("later", 5)  # the earlier time wins
    q.add_after("later", 20)
    q.add_after("now", 0)
    assert got.get(timeout=2) == "now"
    clock.step(4.9)
    assert nothing_within(got)
    clock.step(0.1)
    assert got.get(timeout=2) == "later"
    clock.step(30)
    assert nothing_within(got), "queued once, at the earliest time"
    q.shut_down()


def test_per_item_back_off_doubles_from_5ms_to_1000s() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("a") for _ in range(20)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[-1] == 1000.0 and max(delays) == 1000.0
    assert limiter.when("b") == 0.005, "each item has its own back-off"
    assert limiter.num_requeues("a") == 20
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0 and limiter.when("a") == 0.005
    for _ in range(5000):  # no overflow, however often an item fails
        limiter.when("c")
    assert limiter.when("c") == 1000.0


def test_the_overall_bucket_limits_retries_of_many_items_together() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    delays = [limiter.when(f"item-{i}") for i in range(102)]
    assert delays[:100] == [0.005] * 100  # within the burst: each item's own back-off
    assert delays[100:] == pytest.approx([0.1, 0.2])  # then 10 per second
    assert BucketRateLimiter(TokenBucket(10, 100, clock)).num_requeues("x") == 0


def test_add_rate_limited_retries_later_each_time_until_forgotten() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    got = start_getter(q)
    for expected_delay in (0.005, 0.01, 0.02):
        q.add_rate_limited("flaky")
        clock.step(expected_delay * 0.9)
        assert nothing_within(got)
        clock.step(expected_delay * 0.1)
        assert got.get(timeout=2) == "flaky"
    assert q.num_requeues("flaky") == 3
    q.forget("flaky")
    assert q.num_requeues("flaky") == 0
    q.add_rate_limited("flaky")
    clock.step(0.005)
    assert got.get(timeout=2) == "flaky"
    q.shut_down()


def test_delayed_items_are_dropped_at_shutdown() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add_after("late", 1)
    q.shut_down()
    clock.step(2)
    with pytest.raises(ShutDown):
        q.get()


def test_get_with_wait_says_how_long_the_item_waited_since_it_was_queued() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add("a")
    clock.step(2.0)
    q.add("b")
    clock.step(1.0)
    assert q.get_with_wait() == ("a", 3.0)
    q.add("a")  # while processing: queued again by done(), and waits from then
    clock.step(5.0)
    q.done("a")
    clock.step(0.5)
    assert q.get_with_wait() == ("b", 6.5)
    assert q.get_with_wait() == ("a", 0.5)


def test_a_key_carries_the_distinct_spans_that_queued_it_until_handed_out() -> None:
    """What queued a key (the span current at `add`) goes with it: merged adds keep each
    distinct span once, within `MAX_CAUSES`; an add while the key is processed is the
    next round's; an add outside any span is no cause."""

    def context(n: int) -> SpanContext:
        return SpanContext(n, n, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))

    def add_in(q: WorkQueue[str], n: int) -> None:
        with trace.use_span(NonRecordingSpan(context(n))):
            q.add("k")

    q: WorkQueue[str] = WorkQueue()
    q.add("k")
    for n in (1, 2, 1, *range(3, MAX_CAUSES + 5)):
        add_in(q, n)
    key, _, causes = q.get_with_causes()
    assert key == "k"
    assert causes == [context(n) for n in range(1, MAX_CAUSES + 1)]
    add_in(q, 99)  # while processing: the next round's
    q.done("k")
    assert q.get_with_causes()[2] == [context(99)]
    q.done("k")
    q.add("k")
    assert q.get_with_causes()[2] == []
