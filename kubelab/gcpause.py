"""Short garbage-collector pauses for long-running servers that keep a lot in memory.

CPython's full (generation 2) collection walks every tracked object. A store member
holding its whole key space, or an apiserver holding its watch cache, has hundreds of
thousands of them, so each full collection stops the process for 50-100 ms, and with it
the Raft loop or every request in flight: measured, those pauses were most of the store's
p99 write latency at 64 clients.

The remedy is the one large Python services use: after each full collection, move the
survivors to the permanent generation (`gc.freeze()`), so the next full collection only
walks what was allocated since. Objects that die are still freed at once by reference
counting, frozen or not; only garbage *cycles* among frozen objects wait, so once every
`sweep_every` seconds everything is unfrozen and collected for real (one full pause per
sweep instead of one every few seconds).

`install()` also reports every pause to an optional observer (a Prometheus histogram).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

Observer = Callable[[int, float], None]
"""(generation, seconds) of one finished collection."""


class PausePolicy:
    def __init__(
        self,
        sweep_every: float,
        observe: Observer | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sweep_every = sweep_every
        self.observe = observe
        self.clock = clock
        self._started = 0.0
        self._last_sweep = clock()
        self._sweeping = False

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = int(info["generation"])
        if self.observe is not None:
            self.observe(generation, time.perf_counter() - self._started)
        if generation == 2 and not self._sweeping:
            self._after_full_collection()

    def _after_full_collection(self) -> None:
        if self.clock() - self._last_sweep >= self.sweep_every:
            self._last_sweep = self.clock()
            self._sweeping = True
            try:
                gc.unfreeze()
                gc.collect()
            finally:
                self._sweeping = False
        gc.freeze()


_installed: PausePolicy | None = None


def install(observe: Observer | None = None, sweep_every: float = 600.0) -> PausePolicy:
    """Freeze survivors after every full collection (see the module doc). Once per
    process: a second call only replaces the observer and the sweep interval."""
    global _installed
    if _installed is None:
        _installed = PausePolicy(sweep_every, observe)
        gc.callbacks.append(_installed)
    else:
        _installed.observe, _installed.sweep_every = observe, sweep_every
    return _installed
