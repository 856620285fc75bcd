"""Flow control shared by the REST client, the reflector and the work queue: a token
bucket that limits a rate, and an exponential back-off that spaces out retries.

Token bucket. A bucket holds at most `burst` tokens and gains `qps` per second; each
request takes one. A client that has been quiet may therefore send `burst` requests at
once, and never more than `qps` per second on average. `reserve()` always takes its token
(the bucket may go into debt) and returns how long the caller must wait before acting:
callers that block (the REST client) sleep that long, callers that schedule (the work
queue) schedule that far ahead. Debt is what keeps the schedule fair when many callers
reserve at once: the n-th caller past the burst waits n/qps seconds, not a random turn.

Back-off. The n-th consecutive failure waits `base * factor**n`, capped at `cap`, with an
optional random jitter added on top. Jitter matters when many clients failed for the
same reason (an apiserver restart): without it they would all come back at the same
instant and knock it over again.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

from kubelab.client.clock import REAL_CLOCK, Clock


class TokenBucket:
    """A thread-safe token bucket of `burst` tokens refilled at `qps` per second."""

    def __init__(self, qps: float, burst: int, clock: Clock = REAL_CLOCK) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.now()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take a token and return the seconds to wait before using it (0 if available)."""
        with self._lock:
            now = self._clock.now()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def accept(self, stop: threading.Event | None = None) -> bool:
        """Take a token, sleeping until it is due; False if `stop` was set first (the
        token stays taken)."""
        delay = self.reserve()
        if delay > 0:
            return not self._clock.sleep(delay, stop)
        return stop is None or not stop.is_set()


@dataclass(frozen=True)
class Backoff:
    """Exponential back-off: failure n (from 0) waits min(cap, base * factor**n), plus a
    random jitter of up to `jitter` times that."""

    base: float
    cap: float
    factor: float = 2.0
    jitter: float = 0.0

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        """The wait after `failures` earlier consecutive failures."""
        try:
            wait = min(self.cap, self.base * self.factor**failures)
        except OverflowError:  # thousands of failures: the cap was reached long ago
            wait = self.cap
        if self.jitter > 0:
            wait += (rng or random).random() * self.jitter * wait
        return wait
