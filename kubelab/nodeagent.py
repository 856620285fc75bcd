"""The loop of a node agent that reconciles one thing as a whole (the node's routes,
its iptables, the DNS records): informers mark the state dirty, one thread syncs.

The pod network agent, kube-proxy and the DNS server each derive their whole output
from their caches on every sync, as kindnetd and kube-proxy do, so there is one key
("everything") rather than a queue of objects: notifications arriving during a sync
coalesce into one more sync, and a periodic resync repairs what someone else changed
(a flushed chain, a deleted route). A failed sync is retried after an exponential
back-off; `min_interval` bounds how often a burst of changes makes it sync.

Tracing (docs/architecture.md, "Tracing"): with a `SyncTracing`, a sync that changes
caused is a span (`Proxy.sync`, `DNS.sync`) in a trace of its own, linked to the spans
that wrote the objects whose changes it answers (`kubelab.tracing.link`): one sync
answers many writes, so it has no single parent. Inside it, one span per such object
(`Proxy.syncRules`, `DNS.updateRecords`) names the object (its `k8s.object.*`
attributes, an EndpointSlice's owner being its Service) and links to its writer, so
`labctl trace service/web` finds the sync that programmed web's rules. The objects are
the last state each informer notified of since the previous sync; a periodic resync
that no change caused is not traced.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.context import Context

from kubelab import tracing
from kubelab.client import DeletedFinalStateUnknown, Object, SharedInformer, object_key

log = logging.getLogger(__name__)

CHANGED_ATTRIBUTE = "kubelab.sync.changed"
"""The span attribute of a traced sync: how many objects changed since the last one."""


@dataclass(frozen=True)
class SyncTracing:
    """How a `SyncLoop` traces (module docstring): the component's tracer, the span of a
    sync (`Proxy.sync`) and that of each object it answers (`Proxy.syncRules`)."""

    tracer: trace.Tracer
    sync_span: str
    object_span: str


class SyncLoop:
    """Calls `sync` once informers have synced, again after any change (at most every
    `min_interval` seconds) and every `resync` seconds; failures back off up to
    `max_backoff`. With `sync_tracing`, syncs are traced (module docstring)."""

    def __init__(
        self,
        name: str,
        sync: Callable[[], None],
        *,
        min_interval: float = 0.1,
        resync: float = 30.0,
        max_backoff: float = 30.0,
        sync_tracing: SyncTracing | None = None,
    ) -> None:
        self.name = name
        self._sync = sync
        self._tracing = sync_tracing
        # The objects changed since the last sync, while tracing: (kind, key) -> the
        # last state notified.
        self._changed: dict[tuple[str, str], Object] = {}
        self._changed_lock = threading.Lock()
        self._dirty = threading.Event()
        self._min_interval = min_interval
        self._resync = resync
        self._max_backoff = max_backoff
        self.syncs = 0
        """Successful syncs so far (tests and benchmarks wait on it)."""

    def watch(self, informer: SharedInformer) -> None:
        """Sync again whenever `informer`'s cache changes."""

        kind = informer.resource.kind

        def changed(*objects: Object | DeletedFinalStateUnknown) -> None:
            if self._tracing is not None:
                last = objects[-1]  # on_update's new state
                obj = last.obj if isinstance(last, DeletedFinalStateUnknown) else last
                with self._changed_lock:
                    self._changed[(kind, object_key(obj))] = obj
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
                self._traced_sync()
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

    def _traced_sync(self) -> None:
        """`sync`, as the spans of the module docstring when tracing and changes caused
        it; the changes are kept for the next attempt if it fails."""
        if self._tracing is None:
            self._sync()
            return
        with self._changed_lock:
            changed, self._changed = self._changed, {}
        if not changed:
            self._sync()
            return
        tracer = self._tracing.tracer
        causes = [(kind, obj, tracing.link(obj)) for (kind, _), obj in changed.items()]
        try:
            with tracer.start_as_current_span(
                self._tracing.sync_span,
                context=Context(),
                links=[link for _, _, link in causes if link is not None],
            ) as span:
                span.set_attribute(CHANGED_ATTRIBUTE, len(changed))
                objects = [
                    tracer.start_span(
                        self._tracing.object_span,
                        attributes=tracing.object_attributes(obj, kind),
                        links=None if link is None else [link],
                    )
                    for kind, obj, link in causes
                ]
                try:
                    self._sync()
                finally:
                    for child in objects:
                        child.end()
        except Exception:
            with self._changed_lock:
                self._changed = {**changed, **self._changed}
            raise
