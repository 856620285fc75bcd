"""`lab.memstore` where it is not a store client: its own end of life.

Its KV and watch behaviour is held to etcd's by the `kvstore` tests in
`test_storeclient.py`; here, what closing the in-process store does to its callers, which
must look like a store member going away (the watch cache then retries).
"""

from __future__ import annotations

import threading

import pytest

from kubelab.storeclient import Unavailable
from lab.memstore import MemStore


def test_closing_the_store_ends_open_watches_as_unavailable() -> None:
    store = MemStore()
    watch = store.watch("k")
    assert next(watch).created
    threading.Timer(0.2, store.close).start()
    with pytest.raises(Unavailable, match="watch stream ended"):
        next(watch)
    with pytest.raises(Unavailable, match="closed"):
        store.get("k")


def test_watch_progress_notifications_carry_the_store_revision() -> None:
    with MemStore(progress_interval=0.05) as store:
        revision = store.put("a", "1").header.revision
        with store.watch("b", progress_notify=True) as watch:
            assert next(watch).created
            progress = next(watch)
    assert not progress.events and progress.header.revision == revision
