"""The work queue between a controller's event handlers and its workers (client-go's
`util/workqueue`).

Handlers put keys ("namespace/name") in the queue; workers take them out and reconcile
the object the key names, reading its current state from the informer's cache. The loop
of a worker is::

    while True:
        try:
            key = queue.get()
        except ShutDown:
            return
        try:
            sync(key)
            queue.forget(key)            # success: reset the key's back-off
        except Exception:
            queue.add_rate_limited(key)  # failure: try again later, later each time
        finally:
            queue.done(key)

The queue is "fair and stingy":

* Stingy: a key is queued at most once. Ten updates of one object before a worker gets
  to it cause one reconciliation, not ten. That is right because a worker reconciles
  the latest state, not a particular change.
* A key is never handed to two workers at once. A key added again while a worker
  processes it is held back (it is "dirty") and queued again only when that worker calls
  `done()`. Two workers reconciling one object at the same time would race each other.
* Fair: keys come out in the order they were first added, so that a busy object cannot
  starve the others.

Three sets make this work: `queue` (waiting, in order), `dirty` (needs processing: in
`queue`, or added again during processing) and `processing` (handed out, not yet done).

Delays: `add_after(key, seconds)` queues a key later (a key already waiting keeps the
earlier time). `add_rate_limited(key)` queues it after the delay its rate limiter gives;
the default one is client-go's controller limiter, the larger of:

* a per-key exponential back-off, 5 ms doubling up to 1000 s, which `forget(key)` resets:
  a key that keeps failing is retried less and less often, without slowing other keys;
* an overall token bucket of 10 per second with bursts of 100: when everything fails at
  once (the apiserver is down) the retries together stay at a rate it can take.

How long a key waited between being queued and handed out (`get_with_wait`) is the
work-queue wait of a controller's trace (client-go's `workqueue_queue_duration_seconds`);
a key held back while it is processed waits from the moment `done()` queues it again.

What queued a key (`get_with_causes`): `add` keeps the span current when it is called
(the informer's `Informer.event` span, in the trace of the write that changed the
object), each distinct one once and at most `MAX_CAUSES` a key, since merging ten
events into one reconcile merges ten causes too; the worker links its reconcile to
them (controlplane/controllers/base.py). A key's causes go with it when it is handed
out; one added while it is processed is the next round's.

The queue takes a `Clock`, so tests can check the back-off without waiting.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from opentelemetry import trace
from opentelemetry.trace import SpanContext

from kubelab.client.clock import REAL_CLOCK, Clock
from kubelab.client.flowcontrol import Backoff, TokenBucket

MAX_CAUSES = 16
"""The most span contexts kept of what queued one key (module docstring)."""

T = TypeVar("T", bound=Hashable)


class ShutDown(Exception):
    """The queue was shut down and holds no more items: the worker should return."""


class RateLimiter(Protocol):
    """Decides how long an item waits before it is retried."""

    def when(self, item: Hashable) -> float:
        """The delay before `item` is retried; records one more failure of it."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking `item` (it succeeded): its next failure starts afresh."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many times `item` has failed since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per item: the n-th consecutive failure waits base * 2**n, up to `cap`."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self._backoff = Backoff(base=base, cap=cap)
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            failures = self._failures.get(item, 0)
            self._failures[item] = failures + 1
            return self._backoff.delay(failures)

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class BucketRateLimiter:
    """All items together: a token bucket spaces the retries out."""

    def __init__(self, bucket: TokenBucket) -> None:
        self._bucket = bucket

    def when(self, item: Hashable) -> float:
        return self._bucket.reserve()

    def forget(self, item: Hashable) -> None:
        """Nothing to forget: the bucket does not track items."""

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay of several limiters (each records every failure)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: Hashable) -> float:
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock = REAL_CLOCK) -> RateLimiter:
    """Per-item 5 ms..1000 s exponential back-off, and 10 qps / 100 burst overall."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(TokenBucket(qps=10, burst=100, clock=clock)),
    )


class WorkQueue(Generic[T]):
    """A fair, stingy, delaying, rate-limited work queue; see the module docstring.

    Thread-safe. `rate_limiter` defaults to `default_controller_rate_limiter(clock)`.
    """

    def __init__(
        self, rate_limiter: RateLimiter | None = None, *, clock: Clock = REAL_CLOCK
    ) -> None:
        self._clock = clock
        self._rate_limiter = rate_limiter or default_controller_rate_limiter(clock)
        self._cond = threading.Condition()
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        # When each item in `queue` was appended to it (the clock's time).
        self._queued_at: dict[T, float] = {}
        # Items to add later: a heap of (when, sequence, item), and each item's earliest
        # time. A heap entry whose time is not its item's current one is stale, skipped.
        self._delayed: list[tuple[float, int, T]] = []
        self._ready_at: dict[T, float] = {}
        self._sequence = itertools.count()
        self._shutting_down = False
        # The distinct span contexts current when each dirty item was added.
        self._causes: dict[T, list[SpanContext]] = {}

    def __len__(self) -> int:
        """Items ready to be handed out (not counting delayed or processing ones)."""
        with self._cond:
            self._promote_due()
            return len(self._queue)

    def _add(self, item: T) -> None:
        """`add`, with the lock held."""
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        if item in self._processing:
            return  # queued again by done()
        self._append(item)

    def _append(self, item: T) -> None:
        """Put `item` at the end of `queue`, with the lock held."""
        self._queue.append(item)
        self._queued_at[item] = self._clock.now()
        self._cond.notify()

    def add(self, item: T) -> None:
        """Queue `item`, unless it is queued already or being processed (then it is
        queued again when its worker is done). Ignored after shutdown."""
        cause = trace.get_current_span().get_span_context()
        with self._cond:
            self._add(item)
            if cause.is_valid and item in self._dirty:
                causes = self._causes.setdefault(item, [])
                if cause not in causes and len(causes) < MAX_CAUSES:
                    causes.append(cause)

    def add_after(self, item: T, delay: float) -> None:
        """Queue `item` after `delay` seconds of the queue's clock."""
        if delay <= 0:
            self.add(item)
            return
        with self._cond:
            if self._shutting_down:
                return
            ready_at = self._clock.now() + delay
            due = self._ready_at.get(item)
            if due is not None and due <= ready_at:
                return  # already due sooner
            self._ready_at[item] = ready_at
            heapq.heappush(self._delayed, (ready_at, next(self._sequence), item))
            # Wake a waiting get(): its wait may have to end sooner.
            self._cond.notify_all()

    def add_rate_limited(self, item: T) -> None:
        """Queue `item` after the delay its rate limiter gives (one more failure)."""
        self.add_after(item, self._rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """`item` was processed successfully: reset its back-off."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self._rate_limiter.num_requeues(item)

    def _promote_due(self) -> float | None:
        """Queue the delayed items that are due; return when the next one is due."""
        now = self._clock.now()
        while self._delayed:
            ready_at, _, item = self._delayed[0]
            if self._ready_at.get(item) != ready_at:
                heapq.heappop(self._delayed)  # stale: superseded by an earlier time
                continue
            if ready_at > now:
                return ready_at
            heapq.heappop(self._delayed)
            del self._ready_at[item]
            self._add(item)
        return None

    def get(self) -> T:
        """Take the next item, blocking until there is one. The caller must call
        `done(item)` when finished with it. Raises `ShutDown` once the queue is shut
        down and empty."""
        return self.get_with_wait()[0]

    def get_with_wait(self) -> tuple[T, float]:
        """`get`, and the seconds the item waited in the queue (module docstring)."""
        item, waited, _ = self.get_with_causes()
        return item, waited

    def get_with_causes(self) -> tuple[T, float, list[SpanContext]]:
        """`get_with_wait`, and the span contexts of what queued the item (module
        docstring)."""
        with self._cond:
            while True:
                next_due = self._promote_due()
                if self._queue:
                    break
                if self._shutting_down:
                    raise ShutDown()
                timeout = None if next_due is None else next_due - self._clock.now()
                self._clock.wait(self._cond, timeout)
            item = self._queue.popleft()
            waited = self._clock.now() - self._queued_at.pop(item)
            self._processing.add(item)
            self._dirty.discard(item)
            return item, waited, self._causes.pop(item, [])

    def done(self, item: T) -> None:
        """Finish with `item`; if it was added meanwhile, queue it again now."""
        with self._cond:
            self._processing.discard(item)
            if item in self._dirty:
                self._append(item)

    def shut_down(self) -> None:
        """Stop accepting items and drop the delayed ones. Workers get the items already
        queued, then `ShutDown`."""
        with self._cond:
            self._shutting_down = True
            self._delayed.clear()
            self._ready_at.clear()
            self._cond.notify_all()

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down
