"""The loop of a node agent that reconciles one thing as a whole (the node's routes,
its iptables, the DNS records): informers mark the state dirty, one thread syncs.

The pod network agent, kube-proxy and the DNS server each derive their whole output
from their caches on every sync, as kindnetd and kube-proxy do, so there is one key
("everything") rather than a queue of objects: notifications arriving during a sync
coalesce into one more sync, and a periodic resync repairs what someone else changed
(a flushed chain, a deleted route). A failed sync is retried after an exponential
back-off; `min_interval` bounds how often a burst of changes makes it sync.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kubelab.client import DeletedFinalStateUnknown, Object, SharedInformer

log = logging.getLogger(__name__)


class SyncLoop:
    """Calls `sync` once informers have synced, again after any change (at most every
    `min_interval` seconds) and every `resync` seconds; failures back off up to
    `max_backoff`."""

    def __init__(
        self,
        name: str,
        sync: Callable[[], None],
        *,
        min_interval: float = 0.1,
        resync: float = 30.0,
        max_backoff: float = 30.0,
    ) -> None:
        self.name = name
        self._sync = sync
        self._dirty = threading.Event()
        self._min_interval = min_interval
        self._resync = resync
        self._max_backoff = max_backoff
        self.syncs = 0
        """Successful syncs so far (tests and benchmarks wait on it)."""

    def watch(self, informer: SharedInformer) -> None:
        """Sync again whenever `informer`'s cache changes."""

        def changed(*_: Object | DeletedFinalStateUnknown) -> None:
            self._dirty.set()

        informer.add_event_handler(on_add=changed, on_update=changed, on_delete=changed)

    def poke(self) -> None:
        self._dirty.set()

    def run(self, informers: list[SharedInformer], stop: threading.Event) -> None:
        """Until `stop` is set: wait for the caches, then sync as the docstring says."""
        for informer in informers:
            while not informer.wait_for_sync(1.0):
                if stop.is_set():
                    return
        backoff = 0.0
        self._dirty.set()
        while not stop.is_set():
            self._dirty.wait(self._resync)
            if stop.is_set():
                return
            self._dirty.clear()
            started = time.monotonic()
            try:
                self._sync()
            except Exception:
                backoff = min(max(backoff * 2, 1.0), self._max_backoff)
                log.exception("%s: sync failed; retrying in %.0f s", self.name, backoff)
                self._dirty.set()
                stop.wait(backoff)
                continue
            backoff = 0.0
            self.syncs += 1
            log.debug("%s: synced in %.3f s", self.name, time.monotonic() - started)
            stop.wait(self._min_interval)
