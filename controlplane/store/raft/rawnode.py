"""RawNode: the synchronous, single-threaded API to the Raft core.

The caller drives it in a loop (the asyncio `controlplane.store.node` in production, the
simulator and transcript harness in tests):

    node.tick()                 # every tick interval (or lazily: ticks_until_action)
    node.step(msg)              # for every message from a peer
    node.propose(data)          # for client writes
    if node.has_ready():
        rd = node.ready()
        persist(rd.hard_state, rd.entries, rd.snapshot)   # fsync if rd.must_sync
        send(rd.messages)
        apply(rd.committed_entries)   # conf changes via apply_conf_change()
        node.advance(rd)

Not thread-safe: one owner calls all of it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from controlplane.store.raft.core import Config, Raft
from controlplane.store.raft.errors import ProposalDroppedError
from controlplane.store.raft.tracker import ProgressState
from controlplane.store.raft.types import (
    LOCAL_MESSAGES,
    RESPONSE_MESSAGES,
    ConfChange,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Ready,
    SoftState,
    StateType,
)


@dataclass(frozen=True)
class ProgressStatus:
    match: int
    next: int
    state: ProgressState
    is_learner: bool
    recent_active: bool


@dataclass(frozen=True)
class Status:
    id: int
    hard_state: HardState
    soft_state: SoftState
    applied: int
    conf_state: ConfState
    lead_transferee: int
    progress: dict[int, ProgressStatus] = field(default_factory=dict)


class RawNode:
    def __init__(self, config: Config) -> None:
        self.raft = Raft(config)
        self._prev_soft = self.raft.soft_state()
        self._prev_hard = self.raft.hard_state()

    # -- inputs --------------------------------------------------------------------

    def tick(self) -> None:
        self.raft.tick()

    def ticks_until_action(self) -> int:
        """How many ticks the driver may let pass before calling tick() again, as long as
        it catches them up before any other input (see Raft.ticks_until_action)."""
        return self.raft.ticks_until_action()

    def campaign(self) -> None:
        """Start an election now (pre-vote first when enabled)."""
        self.raft.step(Message(MessageType.HUP, frm=self.raft.id))

    def propose(self, data: bytes) -> None:
        """Append `data` to the log through the leader. Raises ProposalDroppedError if
        there is no leader to take it; acceptance is not commitment."""
        self.propose_batch([data])

    def propose_batch(self, datas: list[bytes]) -> None:
        """Propose several entries at once: the leader appends and replicates them as one
        batch. All are accepted or, with ProposalDroppedError, none."""
        if datas:
            entries = tuple(Entry(0, 0, data=d) for d in datas)
            self.raft.step(Message(MessageType.PROP, frm=self.raft.id, entries=entries))

    def propose_conf_change(self, cc: ConfChange) -> None:
        """Propose a membership change. Only the leader accepts one (so that a pending
        change or an invalid one is refused here, with a clear error, rather than
        silently dropped on the way): followers raise ProposalDroppedError naming the
        leader."""
        if self.raft.state is not StateType.LEADER:
            lead = self.raft.lead
            where = f"the leader is {lead:x}" if lead else "there is no leader now"
            raise ProposalDroppedError(
                f"membership changes must be proposed on the leader; {where}"
            )
        self.raft.step(
            Message(
                MessageType.PROP,
                frm=self.raft.id,
                entries=(Entry(0, 0, EntryType.CONF_CHANGE, cc.encode()),),
            )
        )

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        """Make a committed conf change take effect; call it when applying its entry."""
        return self.raft.apply_conf_change(cc)

    def step(self, m: Message) -> None:
        """Feed a message received from a peer."""
        if m.type in LOCAL_MESSAGES:
            raise ValueError(f"{m.type.name} is a local message and cannot come from a peer")
        if m.type in RESPONSE_MESSAGES and m.frm not in self.raft.prs.progress:
            return  # a response from a member that is no longer in the configuration
        # A proposal forwarded by a follower that this node can no longer accept is
        # dropped: the client behind it times out and retries, as with a lost message.
        with contextlib.suppress(ProposalDroppedError):
            self.raft.step(m)

    def transfer_leader(self, transferee: int) -> None:
        self.raft.step(Message(MessageType.TRANSFER_LEADER, frm=transferee))

    def read_index(self, ctx: bytes) -> None:
        """Ask for a linearizable read point; the answer comes in a later
        `Ready.read_states` as `ReadState(index, ctx)`. `ctx` must be unique per
        request. Raises ProposalDroppedError when there is no leader."""
        self.raft.step(Message(MessageType.READ_INDEX, frm=self.raft.id, context=ctx))

    def report_unreachable(self, node_id: int) -> None:
        self.raft.step(Message(MessageType.UNREACHABLE, frm=node_id))

    def report_snapshot(self, node_id: int, ok: bool) -> None:
        self.raft.step(Message(MessageType.SNAP_STATUS, frm=node_id, reject=not ok))

    # -- outputs -------------------------------------------------------------------

    def has_ready(self) -> bool:
        r = self.raft
        return bool(
            r.soft_state() != self._prev_soft
            or (r.hard_state() != self._prev_hard)
            or r.raft_log.has_pending_snapshot()
            or r.msgs
            or r.raft_log.unstable.entries
            or r.raft_log.has_next_committed_entries()
            or r.read_states
        )

    def ready(self) -> Ready:
        """Take the next batch of work. Call `advance` after handling it and before the
        next `ready`."""
        r = self.raft
        rd = Ready(
            entries=r.raft_log.unstable_entries(),
            committed_entries=r.raft_log.next_committed_entries(),
            messages=r.msgs,
            read_states=r.read_states,
            snapshot=r.raft_log.unstable.snapshot,
        )
        soft = r.soft_state()
        if soft != self._prev_soft:
            rd.soft_state = soft
            self._prev_soft = soft
        hard = r.hard_state()
        if hard != self._prev_hard:
            rd.hard_state = hard
        rd.must_sync = bool(
            rd.entries
            or (hard.term != self._prev_hard.term)
            or (hard.vote != self._prev_hard.vote)
            or rd.snapshot is not None
        )
        self._prev_hard = hard
        r.msgs = []
        r.read_states = []
        return rd

    def advance(self, rd: Ready) -> None:
        log = self.raft.raft_log
        if rd.committed_entries:
            log.applied_to(rd.committed_entries[-1].index)
        elif rd.snapshot is not None:
            log.applied_to(rd.snapshot.metadata.index)
        if rd.entries:
            last = rd.entries[-1]
            log.stable_to(last.index, last.term)
        if rd.snapshot is not None:
            log.stable_snap_to(rd.snapshot.metadata.index)

    # -- inspection ----------------------------------------------------------------

    def status(self) -> Status:
        r = self.raft
        progress: dict[int, ProgressStatus] = {}
        if r.state is StateType.LEADER:
            progress = {
                nid: ProgressStatus(pr.match, pr.next, pr.state, pr.is_learner, pr.recent_active)
                for nid, pr in r.prs.progress.items()
            }
        return Status(
            id=r.id,
            hard_state=r.hard_state(),
            soft_state=r.soft_state(),
            applied=r.raft_log.applied,
            conf_state=r.prs.conf_state(),
            lead_transferee=r.lead_transferee,
            progress=progress,
        )
