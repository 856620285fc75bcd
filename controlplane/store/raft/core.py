"""The Raft state machine: messages and ticks in, messages and log changes out.

This is the algorithm of the Raft paper (Ongaro & Ousterhout, 2014) and its thesis, in
the shape of etcd-io/raft. It does no I/O: it never reads a clock (time is `tick()`),
never touches a socket (outgoing messages collect in `msgs`), never writes a file
(entries to persist sit in the log's unstable part) and draws randomness only from the
`random.Random` it is given. `RawNode` packages the result as a `Ready`.

The role is switched by swapping `_step` and `_tick` in `become_*`, as etcd does, so
each role's behaviour reads as one function.

What is implemented, and the choices made:

* Election with pre-vote (thesis §9.6): a node first asks whether it *could* win at
  term+1 without bumping its term, so a node rejoining from a partition does not
  disrupt a healthy leader.
* Check-quorum: a leader that has not heard from a quorum within an election timeout
  steps down; a follower that heard from a leader within the election timeout ignores
  vote requests (unless the request comes from a leader transfer).
* Replication with per-follower progress (probe/replicate/snapshot, see `tracker`),
  bounded in-flight appends, quorum commit of entries of the current term only (§5.4.2).
* Snapshots: a follower whose next entry is compacted gets the leader's snapshot.
* Membership: one voter change at a time; learners; the change takes effect when the
  caller applies it (`apply_conf_change`), only one may be pending at once, and a
  leader that removes itself steps down.
* Leader transfer (thesis §3.10) via TIMEOUT_NOW.
* A follower told by its runtime that its leader is unreachable (the connection to it
  closed) forgets that leader and campaigns after a wait staggered by its rank among the
  surviving voters (1 tick for the first) instead of a whole election timeout
  (`_leader_unreachable`); etcd waits for the timeout. Safe because pre-vote and
  check-quorum make a false alarm cost nothing but a refused pre-vote.
* Linearizable reads by ReadIndex (thesis §6.4): the leader records its commit index,
  confirms it is still leader with a heartbeat round, and answers once a quorum acks.
  Lease-based reads are not implemented: they depend on bounded clock drift, which a
  lab that pauses and kills containers cannot promise.
"""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from controlplane.store.raft import confchange
from controlplane.store.raft.errors import (
    CompactedError,
    ConfChangePendingError,
    ProposalDroppedError,
    SnapshotTemporarilyUnavailableError,
    UnavailableError,
)
from controlplane.store.raft.log import RaftLog
from controlplane.store.raft.quorum import VoteResult
from controlplane.store.raft.storage import Storage
from controlplane.store.raft.tracker import Progress, ProgressState, ProgressTracker
from controlplane.store.raft.types import (
    NONE,
    ConfChange,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    ReadState,
    Snapshot,
    SoftState,
    StateType,
)

CAMPAIGN_TRANSFER = b"CampaignTransfer"
"""Context of votes from a leader transfer: voters skip the check-quorum lease for it."""


class CampaignType(enum.Enum):
    PRE_ELECTION = "pre-election"
    ELECTION = "election"
    TRANSFER = "transfer"


class RaftLogger(Protocol):
    """Where the core says what it decided; transcripts capture these lines."""

    def info(self, msg: str) -> None: ...

    def debug(self, msg: str) -> None: ...

    def warning(self, msg: str) -> None: ...


class StdLogger:
    """A `RaftLogger` on top of `logging`, tagged with the component."""

    def __init__(self, name: str = "kubelab.raft") -> None:
        self._log = logging.getLogger(name)

    def info(self, msg: str) -> None:
        self._log.info("raft: %s", msg)

    def debug(self, msg: str) -> None:
        self._log.debug("raft: %s", msg)

    def warning(self, msg: str) -> None:
        self._log.warning("raft: %s", msg)


@dataclass
class Config:
    id: int
    storage: Storage
    election_tick: int = 10
    heartbeat_tick: int = 1
    applied: int = 0
    max_size_per_msg: int = 1 << 20
    max_committed_size_per_ready: int | None = 8 << 20
    max_inflight_msgs: int = 256
    check_quorum: bool = True
    pre_vote: bool = True
    rand: random.Random | None = None
    logger: RaftLogger | None = None

    def validate(self) -> None:
        if self.id <= 0:
            raise ValueError("cannot use 0 or a negative number as a member id")
        if self.heartbeat_tick <= 0:
            raise ValueError("heartbeat tick must be greater than 0")
        if self.election_tick <= self.heartbeat_tick:
            raise ValueError("election tick must be greater than heartbeat tick")
        if self.max_inflight_msgs <= 0:
            raise ValueError("max inflight messages must be greater than 0")


def _vote_resp_type(t: MessageType) -> MessageType:
    return MessageType.VOTE_RESP if t is MessageType.VOTE else MessageType.PRE_VOTE_RESP


@dataclass
class _ReadIndexStatus:
    req: Message
    index: int
    acks: set[int]


class Raft:
    def __init__(self, c: Config) -> None:
        c.validate()
        self.id = c.id
        self.log: RaftLogger = c.logger or StdLogger()
        self.rand = c.rand or random.Random(c.id)
        self.raft_log = RaftLog(c.storage, c.max_committed_size_per_ready)
        self.max_msg_size = c.max_size_per_msg
        self.prs = ProgressTracker(c.max_inflight_msgs)
        self.election_timeout = c.election_tick
        self.heartbeat_timeout = c.heartbeat_tick
        self.check_quorum = c.check_quorum
        self.pre_vote = c.pre_vote

        self.term = 0
        self.vote = NONE
        self.lead = NONE
        self.state = StateType.FOLLOWER
        self.msgs: list[Message] = []
        self.read_states: list[ReadState] = []
        self.lead_transferee = NONE
        # Index of the last conf change appended by this leader; another may be
        # proposed only once applied >= this.
        self.pending_conf_index = 0
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = 0
        self.read_pending: dict[bytes, _ReadIndexStatus] = {}
        self.read_queue: list[bytes] = []
        # Reads that arrived before this leader committed an entry of its term.
        self.pending_read_index_messages: list[Message] = []
        self._step: Callable[[Message], None] = self._step_follower
        self._tick: Callable[[], None] = self._tick_election

        hs, cs = c.storage.initial_state()
        self._apply_conf_state(cs)
        if not hs.is_empty():
            self._load_state(hs)
        if c.applied > 0:
            self.raft_log.applied_to(c.applied)
        self.become_follower(self.term, NONE)
        self.log.info(
            f"newRaft {self.id:x} [{confchange.describe(cs)}] term: {self.term}, "
            f"commit: {self.raft_log.committed}, applied: {self.raft_log.applied}, "
            f"lastindex: {self.raft_log.last_index()}, lastterm: {self.raft_log.last_term()}"
        )

    # -- state reporting -----------------------------------------------------------

    def soft_state(self) -> SoftState:
        return SoftState(self.lead, self.state)

    def hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.raft_log.committed)

    def promotable(self) -> bool:
        return self.id in self.prs.voters and not self.raft_log.has_pending_snapshot()

    def _load_state(self, hs: HardState) -> None:
        if hs.commit < self.raft_log.committed or hs.commit > self.raft_log.last_index():
            raise AssertionError(
                f"{self.id:x} state.commit {hs.commit} is out of range "
                f"[{self.raft_log.committed}, {self.raft_log.last_index()}]"
            )
        self.raft_log.committed = hs.commit
        self.term = hs.term
        self.vote = hs.vote

    # -- sending -------------------------------------------------------------------

    def _send(self, m: Message) -> None:
        m = replace(m, frm=self.id)
        if m.type in (
            MessageType.VOTE,
            MessageType.VOTE_RESP,
            MessageType.PRE_VOTE,
            MessageType.PRE_VOTE_RESP,
        ):
            if m.term == 0:
                raise AssertionError(f"term should be set when sending {m.type.wire_name}")
        elif m.type not in (MessageType.PROP, MessageType.READ_INDEX):
            # Proposals and read requests forwarded to the leader carry no term: they
            # are local requests relayed, not part of the protocol between terms.
            m = replace(m, term=self.term)
        self.msgs.append(m)

    def _send_append(self, to: int) -> None:
        self._maybe_send_append(to, send_if_empty=True)

    def _maybe_send_append(self, to: int, send_if_empty: bool) -> bool:
        """Send `to` the entries it lacks, or a snapshot if they are compacted. False if
        nothing was sent (paused, nothing to send, snapshot not ready)."""
        pr = self.prs.progress[to]
        if pr.is_paused():
            return False
        try:
            prev_term = self.raft_log.term(pr.next - 1)
            ents = self.raft_log.entries(pr.next, self.max_msg_size)
        except (CompactedError, UnavailableError):
            return self._send_snapshot(to, pr)
        if not ents and not send_if_empty:
            return False
        self._send(
            Message(
                MessageType.APP,
                to=to,
                index=pr.next - 1,
                log_term=prev_term,
                entries=tuple(ents),
                commit=self.raft_log.committed,
            )
        )
        if pr.state is ProgressState.REPLICATE:
            if ents:
                last = ents[-1].index
                pr.optimistic_update(last)
                pr.inflights.add(last)
        elif pr.state is ProgressState.PROBE:
            pr.probe_sent = True
        return True

    def _send_snapshot(self, to: int, pr: Progress) -> bool:
        if not pr.recent_active:
            self.log.debug(f"ignore sending snapshot to {to:x} since it is not recently active")
            return False
        try:
            snap = self.raft_log.snapshot()
        except SnapshotTemporarilyUnavailableError:
            self.log.debug(
                f"{self.id:x} failed to send snapshot to {to:x} because it is unavailable"
            )
            return False
        if snap.is_empty():
            raise AssertionError("need non-empty snapshot")
        self.log.debug(
            f"{self.id:x} [firstindex: {self.raft_log.first_index()}, commit: "
            f"{self.raft_log.committed}] sent snapshot[index: {snap.metadata.index}, term: "
            f"{snap.metadata.term}] to {to:x} [{pr}]"
        )
        pr.become_snapshot(snap.metadata.index)
        self._send(Message(MessageType.SNAP, to=to, snapshot=snap))
        return True

    def _send_heartbeat(self, to: int, ctx: bytes) -> None:
        # A follower may not have all committed entries yet: tell it to commit only
        # what it is known to have, so it never commits past its own log.
        commit = min(self.prs.progress[to].match, self.raft_log.committed)
        self._send(Message(MessageType.HEARTBEAT, to=to, commit=commit, context=ctx))

    def _peers(self) -> list[int]:
        return [i for i in self.prs.member_ids() if i != self.id]

    def bcast_append(self) -> None:
        for to in self._peers():
            self._send_append(to)

    def bcast_heartbeat(self) -> None:
        ctx = self.read_queue[-1] if self.read_queue else b""
        for to in self._peers():
            self._send_heartbeat(to, ctx)

    # -- becoming a role -----------------------------------------------------------

    def _reset(self, term: int) -> None:
        if self.term != term:
            self.term = term
            self.vote = NONE
        self.lead = NONE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.reset_randomized_election_timeout()
        self.abort_leader_transfer()
        self.prs.reset_votes()
        last = self.raft_log.last_index()
        for nid, pr in self.prs.progress.items():
            fresh = Progress(last + 1, self.prs.max_inflight, pr.is_learner)
            if nid == self.id:
                fresh.match = last
            self.prs.progress[nid] = fresh
        self.pending_conf_index = 0
        self.read_pending = {}
        self.read_queue = []

    def reset_randomized_election_timeout(self) -> None:
        # Randomized in [timeout, 2*timeout) so split votes resolve (§5.2).
        self.randomized_election_timeout = self.election_timeout + self.rand.randrange(
            self.election_timeout
        )

    def become_follower(self, term: int, lead: int) -> None:
        self._step = self._step_follower
        self._reset(term)
        self._tick = self._tick_election
        self.lead = lead
        self.state = StateType.FOLLOWER
        self.log.info(f"{self.id:x} became follower at term {self.term}")

    def become_candidate(self) -> None:
        if self.state is StateType.LEADER:
            raise AssertionError("invalid transition [leader -> candidate]")
        self._step = self._step_candidate
        self._reset(self.term + 1)
        self._tick = self._tick_election
        self.vote = self.id
        self.state = StateType.CANDIDATE
        self.log.info(f"{self.id:x} became candidate at term {self.term}")

    def become_pre_candidate(self) -> None:
        if self.state is StateType.LEADER:
            raise AssertionError("invalid transition [leader -> pre-candidate]")
        # Pre-candidacy changes neither term nor vote: it only asks.
        self._step = self._step_candidate
        self.prs.reset_votes()
        self._tick = self._tick_election
        self.lead = NONE
        self.state = StateType.PRE_CANDIDATE
        self.log.info(f"{self.id:x} became pre-candidate at term {self.term}")

    def become_leader(self) -> None:
        if self.state is StateType.FOLLOWER:
            raise AssertionError("invalid transition [follower -> leader]")
        self._step = self._step_leader
        self._reset(self.term)
        self._tick = self._tick_heartbeat
        self.lead = self.id
        self.state = StateType.LEADER
        self.prs.progress[self.id].become_replicate()
        self.prs.progress[self.id].recent_active = True
        # Unapplied entries may hold a conf change: be conservative and treat
        # everything up to the end of the log as possibly pending.
        self.pending_conf_index = self.raft_log.last_index()
        # An empty entry of the new term: committing it commits everything before it
        # (§5.4.2) and tells the leader its commit index is current (for ReadIndex).
        self._append_entry([Entry(0, 0)])
        self.log.info(f"{self.id:x} became leader at term {self.term}")

    # -- elections -----------------------------------------------------------------

    def hup(self, t: CampaignType) -> None:
        if self.state is StateType.LEADER:
            self.log.debug(f"{self.id:x} ignoring MsgHup because already leader")
            return
        if not self.promotable():
            self.log.warning(f"{self.id:x} is unpromotable and can not campaign")
            return
        pending = [
            e
            for e in self.raft_log.slice(
                self.raft_log.applied + 1, self.raft_log.committed + 1, None
            )
            if e.type is EntryType.CONF_CHANGE
        ]
        if pending:
            self.log.warning(
                f"{self.id:x} cannot campaign at term {self.term} since there are still "
                f"{len(pending)} pending configuration changes to apply"
            )
            return
        self.log.info(f"{self.id:x} is starting a new election at term {self.term}")
        self.campaign(t)

    def campaign(self, t: CampaignType) -> None:
        if t is CampaignType.PRE_ELECTION:
            self.become_pre_candidate()
            vote_msg = MessageType.PRE_VOTE
            term = self.term + 1  # the term we would campaign at; ours is unchanged
        else:
            self.become_candidate()
            vote_msg = MessageType.VOTE
            term = self.term
        if self._poll(self.id, _vote_resp_type(vote_msg), True) is VoteResult.WON:
            # A single-voter cluster wins outright.
            if t is CampaignType.PRE_ELECTION:
                self.campaign(CampaignType.ELECTION)
            else:
                self.become_leader()
            return
        ctx = CAMPAIGN_TRANSFER if t is CampaignType.TRANSFER else b""
        for to in sorted(self.prs.voters):
            if to == self.id:
                continue
            self.log.info(
                f"{self.id:x} [logterm: {self.raft_log.last_term()}, index: "
                f"{self.raft_log.last_index()}] sent {vote_msg.wire_name} request to {to:x} "
                f"at term {self.term}"
            )
            self._send(
                Message(
                    vote_msg,
                    to=to,
                    term=term,
                    index=self.raft_log.last_index(),
                    log_term=self.raft_log.last_term(),
                    context=ctx,
                )
            )

    def _poll(self, nid: int, t: MessageType, granted: bool) -> VoteResult:
        if granted:
            self.log.info(f"{self.id:x} received {t.wire_name} from {nid:x} at term {self.term}")
        else:
            self.log.info(
                f"{self.id:x} received {t.wire_name} rejection from {nid:x} at term {self.term}"
            )
        self.prs.record_vote(nid, granted)
        g, r, res = self.prs.tally_votes()
        self.log.info(f"{self.id:x} has received {g} {t.wire_name} votes and {r} vote rejections")
        return res

    # -- ticks ---------------------------------------------------------------------

    def tick(self) -> None:
        self._tick()

    def ticks_until_action(self) -> int:
        """How many ticks from now until one does more than count: the leader beats or
        checks its quorum, a promotable follower or candidate campaigns; a learner never
        acts, so an election timeout bounds its sleep.

        A driver may sleep that long instead of waking every tick, as long as it applies
        the ticks that fell due before it steps anything else: handling a message reads
        the counters (a vote inside the leader's lease is refused). The answer can only
        shrink through a step or a tick, after which the driver asks again."""
        if self.state is StateType.LEADER:
            return max(
                1,
                min(
                    self.heartbeat_timeout - self.heartbeat_elapsed,
                    self.election_timeout - self.election_elapsed,
                ),
            )
        if self.promotable():
            return max(1, self.randomized_election_timeout - self.election_elapsed)
        return self.election_timeout

    def _past_election_timeout(self) -> bool:
        return self.election_elapsed >= self.randomized_election_timeout

    def _tick_election(self) -> None:
        self.election_elapsed += 1
        if self.promotable() and self._past_election_timeout():
            self.election_elapsed = 0
            self.step(Message(MessageType.HUP, frm=self.id))

    def _tick_heartbeat(self) -> None:
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.election_elapsed >= self.election_timeout:
            self.election_elapsed = 0
            if self.check_quorum:
                self.step(Message(MessageType.CHECK_QUORUM, frm=self.id))
            # A transfer that did not finish within an election timeout is abandoned.
            if self.state is StateType.LEADER and self.lead_transferee != NONE:
                self.abort_leader_transfer()
        if self.state is not StateType.LEADER:
            return
        if self.heartbeat_elapsed >= self.heartbeat_timeout:
            self.heartbeat_elapsed = 0
            self.step(Message(MessageType.BEAT, frm=self.id))

    # -- stepping ------------------------------------------------------------------

    def step(self, m: Message) -> None:
        """Feed one message. Raises ProposalDroppedError for a proposal or read that
        cannot be accepted; never raises for a protocol message."""
        if m.term == 0:
            pass  # local message
        elif m.term > self.term:
            if m.type in (MessageType.VOTE, MessageType.PRE_VOTE):
                force = m.context == CAMPAIGN_TRANSFER
                in_lease = (
                    self.check_quorum
                    and self.lead != NONE
                    and self.election_elapsed < self.election_timeout
                )
                if not force and in_lease:
                    # We heard from a leader recently: a disruptive candidate (e.g. one
                    # that was partitioned away) must not depose it.
                    self.log.info(
                        f"{self.id:x} [logterm: {self.raft_log.last_term()}, index: "
                        f"{self.raft_log.last_index()}, vote: {self.vote:x}] ignored "
                        f"{m.type.wire_name} from {m.frm:x} [logterm: {m.log_term}, index: "
                        f"{m.index}] at term {self.term}: lease is not expired "
                        f"(remaining ticks: {self.election_timeout - self.election_elapsed})"
                    )
                    return
            if m.type is MessageType.PRE_VOTE:
                pass  # never change our term in response to a pre-vote
            elif m.type is MessageType.PRE_VOTE_RESP and not m.reject:
                pass  # the term is bumped when the pre-vote is won
            else:
                self.log.info(
                    f"{self.id:x} [term: {self.term}] received a {m.type.wire_name} message "
                    f"with higher term from {m.frm:x} [term: {m.term}]"
                )
                if m.type in (MessageType.APP, MessageType.HEARTBEAT, MessageType.SNAP):
                    self.become_follower(m.term, m.frm)
                else:
                    self.become_follower(m.term, NONE)
        elif m.term < self.term:
            if (self.check_quorum or self.pre_vote) and m.type in (
                MessageType.HEARTBEAT,
                MessageType.APP,
            ):
                # A leader cut off by a partition keeps its stale term; without pre-vote
                # our higher term would reach it through a vote. Tell it directly.
                self._send(Message(MessageType.APP_RESP, to=m.frm))
            elif m.type is MessageType.PRE_VOTE:
                self.log.info(
                    f"{self.id:x} [logterm: {self.raft_log.last_term()}, index: "
                    f"{self.raft_log.last_index()}, vote: {self.vote:x}] rejected "
                    f"{m.type.wire_name} from {m.frm:x} [logterm: {m.log_term}, index: "
                    f"{m.index}] at term {self.term}"
                )
                self._send(
                    Message(MessageType.PRE_VOTE_RESP, to=m.frm, term=self.term, reject=True)
                )
            else:
                self.log.debug(
                    f"{self.id:x} [term: {self.term}] ignored a {m.type.wire_name} message with "
                    f"lower term from {m.frm:x} [term: {m.term}]"
                )
            return

        if m.type is MessageType.HUP:
            self.hup(CampaignType.PRE_ELECTION if self.pre_vote else CampaignType.ELECTION)
        elif m.type in (MessageType.VOTE, MessageType.PRE_VOTE):
            self._handle_vote_request(m)
        else:
            self._step(m)

    def _handle_vote_request(self, m: Message) -> None:
        can_vote = (
            self.vote == m.frm
            or (self.vote == NONE and self.lead == NONE)
            or (m.type is MessageType.PRE_VOTE and m.term > self.term)
        )
        resp = _vote_resp_type(m.type)
        desc = (
            f"{self.id:x} [logterm: {self.raft_log.last_term()}, index: "
            f"{self.raft_log.last_index()}, vote: {self.vote:x}]"
        )
        if can_vote and self.raft_log.is_up_to_date(m.index, m.log_term):
            self.log.info(
                f"{desc} cast {m.type.wire_name} for {m.frm:x} [logterm: {m.log_term}, "
                f"index: {m.index}] at term {self.term}"
            )
            # Answer with the request's term: a pre-vote is granted at the future term.
            self._send(Message(resp, to=m.frm, term=m.term))
            if m.type is MessageType.VOTE:
                self.election_elapsed = 0
                self.vote = m.frm
        else:
            self.log.info(
                f"{desc} rejected {m.type.wire_name} from {m.frm:x} [logterm: {m.log_term}, "
                f"index: {m.index}] at term {self.term}"
            )
            self._send(Message(resp, to=m.frm, term=self.term, reject=True))

    # -- leader --------------------------------------------------------------------

    def _step_leader(self, m: Message) -> None:
        t = m.type
        if t is MessageType.BEAT:
            self.bcast_heartbeat()
            return
        if t is MessageType.CHECK_QUORUM:
            if not self.prs.quorum_active():
                self.log.warning(f"{self.id:x} stepped down to follower since quorum is not active")
                self.become_follower(self.term, NONE)
            # Everyone (but us) must prove activity again before the next check.
            for nid, member in self.prs.progress.items():
                if nid != self.id:
                    member.recent_active = False
            return
        if t is MessageType.PROP:
            self._leader_propose(m)
            return
        if t is MessageType.READ_INDEX:
            self._leader_read_index(m)
            return

        pr = self.prs.progress.get(m.frm)
        if pr is None:
            self.log.debug(f"{self.id:x} no progress available for {m.frm:x}")
            return
        if t is MessageType.APP_RESP:
            self._handle_append_response(m, pr)
        elif t is MessageType.HEARTBEAT_RESP:
            self._handle_heartbeat_response(m, pr)
        elif t is MessageType.SNAP_STATUS:
            if pr.state is not ProgressState.SNAPSHOT:
                return
            if m.reject:
                pr.pending_snapshot = 0
                self.log.debug(
                    f"{self.id:x} snapshot failed, resumed sending replication "
                    f"messages to {m.frm:x} [{pr}]"
                )
            else:
                self.log.debug(
                    f"{self.id:x} snapshot succeeded, resumed sending replication "
                    f"messages to {m.frm:x} [{pr}]"
                )
            pr.become_probe()
            # Wait for the follower's answer (or a heartbeat response) before probing.
            pr.probe_sent = True
        elif t is MessageType.UNREACHABLE:
            # The follower may have restarted and lost in-flight appends: probe it.
            if pr.state is ProgressState.REPLICATE:
                pr.become_probe()
            self.log.debug(
                f"{self.id:x} failed to send message to {m.frm:x} because it is unreachable [{pr}]"
            )
        elif t is MessageType.TRANSFER_LEADER:
            self._handle_transfer_leader(m, pr)

    def _leader_propose(self, m: Message) -> None:
        if not m.entries:
            raise AssertionError(f"{self.id:x} stepped empty MsgProp")
        if self.id not in self.prs.progress:
            raise ProposalDroppedError(
                f"member {self.id:x} was removed from the cluster and cannot accept proposals"
            )
        if self.lead_transferee != NONE:
            raise ProposalDroppedError(
                f"leadership is being transferred to {self.lead_transferee:x}; retry shortly"
            )
        for i, e in enumerate(m.entries):
            if e.type is EntryType.CONF_CHANGE:
                self._check_conf_change_allowed(ConfChange.decode(e.data))
                self.pending_conf_index = self.raft_log.last_index() + i + 1
        self._append_entry(list(m.entries))
        self.bcast_append()

    def _check_conf_change_allowed(self, cc: ConfChange) -> None:
        if self.pending_conf_index > self.raft_log.applied:
            raise ConfChangePendingError(
                f"a configuration change is already pending (entry {self.pending_conf_index}, "
                f"applied {self.raft_log.applied}); retry once it has been applied"
            )
        # Raises ConfChangeError for a change that would leave the config invalid.
        confchange.apply_change(self.prs.conf_state(), cc)

    def _append_entry(self, entries: list[Entry]) -> None:
        li = self.raft_log.last_index()
        stamped = [Entry(self.term, li + 1 + i, e.type, e.data) for i, e in enumerate(entries)]
        li = self.raft_log.append(stamped)
        # The leader's own log counts toward the quorum as soon as it is appended: the
        # caller persists a Ready's entries before sending its messages.
        self.prs.progress[self.id].maybe_update(li)
        self._maybe_commit()

    def _maybe_commit(self) -> bool:
        return self.raft_log.maybe_commit(self.prs.committed(), self.term)

    def _handle_append_response(self, m: Message, pr: Progress) -> None:
        pr.recent_active = True
        if m.reject:
            self.log.debug(
                f"{self.id:x} received MsgAppResp(rejected, hint: (index {m.reject_hint}, "
                f"term {m.log_term})) from {m.frm:x} for index {m.index}"
            )
            next_probe = m.reject_hint
            if m.log_term > 0:
                next_probe, _ = self.raft_log.find_conflict_by_term(m.reject_hint, m.log_term)
            if pr.maybe_decr_to(m.index, next_probe):
                self.log.debug(f"{self.id:x} decreased progress of {m.frm:x} to [{pr}]")
                if pr.state is ProgressState.REPLICATE:
                    pr.become_probe()
                self._send_append(m.frm)
            return
        old_paused = pr.is_paused()
        if not pr.maybe_update(m.index):
            return
        if pr.state is ProgressState.PROBE:
            pr.become_replicate()
        elif pr.state is ProgressState.SNAPSHOT and pr.match + 1 >= self.raft_log.first_index():
            # The follower caught up past the snapshot: back to normal replication.
            self.log.debug(
                f"{self.id:x} recovered from needing snapshot, resumed sending replication "
                f"messages to {m.frm:x} [{pr}]"
            )
            pr.become_probe()
            pr.become_replicate()
        elif pr.state is ProgressState.REPLICATE:
            pr.inflights.free_le(m.index)

        if self._maybe_commit():
            self._release_pending_read_index_messages()
            self.bcast_append()
        elif old_paused:
            self._send_append(m.frm)
        # Fill the follower's window now that acknowledgements freed room.
        while self._maybe_send_append(m.frm, send_if_empty=False):
            pass
        if m.frm == self.lead_transferee and pr.match == self.raft_log.last_index():
            self.log.info(f"{self.id:x} sent MsgTimeoutNow to {m.frm:x} after received MsgAppResp")
            self._send(Message(MessageType.TIMEOUT_NOW, to=m.frm))

    def _handle_heartbeat_response(self, m: Message, pr: Progress) -> None:
        pr.recent_active = True
        pr.probe_sent = False
        if pr.state is ProgressState.REPLICATE and pr.inflights.full():
            # Free one slot so a follower whose acks were lost is not stuck forever.
            pr.inflights.free_first_one()
        if pr.match < self.raft_log.last_index():
            self._send_append(m.frm)
        if not m.context:
            return
        status = self.read_pending.get(m.context)
        if status is None:
            return
        status.acks.add(m.frm)
        if not self.prs.has_quorum(status.acks):
            return
        # This read, and every read queued before it, is confirmed.
        pos = self.read_queue.index(m.context)
        confirmed = self.read_queue[: pos + 1]
        del self.read_queue[: pos + 1]
        for ctx in confirmed:
            rs = self.read_pending.pop(ctx)
            self._respond_read_index(rs.req, rs.index)

    def _handle_transfer_leader(self, m: Message, pr: Progress) -> None:
        transferee = m.frm
        if pr.is_learner:
            self.log.debug(f"{self.id:x} is learner. Ignored transferring leadership")
            return
        if self.lead_transferee != NONE:
            if self.lead_transferee == transferee:
                self.log.info(
                    f"{self.id:x} [term {self.term}] transfer leadership to {transferee:x} "
                    f"is in progress, ignores request to same node {transferee:x}"
                )
                return
            self.abort_leader_transfer()
            self.log.info(
                f"{self.id:x} [term {self.term}] abort previous transferring leadership to "
                f"{self.lead_transferee:x}"
            )
        if transferee == self.id:
            self.log.debug(
                f"{self.id:x} is already leader. Ignored transferring leadership to self"
            )
            return
        self.log.info(
            f"{self.id:x} [term {self.term}] starts to transfer leadership to {transferee:x}"
        )
        # The transfer must finish within an election timeout, or it is abandoned.
        self.election_elapsed = 0
        self.lead_transferee = transferee
        if pr.match == self.raft_log.last_index():
            self.log.info(
                f"{self.id:x} sends MsgTimeoutNow to {transferee:x} immediately as "
                f"{transferee:x} already has up-to-date log"
            )
            self._send(Message(MessageType.TIMEOUT_NOW, to=transferee))
        else:
            self._send_append(transferee)

    def abort_leader_transfer(self) -> None:
        self.lead_transferee = NONE

    # -- linearizable reads --------------------------------------------------------

    def _leader_read_index(self, m: Message) -> None:
        if self.prs.is_singleton():
            self._respond_read_index(m, self.raft_log.committed)
            return
        if not self._committed_entry_in_current_term():
            # Our commit index may lag the previous leader's until our own first entry
            # commits; hold the read until then (thesis §6.4 step 1).
            self.pending_read_index_messages.append(m)
            return
        self._send_read_index_heartbeat(m)

    def _send_read_index_heartbeat(self, m: Message) -> None:
        ctx = m.context
        if ctx not in self.read_pending:
            self.read_pending[ctx] = _ReadIndexStatus(m, self.raft_log.committed, {self.id})
            self.read_queue.append(ctx)
        for to in self._peers():
            self._send_heartbeat(to, ctx)

    def _respond_read_index(self, req: Message, index: int) -> None:
        if req.frm in (NONE, self.id):
            self.read_states.append(ReadState(index, req.context))
        else:
            self._send(
                Message(MessageType.READ_INDEX_RESP, to=req.frm, index=index, context=req.context)
            )

    def _committed_entry_in_current_term(self) -> bool:
        return self.raft_log.zero_term_on_compacted(self.raft_log.committed) == self.term

    def _release_pending_read_index_messages(self) -> None:
        if not self.pending_read_index_messages or not self._committed_entry_in_current_term():
            return
        pending, self.pending_read_index_messages = self.pending_read_index_messages, []
        for m in pending:
            self._send_read_index_heartbeat(m)

    # -- candidate and follower ------------------------------------------------------

    def _step_candidate(self, m: Message) -> None:
        my_vote_resp = (
            MessageType.PRE_VOTE_RESP
            if self.state is StateType.PRE_CANDIDATE
            else MessageType.VOTE_RESP
        )
        t = m.type
        if t is MessageType.PROP:
            raise ProposalDroppedError(
                f"no leader at term {self.term} (an election is in progress); retry shortly"
            )
        if t is MessageType.READ_INDEX:
            raise ProposalDroppedError(
                f"no leader at term {self.term} to confirm a read; retry shortly"
            )
        if t is MessageType.APP:
            self.become_follower(m.term, m.frm)
            self._handle_append_entries(m)
        elif t is MessageType.HEARTBEAT:
            self.become_follower(m.term, m.frm)
            self._handle_heartbeat(m)
        elif t is MessageType.SNAP:
            self.become_follower(m.term, m.frm)
            self._handle_snapshot(m)
        elif t is my_vote_resp:
            res = self._poll(m.frm, t, not m.reject)
            if res is VoteResult.WON:
                if self.state is StateType.PRE_CANDIDATE:
                    self.campaign(CampaignType.ELECTION)
                else:
                    self.become_leader()
                    self.bcast_append()
            elif res is VoteResult.LOST:
                # A rejected pre-vote or vote: back to follower at our (unchanged) term.
                self.become_follower(self.term, NONE)
        elif t is MessageType.TIMEOUT_NOW:
            self.log.debug(
                f"{self.id:x} [term {self.term} state {self.state.value}] ignored MsgTimeoutNow "
                f"from {m.frm:x}"
            )

    def _step_follower(self, m: Message) -> None:
        t = m.type
        if t is MessageType.PROP:
            if self.lead == NONE:
                raise ProposalDroppedError(
                    f"no leader at term {self.term}; the proposal was dropped, retry shortly"
                )
            self._send(replace(m, to=self.lead))
        elif t is MessageType.APP:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_append_entries(m)
        elif t is MessageType.HEARTBEAT:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_heartbeat(m)
        elif t is MessageType.SNAP:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_snapshot(m)
        elif t is MessageType.TRANSFER_LEADER:
            if self.lead == NONE:
                self.log.info(
                    f"{self.id:x} no leader at term {self.term}; dropping leader transfer msg"
                )
                return
            self._send(replace(m, to=self.lead))
        elif t is MessageType.TIMEOUT_NOW:
            self.log.info(
                f"{self.id:x} [term {self.term}] received MsgTimeoutNow from {m.frm:x} and "
                "starts an election to get leadership"
            )
            # Leadership transfer skips pre-vote: the leader asked for it.
            self.hup(CampaignType.TRANSFER)
        elif t is MessageType.READ_INDEX:
            if self.lead == NONE:
                raise ProposalDroppedError(
                    f"no leader at term {self.term} to confirm a read; retry shortly"
                )
            self._send(replace(m, to=self.lead))
        elif t is MessageType.READ_INDEX_RESP:
            self.read_states.append(ReadState(m.index, m.context))
        elif t is MessageType.UNREACHABLE and m.frm == self.lead != NONE:
            self._leader_unreachable()

    def _leader_unreachable(self) -> None:
        """The runtime lost its connection to our leader: most often its process is gone
        (its kernel closed the connection), so waiting out a whole election timeout for
        heartbeats that cannot come is a second lost. Forget the leader, which ends its
        lease here, and campaign soon: the surviving voters, ranked by id, wait 1, then
        1 + a third of an election timeout, ... ticks. All of them learn of the loss at
        the same moment, so random waits would often start two campaigns within one
        round trip and split the vote (a whole timeout more); staggered, the first has
        normally won before the next starts, and the next stands in if it cannot.

        Only with pre-vote and check-quorum, which make a false alarm harmless: if the
        leader lives, its next heartbeat makes it our leader again, and meanwhile it and
        every follower that still hears it refuse our pre-vote, so no term is bumped.
        A leader that is cut off without its connections closing is still found out by
        the election timeout, as before.
        """
        if not (self.pre_vote and self.check_quorum):
            return
        survivors = sorted(v for v in self.prs.voters if v != self.lead)
        rank = survivors.index(self.id) if self.id in survivors else len(survivors)
        wait = 1 + rank * max(1, self.election_timeout // 3)
        self.log.info(
            f"{self.id:x} lost its connection to leader {self.lead:x} at term {self.term}; "
            f"campaigning in {wait} ticks"
        )
        self.lead = NONE
        self.election_elapsed = max(self.election_elapsed, self.randomized_election_timeout - wait)

    def _handle_append_entries(self, m: Message) -> None:
        if m.index < self.raft_log.committed:
            self._send(Message(MessageType.APP_RESP, to=m.frm, index=self.raft_log.committed))
            return
        mlast = self.raft_log.maybe_append(m.index, m.log_term, m.commit, m.entries)
        if mlast is not None:
            self._send(Message(MessageType.APP_RESP, to=m.frm, index=mlast))
            return
        hint_index = min(m.index, self.raft_log.last_index())
        hint_index, hint_term = self.raft_log.find_conflict_by_term(hint_index, m.log_term)
        self.log.debug(
            f"{self.id:x} [logterm: {self.raft_log.zero_term_on_compacted(m.index)}, index: "
            f"{m.index}] rejected MsgApp [logterm: {m.log_term}, index: {m.index}] "
            f"from {m.frm:x}"
        )
        self._send(
            Message(
                MessageType.APP_RESP,
                to=m.frm,
                index=m.index,
                reject=True,
                reject_hint=hint_index,
                log_term=hint_term,
            )
        )

    def _handle_heartbeat(self, m: Message) -> None:
        self.raft_log.commit_to(m.commit)
        self._send(Message(MessageType.HEARTBEAT_RESP, to=m.frm, context=m.context))

    def _handle_snapshot(self, m: Message) -> None:
        assert m.snapshot is not None
        meta = m.snapshot.metadata
        if self.restore(m.snapshot):
            self.log.info(
                f"{self.id:x} [commit: {self.raft_log.committed}] restored snapshot "
                f"[index: {meta.index}, term: {meta.term}]"
            )
            self._send(Message(MessageType.APP_RESP, to=m.frm, index=self.raft_log.last_index()))
        else:
            self.log.info(
                f"{self.id:x} [commit: {self.raft_log.committed}] ignored snapshot "
                f"[index: {meta.index}, term: {meta.term}]"
            )
            self._send(Message(MessageType.APP_RESP, to=m.frm, index=self.raft_log.committed))

    def restore(self, snap: Snapshot) -> bool:
        """Install a leader's snapshot; False if it brings nothing new."""
        meta = snap.metadata
        if meta.index <= self.raft_log.committed:
            return False
        if self.state is not StateType.FOLLOWER:
            # Defensive: only a leader sends snapshots, and we would have become its
            # follower on receipt. Never let a leader or candidate replace its log.
            self.log.warning(
                f"{self.id:x} attempted to restore snapshot as leader; should never happen"
            )
            self.become_follower(self.term + 1, NONE)
            return False
        cs = meta.conf_state
        if self.id not in cs.voters and self.id not in cs.learners:
            self.log.warning(
                f"{self.id:x} attempted to restore snapshot but it is not in the ConfState "
                f"{confchange.describe(cs)}; should never happen"
            )
            return False
        if self.raft_log.match_term(meta.index, meta.term):
            # We already have the snapshot's last entry: just fast-forward the commit.
            self.log.info(
                f"{self.id:x} [commit: {self.raft_log.committed}, lastindex: "
                f"{self.raft_log.last_index()}, lastterm: {self.raft_log.last_term()}] fast-"
                f"forwarded commit to snapshot [index: {meta.index}, term: {meta.term}]"
            )
            self.raft_log.commit_to(meta.index)
            return False
        self.raft_log.restore(snap)
        self.prs.voters = set()
        self.prs.learners = set()
        self.prs.progress = {}
        self._apply_conf_state(cs)
        return True

    # -- membership ----------------------------------------------------------------

    def _apply_conf_state(self, cs: ConfState) -> None:
        """Make `cs` the configuration (start-up, snapshot, applied conf change)."""
        last = self.raft_log.last_index()
        members = set(cs.voters) | set(cs.learners)
        for nid in list(self.prs.progress):
            if nid not in members:
                del self.prs.progress[nid]
        for nid in members:
            if nid not in self.prs.progress:
                pr = Progress(last + 1, self.prs.max_inflight)
                # A new member counts as active, or check-quorum could depose the leader
                # before the member had any chance to answer.
                pr.recent_active = True
                if nid == self.id:
                    pr.match = last
                self.prs.progress[nid] = pr
            self.prs.progress[nid].is_learner = nid in cs.learners
        self.prs.voters = set(cs.voters)
        self.prs.learners = set(cs.learners)

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        cs = confchange.apply_change(self.prs.conf_state(), cc)
        self._apply_conf_state(cs)
        self.log.info(f"{self.id:x} switched to configuration {confchange.describe(cs)}")
        if self.state is not StateType.LEADER:
            return cs
        if self.id not in self.prs.voters:
            # A leader that removed (or demoted) itself stops leading; the remaining
            # members elect a new leader once their election timeout passes.
            self.log.info(f"{self.id:x} is no longer a voter; stepping down")
            self.become_follower(self.term, NONE)
            return cs
        # The quorum may have shrunk (a removal) and so commit more.
        if self._maybe_commit():
            self.bcast_append()
        else:
            for nid in self._peers():
                self._maybe_send_append(nid, send_if_empty=False)
        if self.lead_transferee != NONE and self.lead_transferee not in self.prs.voters:
            self.abort_leader_transfer()
        return cs
