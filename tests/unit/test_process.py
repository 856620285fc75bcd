"""A component's process stops on SIGTERM or SIGINT through the event its loops watch
(`kubelab.process.stop_on_signals`), instead of dying mid-write."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator

import pytest

from kubelab.process import stop_on_signals


@pytest.fixture
def restored_handlers() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_sets_the_stop_event(
    sig: signal.Signals, restored_handlers: None, caplog: pytest.LogCaptureFixture
) -> None:
    log = logging.getLogger("test-component")
    stop = stop_on_signals(log)
    assert not stop.is_set()
    with caplog.at_level(logging.INFO, "test-component"):
        os.kill(os.getpid(), sig)
        assert stop.wait(5)
    assert f"{sig.name}: stopping" in caplog.text
