"""Consistent reads share store round trips, but never use a revision read before they
arrived (that could miss a write acknowledged just before)."""

from __future__ import annotations

import threading
import time

import pytest

from controlplane.apiserver.storage import RevisionReader


class SlowStore:
    """A store whose revision read blocks until released, counting the reads."""

    def __init__(self) -> None:
        self.reads = 0
        self.revision = 0
        self.release = threading.Event()
        self.started = threading.Event()

    def read(self) -> int:
        self.reads += 1
        at_start = self.revision
        self.started.set()
        self.release.wait(5)
        return at_start


def test_callers_arriving_during_a_read_share_the_next_one() -> None:
    store = SlowStore()
    reader = RevisionReader(store.read)
    results: list[int] = []
    first = threading.Thread(target=lambda: results.append(reader.current()))
    first.start()
    assert store.started.wait(5)
    store.revision = 7  # a write acknowledged after the first read began
    later = [threading.Thread(target=lambda: results.append(reader.current())) for _ in range(20)]
    for t in later:
        t.start()
    time.sleep(0.3)  # let them all queue up behind the running read
    store.started.clear()
    store.release.set()
    for t in [first, *later]:
        t.join(5)
    assert store.reads == 2  # one for the first caller, one shared by the other twenty
    assert sorted(results) == [0] + [7] * 20  # nobody after the write got the old value


def test_a_store_error_reaches_every_caller_sharing_the_read() -> None:
    def broken() -> int:
        raise ConnectionError("store down")

    reader = RevisionReader(broken)
    with pytest.raises(ConnectionError) as err:
        reader.current()
    assert "store down" in str(err.value)
