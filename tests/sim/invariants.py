"""Raft's safety properties, checked incrementally after every simulation step.

The simulator calls these hooks as things happen (a Ready hands out new log entries, a
commit index moves, an entry is applied, a vote is granted, a node becomes leader) and
:meth:`SafetyChecker.after_step` once per step. Each check is incremental: it looks only
at what changed, against global registries that remember everything ever observed, so
the cost per step stays constant however long the run is. A violation raises
:class:`InvariantViolation`; the simulator adds the seed, the step and a trace.

The properties (Raft paper, figure 3), as checked here:

* Election safety: at most one leader per term, ever (a map term -> leader).
* Log matching: an entry is identified by (index, term); every copy of it anywhere, at
  any time, has the same type and data and follows an entry of the same term. By
  induction over the index, two logs holding the same (index, term) agree on every
  earlier entry that both still hold (compacted prefixes are out of reach; they are
  covered by the snapshot checks below). Every entry enters a log through some
  ``Ready.entries``, so checking those covers the durable and unstable logs alike; the
  log a node reads back from its disk at a restart is checked again.
* Leader completeness: an entry committed in term c (by the leader of term c, whatever
  the entry's own term) is in the log of every leader of a term > c. A leader only
  appends to its log, so its log at the moment it is first seen as leader is what must
  contain the entry: that log (its terms) is recorded, and checked against everything
  committed so far and everything committed later. The commit term c is taken as the
  term of the node that first reports the commit, which is never below the term of the
  leader that decided it, so the check can only be weaker than the property, never
  stricter (an entry of term t < c need not be in the logs of leaders between t and c).
* State-machine safety: no two nodes apply different entries at the same index (a map
  index -> (term, type, data) of applied entries), entries are applied in order without
  gaps, and snapshots of the state machine taken at the same index are identical.

Plus one check on durability, which is what the simulated disk is there to stress: a
node never grants its vote to two candidates in one term, even across crashes (which
holds only if the vote is on disk before the grant leaves the node).
"""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.store.raft import CompactedError, Entry, EntryType, Raft, StateType


class InvariantViolation(AssertionError):
    """A safety property of Raft does not hold."""


@dataclass(frozen=True, slots=True)
class _LeaderLog:
    """The log of a leader when it was first seen leading: the terms of its entries."""

    term: int
    node: int
    first: int  # the index of terms[0]
    terms: list[int]

    def term_at(self, index: int) -> int | None:
        """The term of `index` in this log; None if compacted; 0 if beyond the end."""
        if index < self.first:
            return None
        offset = index - self.first
        return self.terms[offset] if offset < len(self.terms) else 0


def _term_or_none(raft: Raft, index: int) -> int | None:
    try:
        return raft.raft_log.term(index)
    except CompactedError:
        return None


class SafetyChecker:
    """Remembers what the cluster has done and raises InvariantViolation as soon as
    something contradicts it. Node ids are printed in hex, as the core logs them."""

    def __init__(self) -> None:
        self.leader_of_term: dict[int, int] = {}
        self._leader_logs: list[_LeaderLog] = []
        self._max_leader_term = 0
        # (index, term) -> (type, data, term of the entry before it; 0 if unknown)
        self._entries: dict[tuple[int, int], tuple[EntryType, bytes, int]] = {}
        # index -> (term of the entry, term in which its commit was first seen)
        self.committed: dict[int, tuple[int, int]] = {}
        self._commit_seen: dict[int, int] = {}
        self._applied: dict[int, tuple[int, EntryType, bytes]] = {}
        self._applied_to: dict[int, int] = {}
        self._snapshots: dict[int, bytes] = {}
        self._votes: dict[tuple[int, int], int] = {}

    # -- node lifecycle ------------------------------------------------------------

    def node_started(self, nid: int, raft: Raft) -> None:
        """A node (re)started from its durable state: its volatile cursors restart, and
        the log it read back from disk must be made of entries seen before."""
        self._commit_seen[nid] = raft.raft_log.committed
        self._applied_to[nid] = raft.raft_log.applied
        entries = raft.raft_log.all_entries()
        for e in entries:
            if (e.index, e.term) not in self._entries:
                raise InvariantViolation(
                    f"durability: {nid:x} restarted with entry {e.term}/{e.index}, which no "
                    "Ready ever handed out"
                )
        self.on_entries(nid, raft, entries)

    # -- election safety and leader completeness -----------------------------------

    def after_step(self, rafts: list[Raft]) -> None:
        for raft in rafts:
            if raft.state is StateType.LEADER:
                self.observe_leader(raft)

    def observe_leader(self, raft: Raft) -> None:
        known = self.leader_of_term.get(raft.term)
        if known == raft.id:
            return
        if known is not None:
            raise InvariantViolation(
                f"election safety: {raft.id:x} and {known:x} are both leaders of term {raft.term}"
            )
        self.leader_of_term[raft.term] = raft.id
        log = raft.raft_log
        first = log.first_index() - 1  # the snapshot's index still has a known term
        terms = [log.term(first)] + [e.term for e in log.all_entries()]
        leader = _LeaderLog(raft.term, raft.id, first, terms)
        for index, (term, commit_term) in self.committed.items():
            self._check_leader_has(leader, index, term, commit_term)
        self._leader_logs.append(leader)
        self._max_leader_term = max(self._max_leader_term, raft.term)

    def _check_leader_has(
        self, leader: _LeaderLog, index: int, term: int, commit_term: int
    ) -> None:
        if leader.term <= commit_term:
            return
        have = leader.term_at(index)
        if have is not None and have != term:
            raise InvariantViolation(
                f"leader completeness: entry {term}/{index} was committed in term "
                f"{commit_term} but leader "
                f"{leader.node:x} of term {leader.term} has "
                + (f"term {have} there" if have else "no entry there")
            )

    # -- log matching --------------------------------------------------------------

    def on_entries(self, nid: int, raft: Raft, entries: list[Entry]) -> None:
        """`entries` were just appended to `nid`'s log (a Ready's entries)."""
        if not entries:
            return
        prev = _term_or_none(raft, entries[0].index - 1) or 0
        registry = self._entries
        for e in entries:
            key = (e.index, e.term)
            known = registry.get(key)
            if known is None:
                registry[key] = (e.type, e.data, prev)
            elif known[0] != e.type or known[1] != e.data:
                raise InvariantViolation(
                    f"log matching: {nid:x} holds entry {e.term}/{e.index} with data "
                    f"{e.data!r}, another copy has {known[1]!r}"
                )
            elif prev and known[2] and prev != known[2]:
                raise InvariantViolation(
                    f"log matching: on {nid:x} entry {e.term}/{e.index} follows an entry of "
                    f"term {prev}, another copy follows one of term {known[2]}"
                )
            elif prev and not known[2]:
                registry[key] = (e.type, e.data, prev)
            prev = e.term

    # -- commitment ----------------------------------------------------------------

    def on_commit(self, nid: int, raft: Raft, commit: int) -> None:
        """`nid`'s commit index is now `commit` (called before it applies or compacts)."""
        seen = self._commit_seen.get(nid, 0)
        if commit <= seen:
            return
        self._commit_seen[nid] = commit
        for index in range(seen + 1, commit + 1):
            term = _term_or_none(raft, index)
            if term is None:
                continue  # below a snapshot this node just installed
            known = self.committed.get(index)
            if known is None:
                self.committed[index] = (term, raft.term)
                if raft.term < self._max_leader_term:
                    for leader in self._leader_logs:
                        self._check_leader_has(leader, index, term, raft.term)
            elif known[0] != term:
                raise InvariantViolation(
                    f"commitment: {nid:x} committed entry {term}/{index}, but entry "
                    f"{known[0]}/{index} was committed before"
                )

    # -- state machine -------------------------------------------------------------

    def on_apply(self, nid: int, e: Entry) -> None:
        expected = self._applied_to.get(nid, 0) + 1
        if e.index != expected:
            raise InvariantViolation(
                f"state machine: {nid:x} applied index {e.index} but its next is {expected}"
            )
        self._applied_to[nid] = e.index
        known = self._applied.get(e.index)
        if known is None:
            self._applied[e.index] = (e.term, e.type, e.data)
        elif known != (e.term, e.type, e.data):
            raise InvariantViolation(
                f"state-machine safety: {nid:x} applied {e.term}/{e.index} {e.data!r}, "
                f"another node applied {known[0]}/{e.index} {known[2]!r}"
            )

    def on_snapshot(self, nid: int, index: int, data: bytes, installed: bool) -> None:
        """`nid` took (or, `installed`, received and installed) a snapshot at `index`."""
        if installed:
            self._applied_to[nid] = index
        known = self._snapshots.setdefault(index, data)
        if known != data:
            raise InvariantViolation(
                f"state-machine safety: {nid:x} has a snapshot at {index} that differs from "
                "another node's snapshot at the same index"
            )

    # -- durability ----------------------------------------------------------------

    def on_vote_granted(self, voter: int, term: int, candidate: int) -> None:
        known = self._votes.setdefault((voter, term), candidate)
        if known != candidate:
            raise InvariantViolation(
                f"vote durability: {voter:x} granted its term-{term} vote to {known:x} and "
                f"then to {candidate:x}"
            )
