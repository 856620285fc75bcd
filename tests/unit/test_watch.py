"""The watch hub across a snapshot install: a member that catches up by installing the
leader's snapshot jumps over revisions its watchers were waiting for, and they must
still get every one of them, once, in order."""

from __future__ import annotations

import asyncio

from controlplane.store import mvcc
from controlplane.store.watch import Watcher, WatchHub


def _put(store: mvcc.MVCCStore, value: bytes) -> None:
    store.apply(0, mvcc.encode_command(mvcc.PutRequest(b"k", value)))


def _next_events(hub: WatchHub, watcher: Watcher) -> list[tuple[int, bytes]]:
    batch = asyncio.run(hub.next_batch(watcher, timeout=1.0))
    assert batch is not None, "nothing delivered"
    return [(e.kv.mod_revision, e.kv.value) for e in batch.events]


def _leader_at_revision_6() -> mvcc.MVCCStore:
    leader = mvcc.MVCCStore()
    for i in range(2, 7):
        _put(leader, b"v%d" % i)
    return leader


def test_a_watcher_on_a_joining_member_gets_the_revisions_its_snapshot_skipped() -> None:
    joining = mvcc.MVCCStore()  # a new member: revision 1, nothing applied yet
    hub = WatchHub(joining)
    watcher = hub.create(b"k", start_revision=3)  # a client resuming from revision 3
    joining.restore(_leader_at_revision_6().snapshot())
    _put(joining, b"v7")  # the log goes on after the snapshot

    assert _next_events(hub, watcher) == [(r, b"v%d" % r) for r in range(3, 8)]


def test_a_watcher_on_a_lagging_member_gets_the_rest_once() -> None:
    lagging = mvcc.MVCCStore()
    hub = WatchHub(lagging)
    watcher = hub.create(b"k", start_revision=2)
    _put(lagging, b"v2")
    _put(lagging, b"v3")
    assert _next_events(hub, watcher) == [(2, b"v2"), (3, b"v3")]
    lagging.restore(_leader_at_revision_6().snapshot())  # the leader compacted its log
    _put(lagging, b"v7")

    assert _next_events(hub, watcher) == [(r, b"v%d" % r) for r in range(4, 8)]
