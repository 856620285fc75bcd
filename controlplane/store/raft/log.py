"""The Raft log as the core sees it: stable entries (Storage) plus unstable ones.

Unstable entries (and an unstable incoming snapshot) are those the core has accepted but
the caller has not yet persisted; they are handed out in `Ready.entries` and dropped from
here by `stable_to` once the caller says (through `advance`) that they are durable.

Indexes: `committed` is the highest index known to be on a quorum; `applied` the highest
the caller has applied to its state machine. Always applied <= committed <= last_index.
"""

from __future__ import annotations

from controlplane.store.raft.errors import CompactedError, UnavailableError
from controlplane.store.raft.storage import Storage, limit_size
from controlplane.store.raft.types import Entry, Snapshot


class Unstable:
    """Entries (and at most one snapshot) not yet written to stable storage.

    `entries[i]` has log index `offset + i`. A snapshot, when present, precedes them.
    """

    def __init__(self, offset: int) -> None:
        self.snapshot: Snapshot | None = None
        self.entries: list[Entry] = []
        self.offset = offset

    def maybe_first_index(self) -> int | None:
        return self.snapshot.metadata.index + 1 if self.snapshot is not None else None

    def maybe_last_index(self) -> int | None:
        if self.entries:
            return self.offset + len(self.entries) - 1
        return self.snapshot.metadata.index if self.snapshot is not None else None

    def maybe_term(self, index: int) -> int | None:
        if index < self.offset:
            if self.snapshot is not None and self.snapshot.metadata.index == index:
                return self.snapshot.metadata.term
            return None
        last = self.maybe_last_index()
        if last is None or index > last:
            return None
        return self.entries[index - self.offset].term

    def stable_to(self, index: int, term: int) -> None:
        # Only if the entry still has the term the caller persisted: a newer leader may
        # have replaced it in between, and then it is not stable yet.
        if self.maybe_term(index) == term and index >= self.offset:
            del self.entries[: index + 1 - self.offset]
            self.offset = index + 1

    def stable_snap_to(self, index: int) -> None:
        if self.snapshot is not None and self.snapshot.metadata.index == index:
            self.snapshot = None

    def restore(self, snap: Snapshot) -> None:
        self.offset = snap.metadata.index + 1
        self.entries = []
        self.snapshot = snap

    def truncate_and_append(self, entries: list[Entry]) -> None:
        after = entries[0].index
        if after == self.offset + len(self.entries):
            self.entries.extend(entries)
        elif after <= self.offset:
            # Replace everything unstable (and, by index, the stable tail the caller will
            # overwrite when it persists these).
            self.offset = after
            self.entries = list(entries)
        else:
            self.entries = self.entries[: after - self.offset] + entries

    def slice(self, lo: int, hi: int) -> list[Entry]:
        return self.entries[lo - self.offset : hi - self.offset]


class RaftLog:
    def __init__(self, storage: Storage, max_next_ents_size: int | None = None) -> None:
        self.storage = storage
        first = storage.first_index()
        last = storage.last_index()
        self.unstable = Unstable(last + 1)
        self.committed = first - 1
        self.applied = first - 1
        self.max_next_ents_size = max_next_ents_size

    def __repr__(self) -> str:
        return (
            f"committed={self.committed}, applied={self.applied}, "
            f"unstable.offset={self.unstable.offset}, "
            f"len(unstable.entries)={len(self.unstable.entries)}"
        )

    # -- appending -----------------------------------------------------------------

    def maybe_append(
        self, index: int, log_term: int, committed: int, entries: tuple[Entry, ...]
    ) -> int | None:
        """Append a leader's entries that follow (index, log_term); None if that does
        not match our log. Returns the index of the last new entry."""
        if not self.match_term(index, log_term):
            return None
        last_new = index + len(entries)
        conflict = self.find_conflict(entries)
        if conflict != 0:
            if conflict <= self.committed:
                raise AssertionError(
                    f"entry {conflict} conflicts with committed entry [committed({self.committed})]"
                )
            self.append(list(entries[conflict - (index + 1) :]))
        self.commit_to(min(committed, last_new))
        return last_new

    def append(self, entries: list[Entry]) -> int:
        if not entries:
            return self.last_index()
        after = entries[0].index - 1
        if after < self.committed:
            raise AssertionError(f"after({after}) is out of range [committed({self.committed})]")
        self.unstable.truncate_and_append(entries)
        return self.last_index()

    def find_conflict(self, entries: tuple[Entry, ...] | list[Entry]) -> int:
        """The index of the first entry that is new or differs from our log, or 0."""
        for e in entries:
            if not self.match_term(e.index, e.term):
                return e.index
        return 0

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The largest index <= `index` whose term is <= `term`, and that term.

        Used on both sides of a rejected append so the leader can skip a whole term of
        divergent entries per round trip instead of one entry.
        """
        if index > self.last_index():
            return index, 0
        while True:
            try:
                log_term = self.term(index)
            except (CompactedError, UnavailableError):
                return index, 0
            if log_term <= term:
                return index, log_term
            index -= 1

    # -- reading -------------------------------------------------------------------

    def unstable_entries(self) -> list[Entry]:
        return list(self.unstable.entries)

    def next_committed_entries(self) -> list[Entry]:
        """Committed entries not yet applied (they may still be unstable: the caller
        persists a Ready's entries before applying its committed entries)."""
        lo = max(self.applied + 1, self.first_index())
        if self.committed + 1 > lo:
            return self.slice(lo, self.committed + 1, self.max_next_ents_size)
        return []

    def has_next_committed_entries(self) -> bool:
        return self.committed + 1 > max(self.applied + 1, self.first_index())

    def has_pending_snapshot(self) -> bool:
        return self.unstable.snapshot is not None

    def snapshot(self) -> Snapshot:
        if self.unstable.snapshot is not None:
            return self.unstable.snapshot
        return self.storage.snapshot()

    def first_index(self) -> int:
        i = self.unstable.maybe_first_index()
        return i if i is not None else self.storage.first_index()

    def last_index(self) -> int:
        i = self.unstable.maybe_last_index()
        return i if i is not None else self.storage.last_index()

    def last_term(self) -> int:
        return self.term(self.last_index())

    def term(self, index: int) -> int:
        """The term of `index`; 0 beyond the last entry; CompactedError below the
        snapshot."""
        dummy = self.first_index() - 1
        if index < dummy:
            raise CompactedError(index)
        if index > self.last_index():
            return 0
        t = self.unstable.maybe_term(index)
        if t is not None:
            return t
        return self.storage.term(index)

    def zero_term_on_compacted(self, index: int) -> int:
        try:
            return self.term(index)
        except (CompactedError, UnavailableError):
            return 0

    def entries(self, lo: int, max_size: int | None) -> list[Entry]:
        if lo > self.last_index():
            return []
        return self.slice(lo, self.last_index() + 1, max_size)

    def all_entries(self) -> list[Entry]:
        return self.entries(self.first_index(), None)

    def is_up_to_date(self, last_index: int, term: int) -> bool:
        """Is a candidate's log (last_index, term) at least as up to date as ours?"""
        our_term = self.last_term()
        return term > our_term or (term == our_term and last_index >= self.last_index())

    def match_term(self, index: int, term: int) -> bool:
        try:
            return self.term(index) == term
        except (CompactedError, UnavailableError):
            return False

    def slice(self, lo: int, hi: int, max_size: int | None) -> list[Entry]:
        if lo > hi:
            raise AssertionError(f"invalid slice {lo} > {hi}")
        first = self.first_index()
        if lo < first:
            raise CompactedError(lo)
        if hi > self.last_index() + 1:
            raise AssertionError(f"slice[{lo},{hi}) out of bound [{first},{self.last_index()}]")
        if lo == hi:
            return []
        ents: list[Entry] = []
        if lo < self.unstable.offset:
            stored = self.storage.entries(lo, min(hi, self.unstable.offset), max_size)
            if len(stored) < min(hi, self.unstable.offset) - lo:
                return stored  # cut by max_size
            ents = stored
        if hi > self.unstable.offset:
            ents = ents + self.unstable.slice(max(lo, self.unstable.offset), hi)
        return limit_size(ents, max_size)

    # -- moving the cursors ----------------------------------------------------------

    def commit_to(self, to_commit: int) -> None:
        if self.committed < to_commit:
            if self.last_index() < to_commit:
                raise AssertionError(
                    f"to_commit({to_commit}) is out of range [last_index({self.last_index()})]"
                )
            self.committed = to_commit

    def applied_to(self, index: int) -> None:
        if index == 0:
            return
        if self.committed < index or index < self.applied:
            raise AssertionError(
                f"applied({index}) is out of range [prev_applied({self.applied}), "
                f"committed({self.committed})]"
            )
        self.applied = index

    def stable_to(self, index: int, term: int) -> None:
        self.unstable.stable_to(index, term)

    def stable_snap_to(self, index: int) -> None:
        self.unstable.stable_snap_to(index)

    def maybe_commit(self, max_index: int, term: int) -> bool:
        """Commit up to `max_index` if that entry is of `term` (Raft §5.4.2: a leader
        commits only entries of its own term by counting replicas)."""
        if max_index > self.committed and self.zero_term_on_compacted(max_index) == term:
            self.commit_to(max_index)
            return True
        return False

    def restore(self, snap: Snapshot) -> None:
        self.committed = snap.metadata.index
        self.unstable.restore(snap)
