"""Watches: every client watch on a member, fed by the MVCC store's applied events.

The MVCC store calls the hub once per applied write revision with that revision's
events; the hub appends the matching events to each watcher's queue, and the watcher's
HTTP stream drains it. Ordering and completeness follow etcd's contract: a watcher sees
every event on its key range with revision >= its start revision, exactly once, in
revision order, with no gaps.

A watcher starting from a past revision first catches up from the store's history; if
that history was compacted it is cancelled with `compact_revision` set, so the client
knows to relist (this is what makes a Kubernetes reflector relist on 410 Gone).

Slow consumers: a watcher's queue is bounded. When it overflows, the queued events are
dropped and the watcher is marked to resynchronise from the store's history at the
first revision it has not delivered, which keeps memory bounded without losing events
(unless compaction overtakes it, in which case it is cancelled as above). etcd keeps
"unsynced" watchers the same way.

Snapshots: a member that installs the leader's snapshot (it lagged too far, or has just
joined) jumps to the snapshot's revision without reporting the revisions in between. The
first revision reported after the jump is beyond a watcher's next revision, and the
watcher resynchronises from the restored history in the same way.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from dataclasses import dataclass, field

from controlplane.store.mvcc import CompactedError, Event, EventType, MVCCStore

log = logging.getLogger(__name__)

MAX_QUEUED_EVENTS = 10_000


def in_range(key: bytes, start: bytes, end: bytes) -> bool:
    """etcd's key range: empty end is the single key, b"\\0" is every key >= start."""
    if not end:
        return key == start
    if end == b"\0":
        return key >= start
    return start <= key < end


@dataclass
class WatchBatch:
    """What a watch stream sends next: events, a cancellation, or a progress notice."""

    revision: int
    events: list[Event] = field(default_factory=list)
    canceled: bool = False
    compact_revision: int = 0


@dataclass
class Watcher:
    id: int
    key: bytes
    range_end: bytes
    prev_kv: bool
    filter_put: bool
    filter_delete: bool
    # The first revision not yet queued for delivery.
    next_revision: int
    pending: deque[Event] = field(default_factory=deque)
    resync: bool = False
    canceled: WatchBatch | None = None
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)

    def wants(self, ev: Event) -> bool:
        if not in_range(ev.kv.key, self.key, self.range_end):
            return False
        if ev.type is EventType.PUT:
            return not self.filter_put
        return not self.filter_delete

    def shape(self, ev: Event) -> Event:
        return ev if self.prev_kv or ev.prev_kv is None else Event(ev.type, ev.kv, None)


class WatchHub:
    def __init__(self, store: MVCCStore) -> None:
        self.store = store
        self._watchers: dict[int, Watcher] = {}
        self._ids = itertools.count()
        self._unsubscribe = store.subscribe(self._on_revision)

    def __len__(self) -> int:
        return len(self._watchers)

    def create(
        self,
        key: bytes,
        range_end: bytes = b"",
        start_revision: int = 0,
        prev_kv: bool = False,
        filter_put: bool = False,
        filter_delete: bool = False,
    ) -> Watcher:
        """Register a watcher. With a past `start_revision` it first catches up."""
        current = self.store.revision
        start = start_revision if start_revision > 0 else current + 1
        w = Watcher(next(self._ids), key, range_end, prev_kv, filter_put, filter_delete, start)
        if start <= current:
            self._catch_up(w)
        self._watchers[w.id] = w
        return w

    def cancel(self, w: Watcher) -> None:
        self._watchers.pop(w.id, None)
        w.wakeup.set()

    def close(self) -> None:
        self._unsubscribe()
        for w in list(self._watchers.values()):
            self.cancel(w)

    def resync_all(self) -> None:
        """The store was replaced by a snapshot: every watcher rereads its history."""
        for w in self._watchers.values():
            w.resync = True
            w.wakeup.set()

    def _catch_up(self, w: Watcher) -> None:
        """Queue the store's history from `w.next_revision` on."""
        try:
            events = self.store.events(w.key, w.range_end, w.next_revision)
        except CompactedError:
            w.canceled = WatchBatch(
                self.store.revision,
                canceled=True,
                compact_revision=self.store.compact_revision,
            )
            w.pending.clear()
            self._watchers.pop(w.id, None)
        else:
            w.pending.extend(w.shape(e) for e in events if w.wants(e))
            w.resync = False
        w.next_revision = self.store.revision + 1
        w.wakeup.set()

    def _on_revision(self, revision: int, events: list[Event]) -> None:
        for w in list(self._watchers.values()):
            if w.resync or revision < w.next_revision:
                continue
            if revision > w.next_revision:
                # Revisions went by unreported: the store was restored from a snapshot
                # (a lagging or new member catching up). Reread them from its history.
                w.resync = True
                w.wakeup.set()
                continue
            w.next_revision = revision + 1
            matched = [w.shape(e) for e in events if w.wants(e)]
            if not matched:
                continue
            if len(w.pending) + len(matched) > MAX_QUEUED_EVENTS:
                # Too far behind: forget the queue and reread history when it drains.
                first = w.pending[0].kv.mod_revision if w.pending else revision
                log.warning(
                    "watch: watcher %d is slow; resynchronising from revision %d", w.id, first
                )
                w.pending.clear()
                w.next_revision = first
                w.resync = True
            else:
                w.pending.extend(matched)
            w.wakeup.set()

    async def next_batch(self, w: Watcher, timeout: float | None) -> WatchBatch | None:
        """The watcher's next events (all queued, grouped by nothing finer than etcd
        does: several revisions may share a batch), its cancellation, or None on
        timeout (the caller may send a progress notification)."""
        while True:
            if w.canceled is not None:
                return w.canceled
            if w.resync:
                self._catch_up(w)
                continue
            if w.pending:
                events = list(w.pending)
                w.pending.clear()
                return WatchBatch(self.store.revision, events)
            if w.id not in self._watchers:
                return WatchBatch(self.store.revision, canceled=True)
            w.wakeup.clear()
            try:
                await asyncio.wait_for(w.wakeup.wait(), timeout)
            except TimeoutError:
                return None
