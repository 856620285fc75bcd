"""Waiting in tests for what happens in the background (an agent's sync, a watch):
bounded in time, polling gently, and saying what was awaited when it times out."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Return once `check()` is true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)
