"""The watch cache: every object of every resource in memory, fed by ONE store watch.

Without it each `kubectl get -w`, informer and kubelet would open its own store watch and
every list would be a range over the store. Kubernetes puts a cache in the apiserver in
between; so does kubelab:

    store --(one watch on /registry/, prev_kv)--> Cacher --> ResourceCache (per resource)
                                                              |- objects by key
                                                              |- recent events (ring)
                                                              '- watchers (one queue each)

Start-up lists ``/registry/`` at revision R, then watches from R+1. Every store revision
is a write under ``/registry/`` (the store is the apiserver's alone), so the cacher sees
every revision and its `revision` is exactly the store's: that is what makes consistent
reads from the cache possible (ask the store for its current revision, wait until the
cache has reached it, answer from memory), as Kubernetes' ConsistentListFromCache does.

Watches from a resourceVersion replay the ring's events after it, then follow live; a
version older than the ring holds gets, as from Kubernetes' watch cache, HTTP 200 and one ERROR
event with a 410 Expired Status ("too old resource version"), so the client
re-lists. A watch with resourceVersion "0" (or none) starts with a synthetic ADDED per
current object. Selectors are applied per watcher, and an object that stops (starts)
matching is sent as DELETED (ADDED), so a filtered watch stays a consistent view.

Pods are indexed by `spec.nodeName`, as Kubernetes' cacher indexes them ("indexed
triggers"): each kubelet watches and lists only its own node's pods, and with hundreds of
nodes, offering every pod event to every kubelet's watcher (and scanning every pod for a
kubelet's list) would cost the apiserver nodes x events selector runs. A watch or list
whose field selector pins `spec.nodeName=X` is registered under X; an event is offered to
the unindexed watchers and to those registered under the node of the object's new and
previous state (a binding moves a pod from "" to a node), and to no one else.

A write's event is delivered in the writer's trace: `WatchCache.dispatch`, the child of
the context the write stamped on the object (`kubelab.tracing`), with the event's type,
the object and the number of watchers it was queued for (`kubelab.watch.watchers`), one
span per event rather than per watcher, so that a Pod's event offered to a thousand
kubelets' watches costs one span. An event whose object carries no new context (a status
write, which keeps the one stored; a removal, which stores nothing) is not traced.

A watcher whose queue overflows (a client that stopped reading) is closed rather than
allowed to grow without bound; like any closed watch, its client re-watches.

If the store watch is lost (a member restarted) the cacher re-watches from its revision;
if that revision was compacted meanwhile it re-lists, and every open watch ends with
410 so clients re-list too. Threads and `threading` primitives only: under the
apiserver's gevent server they are green.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from kubelab import fastjson, storeclient, tracing
from kubelab.api.resources import RESOURCES, Resource
from kubelab.api.selectors import field_value
from kubelab.storeclient import WatchStream

from . import traces
from .storage import Object, Storage, decode

log = logging.getLogger("kubelab.apiserver.watchcache")

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"


def _traceparent(obj: Object | None) -> str | None:
    """The trace context a write stamped on `obj`, if any."""
    if obj is None:
        return None
    annotations = obj["metadata"].get("annotations") or {}
    value = annotations.get(tracing.TRACEPARENT_ANNOTATION)
    return value if isinstance(value, str) else None


class TooOldResourceVersion(Exception):
    """The requested resourceVersion is older than the cache's history (410 Gone)."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


class CacheNotReady(Exception):
    """The cache has not caught up with the store in time (503, retry)."""


@dataclass(frozen=True)
class Event:
    type: str
    key: str
    object: Object
    prev: Object | None
    revision: int


Filter = Callable[[Object], bool]

INDEXED_FIELDS = {"pods": "spec.nodeName"}
"""The field each resource's cache is indexed by (group_resource -> field selector name)."""


@dataclass(eq=False)
class Watcher:
    """One client's watch: events for it are queued here; `None` ends the stream."""

    prefix: str
    matches: Filter
    index_value: str | None = None
    """The value of its resource's indexed field that `matches` pins, if any."""
    queue: queue.Queue[Event | None] = field(default_factory=lambda: queue.Queue(maxsize=5000))
    closed: bool = False
    reason: str = ""

    def translate(self, ev: Event) -> Event | None:
        """What `ev` means to this watcher, or None: an object that starts (stops)
        matching its selectors is ADDED (DELETED) for it."""
        if not ev.key.startswith(self.prefix):
            return None
        now = ev.type != DELETED and self.matches(ev.object)
        before = ev.prev is not None and self.matches(ev.prev)
        if ev.type == DELETED:
            return ev if before else None
        if now:
            return ev if before else Event(ADDED, ev.key, ev.object, ev.prev, ev.revision)
        if before and ev.prev is not None:
            # Gone from this watcher's view: its last matching state, at the new revision.
            gone = fastjson.copy(ev.prev)
            gone["metadata"]["resourceVersion"] = str(ev.revision)
            return Event(DELETED, ev.key, gone, ev.prev, ev.revision)
        return None

    def offer(self, ev: Event) -> bool:
        """Queue what `ev` means to this watcher, and say whether anything was queued;
        close it if its client stopped reading (it re-watches from the last version it
        got, and the ring replays the rest)."""
        if self.closed:
            return False
        out = self.translate(ev)
        if out is None:
            return False
        try:
            self.queue.put_nowait(out)
        except queue.Full:
            self.close("the watcher fell too far behind")
            return False
        return True

    def close(self, reason: str = "") -> None:
        """End the stream: its reader stops at the next empty queue or at the marker."""
        if self.closed:
            return
        self.closed = True
        self.reason = reason
        with contextlib.suppress(queue.Full):
            self.queue.put_nowait(None)


class ResourceCache:
    """One resource's objects, recent events and watchers (guarded by the cacher's lock),
    with the objects and watchers indexed by `index_field` if the resource has one."""

    def __init__(self, resource: Resource, capacity: int) -> None:
        self.resource = resource
        self.prefix = resource.registry_prefix()
        self.depth = 2 if resource.namespaced else 1
        self.objects: dict[str, Object] = {}
        self.events: collections.deque[Event] = collections.deque(maxlen=capacity)
        self.oldest = 0
        """Every event after this revision is in `events`."""
        self.watchers: set[Watcher] = set()
        """The watchers that are not indexed."""
        self.index_field = INDEXED_FIELDS.get(resource.group_resource)
        self._keys_by_value: dict[str, set[str]] = {}
        self._watchers_by_value: dict[str, set[Watcher]] = {}

    def owns(self, key: str) -> bool:
        if not key.startswith(self.prefix):
            return False
        rest = key[len(self.prefix) :]
        return rest.count("/") == self.depth - 1 and "" not in rest.split("/")

    def index_value(self, obj: Object | None) -> str | None:
        if obj is None or self.index_field is None:
            return None
        return field_value(self.resource, obj, self.index_field)

    def put(self, key: str, obj: Object) -> None:
        old = self.objects.get(key)
        self.objects[key] = obj
        if self.index_field is not None:
            self._unindex(key, old)
            self._keys_by_value.setdefault(self.index_value(obj) or "", set()).add(key)

    def remove(self, key: str) -> None:
        self._unindex(key, self.objects.pop(key, None))

    def clear(self) -> None:
        self.objects.clear()
        self._keys_by_value.clear()
        self.events.clear()

    def _unindex(self, key: str, old: Object | None) -> None:
        value = self.index_value(old)
        if value is None:
            return
        keys = self._keys_by_value.get(value)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._keys_by_value[value]

    def items(self, prefix: str, index_value: str | None) -> list[tuple[str, Object]]:
        """The (key, object) pairs under `prefix`, in key order, only those whose indexed
        field is `index_value` if that is given (and the resource is indexed)."""
        pairs: Iterable[tuple[str, Object]] = self.objects.items()
        if index_value is not None and self.index_field is not None:
            keys = self._keys_by_value.get(index_value, ())
            pairs = ((k, self.objects[k]) for k in keys)
        return sorted((k, o) for k, o in pairs if k.startswith(prefix))

    def add_watcher(self, w: Watcher) -> None:
        if w.index_value is None or self.index_field is None:
            self.watchers.add(w)
        else:
            self._watchers_by_value.setdefault(w.index_value, set()).add(w)

    def remove_watcher(self, w: Watcher) -> None:
        self.watchers.discard(w)
        if w.index_value is not None:
            indexed = self._watchers_by_value.get(w.index_value)
            if indexed is not None:
                indexed.discard(w)
                if not indexed:
                    del self._watchers_by_value[w.index_value]

    def all_watchers(self) -> list[Watcher]:
        return [*self.watchers, *(w for ws in self._watchers_by_value.values() for w in ws)]

    def _interested(self, ev: Event) -> list[Watcher]:
        """The watchers `ev` may concern: the unindexed ones, and those indexed under the
        value of the object's new or previous state."""
        if not self._watchers_by_value:
            return list(self.watchers)
        out = list(self.watchers)
        now, before = self.index_value(ev.object), self.index_value(ev.prev)
        for value in {now, before}:
            if value is not None:
                out.extend(self._watchers_by_value.get(value, ()))
        return out

    def record(self, ev: Event) -> int:
        """Keep `ev` in the ring and offer it to the watchers; how many queued it."""
        if len(self.events) == self.events.maxlen:
            self.oldest = self.events[0].revision
        self.events.append(ev)
        delivered = 0
        for w in self._interested(ev):
            delivered += w.offer(ev)
            if w.closed:
                self.remove_watcher(w)
        return delivered


class Cacher:
    """All resources' caches, fed by one store watch running in a background thread."""

    def __init__(
        self,
        storage: Storage,
        traced: tracing.Tracing = tracing.DISABLED,
        resources: tuple[Resource, ...] = RESOURCES,
        capacity: int = 10_000,
    ) -> None:
        self.storage = storage
        self.tracing = traced
        # A converted resource (events.k8s.io Events) is read from its source's cache.
        self.caches = [
            ResourceCache(r, capacity) for r in resources if r.stored and not r.converted_from
        ]
        self._by_prefix = sorted(self.caches, key=lambda c: -len(c.prefix))
        self.capacity = capacity
        self._unclaimed: dict[str, Object] = {}
        """Objects under /registry/ that no cache owns: a custom resource's, while its
        CustomResourceDefinition is not (yet, or any more) served."""
        self.revision = 0
        self._cond = threading.Condition()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: WatchStream | None = None
        self.ready = threading.Event()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="watch-cache", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._watch is not None:
            self._watch.close()
        with self._cond:
            for c in self.caches:
                for w in c.all_watchers():
                    w.close("the apiserver is shutting down")
                    c.remove_watcher(w)
            self._cond.notify_all()

    def cache_for(self, resource: Resource) -> ResourceCache:
        """The cache of `resource`'s objects (one for all versions of a custom resource:
        they share the storage prefix)."""
        prefix = resource.registry_prefix()
        for c in self.caches:
            if c.resource == resource or c.prefix == prefix:
                return c
        raise KeyError(resource.group_resource)

    def serve(self, resource: Resource) -> None:
        """Cache a resource that came to be served while running (a CRD's): the objects
        of it already seen move in. Its history starts now: a watch from an older
        resourceVersion gets 410 and re-lists."""
        with self._cond:
            prefix = resource.registry_prefix()
            if any(c.prefix == prefix for c in self.caches):
                return
            cache = ResourceCache(resource, self.capacity)
            cache.oldest = self.revision
            for key in [k for k in self._unclaimed if cache.owns(k)]:
                cache.put(key, self._unclaimed.pop(key))
            self.caches.append(cache)
            self._by_prefix = sorted(self.caches, key=lambda c: -len(c.prefix))

    def unserve(self, resource: Resource) -> None:
        """Stop caching a resource no longer served; its watches end, its remaining
        objects (if any) go back to the unclaimed ones."""
        with self._cond:
            prefix = resource.registry_prefix()
            for cache in [c for c in self.caches if c.prefix == prefix]:
                for w in cache.all_watchers():
                    w.close(f"{resource.group_resource} is no longer served")
                    cache.remove_watcher(w)
                self._unclaimed.update(cache.objects)
                self.caches.remove(cache)
            self._by_prefix = sorted(self.caches, key=lambda c: -len(c.prefix))

    def _run(self) -> None:
        backoff = 0.1
        while not self._stopped.is_set():
            try:
                if not self.ready.is_set():
                    self._relist()
                self._follow()
                backoff = 0.1
            except storeclient.CompactedError as exc:
                log.warning(
                    "watch cache: history compacted past %d (%s); re-listing", self.revision, exc
                )
                self._reset()
            except Exception as exc:  # the store is down or restarting: retry
                if self._stopped.is_set():
                    return
                log.warning(
                    "watch cache: store watch lost at revision %d: %s; retrying in %.1fs",
                    self.revision,
                    exc,
                    backoff,
                )
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    def _relist(self) -> None:
        objects, revision = self.storage.scan("/registry/")
        with self._cond:
            for c in self.caches:
                c.clear()
                c.oldest = revision
            self._unclaimed.clear()
            for key, obj in objects:
                cache = self._owner(key)
                if cache is not None:
                    cache.put(key, obj)
                else:
                    self._unclaimed[key] = obj
            self.revision = revision
            self._cond.notify_all()
        self.ready.set()
        log.info("watch cache: listed %d objects at revision %d", len(objects), revision)

    def _reset(self) -> None:
        """Forget everything and end every watch with 410: history was lost."""
        with self._cond:
            self.ready.clear()
            for c in self.caches:
                for w in c.all_watchers():
                    w.close("resource version too old: the cache re-listed")
                    c.remove_watcher(w)

    def _follow(self) -> None:
        with self.storage.client.watch(
            "/registry/",
            prefix=True,
            start_revision=self.revision + 1,
            prev_kv=True,
            progress_notify=True,
        ) as watch:
            self._watch = watch
            for frame in watch:
                if self._stopped.is_set():
                    return
                if frame.canceled:
                    if frame.compact_revision:
                        raise storeclient.CompactedError(
                            storeclient.GrpcCode.OUT_OF_RANGE,
                            "required revision has been compacted",
                        )
                    raise storeclient.Unavailable(
                        storeclient.GrpcCode.UNAVAILABLE, frame.cancel_reason or "canceled"
                    )
                self._apply(frame)

    def _apply(self, frame: storeclient.WatchResponse) -> None:
        with self._cond:
            for ev in frame.events:
                key = ev.kv.key.decode()
                cache = self._owner(key)
                revision = ev.kv.mod_revision
                try:
                    if cache is None:
                        self._keep_unclaimed(key, ev)
                        continue
                    self._record(cache, key, ev, revision)
                except ValueError as exc:
                    # Not an API object (written by hand?): skip it rather than lose the
                    # store watch over it forever.
                    log.warning("watch cache: skipping %s at revision %d: %s", key, revision, exc)
            header_rev = frame.header.revision
            last = max((e.kv.mod_revision for e in frame.events), default=0)
            # A progress notification (no events) says the store is at header_rev and
            # nothing under the prefix changed in between.
            self.revision = max(self.revision, last if frame.events else header_rev)
            self._cond.notify_all()

    def _record(self, cache: ResourceCache, key: str, ev: storeclient.Event, revision: int) -> None:
        prev = decode(ev.prev_kv) if ev.prev_kv is not None else cache.objects.get(key)
        if ev.type == "DELETE":
            if prev is None:
                return
            gone = fastjson.copy(prev)
            gone["metadata"]["resourceVersion"] = str(revision)
            cache.remove(key)
            cache.record(Event(DELETED, key, gone, prev, revision))
            return
        obj = decode(ev.kv)
        cache.put(key, obj)
        kind = ADDED if ev.kv.version == 1 or prev is None else MODIFIED
        event = Event(kind, key, obj, prev, revision)
        if not self.tracing.enabled or _traceparent(obj) in (None, _traceparent(prev)):
            cache.record(event)
            return
        # The object is its parent's, the writer's request span: not repeated here, as
        # every attribute costs the export some 6 us (docs/architecture.md, "Tracing").
        # The span is not made current: nothing in the dispatch looks for it, and
        # `start_as_current_span`'s context manager costs about as much as the span.
        span = self.tracing.tracer.start_span(
            "WatchCache.dispatch",
            context=tracing.extract(obj),
            attributes={traces.EVENT_TYPE: kind},
        )
        try:
            span.set_attribute(traces.WATCHERS, cache.record(event))
        finally:
            span.end()

    def _keep_unclaimed(self, key: str, ev: storeclient.Event) -> None:
        if ev.type == "DELETE":
            self._unclaimed.pop(key, None)
            return
        # Allocation markers (/registry/ranges/...) are not API objects: not kept.
        with contextlib.suppress(ValueError):
            self._unclaimed[key] = decode(ev.kv)

    def _owner(self, key: str) -> ResourceCache | None:
        for c in self._by_prefix:
            if c.owns(key):
                return c
        return None

    # -- reads ---------------------------------------------------------------------------

    def wait_fresh(self, revision: int, timeout: float = 3.0) -> None:
        """Block until the cache has seen `revision` (the store's, just read)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.revision < revision or not self.ready.is_set():
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped.is_set():
                    raise CacheNotReady(
                        f"the watch cache is at revision {self.revision}, behind the "
                        f"store's {revision}; try again"
                    )
                self._cond.wait(left)

    def list_objects(
        self, resource: Resource, prefix: str, matches: Filter, index_value: str | None = None
    ) -> tuple[list[Object], int]:
        """The matching objects under `prefix` (a namespace or the whole resource), in key
        order, and the revision they are current at. `index_value`: the value `matches`
        pins the resource's indexed field to, so only those objects are looked at."""
        cache = self.cache_for(resource)
        with self._cond:
            self._check_ready()
            items = [o for _, o in cache.items(prefix, index_value)]
            revision = self.revision
        return [o for o in items if matches(o)], revision

    def get(self, resource: Resource, key: str) -> Object | None:
        with self._cond:
            self._check_ready()
            return self.cache_for(resource).objects.get(key)

    def watch(
        self,
        resource: Resource,
        prefix: str,
        matches: Filter,
        resource_version: int | None,
        index_value: str | None = None,
    ) -> tuple[Watcher, list[Event], int]:
        """Register a watcher. With a `resource_version`, the events after it come first
        (410 if they are no longer held); without, a synthetic ADDED per object now.
        Also returns the cache's revision at that moment. `index_value` as for
        `list_objects`: the watcher is offered only the events of those objects."""
        cache = self.cache_for(resource)
        w = Watcher(prefix, matches, index_value if cache.index_field else None)
        with self._cond:
            self._check_ready()
            if resource_version is None:
                first = [
                    Event(ADDED, k, o, None, int(o["metadata"]["resourceVersion"]))
                    for k, o in cache.items(prefix, w.index_value)
                    if matches(o)
                ]
            else:
                if resource_version < cache.oldest:
                    raise TooOldResourceVersion(resource_version, cache.oldest + 1)
                replay = (w.translate(ev) for ev in cache.events if ev.revision > resource_version)
                first = [ev for ev in replay if ev is not None]
            cache.add_watcher(w)
            return w, first, self.revision

    def _check_ready(self) -> None:
        if not self.ready.is_set():
            raise CacheNotReady("the watch cache is re-listing the store; try again")

    def unwatch(self, resource: Resource, w: Watcher) -> None:
        with self._cond:
            self.cache_for(resource).remove_watcher(w)
        w.close()

    def watcher_count(self) -> int:
        with self._cond:
            return sum(len(c.all_watchers()) for c in self.caches)

    def events(self, w: Watcher, timeout: Callable[[], float]) -> Iterator[Event | None]:
        """The watcher's next events; yields None after `timeout()` s without one (the
        caller's chance to send a bookmark or notice the deadline)."""
        while True:
            try:
                item = w.queue.get(timeout=timeout())
            except queue.Empty:
                if w.closed:
                    return
                yield None
                continue
            if item is None:
                return
            yield item
            if w.closed and w.queue.empty():
                return  # closed with a full queue: its end marker did not fit
