"""Informers: a local, continuously updated cache of one resource, and notifications of
its changes. Controllers, the scheduler and the kubelet read the cache instead of asking
the apiserver, and react to the notifications; this is client-go's `tools/cache`.

Three pieces, each usable alone:

* `Indexer`: a thread-safe map "namespace/name" -> object (just "name" for
  cluster-scoped objects), with secondary indexes, e.g. pods by `spec.nodeName`, so that
  "the pods of node n1" is a lookup rather than a scan.
* `Reflector`: keeps a `Store` (an `Indexer`, or an informer's queue) equal to the
  apiserver's state. It lists, then watches from the list's resourceVersion, applying
  each event.
* `SharedInformer`: a reflector feeding an indexer, plus event handlers.

The reflector's protocol, and why:

* List, then watch from the list's resourceVersion. The list is a consistent snapshot at
  that version, and the watch delivers exactly the changes after it: nothing is missed
  and nothing is applied twice.
* When a watch ends (the server's timeout, a dropped connection), watch again from the
  last resourceVersion seen; the cache stays valid, so no relist is needed.
* On 410 Gone, list again. The apiserver keeps a bounded history of changes; once it has
  dropped the changes after our resourceVersion, they cannot be replayed, and the only
  way back to a correct cache is a fresh snapshot. Objects deleted in the gap simply are
  absent from the new list (see `DeletedFinalStateUnknown`).
* Bookmarks carry no change, only a newer resourceVersion: remembering it means that the
  next watch starts from a recent point, so a quiet watch does not fall out of the history
  and force a relist.
* On 429 (too many requests) and connection failures, wait with an exponential, jittered
  back-off before trying again, so that a fleet of clients does not hammer an apiserver
  that is overloaded or restarting. Watch timeouts are randomised (5-10 min) for the same
  reason. A `threading.Event` stops the reflector, cutting an open watch short.

The informer's contract, which its users may rely on:

* The cache is eventually consistent: it lags the apiserver by the time an event takes
  to arrive, and after a relist it is a recent snapshot, not necessarily the latest.
* Notifications for one object arrive in the order its changes happened. All handlers
  are called from one thread, one notification at a time.
* A handler is called after the cache has been updated. A handler typically puts a key
  in a work queue and a worker then reads the object from the cache: had the handler run
  first, the worker could read the state before the change it was notified of, act on
  it, and never be notified again.
* Handlers must return quickly (they hold up every other notification): the work goes
  to a work queue, not into the handler.
* on_add and on_update are decided by the cache, not by the event's name: an object
  the cache did not hold is an add, one it did hold is an update (with the old state).
  After a relist every listed object that was already cached is an update, even if
  unchanged; handlers that only care about changes compare resourceVersions.
* A delete normally comes with the object's last state. When the deletion happened
  while the informer was not watching (between a 410 and the relist), the informer only
  learns that the object is gone, not what it looked like when it went: on_delete then
  receives a `DeletedFinalStateUnknown` holding the key and the last state the cache had,
  which may be stale. Delete handlers must accept both.
* With a resync period, every cached object is periodically re-delivered as
  on_update(obj, obj): a controller that dropped an item gets another chance to
  reconcile it. It is not a relist; nothing is fetched.
* The objects are shared by the cache and every handler: never modify one; copy it
  (`copy.deepcopy`) to build an update.

Tracing: an informer given a `tracer` makes each watch event's notification a span,
`Informer.event` (`k8s.event.type` ADDED, MODIFIED or DELETED, and the object), in the
trace of the write that caused it (`kubelab.tracing.extract`), so a controller's trace
shows when the change reached it. A relist's notifications are not traced one by one:
they are the cache catching up, caused by no one write, and a controller-manager
starting up would otherwise send a span per object in the cluster. Nor is the event of
an object that carries no trace context: its write was not traced (a Lease's renewal,
which the apiserver leaves untraced, or a writer outside any trace), and a span of the
informer's own would start a trace per heartbeat in an idle cluster.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import random
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from opentelemetry import trace

from kubelab import tracing
from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource
from kubelab.client.clock import REAL_CLOCK, Clock
from kubelab.client.flowcontrol import Backoff
from kubelab.client.rest import Object, ResourceExpired, RestClient, ServerUnreachable, Watch

log = logging.getLogger(__name__)

EVENT_TYPE = "k8s.event.type"
"""The span attribute of a notification's watch event type (ADDED, MODIFIED, DELETED)."""

# -- keys and indexes ----------------------------------------------------------------------


@dataclass(frozen=True)
class DeletedFinalStateUnknown:
    """An object deleted while the informer was not watching: `key` is certain, `obj` is
    the last state the cache had, which may be older than the object's final state."""

    key: str
    obj: Object


def object_key(obj: Object | DeletedFinalStateUnknown) -> str:
    """The cache key of an object: "namespace/name", or "name" if cluster-scoped."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError("an object without metadata.name has no key")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def split_key(key: str) -> tuple[str, str]:
    """(namespace, name) of a cache key; the namespace is "" for cluster-scoped objects."""
    namespace, sep, name = key.partition("/")
    if not sep:
        return "", key
    if not namespace or not name or "/" in name:
        raise ValueError(f"{key!r} is not a namespace/name key")
    return namespace, name


IndexFunc = Callable[[Object], Iterable[str]]
"""The values under which an object is indexed (none, one or several)."""

NAMESPACE_INDEX = "namespace"
NODE_NAME_INDEX = "spec.nodeName"


def namespace_index(obj: Object) -> list[str]:
    namespace = (obj.get("metadata") or {}).get("namespace")
    return [namespace] if namespace else []


def node_name_index(obj: Object) -> list[str]:
    """Pods by the node they are bound to (unscheduled pods are not indexed)."""
    node = (obj.get("spec") or {}).get("nodeName")
    return [node] if node else []


class Store(Protocol):
    """What a `Reflector` writes to."""

    def add(self, obj: Object) -> object: ...

    def update(self, obj: Object) -> object: ...

    def delete(self, obj: Object) -> object: ...

    def replace(self, objects: builtins.list[Object], resource_version: str) -> object: ...


class Indexer:
    """A thread-safe cache of objects by key, with named secondary indexes."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Object] = {}
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        self.list_resource_version = ""
        """The resourceVersion of the list that last `replace`d the contents ("" if none
        did); later adds, updates and deletes do not change it."""
        self.add_indexers(indexers or {})

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indexes; objects already cached are indexed at once."""
        with self._lock:
            for name in indexers:
                if name in self._indexers:
                    raise ValueError(f"index {name!r} exists already")
            # Every value first: an index function that raises adds no index.
            indices: dict[str, dict[str, set[str]]] = {}
            for name, func in indexers.items():
                index = indices[name] = {}
                for key, obj in self._items.items():
                    for value in func(obj):
                        index.setdefault(value, set()).add(key)
            self._indexers.update(indexers)
            self._indices.update(indices)

    def _values(self, obj: Object | None) -> dict[str, builtins.list[str]]:
        """The values each index files `obj` under (none for None)."""
        if obj is None:
            return {name: [] for name in self._indexers}
        return {name: builtins.list(func(obj)) for name, func in self._indexers.items()}

    def _set(self, key: str, new: Object | None) -> Object | None:
        """Store `new` under `key` (None: remove it); return what was there. The index
        values are computed first: if an index function raises, nothing changes."""
        old = self._items.get(key)
        old_values, new_values = self._values(old), self._values(new)
        if new is None:
            self._items.pop(key, None)
        else:
            self._items[key] = new
        for name, index in self._indices.items():
            for value in old_values[name]:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in new_values[name]:
                index.setdefault(value, set()).add(key)
        return old

    def add(self, obj: Object) -> Object | None:
        """Cache `obj`, replacing the object with the same key; return the one replaced.
        Raises (changing nothing) if `obj` has no key or an index function fails on it."""
        with self._lock:
            return self._set(object_key(obj), obj)

    def update(self, obj: Object) -> Object | None:
        """The same as `add`: the cache holds the latest state, whatever the event."""
        return self.add(obj)

    def delete(self, obj: Object | DeletedFinalStateUnknown) -> Object | None:
        """Forget the object with `obj`'s key; return it (None if it was not cached)."""
        with self._lock:
            return self._set(object_key(obj), None)

    def replace(self, objects: builtins.list[Object], resource_version: str = "") -> None:
        """Make the cache hold exactly `objects` (a fresh list from the apiserver, at
        `resource_version`, kept as `list_resource_version`). An object that has no key,
        or that an index function fails on, is left out (logged)."""
        items: dict[str, Object] = {}
        indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        with self._lock:
            for obj in objects:
                try:
                    key = object_key(obj)
                    values = self._values(obj)
                except Exception:
                    log.exception("cannot cache %r", (obj.get("metadata") or {}).get("name"))
                    continue
                if key in items:  # a duplicate: the later one wins
                    for name, old_values in self._values(items[key]).items():
                        for value in old_values:
                            indices[name][value].discard(key)
                            if not indices[name][value]:
                                del indices[name][value]
                items[key] = obj
                for name, index_values in values.items():
                    for value in index_values:
                        indices[name].setdefault(value, set()).add(key)
            self._items, self._indices = items, indices
            self.list_resource_version = resource_version

    def get(self, key: str) -> Object | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> builtins.list[Object]:
        with self._lock:
            return builtins.list(self._items.values())

    def keys(self) -> builtins.list[str]:
        with self._lock:
            return builtins.list(self._items)

    def by_index(self, index_name: str, value: str) -> builtins.list[Object]:
        """The objects that index `index_name` files under `value`."""
        with self._lock:
            if index_name not in self._indices:
                raise ValueError(f"there is no index named {index_name!r}")
            keys = self._indices[index_name].get(value, set())
            return [self._items[k] for k in sorted(keys)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


# -- reflector ---------------------------------------------------------------------------

REFLECTOR_BACKOFF = Backoff(base=0.8, cap=30.0, jitter=1.0)
"""client-go's reflector back-off: 0.8 s doubling to 30 s, plus up to 100% jitter."""

WATCH_TIMEOUT_RANGE = (300, 600)
"""Seconds after which the apiserver ends a watch, drawn at random for each watch."""

MIN_WATCH_DURATION = 1.0
"""A watch that ends sooner than this without an event counts as a failure (back off)."""


_stop_actions: dict[threading.Event, list[Callable[[], None]]] = {}
_stop_actions_lock = threading.Lock()


def _when_set(event: threading.Event, action: Callable[[], None], name: str) -> None:
    """Run `action` once `event` is set: how a blocking read is cut short by a stop event
    that cannot itself interrupt it. One daemon thread per event runs every action
    registered on it, so that the informers sharing a stop event (a controller-manager's,
    hundreds of hollow kubelets') do not hold a waiting thread each."""
    with _stop_actions_lock:
        actions = _stop_actions.get(event)
        if actions is not None:
            actions.append(action)
            return
        _stop_actions[event] = [action]

    def wait_then_act() -> None:
        event.wait()
        while True:
            with _stop_actions_lock:
                pending = _stop_actions.get(event) or []
                if not pending:
                    # Actions registered from now on find no waiter and start one (the
                    # event is set: it runs them at once).
                    _stop_actions.pop(event, None)
                    return
                _stop_actions[event] = []
            for act in pending:
                try:
                    act()
                except Exception:
                    log.exception("%s: stopping failed", name)

    threading.Thread(target=wait_then_act, name=name, daemon=True).start()


class Reflector:
    """Keeps `store` equal to the apiserver's objects of `resource` (in `namespace`, ""
    for all, and matching the selectors), following the protocol of the module docstring.

    `page_size` lists in pages of that many objects (None: in one request).
    """

    def __init__(
        self,
        client: RestClient,
        resource: Resource,
        store: Store,
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        page_size: int | None = 500,
        backoff: Backoff = REFLECTOR_BACKOFF,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self._resource = resource
        self._store = store
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._page_size = page_size
        self._backoff = backoff
        self._clock = clock
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._watch: Watch | None = None
        self._stopped = False
        self.name = resource.group_resource + (f" in {namespace}" if namespace else "")
        self.last_sync_resource_version = ""
        """The resourceVersion the store reflects (from the last list, event or bookmark)."""

    def run(self, stop: threading.Event) -> None:
        """List and watch until `stop` is set; never raises for API or network errors."""
        self._stopped = False
        _when_set(stop, self._interrupt, f"reflector-stop {self.name}")
        failures = 0
        need_list = True
        while not stop.is_set():
            expired = False
            try:
                if need_list:
                    self._list()
                    need_list = False
                if self._watch_once():
                    failures = 0
                    continue
                log.info("%s: the watch ended at once without events", self.name)
            except ResourceExpired as exc:
                log.info("%s: %s; listing again", self.name, exc)
                need_list = expired = True
            except StatusError as exc:
                log.warning("%s: %s (%d %s)", self.name, exc, exc.code, exc.reason)
                # 429 is the apiserver asking for patience: our position is still valid.
                need_list = need_list or exc.code != 429
            except ServerUnreachable as exc:
                log.warning("%s: %s", self.name, exc)
            except Exception:
                log.exception("%s: unexpected error; listing again", self.name)
                need_list = True
            # A first 410 is routine (the history moved on while we were away): relist at
            # once. Any other failure, or a 410 again right after a relist, backs off.
            delay = 0.0 if expired and failures == 0 else self._backoff.delay(failures, self._rng)
            failures += 1
            if delay and self._clock.sleep(delay, stop):
                break

    def _interrupt(self) -> None:
        with self._lock:
            self._stopped = True
            if self._watch is not None:
                self._watch.close()

    def _list(self) -> None:
        items: list[Object] = []
        token = ""
        limit = self._page_size
        while True:
            try:
                page = self._client.list(
                    self._resource,
                    self._namespace,
                    label_selector=self._label_selector,
                    field_selector=self._field_selector,
                    limit=limit,
                    continue_token=token,
                )
            except ResourceExpired:
                if not token:
                    raise
                # The continuation outlived the history its first page was read at.
                log.info("%s: list continuation expired; listing in one request", self.name)
                items, token, limit = [], "", None
                continue
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                break
        # List items may leave out their kind; watch events carry it. Make them alike.
        for item in items:
            item.setdefault("apiVersion", self._resource.api_version)
            item.setdefault("kind", self._resource.kind)
        resource_version = str(meta.get("resourceVersion") or "")
        self._store.replace(items, resource_version)
        self.last_sync_resource_version = resource_version

    def _watch_once(self) -> bool:
        """Watch from the last resourceVersion until the stream ends; return whether it
        made progress (delivered an event or lasted a while)."""
        started = self._clock.now()
        watch = self._client.watch(
            self._resource,
            self._namespace,
            resource_version=self.last_sync_resource_version,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            timeout_seconds=self._rng.randint(*WATCH_TIMEOUT_RANGE),
        )
        with self._lock:
            if self._stopped:
                watch.close()
            self._watch = watch
        delivered = False
        try:
            for kind, obj in watch:
                if kind == "ADDED":
                    self._store.add(obj)
                elif kind == "MODIFIED":
                    self._store.update(obj)
                elif kind == "DELETED":
                    self._store.delete(obj)
                elif kind != "BOOKMARK":
                    log.warning("%s: ignoring a watch event of type %r", self.name, kind)
                    continue
                self.last_sync_resource_version = str(obj["metadata"]["resourceVersion"])
                delivered = True
        finally:
            with self._lock:
                self._watch = None
            watch.close()
        return delivered or self._clock.now() - started >= MIN_WATCH_DURATION


# -- informer ----------------------------------------------------------------------------

AddHandler = Callable[[Object], None]
UpdateHandler = Callable[[Object, Object], None]
"""Called with (old, new)."""
DeleteHandler = Callable[[Object | DeletedFinalStateUnknown], None]


@dataclass(frozen=True)
class _Handler:
    on_add: AddHandler | None
    on_update: UpdateHandler | None
    on_delete: DeleteHandler | None


@dataclass(frozen=True)
class _Delta:
    """A change the reflector made, waiting to be applied to the cache and notified.
    `replace` carries a whole list; `upsert` and `delete` one object. `resource_version`
    is the list's, or the object's."""

    kind: str
    objects: tuple[Object, ...]
    resource_version: str


def _resource_version(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class _DeltaQueue:
    """The reflector's store inside an informer: it queues changes for the informer's
    processing thread, so that the watch is read while handlers run."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[_Delta] = deque()
        self.closed = False

    def _put(self, delta: _Delta) -> None:
        with self._cond:
            self._queue.append(delta)
            self._cond.notify()

    def add(self, obj: Object) -> None:
        self._put(_Delta("upsert", (obj,), _resource_version(obj)))

    def update(self, obj: Object) -> None:
        self._put(_Delta("upsert", (obj,), _resource_version(obj)))

    def delete(self, obj: Object) -> None:
        self._put(_Delta("delete", (obj,), _resource_version(obj)))

    def replace(self, objects: list[Object], resource_version: str) -> None:
        self._put(_Delta("replace", tuple(objects), resource_version))

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def pop(self, deadline: float | None) -> _Delta | None:
        """The next change; None once closed or when the clock reaches `deadline`."""
        with self._cond:
            while not self._queue and not self.closed:
                if deadline is not None and self._clock.now() >= deadline:
                    return None
                timeout = None if deadline is None else deadline - self._clock.now()
                self._clock.wait(self._cond, timeout)
            return None if self.closed else self._queue.popleft()


class SharedInformer:
    """One resource's cache (`indexer`) kept up to date by a reflector, shared by any
    number of event handlers; the contract is in the module docstring."""

    def __init__(
        self,
        client: RestClient,
        resource: Resource,
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        resync_period: float | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        backoff: Backoff = REFLECTOR_BACKOFF,
        clock: Clock = REAL_CLOCK,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.resource = resource
        self.indexer = Indexer(indexers)
        """The cache. Read it freely; never modify it or the objects it holds."""
        self._resync_period = resync_period
        self._clock = clock
        self._tracer = tracer
        self._deltas = _DeltaQueue(clock)
        self._reflector = Reflector(
            client,
            resource,
            self._deltas,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            backoff=backoff,
            clock=clock,
        )
        # Held while notifying, so that notifications never interleave, and a handler
        # added late gets the cached objects replayed without missing or doubling one.
        self._dispatch = threading.Lock()
        self._handlers: list[_Handler] = []
        self._synced = threading.Event()
        self._started = False
        self._applied_resource_version = ""

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion the cache reflects: that of the last list or event applied
        to it (the reflector may have read further: its changes wait in a queue). A
        bookmark changes nothing in the cache, so it does not move this forward."""
        return self._applied_resource_version

    def add_event_handler(
        self,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> None:
        """Register callbacks. Added to a running informer, the handler first receives
        on_add for every object already cached, as if it had been there all along."""
        handler = _Handler(on_add, on_update, on_delete)
        with self._dispatch:
            self._handlers.append(handler)
            for obj in self.indexer.list():
                self._call(handler.on_add, obj)

    def has_synced(self) -> bool:
        """Whether the first list has reached the cache and the handlers."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Block until `has_synced()` (real time, at most `timeout` seconds)."""
        return self._synced.wait(timeout)

    def start(self, stop: threading.Event) -> threading.Thread:
        """`run(stop)` in a new daemon thread, which is returned."""
        thread = threading.Thread(
            target=self.run, args=(stop,), name=f"informer {self._reflector.name}", daemon=True
        )
        thread.start()
        return thread

    def run(self, stop: threading.Event) -> None:
        """Run the reflector (in a thread of its own) and process its changes here,
        until `stop` is set. An informer runs once."""
        if self._started:
            raise RuntimeError("an informer can only be run once")
        self._started = True
        reflector = threading.Thread(
            target=self._reflector.run,
            args=(stop,),
            name=f"reflector {self._reflector.name}",
            daemon=True,
        )
        reflector.start()
        _when_set(stop, self._deltas.close, f"informer-stop {self._reflector.name}")
        period = self._resync_period
        next_resync = None if period is None else self._clock.now() + period
        while True:
            delta = self._deltas.pop(next_resync)
            if self._deltas.closed:
                break
            if delta is not None:
                try:
                    self._apply(delta)
                except Exception:
                    # One object the cache cannot hold must not stop the informer.
                    log.exception("%s: cannot apply a %s", self._reflector.name, delta.kind)
            # Checked after every change too: on a busy resource the queue is never
            # empty, and `pop` never gets to wait for the deadline.
            if period is not None and next_resync is not None:
                now = self._clock.now()
                if now >= next_resync:
                    self._resync()
                    next_resync = now + period
        reflector.join()

    def _call(self, func: Callable[..., None] | None, *args: object) -> None:
        if func is None:
            return
        try:
            func(*args)
        except Exception:
            # One faulty handler must not stop the others, nor the informer.
            log.exception("%s: event handler %r failed", self._reflector.name, func)

    def _notify_upsert(self, old: Object | None, new: Object) -> None:
        for h in self._handlers:
            if old is None:
                self._call(h.on_add, new)
            else:
                self._call(h.on_update, old, new)

    def _notify_delete(self, obj: Object | DeletedFinalStateUnknown) -> None:
        for h in self._handlers:
            self._call(h.on_delete, obj)

    def _apply(self, delta: _Delta) -> None:
        with self._dispatch:
            try:
                if delta.kind == "upsert":
                    (obj,) = delta.objects
                    old = self.indexer.add(obj)
                    self._applied(delta)
                    with self._event_span("ADDED" if old is None else "MODIFIED", obj):
                        self._notify_upsert(old, obj)
                elif delta.kind == "delete":
                    (obj,) = delta.objects
                    self.indexer.delete(obj)
                    self._applied(delta)
                    with self._event_span("DELETED", obj):
                        self._notify_delete(obj)
                else:
                    before = {object_key(o): o for o in self.indexer.list()}
                    self.indexer.replace(list(delta.objects), delta.resource_version)
                    self._applied(delta)
                    for obj in delta.objects:
                        try:
                            key = object_key(obj)
                        except ValueError:
                            continue
                        if self.indexer.get(key) is obj:  # not left out
                            self._notify_upsert(before.pop(key, None), obj)
                    for key, last in before.items():
                        self._notify_delete(DeletedFinalStateUnknown(key, last))
                    self._synced.set()
            finally:
                # A change the cache could not take has been dealt with all the same.
                self._applied(delta)

    @contextlib.contextmanager
    def _event_span(self, event: str, obj: Object) -> Iterator[None]:
        """The span of one watch event's notification (module docstring); none without
        a tracer or for an object that carries no trace context, nothing but the span
        when it is not recording."""
        context = tracing.extract(obj)
        if self._tracer is None or not trace.get_current_span(context).get_span_context().is_valid:
            yield
            return
        with self._tracer.start_as_current_span(
            "Informer.event", context=context, kind=trace.SpanKind.CONSUMER
        ) as span:
            if span.is_recording():
                span.set_attributes(tracing.object_attributes(obj, self.resource.kind))
                span.set_attribute(EVENT_TYPE, event)
            yield

    def _applied(self, delta: _Delta) -> None:
        """Record that the cache reflects `delta` (before the handlers hear of it)."""
        if delta.resource_version:
            self._applied_resource_version = delta.resource_version

    def _resync(self) -> None:
        if not self._synced.is_set():
            return
        with self._dispatch:
            for obj in self.indexer.list():
                for h in self._handlers:
                    self._call(h.on_update, obj, obj)
