"""The leader's view of each follower: how far it has replicated, and how to feed it.

A `Progress` is in one of three states, as in etcd-io/raft:

* PROBE: the leader does not know the follower's last matching index. It sends one
  append at a time (then pauses until a response or heartbeat response) and walks
  `next` back on each rejection, a term at a time.
* REPLICATE: the follower is known to match up to `match`; the leader streams appends
  optimistically, advancing `next` as it sends, bounded by `Inflights` (at most
  `max_inflight` appends unacknowledged) so a slow follower cannot make the leader
  buffer without limit.
* SNAPSHOT: the entries the follower needs are compacted; a snapshot is on its way and
  nothing else is sent until the follower answers or the runtime reports the outcome.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable

from controlplane.store.raft import quorum
from controlplane.store.raft.types import ConfState


class ProgressState(enum.Enum):
    PROBE = "StateProbe"
    REPLICATE = "StateReplicate"
    SNAPSHOT = "StateSnapshot"


class Inflights:
    """Last indexes of the appends sent but not yet acknowledged, oldest first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._indexes: deque[int] = deque()

    def __len__(self) -> int:
        return len(self._indexes)

    def add(self, index: int) -> None:
        if self.full():
            raise AssertionError("cannot add into a full inflights")
        self._indexes.append(index)

    def free_le(self, index: int) -> None:
        """Forget every append up to and including `index` (acknowledged)."""
        while self._indexes and self._indexes[0] <= index:
            self._indexes.popleft()

    def free_first_one(self) -> None:
        if self._indexes:
            self._indexes.popleft()

    def full(self) -> bool:
        return len(self._indexes) >= self.capacity

    def reset(self) -> None:
        self._indexes.clear()


class Progress:
    def __init__(self, next_index: int, max_inflight: int, is_learner: bool = False) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.pending_snapshot = 0
        # Heard from within the last election timeout (check-quorum uses this).
        self.recent_active = False
        # PROBE: an append is outstanding; wait for its answer or a heartbeat response.
        self.probe_sent = False
        self.inflights = Inflights(max_inflight)
        self.is_learner = is_learner

    def __repr__(self) -> str:
        s = f"{self.state.value} match={self.match} next={self.next}"
        if self.is_learner:
            s += " learner"
        if self.state is ProgressState.SNAPSHOT:
            s += f" pendingSnap={self.pending_snapshot}"
        if self.probe_sent:
            s += " paused"
        if len(self.inflights):
            s += f" inflight={len(self.inflights)}"
            if self.inflights.full():
                s += "[full]"
        return s

    def _reset_state(self, state: ProgressState) -> None:
        self.probe_sent = False
        self.pending_snapshot = 0
        self.state = state
        self.inflights.reset()

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            # The snapshot may or may not have been installed; probe from just after it.
            pending = self.pending_snapshot
            self._reset_state(ProgressState.PROBE)
            self.next = max(self.match + 1, pending + 1)
        else:
            self._reset_state(ProgressState.PROBE)
            self.next = self.match + 1

    def become_replicate(self) -> None:
        self._reset_state(ProgressState.REPLICATE)
        self.next = self.match + 1

    def become_snapshot(self, snapshot_index: int) -> None:
        self._reset_state(ProgressState.SNAPSHOT)
        self.pending_snapshot = snapshot_index

    def maybe_update(self, index: int) -> bool:
        """The follower acknowledged `index`; False if that is old news."""
        updated = False
        if self.match < index:
            self.match = index
            updated = True
            self.probe_sent = False
        self.next = max(self.next, index + 1)
        return updated

    def optimistic_update(self, index: int) -> None:
        self.next = index + 1

    def maybe_decr_to(self, rejected: int, match_hint: int) -> bool:
        """The follower rejected an append at `rejected`; move `next` back. False if the
        rejection is stale (out of order) and must be ignored."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, match_hint + 1), 1)
        self.probe_sent = False
        return True

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return self.inflights.full()
        return True


class ProgressTracker:
    """The configuration (voters, learners) and a `Progress` per member."""

    def __init__(self, max_inflight: int) -> None:
        self.max_inflight = max_inflight
        self.voters: set[int] = set()
        self.learners: set[int] = set()
        self.progress: dict[int, Progress] = {}
        self.votes: dict[int, bool] = {}

    def conf_state(self) -> ConfState:
        return ConfState(tuple(sorted(self.voters)), tuple(sorted(self.learners)))

    def member_ids(self) -> list[int]:
        return sorted(self.progress)

    def is_singleton(self) -> bool:
        return len(self.voters) == 1

    def committed(self) -> int:
        return quorum.committed_index(self.voters, {i: pr.match for i, pr in self.progress.items()})

    def quorum_active(self) -> bool:
        """Has a majority of voters been heard from recently? (check-quorum)"""
        active = {i: pr.recent_active for i, pr in self.progress.items() if i in self.voters}
        return quorum.vote_result(self.voters, active) is quorum.VoteResult.WON

    def reset_votes(self) -> None:
        self.votes = {}

    def record_vote(self, node_id: int, granted: bool) -> None:
        self.votes.setdefault(node_id, granted)

    def tally_votes(self) -> tuple[int, int, quorum.VoteResult]:
        granted = sum(1 for i, v in self.votes.items() if v and i in self.voters)
        rejected = sum(1 for i, v in self.votes.items() if not v and i in self.voters)
        return granted, rejected, quorum.vote_result(self.voters, self.votes)

    def has_quorum(self, ids: Iterable[int]) -> bool:
        acks = dict.fromkeys(ids, True)
        return quorum.vote_result(self.voters, acks) is quorum.VoteResult.WON
