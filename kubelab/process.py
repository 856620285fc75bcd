"""What every component's process does the same way when it starts: log
at the level its `-v` flag asks for, in one format (so that the logs of a local plane's
processes read alike), and turn SIGTERM and SIGINT into a stop event its loops watch,
so that it releases its lease and exits 0 instead of dying mid-write."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(verbosity: int) -> None:
    """Log to stderr: DEBUG from `-v 4` up (klog's detailed levels), INFO below."""
    logging.basicConfig(
        level=logging.DEBUG if verbosity >= 4 else logging.INFO,
        format=LOG_FORMAT,
        stream=sys.stderr,
    )


def stop_on_signals(log: logging.Logger) -> threading.Event:
    """An event set (and logged on `log`) when SIGTERM or SIGINT arrives. Call it from
    the main thread, as Python requires of signal handlers."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("%s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop
