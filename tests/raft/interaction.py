"""An interactive Raft test environment driven by transcript commands.

The environment holds several `RawNode`s wired to in-memory storage and a message queue
that the script controls: nothing is delivered, ticked or persisted unless a command
says so. Every decision the core logs (at the chosen level), every Ready and every
delivered message is printed, so a transcript shows exactly what happened.

Commands (ids are member ids):

    add-nodes N voters=(1,2,3) [learners=(4)] [index=2]
        N new nodes; with voters, their storage starts from a snapshot at `index`
        with that configuration; without, empty (a member to be added later).
    campaign ID                    start an election on ID
    propose ID DATA                propose an entry
    propose-conf-change ID v4|l4|r4  add voter / add learner / remove, on the leader
    read-index ID CTX              request a linearizable read point
    transfer-leadership from=ID to=ID
    tick ID [N]                    N ticks (default 1)
    tick-heartbeat ID              one heartbeat interval of ticks
    tick-election ID               enough ticks for ID's election timer to fire
    process-ready ID...            take, print and handle each node's Ready
    deliver-msgs [ID...] [drop=(ID...)]  deliver queued messages (drop= discards
                                   those addressed to the listed ids)
    stabilize [ID...]              process-ready and deliver-msgs until nothing moves
    compact ID INDEX               snapshot ID's state at INDEX and compact its log
    restart ID                     crash ID (losing everything unpersisted) and restart
    raft-state | raft-log ID | status ID
    log-level none|info|debug
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from controlplane.store.raft import (
    ConfChange,
    ConfChangeType,
    Config,
    ConfState,
    EntryType,
    MemoryStorage,
    Message,
    RaftError,
    RawNode,
    Ready,
    Snapshot,
    SnapshotMetadata,
    StateType,
)
from controlplane.store.raft.describe import describe_entry, describe_message, describe_ready
from tests.raft.datadriven import TestCase

LEVELS = {"none": 0, "info": 1, "debug": 2}


class CaptureLogger:
    """Writes the core's log lines into the transcript at the current indentation."""

    def __init__(self, env: InteractionEnv) -> None:
        self.env = env

    def info(self, msg: str) -> None:
        if self.env.level >= 1:
            self.env.emit("INFO " + msg)

    def debug(self, msg: str) -> None:
        if self.env.level >= 2:
            self.env.emit("DEBUG " + msg)

    def warning(self, msg: str) -> None:
        if self.env.level >= 1:
            self.env.emit("WARN " + msg)


class HarnessStorage(MemoryStorage):
    """MemoryStorage whose snapshot() reflects the node's applied state, as the
    application would produce one on demand (etcd's interaction tests do the same)."""

    def __init__(self, node: HarnessNode) -> None:
        super().__init__()
        self.node = node

    def snapshot(self) -> Snapshot:
        stored = super().snapshot()
        raft = self.node.raw.raft
        applied = raft.raft_log.applied
        if applied <= stored.metadata.index:
            return stored
        meta = SnapshotMetadata(applied, self.term(applied), raft.prs.conf_state())
        return Snapshot(meta, self.node.state_up_to(applied))


@dataclass
class HarnessNode:
    id: int
    config_template: Config
    storage: HarnessStorage = field(init=False)
    raw: RawNode = field(init=False)
    # The "state machine": the data of applied normal entries, with their indexes.
    history: list[tuple[int, bytes]] = field(default_factory=list)

    def state_up_to(self, index: int) -> bytes:
        return b",".join(d for i, d in self.history if i <= index and d)

    def load_state(self, snap: Snapshot) -> None:
        items = [d for d in snap.data.split(b",") if d]
        self.history = [(snap.metadata.index, d) for d in items]


class InteractionEnv:
    def __init__(self) -> None:
        self.nodes: dict[int, HarnessNode] = {}
        self.messages: list[Message] = []
        self.level = 1
        self._out: list[str] = []
        self._indent = 0

    # -- output --------------------------------------------------------------------

    def emit(self, line: str, always: bool = False) -> None:
        """Add a line to the transcript; at log level `none` only errors are kept, so a
        script can set up a cluster quietly."""
        if self.level > 0 or always:
            self._out.append("  " * self._indent + line)

    def handle(self, tc: TestCase) -> str:
        self._out = []
        self._indent = 0
        handler = getattr(self, "cmd_" + tc.command.replace("-", "_"), None)
        if handler is None:
            raise ValueError(f"{tc.pos}: unknown command {tc.command!r}")
        try:
            handler(tc)
        except RaftError as exc:
            self._indent = 0
            self.emit(f"error: {exc}", always=True)
        return "\n".join(self._out)

    # -- nodes ---------------------------------------------------------------------

    def _config(self, nid: int, storage: MemoryStorage, applied: int) -> Config:
        return Config(
            id=nid,
            storage=storage,
            election_tick=10,
            heartbeat_tick=1,
            applied=applied,
            max_size_per_msg=1 << 20,
            max_inflight_msgs=256,
            check_quorum=True,
            pre_vote=True,
            rand=random.Random(nid),
            logger=CaptureLogger(self),
        )

    def cmd_add_nodes(self, tc: TestCase) -> None:
        count = tc.arg_int(0)
        voters = tc.kw_ints("voters")
        learners = tc.kw_ints("learners")
        index = tc.kw_int("index", 1)
        first = max(self.nodes, default=0) + 1
        for nid in range(first, first + count):
            node = HarnessNode(nid, self._config(nid, MemoryStorage(), 0))
            node.storage = HarnessStorage(node)
            if voters:
                conf = ConfState(tuple(voters), tuple(learners))
                node.storage.apply_snapshot(Snapshot(SnapshotMetadata(index, 1, conf)))
            applied = node.storage.first_index() - 1
            node.raw = RawNode(self._config(nid, node.storage, applied))
            self.nodes[nid] = node

    def cmd_restart(self, tc: TestCase) -> None:
        node = self.nodes[tc.arg_int(0)]
        snap = super(HarnessStorage, node.storage).snapshot()
        node.load_state(snap)
        # Everything not persisted (unstable entries, unsent messages) is lost.
        self.messages = [m for m in self.messages if m.frm != node.id]
        node.raw = RawNode(self._config(node.id, node.storage, snap.metadata.index))

    # -- inputs --------------------------------------------------------------------

    def cmd_campaign(self, tc: TestCase) -> None:
        self.nodes[tc.arg_int(0)].raw.campaign()

    def cmd_propose(self, tc: TestCase) -> None:
        self.nodes[tc.arg_int(0)].raw.propose(tc.args[1].encode())

    def cmd_propose_conf_change(self, tc: TestCase) -> None:
        spec = tc.args[1]
        kind = {
            "v": ConfChangeType.ADD_NODE,
            "l": ConfChangeType.ADD_LEARNER_NODE,
            "r": ConfChangeType.REMOVE_NODE,
        }[spec[0]]
        self.nodes[tc.arg_int(0)].raw.propose_conf_change(ConfChange(kind, int(spec[1:])))

    def cmd_read_index(self, tc: TestCase) -> None:
        self.nodes[tc.arg_int(0)].raw.read_index(tc.args[1].encode())

    def cmd_transfer_leadership(self, tc: TestCase) -> None:
        self.nodes[tc.kw_int("from", 0)].raw.transfer_leader(tc.kw_int("to", 0))

    def cmd_tick(self, tc: TestCase) -> None:
        n = tc.arg_int(1) if len(tc.args) > 1 else 1
        for _ in range(n):
            self.nodes[tc.arg_int(0)].raw.tick()

    def cmd_tick_heartbeat(self, tc: TestCase) -> None:
        node = self.nodes[tc.arg_int(0)]
        for _ in range(node.raw.raft.heartbeat_timeout):
            node.raw.tick()

    def cmd_tick_election(self, tc: TestCase) -> None:
        raft = self.nodes[tc.arg_int(0)].raw.raft
        # A leader's timer is the plain election timeout (check-quorum); a follower's
        # is randomized, so tick until that one fires.
        if raft.state is StateType.LEADER:
            n = raft.election_timeout
        else:
            n = raft.randomized_election_timeout - raft.election_elapsed
        for _ in range(n):
            raft.tick()

    def cmd_log_level(self, tc: TestCase) -> None:
        self.level = LEVELS[tc.args[0]]

    # -- ready and delivery --------------------------------------------------------

    def _process_ready(self, node: HarnessNode) -> None:
        rd: Ready = node.raw.ready()
        self.emit(f"> {node.id} handling Ready")
        self._indent += 1
        for line in describe_ready(rd):
            self.emit(line)
        if rd.hard_state is not None:
            node.storage.set_hard_state(rd.hard_state)
        if rd.snapshot is not None:
            node.storage.apply_snapshot(rd.snapshot)
            node.load_state(rd.snapshot)
        node.storage.append(rd.entries)
        self.messages.extend(rd.messages)
        for e in rd.committed_entries:
            if e.type is EntryType.CONF_CHANGE:
                try:
                    node.raw.apply_conf_change(ConfChange.decode(e.data))
                except RaftError as exc:
                    self.emit(f"conf change {describe_entry(e)} refused: {exc}")
            else:
                node.history.append((e.index, e.data))
        node.raw.advance(rd)
        self._indent -= 1

    def cmd_process_ready(self, tc: TestCase) -> None:
        for nid in tc.ids():
            self._process_ready(self.nodes[nid])

    def _deliver(self, to: int, drop: set[int]) -> bool:
        mine = [m for m in self.messages if m.to == to]
        if not mine:
            return False
        self.messages = [m for m in self.messages if m.to != to]
        if to in drop or to not in self.nodes:
            for m in mine:
                self.emit(f"dropped: {describe_message(m)}")
            return True
        self.emit(f"> {to} receiving messages")
        self._indent += 1
        for m in mine:
            self.emit(describe_message(m))
            self._indent += 1
            self.nodes[to].raw.step(m)
            self._indent -= 1
        self._indent -= 1
        return True

    def cmd_deliver_msgs(self, tc: TestCase) -> None:
        drop = set(tc.kw_ints("drop"))
        targets = tc.ids() or sorted({m.to for m in self.messages})
        for to in sorted(set(targets) | (drop & {m.to for m in self.messages})):
            self._deliver(to, drop)

    def cmd_stabilize(self, tc: TestCase) -> None:
        ids = tc.ids() or sorted(self.nodes)
        while True:
            moved = False
            for nid in ids:
                if self.nodes[nid].raw.has_ready():
                    self._process_ready(self.nodes[nid])
                    moved = True
            for nid in ids:
                moved = self._deliver(nid, set()) or moved
            if not moved:
                return

    # -- inspection ----------------------------------------------------------------

    def cmd_compact(self, tc: TestCase) -> None:
        node = self.nodes[tc.arg_int(0)]
        index = tc.arg_int(1)
        conf = node.raw.raft.prs.conf_state()
        node.storage.create_snapshot(index, conf, node.state_up_to(index))
        node.storage.compact(index)
        self.cmd_raft_log(TestCase(tc.pos, "raft-log", [str(node.id)]))

    def cmd_raft_state(self, tc: TestCase) -> None:
        for nid, node in sorted(self.nodes.items()):
            r = node.raw.raft
            role = "Voter" if nid in r.prs.voters else "Learner"
            if nid not in r.prs.progress:
                role = "Non-member"
            self.emit(f"{nid}: {r.state.value} ({role}) Term:{r.term} Lead:{r.lead}", True)

    def cmd_raft_log(self, tc: TestCase) -> None:
        log = self.nodes[tc.arg_int(0)].raw.raft.raft_log
        ents = log.all_entries()
        if not ents:
            self.emit(
                f"log is empty: first index={log.first_index()}, last index={log.last_index()}"
            )
        for e in ents:
            self.emit(describe_entry(e))

    def cmd_status(self, tc: TestCase) -> None:
        st = self.nodes[tc.arg_int(0)].raw.status()
        for nid, pr in sorted(st.progress.items()):
            role = " learner" if pr.is_learner else ""
            self.emit(f"{nid}: {pr.state.value} match={pr.match} next={pr.next}{role}")
