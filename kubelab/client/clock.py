"""Time as the client library sees it: a `Clock` that every timed component takes as a
parameter, the real one, and a fake one that tests move by hand.

Work-queue back-off, rate limiting, reflector back-off and leader election are all about
time. Taking the clock as a parameter lets their tests say "ten seconds pass" and check
what happens, exactly and instantly, instead of sleeping and hoping.

Two kinds of waiting are needed, and a clock provides both:

* `wait(cond, timeout)`: block on a `threading.Condition` the caller holds, until it is
  notified or `timeout` seconds of *this clock's* time pass. Like `Condition.wait` it may
  return early, so callers re-check their predicate in a loop. The work queue waits this
  way for an item to become ready.
* `sleep(seconds, stop)`: pause, returning early when the `stop` event is set. Back-offs
  and leader-election retries wait this way, so that stopping a component is prompt.

`now()` is monotonic and measures every duration; `utcnow()` is the wall-clock time that
goes into objects (a Lease's renewTime) and is never used to measure anything.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections import Counter
from typing import Protocol


def rfc3339(when: datetime.datetime) -> str:
    """A time as the API writes it, to the second ("2026-01-02T03:04:05Z")."""
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock(Protocol):
    """The time source of a timed component; see the module docstring."""

    def now(self) -> float:
        """Monotonic seconds, for measuring durations only."""
        ...

    def utcnow(self) -> datetime.datetime:
        """Wall-clock time (UTC, timezone-aware), for timestamps written into objects."""
        ...

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        """Wait on `cond` (held by the caller) until notified or `timeout` clock seconds
        pass; may return early."""
        ...

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """Pause for `seconds`, or until `stop` is set; return whether `stop` is set."""
        ...


class RealClock:
    """The machine's clocks: `time.monotonic` and the UTC wall clock."""

    def now(self) -> float:
        return time.monotonic()

    def utcnow(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        if timeout is None or timeout > 0:
            cond.wait(timeout)

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        if stop is None:
            time.sleep(max(seconds, 0.0))
            return False
        return stop.wait(max(seconds, 0.0))


REAL_CLOCK = RealClock()
"""The clock components use unless given another."""

_STOP_POLL = 0.005
"""How often (in real seconds) a fake sleep looks at its stop event: an Event cannot notify
the fake clock when it is set, so a sleeper polls it."""


class FakeClock:
    """A clock that only moves when `step` is called, for deterministic tests.

    Threads waiting on it (in `wait` or `sleep`) are woken by `step` and re-check their
    deadlines against the new time, so a test can start workers, step the clock, and
    observe exactly what became due. `utcnow()` is `start_wall` plus the time stepped.
    """

    def __init__(
        self,
        start: float = 0.0,
        start_wall: datetime.datetime = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    ) -> None:
        self._now = start
        self._start = start
        self._start_wall = start_wall
        self._lock = threading.Condition()
        # Conditions that threads are waiting on through `wait`, with how many threads.
        self._waited: Counter[threading.Condition] = Counter()

    def now(self) -> float:
        with self._lock:
            return self._now

    def utcnow(self) -> datetime.datetime:
        return self._start_wall + datetime.timedelta(seconds=self.now() - self._start)

    def step(self, seconds: float) -> None:
        """Move time forward by `seconds` and wake every thread waiting on this clock."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back in time (step {seconds})")
        with self._lock:
            self._now += seconds
            waited = list(self._waited)
            self._lock.notify_all()
        # Outside our own lock: the waiters' conditions are taken in the order
        # "condition, then clock" by `wait`, so holding ours here could deadlock.
        for cond in waited:
            with cond:
                cond.notify_all()

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        if timeout is not None and timeout <= 0:
            return
        # Registered while the caller still holds `cond`: a `step` between here and the
        # wait below blocks on `cond` until the wait releases it, so no wake-up is lost.
        with self._lock:
            self._waited[cond] += 1
        try:
            cond.wait()
        finally:
            with self._lock:
                self._waited[cond] -= 1
                if not self._waited[cond]:
                    del self._waited[cond]

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        with self._lock:
            deadline = self._now + seconds
            while self._now < deadline and not (stop is not None and stop.is_set()):
                self._lock.wait(_STOP_POLL if stop is not None else None)
        return stop is not None and stop.is_set()
