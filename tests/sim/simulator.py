"""A deterministic simulation of a kubelab store cluster under faults.

The Raft core (``controlplane.store.raft``) is pure: it never reads a clock, never does
I/O and draws randomness from the ``random.Random`` it is given. That makes it possible
to run whole clusters - nodes, network, disks, clients, an operator changing membership
- inside one Python process, driven by one ``random.Random(seed)`` and a logical clock,
with no threads, no asyncio and no real time. A run is a pure function of its seed: a
failure found once is replayed exactly, as often as needed, by running the same seed.

The world
---------
An event queue (a heap ordered by logical time, then by insertion) holds everything
that will happen: message deliveries, node ticks, client requests and their timeouts,
restarts, the nemesis's next fault and the operator's next move. One event is one
*step*. After each step every node's ``Ready`` is handled (see :meth:`_handle_ready`)
and the safety invariants of ``invariants.py`` are checked, so a violation is reported
at the step that caused it, with the seed and a trace of the last events.

Time is counted in units of 1/``TICK`` of a Raft tick. Nodes tick every ``TICK`` units
give or take a few percent (clock drift); with ``election_tick=10``, ``heartbeat_tick=1``
an election timeout is 10-20 ticks. Messages normally take a few units, far less than
a heartbeat interval.

Fault model
-----------
Network (:class:`Network`). Every message gets its own delivery time, so messages are
reordered whenever their latencies cross. On top of that the nemesis sets, for a while:
loss (a message silently vanishes), duplication (a second copy with its own latency),
delay spikes (a message takes up to tens of ticks), and partitions: symmetric (a node
isolated, or the members split into a minority and a majority) and asymmetric (links
blocked in one direction only: A reaches B but B does not reach A, e.g. a node that
can send but not receive). A message is checked against the partition when it would be
delivered. Healing removes every blocked link. The sender's transport learns what a
real one would: a message that could not be delivered because of a partition or a dead
peer is reported with ``report_unreachable``, and every snapshot message's outcome with
``report_snapshot`` (a leader otherwise waits forever for a lost snapshot).

Disks (:class:`SimDisk`). What a node persists goes to a write buffer; ``fsync`` makes
it durable. Each Ready's writes form one atomic batch (like one checksummed WAL record:
a torn record is discarded on replay). A crash loses every batch not yet fsynced,
except that a random prefix of them may survive (the OS wrote them back on its own):
losing unsynced data and keeping it are both legal outcomes. Local snapshots are
written and fsynced together with everything buffered before them, like etcd's
snapshotter, which fsyncs the WAL before it releases the log the snapshot replaces.

Processes. A node may crash between any two steps, or in the middle of handling
a Ready (after writing but before fsync, after fsync but before sending, after sending
but before applying); a crash loses all volatile state (unsent messages, unsynced
writes, the state machine). A restart rebuilds the node from its disk alone:
``MemoryStorage`` from the durable hard state, snapshot and entries, ``applied`` = the
snapshot's index, and the state machine from the snapshot (the log replays the rest).
Crashes of a majority at once happen too. A node may also be paused (a long GC or
SIGSTOP): it processes nothing, then resumes with whatever it believed before - a
deposed leader that does not know it yet.

Raft itself runs with check-quorum and pre-vote on, election_tick 10, heartbeat_tick 1,
and flow-control limits drawn per run, small ones included (tiny appends, an in-flight
window of two, committed entries spread over several Readies) so that those paths run
too. Each node snapshots its state machine every few applied entries, compacts its log
(sometimes keeping a few entries behind the snapshot), and a leader sends a follower
that lags behind the compacted log a snapshot of its current applied state.

The Ready contract. A node persists the hard state, entries and snapshot of a Ready,
fsyncs if ``must_sync``, and only THEN releases the Ready's messages: a vote grant or an
append acknowledgement is a promise about the disk, and a message that overtakes the
data it promises about lets a crash make the promise false (a node could vote twice in
one term, or a leader count an acknowledgement for entries no disk holds). Then it
applies the committed entries (conf changes through ``apply_conf_change``) and calls
``advance``. The invariants check the consequence directly: no node ever grants its
vote to two candidates in one term. A leader is the exception, as in the real node: it
sends its messages first and writes its own copy meanwhile (Raft thesis 10.2.1), so a
leader that crashes before its fsync has sent entries it then loses.

Membership. An operator (:class:`_MembershipChange`) removes a voter (any voter, the
leader included), leaves it running for a while (a removed node must not disrupt the
cluster), stops it and wipes it, then adds a brand-new member with a NEW id and empty
storage as a learner and promotes it to voter once it has caught up. New ids, as etcd
does, so that no message addressed to the old incarnation can ever reach the new one.
Conf changes go only through the leader; a refusal (no leader, a change still pending,
an invalid change) is retried later. All of this happens while the faults go on.
The nemesis also asks leaders to transfer leadership now and then.

Clients. A few concurrent clients issue ``put``, ``cas`` and linearizable ``get`` on a
handful of keys, one request at a time each, at the node they believe is the leader
(followers forward proposals). A write completes when its entry is applied on the node
that accepted it; a read calls ``read_index`` and completes when that node has applied
up to the returned index, answered from that node's state machine. A request refused
with ``ProposalDroppedError`` was never appended, so it is left out of the history. A
request without an answer within the timeout is recorded as timed out (it may or may
not have taken effect). The state machine applies each request id at most once, as a
real store's request deduplication does, because the network may duplicate a forwarded
proposal.

At the end (:meth:`Simulation.finish`) the nemesis stops, the network heals, crashed
members restart; once the cluster has settled a final read of every key is made, all
members must have converged to the same state, every acknowledged write must be in it
and the client history must be linearizable for the ``KVModel`` of ``kubelab.lincheck``.

Not modelled: corrupted (rather than lost) writes, byzantine behaviour, disks that lie
about fsync, a member coming back under its old id with an empty disk (unsafe in Raft
by design: it could vote twice in a term), clock-dependent features (the core has no
leases).
"""

from __future__ import annotations

import enum
import hashlib
import heapq
import itertools
import json
import random
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from controlplane.store.raft import (
    ConfChange,
    ConfChangeError,
    ConfChangeType,
    Config,
    ConfState,
    Entry,
    EntryType,
    HardState,
    MemoryStorage,
    Message,
    MessageType,
    ProposalDroppedError,
    RawNode,
    Ready,
    Snapshot,
    SnapshotMetadata,
    StateType,
)
from controlplane.store.raft.describe import describe_message
from kubelab.lincheck import CheckResult, KVInput, KVModel, KVOutput, Operation, check
from tests.sim.invariants import SafetyChecker

TICK = 100
"""Logical time units per Raft tick."""

ELECTION_TICK = 10
HEARTBEAT_TICK = 1

TRACE_LENGTH = 60
"""How many of the last events a failure report shows."""

TRACE_WIDTH = 240
"""Trace lines are cut at this width (an append can carry hundreds of entries)."""

LINCHECK_TIMEOUT_S = 120.0


class SimulationFailure(AssertionError):
    """A property failed; the message names the seed and the step and shows a trace."""


# -- the state machine ---------------------------------------------------------------


def encode_command(rid: str, inp: KVInput) -> bytes:
    return json.dumps([rid, inp.op, inp.key, inp.value, inp.expected]).encode()


class KVStateMachine:
    """The replicated map. ``done`` remembers each applied request id and its result, so
    that a request whose proposal the network duplicated takes effect once."""

    def __init__(
        self, kv: dict[str, str] | None = None, done: dict[str, bool | None] | None = None
    ) -> None:
        self.kv: dict[str, str] = kv or {}
        self.done: dict[str, bool | None] = done or {}

    def apply(self, data: bytes) -> tuple[str, bool | None]:
        rid, op, key, value, expected = json.loads(data)
        if rid in self.done:
            return rid, self.done[rid]
        result: bool | None = None
        if op == "put":
            self.kv[key] = value
        else:
            result = self.kv.get(key) == expected
            if result:
                self.kv[key] = value
        self.done[rid] = result
        return rid, result

    def encode(self) -> bytes:
        return json.dumps({"kv": self.kv, "done": self.done}, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> KVStateMachine:
        state = json.loads(data)
        return cls(state["kv"], state["done"])


# -- disks ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _WriteBatch:
    """What one Ready persists; written and lost as a unit."""

    hard_state: HardState | None
    snapshot: Snapshot | None
    entries: list[Entry]


class SimDisk:
    """A node's disk: durable state plus a buffer of writes awaiting fsync."""

    def __init__(self, snapshot: Snapshot | None = None) -> None:
        self.hard_state = HardState()
        self.snapshot = snapshot or Snapshot()
        self.entries: list[Entry] = []  # contiguous, the log after (part of) the snapshot
        self._buffer: list[_WriteBatch] = []

    def write(self, batch: _WriteBatch) -> None:
        self._buffer.append(batch)

    def fsync(self) -> None:
        for batch in self._buffer:
            self._make_durable(batch)
        self._buffer.clear()

    def crash(self, rng: random.Random) -> int:
        """Lose the unsynced writes but a random prefix of them; returns how many were
        lost."""
        kept = rng.randint(0, len(self._buffer))
        lost = len(self._buffer) - kept
        del self._buffer[kept:]
        self.fsync()
        return lost

    def save_snapshot(self, snap: Snapshot, compact_to: int) -> None:
        """Persist a local snapshot and release the log up to `compact_to`."""
        self.fsync()
        self.snapshot = snap
        if self.entries and self.entries[0].index <= compact_to:
            del self.entries[: compact_to - self.entries[0].index + 1]

    def _make_durable(self, batch: _WriteBatch) -> None:
        if batch.snapshot is not None:
            self.snapshot = batch.snapshot
            self.entries = []  # a leader's snapshot replaces the whole log
        if batch.entries:
            first = batch.entries[0].index
            if self.entries:
                del self.entries[max(0, first - self.entries[0].index) :]
            self.entries.extend(batch.entries)
        if batch.hard_state is not None:
            self.hard_state = batch.hard_state

    def load(self, storage: MemoryStorage) -> None:
        """Rebuild a restarting node's (empty) `storage` from what is durable."""
        if not self.snapshot.is_empty():
            storage.apply_snapshot(self.snapshot)
        storage.append(list(self.entries))
        storage.set_hard_state(self.hard_state)


# -- network -------------------------------------------------------------------------


@dataclass
class Network:
    """Link conditions (set by the nemesis) and the blocked directed links."""

    loss: float = 0.0
    duplicate: float = 0.0
    min_latency: int = 1
    max_latency: int = 8
    spike: float = 0.0  # probability of a delay spike
    spike_latency: int = 0  # longest spike
    blocked: set[tuple[int, int]] = field(default_factory=set)

    def calm(self) -> None:
        self.loss = self.duplicate = self.spike = 0.0
        self.spike_latency = 0

    def latency(self, rng: random.Random) -> int:
        if self.spike and rng.random() < self.spike:
            return rng.randint(self.max_latency, max(self.max_latency, self.spike_latency))
        return rng.randint(self.min_latency, self.max_latency)


# -- nodes and clients ---------------------------------------------------------------


class CrashPoint(enum.Enum):
    """Where inside the handling of a Ready a node can be made to crash."""

    BEFORE_FSYNC = "after writing the Ready, before fsync"
    BEFORE_SEND = "after fsync, before sending the Ready's messages"
    BEFORE_APPLY = "after sending, before applying the committed entries"


class _QuietLogger:
    """The core logs every decision; a simulation makes millions of them."""

    def info(self, msg: str) -> None:
        pass

    def debug(self, msg: str) -> None:
        pass

    def warning(self, msg: str) -> None:
        pass


@dataclass(eq=False)
class PendingOp:
    client: SimClient
    rid: str
    input: KVInput
    call: int
    node: int
    outcome: str = ""  # "ok", "timed out" or "refused" once finished

    @property
    def finished(self) -> bool:
        return bool(self.outcome)


@dataclass(eq=False)
class SimClient:
    id: int
    hint: int  # the node this client sends its next request to
    pinned: int | None = None  # always use this node (scenarios)
    kinds: tuple[str, ...] = ("put", "put", "cas", "get", "get")
    seq: int = 0
    current: PendingOp | None = None
    last_seen: dict[str, str | None] = field(default_factory=dict)


class SimStorage(MemoryStorage):
    """The node's log in memory, rebuilt from its disk at start-up.

    A leader sends ``snapshot()`` to a follower whose entries it has compacted. The
    stored snapshot may predate the follower's own addition to the configuration (a new
    member is added after the last periodic snapshot), and a follower refuses a snapshot
    whose configuration does not contain it. So, like an application that serves
    snapshots on demand, this returns the state as of the last applied entry when that
    is newer: a snapshot taken for sending only, which neither compacts nor persists.
    """

    def __init__(self, on_demand: Callable[[Snapshot], Snapshot]) -> None:
        super().__init__()
        self._on_demand = on_demand

    def stored_snapshot(self) -> Snapshot:
        return super().snapshot()

    def snapshot(self) -> Snapshot:
        return self._on_demand(super().snapshot())


class SimNode:
    """One member: its disk survives crashes, everything else is rebuilt on restart."""

    def __init__(self, nid: int, disk: SimDisk, rng: random.Random) -> None:
        self.id = nid
        self.disk = disk
        self.incarnation = 0
        self.up = False
        self.decommissioned = False
        self.paused_until = 0
        self.tick_interval = TICK + rng.randint(-3, 3)  # clock drift
        self.snapshot_every = rng.choice((5, 10, 25, 60))  # applied entries per snapshot
        self.retain = rng.choice((0, 1, 3, 10))  # entries kept behind a snapshot
        self.crash_point: CrashPoint | None = None
        self.restart_delay: int | None = None  # ticks from an armed crash to the restart
        self.raw: RawNode
        self.storage: SimStorage
        self.sm = KVStateMachine()
        self.applied = 0
        self.waiting_writes: dict[str, PendingOp] = {}
        self.waiting_reads: dict[bytes, PendingOp] = {}
        self.confirmed_reads: list[tuple[int, PendingOp]] = []
        self.snapshots_installed = 0  # leader's snapshots installed, over all incarnations


@dataclass(frozen=True)
class SimConfig:
    members: int = 3
    clients: int = 3
    keys: tuple[str, ...] = ("a", "b", "c")
    random_faults: bool = True
    membership_changes: int = 2  # remove/re-add cycles the nemesis may start
    fault_interval_ticks: tuple[int, int] = (2, 25)  # between two nemesis actions
    op_timeout_ticks: int = 25
    settle_ticks: int = 400
    stale_reads: bool = False
    """Deliberately broken read path: serve reads from the local state machine, without
    ReadIndex. Used only to prove the linearizability check is not vacuous."""


class _Phase(enum.Enum):
    REMOVE = "remove"
    DRAIN = "drain"
    ADD_LEARNER = "add-learner"
    PROMOTE = "promote"


@dataclass
class _MembershipChange:
    victim: int
    newcomer: int = 0
    phase: _Phase = _Phase.REMOVE
    retry_at: int = 0
    drain_until: int = 0


@dataclass(frozen=True)
class SimResult:
    seed: int
    steps: int
    ticks: float
    history: list[Operation]
    linearizability: CheckResult
    stats: dict[str, int]
    digest: str
    """A hash of the history and the final state: equal for equal seeds."""

    def summary(self) -> str:
        stats = ", ".join(f"{k}={v}" for k, v in sorted(self.stats.items()))
        return f"seed {self.seed}: {self.steps} steps, {self.ticks:.0f} ticks; {stats}"


# -- the world -----------------------------------------------------------------------


Event = tuple[int, int, Callable[[Any], None], Any]


class Simulation:
    """The world. Scenario tests drive it through the public methods; random runs let
    the nemesis call the same methods."""

    def __init__(self, seed: int, config: SimConfig | None = None) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.now = 0
        self.steps = 0
        self.stats: Counter[str] = Counter()
        self.checker = SafetyChecker()
        self.net = Network()
        self.history: list[Operation] = []
        self.faults_active = self.config.random_faults
        self.accepting_ops = True
        self.change: _MembershipChange | None = None
        self._changes_left = self.config.membership_changes
        self._queue: list[Event] = []
        self._touched: list[SimNode] = []  # nodes given input in this step
        self._seq = itertools.count()
        self._trace: deque[tuple[int, int, Callable[[Any], None] | None, Any]] = deque(
            maxlen=TRACE_LENGTH
        )
        # Flow-control limits, small ones included so that appends are split, the
        # in-flight window fills up and committed entries span several Readies.
        rng = self.rng
        self._max_msg_bytes = rng.choice((256, 4096, 1 << 20))
        self._max_inflight = rng.choice((2, 8, 256))
        self._max_committed_bytes = rng.choice((512, 8 << 20))
        voters = tuple(range(1, self.config.members + 1))
        boot = Snapshot(SnapshotMetadata(1, 1, ConfState(voters)), KVStateMachine().encode())
        self.nodes: dict[int, SimNode] = {}
        for nid in voters:
            self._add_node(nid, SimDisk(boot))
        self.clients = [
            SimClient(cid, self.rng.choice(voters)) for cid in range(self.config.clients)
        ]
        for client in self.clients:
            self._schedule(self.rng.randint(1, 5 * TICK), self._client_wake, client)
        if self.faults_active:
            self._schedule(self.rng.randint(5, 30) * TICK, self._nemesis, None)

    # -- driving -------------------------------------------------------------------

    def run_ticks(self, ticks: float) -> None:
        self._run(self.now + int(ticks * TICK))

    def run_until(self, cond: Callable[[], bool], max_ticks: float) -> bool:
        """Run until `cond()` holds (checked every tick); False if it never did."""
        deadline = self.now + int(max_ticks * TICK)
        while not cond():
            if self.now >= deadline:
                return False
            self._run(min(deadline, self.now + TICK))
        return True

    def _schedule(self, at: int, fn: Callable[[Any], None], arg: Any) -> None:
        heapq.heappush(self._queue, (at, next(self._seq), fn, arg))

    def _run(self, until: int) -> None:
        queue = self._queue
        while queue and queue[0][0] <= until:
            at, _, fn, arg = heapq.heappop(queue)
            self.now = at
            self._trace.append((self.steps, at, fn, arg))
            try:
                fn(arg)
                self._handle_readies()
                self.checker.after_step([n.raw.raft for n in self.nodes.values() if n.up])
            except Exception as exc:
                raise SimulationFailure(self._report(f"{type(exc).__name__}: {exc}")) from exc
            self.steps += 1
        self.now = max(self.now, until)

    def fail(self, what: str) -> SimulationFailure:
        """A failure report naming the seed, the step and the recent events."""
        return SimulationFailure(self._report(what))

    def _report(self, what: str) -> str:
        lines = [f"seed {self.seed}, step {self.steps} (t={self.now / TICK:.2f} ticks): {what}"]
        lines.append("cluster: " + self.describe_cluster())
        lines.append(f"last {len(self._trace)} events:")
        for step, at, fn, arg in self._trace:
            line = f"  #{step} t={at / TICK:.2f} {_describe_event(fn, arg)}"
            lines.append(line if len(line) <= TRACE_WIDTH else line[: TRACE_WIDTH - 3] + "...")
        return "\n".join(lines)

    def _note(self, text: str) -> None:
        """Put a fault or operator action into the trace."""
        self._trace.append((self.steps, self.now, None, text))

    # -- observation ---------------------------------------------------------------

    def node(self, nid: int) -> SimNode:
        return self.nodes[nid]

    def members(self) -> list[int]:
        """Every node that is part of the cluster (up or crashed, not decommissioned)."""
        return [nid for nid, n in self.nodes.items() if not n.decommissioned]

    def leader(self) -> int | None:
        """The live leader of the highest term, if any (a deposed leader that has not
        noticed yet may still think it leads at a lower term)."""
        best: SimNode | None = None
        for n in self.nodes.values():
            if not n.up or n.raw.raft.state is not StateType.LEADER:
                continue
            if best is None or n.raw.raft.term > best.raw.raft.term:
                best = n
        return best.id if best is not None else None

    def describe_cluster(self) -> str:
        parts = []
        for nid, n in self.nodes.items():
            if n.decommissioned:
                parts.append(f"{nid}:removed")
            elif not n.up:
                parts.append(f"{nid}:down")
            else:
                r = n.raw.raft
                role = r.state.name.lower().replace("_", "-")
                paused = " paused" if n.paused_until > self.now else ""
                parts.append(
                    f"{nid}:{role} term={r.term} lead={r.lead} commit={r.raft_log.committed} "
                    f"applied={n.applied} last={r.raft_log.last_index()}{paused}"
                )
        blocked = " ".join(f"{a}->{b}" for a, b in sorted(self.net.blocked))
        return "; ".join(parts) + (f"; blocked: {blocked}" if blocked else "")

    # -- nodes ---------------------------------------------------------------------

    def _add_node(self, nid: int, disk: SimDisk) -> SimNode:
        node = SimNode(nid, disk, self.rng)
        self.nodes[nid] = node
        self._start(node)
        return node

    def _start(self, node: SimNode) -> None:
        node.incarnation += 1
        node.storage = SimStorage(partial(self._snapshot_on_demand, node))
        node.disk.load(node.storage)
        snap = node.storage.stored_snapshot()
        node.sm = KVStateMachine.decode(snap.data) if snap.data else KVStateMachine()
        node.applied = snap.metadata.index
        node.raw = RawNode(
            Config(
                id=node.id,
                storage=node.storage,
                election_tick=ELECTION_TICK,
                heartbeat_tick=HEARTBEAT_TICK,
                applied=node.applied,
                max_size_per_msg=self._max_msg_bytes,
                max_committed_size_per_ready=self._max_committed_bytes,
                max_inflight_msgs=self._max_inflight,
                check_quorum=True,
                pre_vote=True,
                rand=random.Random(self.rng.getrandbits(64)),
                logger=_QuietLogger(),
            )
        )
        node.up = True
        node.paused_until = 0
        node.crash_point = None
        node.waiting_writes = {}
        node.waiting_reads = {}
        node.confirmed_reads = []
        self.checker.node_started(node.id, node.raw.raft)
        self._touched.append(node)  # committed entries may be waiting to be re-applied
        self._at_node(self.now + self.rng.randint(1, TICK), node, self._tick)

    def _at_node(self, at: int, node: SimNode, action: Callable[[SimNode], None]) -> None:
        """Schedule `action` on this incarnation of `node` (dropped if it crashes)."""
        self._schedule(at, self._run_at_node, (node.id, node.incarnation, action))

    def _run_at_node(self, arg: tuple[int, int, Callable[[SimNode], None]]) -> None:
        nid, incarnation, action = arg
        node = self.nodes[nid]
        if not node.up or node.incarnation != incarnation:
            return
        if node.paused_until > self.now:
            self._schedule(node.paused_until, self._run_at_node, arg)
            return
        self._touched.append(node)
        action(node)

    def _tick(self, node: SimNode) -> None:
        node.raw.tick()
        self._at_node(self.now + node.tick_interval, node, self._tick)

    def crash(self, nid: int) -> None:
        """Kill `nid`: volatile state and unsynced writes are lost."""
        node = self.nodes[nid]
        if not node.up:
            return
        node.up = False
        lost = node.disk.crash(self.rng)
        self.stats["crashes"] += 1
        self.stats["unsynced_batches_lost"] += lost
        self._note(f"crash {nid} ({lost} unsynced write batches lost)")

    def restart(self, nid: int) -> None:
        node = self.nodes[nid]
        if node.up or node.decommissioned:
            return
        self._start(node)
        self.stats["restarts"] += 1
        self._note(
            f"restart {nid} (commit {node.raw.raft.raft_log.committed}, applied "
            f"{node.applied}, last {node.raw.raft.raft_log.last_index()})"
        )

    def _restart_event(self, nid: int) -> None:
        self.restart(nid)

    def pause(self, nid: int, ticks: float) -> None:
        node = self.nodes[nid]
        if node.up:
            node.paused_until = max(node.paused_until, self.now + int(ticks * TICK))
            self.stats["pauses"] += 1
            self._note(f"pause {nid} for {ticks} ticks")

    def arm_crash(self, nid: int, point: CrashPoint, restart_after_ticks: int | None) -> None:
        """Crash `nid` at `point` while it handles its next Ready, then restart it after
        the given delay (None: stay down)."""
        node = self.nodes[nid]
        node.crash_point = point
        node.restart_delay = restart_after_ticks
        self._note(f"arm crash of {nid} {point.value}")

    # -- network -------------------------------------------------------------------

    def isolate(self, nid: int) -> None:
        self.partition([nid], [m for m in self.nodes if m != nid])

    def partition(self, *groups: Iterable[int]) -> None:
        """Cut every link between different groups, both ways."""
        sets = [set(g) for g in groups]
        for i, a in enumerate(sets):
            for b in sets[i + 1 :]:
                for x in a:
                    for y in b:
                        self.net.blocked.update(((x, y), (y, x)))
        self.stats["partitions"] += 1
        self._note("partition " + " | ".join(str(sorted(s)) for s in sets))

    def block(self, frm: int, to: int) -> None:
        """Cut the link from `frm` to `to` only: `to` can still reach `frm`."""
        self.net.blocked.add((frm, to))
        self._note(f"block {frm}->{to}")

    def heal(self) -> None:
        self.net.blocked.clear()
        self._note("heal")

    def _send(self, node: SimNode, m: Message) -> None:
        if m.type is MessageType.VOTE_RESP and not m.reject:
            self.checker.on_vote_granted(m.frm, m.term, m.to)
        net, rng = self.net, self.rng
        lost = bool(net.loss) and rng.random() < net.loss
        self._schedule(self.now + net.latency(rng), self._deliver, (m, lost, node.incarnation))
        if net.duplicate and rng.random() < net.duplicate:
            self.stats["duplicated"] += 1
            self._schedule(self.now + net.latency(rng), self._deliver, (m, False, node.incarnation))

    def _deliver(self, arg: tuple[Message, bool, int]) -> None:
        m, lost, incarnation = arg
        dst = self.nodes.get(m.to)
        if lost:
            self.stats["lost"] += 1
            self._undeliverable(m, incarnation, unreachable=False)
        elif dst is None or not dst.up or (m.frm, m.to) in self.net.blocked:
            self.stats["dropped"] += 1
            self._undeliverable(m, incarnation, unreachable=True)
        elif dst.paused_until > self.now:
            self._schedule(dst.paused_until + self.net.latency(self.rng), self._deliver, arg)
        else:
            self._touched.append(dst)
            dst.raw.step(m)
            if m.type is MessageType.SNAP:
                self.stats["snapshots_delivered"] += 1
                self._feedback(m.frm, incarnation, partial(_report_snapshot, m.to, True))

    def _undeliverable(self, m: Message, incarnation: int, unreachable: bool) -> None:
        """Tell the sender's Raft what its transport noticed about a failed send."""
        if m.type is MessageType.SNAP:
            self._feedback(m.frm, incarnation, partial(_report_snapshot, m.to, False))
        elif unreachable:
            self._feedback(m.frm, incarnation, partial(_report_unreachable, m.to))

    def _feedback(self, nid: int, incarnation: int, action: Callable[[SimNode], None]) -> None:
        sender = self.nodes[nid]
        if sender.up and sender.incarnation == incarnation:
            self._at_node(self.now + 1, sender, action)

    # -- the Ready loop ------------------------------------------------------------

    def _handle_readies(self) -> None:
        """Handle the Readies of the nodes this step gave input to (no other node can
        have one: every Ready is handled in the step that produced it)."""
        touched, self._touched = self._touched, []
        for node in touched:
            while node.up and node.raw.has_ready():
                self._handle_ready(node)

    def _handle_ready(self, node: SimNode) -> None:
        """Handle one Ready in the order its contract demands (see the module doc)."""
        raw = node.raw
        raft = raw.raft
        rd: Ready = raw.ready()
        if rd.soft_state is not None and rd.soft_state.raft_state is StateType.LEADER:
            self.checker.observe_leader(raft)
            self.stats["leaders_elected"] += 1
        self.checker.on_entries(node.id, raft, rd.entries)
        if rd.hard_state is not None:
            self.checker.on_commit(node.id, raft, rd.hard_state.commit)

        # 0. A leader's appends leave before its own write (see the module doc).
        leading = raft.state is StateType.LEADER
        if leading:
            for m in rd.messages:
                self._send(node, m)

        # 1. Persist: to the write buffer, and to the in-memory view of the log.
        if rd.hard_state is not None or rd.snapshot is not None or rd.entries:
            node.disk.write(_WriteBatch(rd.hard_state, rd.snapshot, list(rd.entries)))
        if rd.snapshot is not None:
            node.storage.apply_snapshot(rd.snapshot)
        node.storage.append(rd.entries)
        if rd.hard_state is not None:
            node.storage.set_hard_state(rd.hard_state)
        if self._crash_at(node, CrashPoint.BEFORE_FSYNC):
            return
        if rd.must_sync:
            node.disk.fsync()
        if self._crash_at(node, CrashPoint.BEFORE_SEND):
            return

        # 2. Only now may a follower's messages leave: what they promise is on disk.
        if not leading:
            for m in rd.messages:
                self._send(node, m)
        if self._crash_at(node, CrashPoint.BEFORE_APPLY):
            return

        # 3. Apply: a snapshot from the leader, then committed entries, then reads.
        if rd.snapshot is not None:
            self._install_snapshot(node, rd.snapshot)
        for e in rd.committed_entries:
            self._apply(node, e)
        for rs in rd.read_states:
            op = node.waiting_reads.pop(rs.request_ctx, None)
            if op is not None:
                node.confirmed_reads.append((rs.index, op))
        if node.confirmed_reads:
            self._answer_reads(node)

        # 4. Advance, then maybe snapshot the state machine and compact the log.
        raw.advance(rd)
        if node.applied - node.storage.stored_snapshot().metadata.index >= node.snapshot_every:
            self._take_snapshot(node)

    def _crash_at(self, node: SimNode, point: CrashPoint) -> bool:
        if node.crash_point is not point:
            return False
        self.stats["crashes_mid_ready"] += 1
        self.crash(node.id)
        if node.restart_delay is not None:
            self._schedule(self.now + node.restart_delay * TICK, self._restart_event, node.id)
        return True

    def _install_snapshot(self, node: SimNode, snap: Snapshot) -> None:
        node.sm = KVStateMachine.decode(snap.data)
        node.applied = snap.metadata.index
        self.checker.on_snapshot(node.id, snap.metadata.index, snap.data, installed=True)
        self.stats["snapshots_installed"] += 1
        node.snapshots_installed += 1
        # Writes this node accepted that the snapshot covers have taken effect.
        for rid in [rid for rid in node.waiting_writes if rid in node.sm.done]:
            self._complete(node.waiting_writes.pop(rid), node.sm.done[rid])

    def _apply(self, node: SimNode, e: Entry) -> None:
        self.checker.on_apply(node.id, e)
        node.applied = e.index
        if e.type is EntryType.CONF_CHANGE:
            cc = ConfChange.decode(e.data)
            try:
                node.raw.apply_conf_change(cc)
                self.stats["conf_changes_applied"] += 1
            except ConfChangeError:
                # Refused identically on every node, e.g. a stale duplicate proposal.
                self.stats["conf_changes_refused"] += 1
        elif e.data:
            rid, result = node.sm.apply(e.data)
            op = node.waiting_writes.pop(rid, None)
            if op is not None:
                self._complete(op, result)

    def _answer_reads(self, node: SimNode) -> None:
        waiting = []
        for index, op in node.confirmed_reads:
            if index <= node.applied:
                self._complete(op, node.sm.kv.get(str(op.input.key)))
            else:
                waiting.append((index, op))
        node.confirmed_reads = waiting

    def _snapshot_on_demand(self, node: SimNode, stored: Snapshot) -> Snapshot:
        if node.applied <= stored.metadata.index:
            return stored
        conf = node.raw.raft.prs.conf_state()
        meta = SnapshotMetadata(node.applied, node.storage.term(node.applied), conf)
        snap = Snapshot(meta, node.sm.encode())
        self.checker.on_snapshot(node.id, node.applied, snap.data, installed=False)
        return snap

    def _take_snapshot(self, node: SimNode) -> None:
        conf = node.raw.raft.prs.conf_state()
        snap = node.storage.create_snapshot(node.applied, conf, node.sm.encode())
        compact_to = node.applied - node.retain
        if compact_to >= node.storage.first_index():
            node.storage.compact(compact_to)
        node.disk.save_snapshot(snap, compact_to)
        self.checker.on_snapshot(node.id, node.applied, snap.data, installed=False)
        self.stats["snapshots_taken"] += 1

    # -- clients -------------------------------------------------------------------

    def add_client(self, pinned: int | None = None, kinds: tuple[str, ...] = ()) -> SimClient:
        """A client for a scenario: pinned to one node, and/or doing only `kinds`."""
        client = SimClient(len(self.clients), pinned or self.rng.choice(self.members()), pinned)
        if kinds:
            client.kinds = kinds
        self.clients.append(client)
        self._schedule(self.now + 1, self._client_wake, client)
        return client

    def _client_wake(self, client: SimClient) -> None:
        if client.current is not None or not self.accepting_ops:
            return
        rng = self.rng
        kind = rng.choice(client.kinds)
        key = rng.choice(self.config.keys)
        rid = f"c{client.id}.{client.seq + 1}"
        if kind == "put":
            inp = KVInput.put(key, rid)
        elif kind == "cas":
            expected = client.last_seen.get(key) if rng.random() < 0.8 else None
            inp = KVInput.cas(key, expected, rid)
        else:
            inp = KVInput.get(key)
        self.issue(client, inp)

    def issue(self, client: SimClient, inp: KVInput) -> PendingOp:
        """Send `inp` from `client` to the node it talks to."""
        client.seq += 1
        target = client.pinned if client.pinned is not None else client.hint
        op = PendingOp(client, f"c{client.id}.{client.seq}", inp, self.now, target)
        client.current = op
        self._schedule(self.now + self.net.latency(self.rng), self._submit, op)
        self._schedule(self.now + self.config.op_timeout_ticks * TICK, self._op_timeout, op)
        return op

    def _submit(self, op: PendingOp) -> None:
        if op.finished:
            return
        node = self.nodes[op.node]
        if not node.up:
            self._refused(op, None)
            return
        if node.paused_until > self.now:
            self._schedule(node.paused_until, self._submit, op)
            return
        inp = op.input
        self._touched.append(node)
        try:
            if inp.op != "get":
                node.raw.propose(encode_command(op.rid, inp))
                node.waiting_writes[op.rid] = op
            elif self.config.stale_reads:
                self._complete(op, node.sm.kv.get(str(inp.key)))
            else:
                node.raw.read_index(op.rid.encode())
                node.waiting_reads[op.rid.encode()] = op
        except ProposalDroppedError:
            self._refused(op, node)

    def _refused(self, op: PendingOp, node: SimNode | None) -> None:
        """Never appended, never happened: left out of the history; retry elsewhere."""
        op.outcome = "refused"
        self.stats["ops_refused"] += 1
        client = op.client
        client.current = None
        lead = node.raw.raft.lead if node is not None else 0
        client.hint = lead if lead in self.nodes else self.rng.choice(self.members())
        self._schedule(self.now + self.rng.randint(TICK // 10, TICK), self._client_wake, client)

    def _complete(self, op: PendingOp, output: KVOutput) -> None:
        if op.finished:
            return
        op.outcome = "ok"
        client = op.client
        self.history.append(Operation(client.id, op.call, self.now, op.input, output))
        self.stats["ops_ok"] += 1
        key, inp = str(op.input.key), op.input
        if inp.op == "get":
            client.last_seen[key] = output if isinstance(output, str) else None
        elif inp.op == "put" or output is True:
            client.last_seen[key] = str(inp.value)
        client.current = None
        self._schedule(self.now + self.rng.randint(0, 2 * TICK), self._client_wake, client)

    def _op_timeout(self, op: PendingOp) -> None:
        if op.finished:
            return
        op.outcome = "timed out"
        client = op.client
        self.history.append(Operation.timeout(client.id, op.call, op.input))
        self.stats["ops_timed_out"] += 1
        client.current = None
        client.hint = self.rng.choice(self.members())
        self._schedule(self.now + 1, self._client_wake, client)

    # -- leadership and membership -------------------------------------------------

    def transfer_leadership(self, to: int) -> None:
        lid = self.leader()
        if lid is not None and lid != to:
            self._touched.append(self.nodes[lid])
            self.nodes[lid].raw.transfer_leader(to)
            self.stats["transfers_requested"] += 1
            self._note(f"transfer leadership {lid} -> {to}")

    def start_membership_change(self, victim: int) -> None:
        """Remove voter `victim`, then add a fresh member with a new id (learner first,
        promoted once caught up)."""
        self.change = _MembershipChange(victim)
        self._note(f"operator: replace member {victim}")
        self._schedule(self.now + 1, self._operate, None)

    def _propose_conf_change(self, leader: SimNode, cc: ConfChange) -> None:
        assert self.change is not None
        if self.now < self.change.retry_at:
            return
        self.change.retry_at = self.now + 10 * TICK
        self._touched.append(leader)
        try:
            leader.raw.propose_conf_change(cc)
            self.stats["conf_changes_proposed"] += 1
            self._note(f"operator: propose {cc.type.name} {cc.node_id} at {leader.id}")
        except (ProposalDroppedError, ConfChangeError) as exc:
            self.stats["conf_changes_retried"] += 1
            self._note(f"operator: {cc.type.name} {cc.node_id} refused: {exc}")

    def _operate(self, _: None) -> None:
        change = self.change
        if change is None:
            return
        lid = self.leader()
        leader = self.nodes[lid] if lid is not None else None
        conf = leader.raw.raft.prs.conf_state() if leader is not None else None
        if change.phase is _Phase.REMOVE:
            if leader is not None and conf is not None:
                if change.victim in conf.voters:
                    self._propose_conf_change(
                        leader, ConfChange(ConfChangeType.REMOVE_NODE, change.victim)
                    )
                else:
                    change.phase = _Phase.DRAIN
                    change.drain_until = self.now + self.rng.randint(0, 30) * TICK
        elif change.phase is _Phase.DRAIN:
            if self.now >= change.drain_until:
                victim = self.nodes[change.victim]
                victim.up = False
                victim.decommissioned = True
                change.newcomer = max(self.nodes) + 1
                self._add_node(change.newcomer, SimDisk())
                change.phase = _Phase.ADD_LEARNER
                change.retry_at = 0
                self._note(f"operator: {change.victim} stopped, {change.newcomer} started")
        elif leader is not None and conf is not None:
            new = change.newcomer
            if change.phase is _Phase.ADD_LEARNER:
                if new in conf.learners or new in conf.voters:
                    change.phase = _Phase.PROMOTE
                    change.retry_at = 0
                else:
                    cc = ConfChange(ConfChangeType.ADD_LEARNER_NODE, new)
                    self._propose_conf_change(leader, cc)
            elif new in conf.voters:
                self.change = None
                self.stats["members_replaced"] += 1
                self._note(f"operator: {new} is a voter")
                return
            else:
                pr = leader.raw.status().progress.get(new)
                if pr is not None and pr.match >= leader.raw.raft.raft_log.committed:
                    self._propose_conf_change(leader, ConfChange(ConfChangeType.ADD_NODE, new))
        self._schedule(self.now + 2 * TICK, self._operate, None)

    # -- the nemesis ---------------------------------------------------------------

    def _nemesis(self, _: None) -> None:
        if not self.faults_active:
            return
        actions: list[tuple[Callable[[], None], int]] = [
            (self._nemesis_isolate, 10),
            (self._nemesis_split, 8),
            (self._nemesis_one_way, 8),
            (self._nemesis_heal, 16),
            (self._nemesis_crash, 8),
            (self._nemesis_crash_mid_ready, 5),
            (self._nemesis_crash_majority, 2),
            (self._nemesis_pause, 5),
            (self._nemesis_weather, 8),
            (self._nemesis_transfer, 5),
            (self._nemesis_membership, 4),
        ]
        action = self.rng.choices([a for a, _ in actions], [w for _, w in actions])[0]
        action()
        gap = self.rng.randint(*self.config.fault_interval_ticks)
        self._schedule(self.now + gap * TICK, self._nemesis, None)

    def _live_members(self) -> list[int]:
        return [nid for nid in self.members() if self.nodes[nid].up]

    def _nemesis_isolate(self) -> None:
        self.isolate(self.rng.choice(self.members()))

    def _nemesis_split(self) -> None:
        members = self.members()
        self.rng.shuffle(members)
        minority = self.rng.randint(1, len(members) // 2)
        self.partition(members[:minority], members[minority:])

    def _nemesis_one_way(self) -> None:
        members = self.members()
        nid = self.rng.choice(members)
        others = [m for m in members if m != nid]
        shape = self.rng.randrange(3)
        if shape == 0:  # nid can send but not receive
            for other in others:
                self.block(other, nid)
        elif shape == 1:  # nid can receive but not send
            for other in others:
                self.block(nid, other)
        else:  # a few random one-way links
            for _ in range(self.rng.randint(1, len(members))):
                self.block(nid, self.rng.choice(others))
                nid = self.rng.choice(members)
                others = [m for m in members if m != nid]
        self.stats["one_way_partitions"] += 1

    def _nemesis_heal(self) -> None:
        self.heal()
        if self.rng.random() < 0.5:
            self.net.calm()

    def _nemesis_crash(self) -> None:
        live = self._live_members()
        if live:
            nid = self.rng.choice(live)
            self.crash(nid)
            self._schedule(self.now + self.rng.randint(1, 40) * TICK, self._restart_event, nid)

    def _nemesis_crash_mid_ready(self) -> None:
        live = self._live_members()
        if live:
            point = self.rng.choice(list(CrashPoint))
            self.arm_crash(self.rng.choice(live), point, self.rng.randint(1, 30))

    def _nemesis_crash_majority(self) -> None:
        live = self._live_members()
        victims = self.rng.sample(live, min(len(live), len(self.members()) // 2 + 1))
        self.stats["majority_crashes"] += 1
        for nid in victims:
            self.crash(nid)
            self._schedule(self.now + self.rng.randint(5, 40) * TICK, self._restart_event, nid)

    def _nemesis_pause(self) -> None:
        live = self._live_members()
        if live:
            self.pause(self.rng.choice(live), self.rng.randint(1, 25))

    def _nemesis_weather(self) -> None:
        net, rng = self.net, self.rng
        net.loss = rng.choice((0.0, 0.0, 0.02, 0.1, 0.3))
        net.duplicate = rng.choice((0.0, 0.0, 0.02, 0.1))
        net.spike = rng.choice((0.0, 0.01, 0.05))
        net.spike_latency = rng.randint(1, 30) * TICK
        self._note(
            f"network: loss {net.loss}, duplicate {net.duplicate}, "
            f"spikes {net.spike} up to {net.spike_latency / TICK:.0f} ticks"
        )

    def _nemesis_transfer(self) -> None:
        lid = self.leader()
        if lid is not None:
            voters = [v for v in self.nodes[lid].raw.raft.prs.voters if v != lid]
            if voters:
                self.transfer_leadership(self.rng.choice(sorted(voters)))

    def _nemesis_membership(self) -> None:
        lid = self.leader()
        if self.change is not None or self._changes_left <= 0 or lid is None:
            return
        self._changes_left -= 1
        voters = sorted(self.nodes[lid].raw.raft.prs.voters)
        self.start_membership_change(self.rng.choice(voters))

    # -- the end -------------------------------------------------------------------

    def settled(self) -> bool:
        """A leader whose whole configuration is up, following it, and has applied its
        entire log; no membership change in progress."""
        lid = self.leader()
        if self.change is not None or lid is None:
            return False
        raft = self.nodes[lid].raw.raft
        last = raft.raft_log.last_index()
        if raft.raft_log.committed != last:
            return False
        conf = raft.prs.conf_state()
        for nid in (*conf.voters, *conf.learners):
            n = self.nodes.get(nid)
            if n is None or not n.up or n.paused_until > self.now:
                return False
            if n.applied != last or n.raw.raft.lead != lid:
                return False
        return True

    def heal_all(self) -> None:
        """Stop the faults: heal the network, restart every crashed member."""
        self.faults_active = False
        self.heal()
        self.net.calm()
        for nid in self.members():
            self.nodes[nid].crash_point = None
            self.restart(nid)

    def finish(self) -> SimResult:
        """Heal, settle, read every key, check convergence and linearizability."""
        self.accepting_ops = False
        self.heal_all()
        self._settle("after healing")
        self.run_ticks(2)  # let answers to requests still in flight arrive
        reader = SimClient(len(self.clients), 0)
        for key in self.config.keys:
            self._final_read(reader, key)
        for client in self.clients:
            if client.current is not None:
                self._op_timeout(client.current)
        self._settle("after the final reads")
        self._check_convergence()
        result = check(KVModel(), self.history, timeout_s=LINCHECK_TIMEOUT_S)
        return SimResult(
            seed=self.seed,
            steps=self.steps,
            ticks=self.now / TICK,
            history=list(self.history),
            linearizability=result,
            stats=dict(self.stats),
            digest=self._digest(),
        )

    def _settle(self, when: str) -> None:
        if not self.run_until(self.settled, self.config.settle_ticks):
            raise self.fail(f"liveness: the cluster did not settle {when}")

    def _final_read(self, reader: SimClient, key: str) -> None:
        for _ in range(20):
            lid = self.leader()
            if lid is None:
                self.run_ticks(1)
                continue
            reader.pinned = lid
            op = self.issue(reader, KVInput.get(key))
            self.run_until(partial(getattr, op, "finished"), self.config.op_timeout_ticks + 1)
            if op.outcome == "ok":
                return
        raise self.fail(f"liveness: a final read of {key!r} never completed")

    def _check_convergence(self) -> None:
        lid = self.leader()
        assert lid is not None
        leader = self.nodes[lid]
        conf = leader.raw.raft.prs.conf_state()
        for nid in (*conf.voters, *conf.learners):
            n = self.nodes[nid]
            if (
                n.applied != leader.applied
                or n.sm.kv != leader.sm.kv
                or n.sm.done != leader.sm.done
            ):
                raise self.fail(
                    f"convergence: {nid} (applied {n.applied}, {n.sm.kv}) differs from leader "
                    f"{lid} (applied {leader.applied}, {leader.sm.kv})"
                )
        for op in self.history:
            inp = op.input
            if inp.op in ("put", "cas") and not op.timed_out and inp.value not in leader.sm.done:
                raise self.fail(f"durability: acknowledged write {inp} is not in the final state")

    def _digest(self) -> str:
        lid = self.leader()
        final = self.nodes[lid].sm.encode() if lid is not None else b""
        text = repr([(o.client_id, o.call, o.ret, o.input, o.output) for o in self.history])
        return hashlib.sha256(text.encode() + final + str(self.steps).encode()).hexdigest()


def _report_snapshot(peer: int, ok: bool, node: SimNode) -> None:
    node.raw.report_snapshot(peer, ok)


def _report_unreachable(peer: int, node: SimNode) -> None:
    node.raw.report_unreachable(peer)


def _describe_event(fn: Callable[[Any], None] | None, arg: Any) -> str:
    if fn is None:
        return str(arg)
    name = getattr(fn, "__name__", repr(fn)).lstrip("_")
    if name == "deliver":
        m, lost, _ = arg
        return f"deliver {describe_message(m)}" + (" (lost)" if lost else "")
    if name == "run_at_node":
        nid, incarnation, action = arg
        if isinstance(action, partial):
            args = ", ".join(map(str, action.args))
            return f"{action.func.__name__.lstrip('_')}({args}) at {nid}#{incarnation}"
        return f"{getattr(action, '__name__', action).lstrip('_')} {nid}#{incarnation}"
    if isinstance(arg, PendingOp):
        return f"{name} client {arg.client.id} {arg.input} at {arg.node}"
    if isinstance(arg, SimClient):
        return f"{name} client {arg.id}"
    return f"{name} {arg}" if arg is not None else name
