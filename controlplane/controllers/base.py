"""What the controller-manager's controllers are made of: the `Controller` protocol, the
workers that drain a work queue, the informers they share and the context each is built
from. This is the shape client-go gives every controller of kube-controller-manager:

    informer event --handler--> work queue --worker--> sync(key) --> API writes
                                                         \\--> reads the informer caches

* A handler only works out which key is affected and adds it to a queue; it runs on the
  informer's single notification thread, so anything slower would hold up every other
  notification.
* A worker takes a key, reconciles it, and marks it done:
  `key = queue.get(); try: sync(key) finally: queue.done(key)`. The queue never hands one
  key to two workers at once, and a key added while it is being synced comes back once
  the sync is done, so a change is never lost.
* A failed sync is retried after the queue's per-key exponential back-off
  (`add_rate_limited`); a successful one resets that back-off (`forget`). A sync that
  waits for something no event will announce (the grace period of a pod) returns how
  many seconds to wait, and the key comes back then.
* Syncs are level driven: they reconcile the state the caches show now, whatever change
  woke them, so merged or missed notifications cost latency, never correctness. They
  never modify a cached object (it is shared with every other handler): a write starts
  from a copy, or sends only what changes.
* Workers start only once every informer has synced. Before that an object missing from
  a cache may only not be listed yet, and a controller trusting that absence would
  create duplicates or delete what it should keep.

Tracing (docs/architecture.md, "Tracing"): with the manager's tracer, each watch
event a shared informer delivers is a span (`Informer.event`), and each key a worker
takes is two: `WorkQueue.wait`, from the moment the key was queued until a worker took
it, and `Controller.reconcile` (`kubelab.controller` names the controller), the sync
with the object's attributes. Both continue the trace kept in the object's annotation
(`kubelab.tracing.extract`): the trace of the write that made the change the
controller reconciles. The reconcile links to what queued its key (the work queue's
causes: the `Informer.event` spans current when a handler added the key, each distinct
one, `workqueue.MAX_CAUSES` at most): a ReplicaSet reconciled because one of its pods
was deleted stays in the ReplicaSet's trace, yet links to the deletion's, so that
`labctl trace pod/NAME` finds the reconcile and the replacement it created. A key whose
object carries no trace (or is gone from the cache) continues the first cause's trace
instead. The controller's writes happen inside the reconcile span, so
each is a `Client.<verb>` span of it and its request carries the reconcile's
`traceparent`: the apiserver keeps it on what the controller writes (the ReplicaSet a
Deployment's reconcile creates), and the next controller continues from there.

Informers are shared: `InformerFactory` makes one per resource, whichever controllers
ask for it, so the namespace cache that four controllers read costs one list and one
watch. Each controller gets its own REST client (`ControllerContext.client_for`) with its
own rate limit and user agent, as kube-controller-manager gives each of its controllers
its own: a controller polling a namespace that is stuck on a finalizer spends its own
request budget, not the garbage collector's, and the apiserver's audit log shows which
controller sent what.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from opentelemetry import trace

from kubelab import tracing
from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource
from kubelab.client import (
    ClientConfig,
    IndexFunc,
    Object,
    RestClient,
    ServerUnreachable,
    SharedInformer,
    ShutDown,
    WorkQueue,
    resource_for,
)

K = TypeVar("K", bound=Hashable)

SyncResult = float | None
"""What a sync returns: None when its key is reconciled, or the seconds after which to
look at the key again because it is waiting for something that sends no event."""

LOG_PREFIX = "kubelab.controllers"

log = logging.getLogger(LOG_PREFIX)

CONTROLLER_ATTRIBUTE = "kubelab.controller"
"""The span attribute naming the controller (its worker pool) that reconciled."""
KEY_ATTRIBUTE = "kubelab.workqueue.key"
"""The span attribute of the work-queue key reconciled."""

NAMESPACES = resource_for("v1", "Namespace")
"""The resource several controllers watch (namespaces), shared by them."""


def add_index(informer: SharedInformer, name: str, func: IndexFunc) -> None:
    """Index a shared informer's objects by `func` under `name`, unless a controller
    sharing the informer did already (with the same function: index names are the
    library's constants, NAMESPACE_INDEX, NODE_NAME_INDEX)."""
    with contextlib.suppress(ValueError):
        informer.indexer.add_indexers({name: func})


class SyncError(Exception):
    """A sync failed for a reason its message tells in full (no traceback needed)."""


def controller_logger(name: str) -> logging.Logger:
    """The logger of the controller `name`: every line a controller logs names it."""
    return logging.getLogger(f"{LOG_PREFIX}.{name}")


class Controller(Protocol):
    """A controller of the controller-manager: `name` is the one `--controllers` takes;
    `run` blocks, reconciling with `workers` threads, until `stop` is set."""

    @property
    def name(self) -> str: ...

    def run(self, workers: int, stop: threading.Event) -> None: ...


class Workers(Generic[K]):
    """Threads that feed the keys of one work queue to `sync`, following the loop of the
    module docstring; `run` starts them and returns once they have all finished.

    With a `tracer`, each key is traced (module docstring); `objects` is the informer
    whose cache holds the object a key names, where the key is one ("namespace/name"),
    for the reconcile's attributes and the trace it continues."""

    def __init__(
        self,
        name: str,
        queue: WorkQueue[K],
        sync: Callable[[K], SyncResult],
        logger: logging.Logger,
        *,
        tracer: trace.Tracer | None = None,
        objects: SharedInformer | None = None,
    ) -> None:
        self.name = name
        self.queue = queue
        self._sync = sync
        self._log = logger
        self._tracer = tracer
        self._objects = objects

    def run(self, count: int, stop: threading.Event) -> None:
        """Work with `count` threads until `stop` is set, then shut the queue down and
        wait for each worker to finish the key it holds."""
        threads = [
            threading.Thread(target=self._work, args=(stop,), name=f"{self.name}-{i}", daemon=True)
            for i in range(count)
        ]
        for thread in threads:
            thread.start()
        stop.wait()
        self.queue.shut_down()
        for thread in threads:
            thread.join()

    def _work(self, stop: threading.Event) -> None:
        while True:
            try:
                key, waited, causes = self.queue.get_with_causes()
            except ShutDown:
                return
            try:
                # Once stopped (leadership lost), the keys still queued are the next
                # leader's business: acting on them would make two controllers act.
                if not stop.is_set():
                    self._reconcile(key, waited, causes)
            finally:
                self.queue.done(key)

    def _reconcile(self, key: K, waited: float, causes: list[trace.SpanContext]) -> None:
        """`_sync_one`, as the spans of the module docstring when tracing."""
        tracer = self._tracer
        if tracer is None:
            self._sync_one(key)
            return
        obj = None
        if self._objects is not None and isinstance(key, str):
            obj = self._objects.indexer.get(key)
        context = tracing.extract(obj) if obj is not None else None
        if causes and not trace.get_current_span(context).get_span_context().is_valid:
            context = trace.set_span_in_context(trace.NonRecordingSpan(causes[0]))
        links = [trace.Link(cause) for cause in causes]
        now = time.time_ns()
        wait = tracer.start_span(
            "WorkQueue.wait", context=context, start_time=now - int(waited * 1e9)
        )
        if wait.is_recording():
            wait.set_attributes({CONTROLLER_ATTRIBUTE: self.name, KEY_ATTRIBUTE: str(key)})
        wait.end(end_time=now)
        with tracer.start_as_current_span(
            "Controller.reconcile", context=context, links=links
        ) as span:
            if span.is_recording():
                if obj is not None:
                    assert self._objects is not None
                    span.set_attributes(tracing.object_attributes(obj, self._objects.resource.kind))
                span.set_attributes({CONTROLLER_ATTRIBUTE: self.name, KEY_ATTRIBUTE: str(key)})
            failure = self._sync_one(key)
            if failure is not None:
                span.set_status(trace.Status(trace.StatusCode.ERROR, failure))

    def _sync_one(self, key: K) -> str | None:
        """Sync `key` and queue it again as the outcome says; what failed, or None."""
        try:
            wait = self._sync(key)
        except StatusError as exc:
            # 409: the cache was behind the apiserver; the retry reads a newer state.
            level = logging.INFO if exc.code == 409 else logging.WARNING
            return self._retry(key, level, f"{exc} ({exc.code} {exc.reason})")
        except (ServerUnreachable, SyncError) as exc:
            return self._retry(key, logging.WARNING, str(exc))
        except Exception as exc:
            self._log.exception("syncing %s failed, will retry", key)
            self.queue.add_rate_limited(key)
            return f"{type(exc).__name__}: {exc}"
        self.queue.forget(key)
        if wait is not None:
            self.queue.add_after(key, wait)
        return None

    def _retry(self, key: K, level: int, why: str) -> str:
        failures = self.queue.num_requeues(key) + 1
        self._log.log(level, "syncing %s failed (%d in a row), will retry: %s", key, failures, why)
        self.queue.add_rate_limited(key)
        return why


def run_workers(stop: threading.Event, count: int, *pools: Workers[K]) -> None:
    """Run several worker pools of one controller side by side until `stop` is set."""
    threads = [
        threading.Thread(target=pool.run, args=(count, stop), name=pool.name, daemon=True)
        for pool in pools
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


CACHE_WAIT = 0.2
"""Seconds between looks at a key whose last writes the cache does not show yet."""
EXPECTATION_TIMEOUT = 10.0
"""Seconds after which a write the cache never showed is given up on (someone else
changed the object again at once), as client-go's expectations expire."""


class Expectations:
    """The objects a sync wrote, until the cache shows the writes: a sync that ran on
    a cache without an object it had just created (a pod, an EndpointSlice) would create
    it again. Keyed by the key of the object whose sync wrote them. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key -> (deadline, {object name: resourceVersion it had before the
        # write, "" for a create, None for a delete})
        self._pending: dict[str, tuple[float, dict[str, str | None]]] = {}

    def expect(self, key: str, writes: dict[str, str | None]) -> None:
        if writes:
            with self._lock:
                self._pending[key] = (time.monotonic() + EXPECTATION_TIMEOUT, writes)

    def forget(self, key: str) -> None:
        with self._lock:
            self._pending.pop(key, None)

    def satisfied(self, key: str, cached: dict[str, Object]) -> bool:
        """Whether `cached` (the objects of `key` in the cache, by name) shows them."""
        with self._lock:
            deadline, writes = self._pending.get(key, (0.0, {}))
            for name, before in writes.items():
                slice_ = cached.get(name)
                if before is None:
                    shown = slice_ is None
                else:
                    shown = (
                        slice_ is not None and slice_["metadata"].get("resourceVersion") != before
                    )
                if not shown and time.monotonic() < deadline:
                    return False
            self._pending.pop(key, None)
            return True


class InformerFactory:
    """One `SharedInformer` per resource, shared by every controller that asks for it
    (client-go's SharedInformerFactory). Controllers ask while they are built; `start`
    then runs them all. Not thread-safe: build, then start, from one thread."""

    def __init__(self, client: RestClient, tracer: trace.Tracer | None = None) -> None:
        self._client = client
        self._tracer = tracer
        self._informers: dict[str, SharedInformer] = {}
        self._threads: list[threading.Thread] = []

    def __len__(self) -> int:
        return len(self._informers)

    def informer(self, resource: Resource) -> SharedInformer:
        """The informer of `resource`, made on first request."""
        informer = self._informers.get(resource.group_resource)
        if informer is None:
            informer = SharedInformer(self._client, resource, tracer=self._tracer)
            self._informers[resource.group_resource] = informer
        return informer

    def start(self, stop: threading.Event) -> None:
        """Run every informer until `stop` is set."""
        self._threads = [informer.start(stop) for informer in self._informers.values()]

    def wait_for_sync(self, stop: threading.Event, report_every: float = 10.0) -> bool:
        """Block until every informer has listed its resource once; False if `stop` was
        set first. Informers still waiting are logged every `report_every` seconds."""
        pending = dict(self._informers)
        last_report = time.monotonic()
        while pending:
            if stop.is_set():
                return False
            # Each informer waits 0.1 s only while it is pending: time the loop by the
            # clock, not by counting waits.
            pending = {n: i for n, i in pending.items() if not i.wait_for_sync(0.1)}
            now = time.monotonic()
            if pending and now - last_report >= report_every:
                log.info("still waiting for the caches of %s", ", ".join(sorted(pending)))
                last_report = now
        return True

    def join(self, timeout: float) -> list[str]:
        """Wait (at most `timeout` seconds in all) for stopped informers to finish; the
        names of the threads still running then (none: they have all exited)."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [thread.name for thread in self._threads if thread.is_alive()]


class ControllerContext:
    """What a controller is built from: the shared informers, a way to get a REST client
    of its own, the settings from the command line that concern it, and the tracer of
    the controller-manager (None: tracing off) for its `Workers`."""

    def __init__(
        self,
        config: ClientConfig,
        informers: InformerFactory,
        *,
        root_ca: bytes,
        qps: float | None,
        burst: int,
        args: argparse.Namespace | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.config = config
        self.tracer = tracer
        self.args = args if args is not None else argparse.Namespace()
        """The command line, for the flags a controller reads itself (its module's
        `Settings.from_args`), with their defaults where a flag was not given."""
        self.informers = informers
        self.root_ca = root_ca
        """The cluster CA in PEM (`--root-ca-file`), which pods use to verify the apiserver."""
        self._qps = qps
        self._burst = burst
        self._clients: list[RestClient] = []

    def client_for(self, controller: str) -> RestClient:
        """A REST client for `controller` alone (see the module docstring)."""
        client = RestClient(
            self.config,
            user_agent=f"kube-controller-manager/{controller}",
            qps=self._qps,
            burst=self._burst,
            tracer=self.tracer,
        )
        self._clients.append(client)
        return client

    def close(self) -> None:
        """Close every client handed out."""
        for client in self._clients:
            client.close()
        self._clients.clear()
