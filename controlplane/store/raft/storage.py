"""The stable part of the Raft log, as the core sees it.

The core reads stable entries through the `Storage` protocol and never writes to it: the
caller appends `Ready.entries` to it (after making them durable in its WAL) and applies
snapshots to it. `MemoryStorage` is the implementation both the runtime and the tests use:
the runtime rebuilds it from the WAL at start-up and compacts it after snapshots, exactly
as etcd's server does with raft's MemoryStorage.

Indexes below `first_index()` are compacted (folded into the snapshot); the entry at
`first_index() - 1` survives only as the snapshot's (index, term), kept as a dummy entry
at position 0 so that the term of the last compacted index can still be asked for (the
leader needs it to build the first append after a snapshot).
"""

from __future__ import annotations

from typing import Protocol

from controlplane.store.raft.errors import CompactedError, SnapOutOfDateError, UnavailableError
from controlplane.store.raft.types import (
    EMPTY_HARD_STATE,
    ConfState,
    Entry,
    HardState,
    Snapshot,
    SnapshotMetadata,
)


class Storage(Protocol):
    """Read access to the persisted log: what the core needs and nothing more."""

    def initial_state(self) -> tuple[HardState, ConfState]: ...

    def entries(self, lo: int, hi: int, max_size: int | None) -> list[Entry]:
        """Entries in [lo, hi); at least one if any, then at most `max_size` bytes."""
        ...

    def term(self, index: int) -> int: ...

    def first_index(self) -> int: ...

    def last_index(self) -> int: ...

    def snapshot(self) -> Snapshot: ...


def limit_size(entries: list[Entry], max_size: int | None) -> list[Entry]:
    """Cut `entries` to at most `max_size` bytes, but never below one entry."""
    if max_size is None or not entries:
        return entries
    total = entries[0].size()
    for i in range(1, len(entries)):
        total += entries[i].size()
        if total > max_size:
            return entries[:i]
    return entries


class MemoryStorage:
    """An in-memory `Storage`; the caller makes it durable through its own WAL."""

    def __init__(self) -> None:
        self.hard_state = EMPTY_HARD_STATE
        self._snapshot = Snapshot()
        # _ents[0] is the dummy entry standing for the snapshot's last index and term.
        self._ents: list[Entry] = [Entry(0, 0)]

    # -- Storage protocol ----------------------------------------------------------

    def initial_state(self) -> tuple[HardState, ConfState]:
        return self.hard_state, self._snapshot.metadata.conf_state

    def entries(self, lo: int, hi: int, max_size: int | None) -> list[Entry]:
        offset = self._ents[0].index
        if lo <= offset:
            raise CompactedError(lo)
        if hi > self.last_index() + 1:
            raise UnavailableError(hi - 1)
        return limit_size(self._ents[lo - offset : hi - offset], max_size)

    def term(self, index: int) -> int:
        offset = self._ents[0].index
        if index < offset:
            raise CompactedError(index)
        if index - offset >= len(self._ents):
            raise UnavailableError(index)
        return self._ents[index - offset].term

    def first_index(self) -> int:
        return self._ents[0].index + 1

    def last_index(self) -> int:
        return self._ents[0].index + len(self._ents) - 1

    def snapshot(self) -> Snapshot:
        return self._snapshot

    # -- Writes by the caller ------------------------------------------------------

    def set_hard_state(self, hs: HardState) -> None:
        self.hard_state = hs

    def apply_snapshot(self, snap: Snapshot) -> None:
        """Replace the whole log with `snap` (a follower installing a leader's snapshot)."""
        if snap.metadata.index <= self._snapshot.metadata.index:
            raise SnapOutOfDateError(snap.metadata.index)
        self._snapshot = snap
        self._ents = [Entry(snap.metadata.term, snap.metadata.index)]

    def create_snapshot(self, index: int, conf_state: ConfState, data: bytes) -> Snapshot:
        """Record a snapshot of the state machine as of applied `index`."""
        if index <= self._snapshot.metadata.index:
            raise SnapOutOfDateError(index)
        if index > self.last_index():
            raise UnavailableError(index)
        term = self._ents[index - self._ents[0].index].term
        self._snapshot = Snapshot(SnapshotMetadata(index, term, conf_state), data)
        return self._snapshot

    def compact(self, compact_index: int) -> None:
        """Drop entries up to `compact_index`; they must already be in a snapshot."""
        offset = self._ents[0].index
        if compact_index <= offset:
            raise CompactedError(compact_index)
        if compact_index > self.last_index():
            raise UnavailableError(compact_index)
        i = compact_index - offset
        self._ents = [Entry(self._ents[i].term, self._ents[i].index), *self._ents[i + 1 :]]

    def append(self, entries: list[Entry]) -> None:
        """Append entries, replacing any conflicting suffix (a follower's log truncation)."""
        if not entries:
            return
        first = self.first_index()
        last = entries[-1].index
        if last < first:
            return  # all already compacted
        if first > entries[0].index:
            entries = entries[first - entries[0].index :]
        offset = entries[0].index - self._ents[0].index
        if offset > len(self._ents):
            raise UnavailableError(entries[0].index)
        self._ents = self._ents[:offset] + entries
