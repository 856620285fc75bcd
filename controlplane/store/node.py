"""The store member's runtime: an asyncio driver around the pure Raft core.

One `RaftNode` owns a `RawNode`, the write-ahead log, the snapshot files, the peer
transport and a state machine, and runs the Ready loop of `rawnode`:

    persist (WAL, fsync with group commit) -> send -> apply -> advance

except that a leader sends first (Raft thesis 10.2.1): its appends travel and the
followers write them while it writes its own copy. That is safe because nothing counts
its copy before it is durable: acknowledgements stepped during the fsync can move the
commit index, but committed entries (and the commit index in messages) leave only in
the next Ready, which comes after this one's fsync. A follower still persists before it
sends, since its acknowledgements and vote grants are promises about its disk.

Group commit falls out of the loop's shape: the fsync runs in a worker thread, and
while it does the event loop keeps accepting proposals and peer messages into the core;
they all leave in the next Ready and share the next fsync.

Clients call `propose()` (a write: resolves with the state machine's result once the
entry is applied here) and `read_index()` (a linearizable read point: resolves once the
state machine has applied at least that index). Both fail fast with
`ProposalDroppedError` when the core refuses them (no leader) and with
`StoreTimeoutError` when nothing happened in time (no quorum): a client never hangs.

Start-up: a member with no WAL bootstraps. With `initial_cluster_state="new"` every
initial member writes the same bootstrap snapshot (index 1, the initial voters, their
peer URLs), so they agree on the configuration without a log; with "existing" it starts
empty, dials the members its initial cluster lists and waits for the leader to send it a
snapshot (`member add` must have made it a member first). A member with a WAL recovers: the
newest snapshot the WAL refers to, then the WAL's hard state and entries after it.

Snapshots: after `snapshot_count` applied entries the state machine is snapshotted, the
snapshot saved, the in-memory log compacted (keeping `catch_up_entries` so slightly slow
followers still get appends) and the WAL segments before it released. A snapshot sent to
a follower is always made fresh from the applied state, so it carries the current
membership (a member added after the last local snapshot must find itself in it).

Tracing (`spans`, with a tracer): a write proposed inside a recording span carries its
trace context in its entry, and every member's fsync, the leader's commit and every
member's apply of it are spans of that trace. Without a tracer nothing is done.

Heartbeats: the leader does not send a follower its regular heartbeat when it sent that
follower an append, a snapshot or a read's heartbeat within the last interval (etcd
sends every one); see `RaftNode._redundant_heartbeat`.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import itertools
import logging
import math
import random
import secrets
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import msgpack
from opentelemetry import trace
from opentelemetry.context import Context

from controlplane.store import spans
from controlplane.store.raft import (
    ConfChange,
    ConfChangeType,
    Config,
    ConfState,
    Entry,
    EntryType,
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
from controlplane.store.snapshotter import Snapshotter
from controlplane.store.transport import PeerTransport
from controlplane.store.wal import WAL, StoreStorageError

log = logging.getLogger(__name__)


STOP_TIMEOUT = 5.0
"""How long `stop()` waits for the Raft loop to finish the Ready it is persisting."""

_CONTACT = frozenset({MessageType.APP, MessageType.SNAP, MessageType.HEARTBEAT})
"""Messages from a leader that reset a follower's election timer (regular heartbeats,
the one kind that can be skipped, are never recorded: see `RaftNode._redundant_heartbeat`)."""

_STORAGE_ERRORS = (OSError, StoreStorageError)


def _fatal_cause(exc: BaseException) -> str:
    """What stopped the Raft loop, as clients and the log are told: a storage failure
    (disk full, I/O error) or, for anything else, the error's type, which points at a
    bug rather than at the disk."""
    if isinstance(exc, _STORAGE_ERRORS):
        return f"a storage failure: {exc}"
    return f"an internal error ({type(exc).__name__}: {exc}); see the member's log"


TICK_SLACK = 1e-6
"""Fraction of a tick by which a timer may fire early (asyncio runs a timer that is due
within its clock resolution) and still count that tick as due."""


class StoreTimeoutError(TimeoutError):
    """A request did not complete in time. A write may or may not have been applied."""


class StateMachine(Protocol):
    """What the Raft log is replicated for (the KV store, later the MVCC store)."""

    def apply(self, index: int, command: bytes) -> Any:
        """Apply a committed command; the result goes back to the proposer."""
        ...

    def snapshot(self) -> bytes: ...

    def restore(self, data: bytes) -> None: ...


class ClusterState(enum.Enum):
    NEW = "new"
    EXISTING = "existing"


def member_id(peer_addr: tuple[str, int], cluster_token: str = "kubelab-store") -> int:
    """A member's id from its peer address and the cluster token, as etcd derives ids
    from peer URLs: every initial member computes the same ids, and `member add` (which
    knows only the new member's URL) computes the id that member will have."""
    host, port = peer_addr
    digest = hashlib.sha256(f"{cluster_token}/{host}:{port}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF_FFFF_FFFF or 1


@dataclass
class NodeConfig:
    name: str
    data_dir: Path
    peer_listen: tuple[str, int]
    # Peer address of every initial member, by name (this member included).
    initial_cluster: dict[str, tuple[str, int]]
    initial_cluster_state: ClusterState = ClusterState.NEW
    peer_server_ssl: ssl.SSLContext | None = None
    peer_client_ssl: ssl.SSLContext | None = None
    tick_interval: float = 0.1  # etcd's default --heartbeat-interval (100 ms)
    election_ticks: int = 10  # etcd's default --election-timeout (1000 ms)
    snapshot_count: int = 10_000
    catch_up_entries: int = 5_000
    request_timeout: float = 5.0
    cluster_token: str = "kubelab-store"
    client_urls: tuple[str, ...] = ()

    @property
    def id(self) -> int:
        if self.name not in self.initial_cluster:
            raise ValueError(
                f"--initial-cluster does not name this member ({self.name}); list every "
                "member as name=https://host:port, this one included"
            )
        return member_id(self.initial_cluster[self.name], self.cluster_token)


@dataclass
class NodeStatus:
    id: int
    name: str
    leader: int
    term: int
    commit: int
    applied: int
    role: StateType
    voters: tuple[int, ...]
    learners: tuple[int, ...]
    members: dict[int, tuple[str, int]] = field(default_factory=dict)


_REQ = msgpack.Packer(use_bin_type=True)


def _encode_request(proposer: int, req_id: int, payload: bytes, traceparent: str) -> bytes:
    """An entry's data; a traced proposal's has its traceparent as a fourth field
    (`spans.TRACED_ENTRY`), an untraced one stays three fields long."""
    fields: list[Any] = [proposer, req_id, payload]
    if traceparent:
        fields.append(traceparent)
    data: bytes = _REQ.pack(fields)
    return data


def _decode_request(data: bytes) -> tuple[int, int, bytes, str]:
    """An entry's proposer, request id, payload and traceparent ("" if untraced)."""
    proposer, req_id, payload, *traced = msgpack.unpackb(data, raw=False)
    return int(proposer), int(req_id), bytes(payload), str(traced[0]) if traced else ""


def _request_ids() -> Iterator[int]:
    """Ids for this process's requests. An applied entry completes the request with the
    same proposer and id, so ids must never repeat: not across members (hence the
    proposer's member id in every entry) and not across restarts of one member (a
    restarted member re-applies entries it proposed in its previous life; hence a random
    prefix per process, as etcd's request id generator uses a time-based one)."""
    return itertools.count((secrets.randbits(31) << 32) + 1)


class RaftNode:
    def __init__(
        self,
        config: NodeConfig,
        state_machine: StateMachine,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.config = config
        self.id = config.id
        self.sm = state_machine
        self._tag = f"store[{config.name}]"
        self._storage = MemoryStorage()
        self._snapshotter = Snapshotter(config.data_dir / "member" / "snap")
        self._wal: WAL | None = None
        self._raw: RawNode | None = None
        self._transport: PeerTransport | None = None
        # Peer addresses of the members, replicated with the configuration.
        self.members: dict[int, tuple[str, int]] = {}
        self._conf = ConfState()
        self._applied = 0
        self._snapshot_index = 0
        self._req_ids = _request_ids()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        # Writes waiting for the loop to step them into the core (see _flush_proposals).
        self._proposals: list[tuple[int, bytes]] = []
        self._reads: dict[bytes, asyncio.Future[int]] = {}
        self._apply_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # Ticks are counted from a fixed origin, not "interval after the last one": the
        # election timeout is counted in ticks, and drift would stretch failover.
        self._tick_origin = 0.0
        self._ticks = 0
        self._tick_timer: asyncio.TimerHandle | None = None
        self._stopping = False
        self._fatal: BaseException | None = None
        # When the leader last sent each follower an append, a snapshot or a read's
        # heartbeat: its regular heartbeat is redundant for an interval after one.
        self._last_contact: dict[int, float] = {}
        self.leader_changes = 0
        self.proposals_committed = 0
        self.proposals_failed = 0
        self.heartbeats_skipped = 0
        # Hooks for the server: fsync durations (metrics) and leadership changes.
        self.on_fsync: Callable[[float], None] | None = None
        self.on_leader_change: Callable[[int], None] | None = None
        self._tracer = tracer
        self._spans = spans.RaftSpans(tracer) if tracer is not None else None

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        wal_dir = cfg.data_dir / "member" / "wal"
        loop = asyncio.get_running_loop()
        if any(wal_dir.glob("*.wal")):
            await loop.run_in_executor(None, self._recover, wal_dir)
        else:
            await loop.run_in_executor(None, self._bootstrap, wal_dir)
        raft_config = Config(
            id=self.id,
            storage=self._storage,
            election_tick=cfg.election_ticks,
            heartbeat_tick=1,
            applied=self._applied,
            check_quorum=True,
            pre_vote=True,
            rand=random.Random(),
        )
        self._raw = RawNode(raft_config)
        self._transport = PeerTransport(
            self.id,
            cfg.peer_listen,
            cfg.peer_server_ssl,
            cfg.peer_client_ssl,
            on_message=self._on_peer_message,
            on_unreachable=self._on_unreachable,
        )
        for mid, (host, port) in self._initial_peers().items():
            if mid != self.id:
                self._transport.add_peer(mid, host, port)
        await self._transport.start()
        self._tick_origin = loop.time()
        self._tasks = [asyncio.create_task(self._run(), name=f"{self._tag} raft loop")]
        log.info(
            "%s: started member %x, peer listener %s:%d, %d members, applied index %d",
            self._tag,
            self.id,
            cfg.peer_listen[0],
            self._transport.port,
            len(self.members),
            self._applied,
        )

    def _initial_peers(self) -> dict[int, tuple[str, int]]:
        """Whom to dial from the start: the members the recovered state names or, for a
        member that joined an existing cluster and has not yet received the leader's
        snapshot (it has no membership of its own), the members `--initial-cluster`
        lists, as etcd's joining member does. Without them it could not answer the
        leader's appends, so the leader would never learn that it needs a snapshot."""
        if self.members:
            return self.members
        token = self.config.cluster_token
        return {member_id(a, token): a for a in self.config.initial_cluster.values()}

    async def stop(self) -> None:
        """Stop cooperatively: the Raft loop finishes the Ready in hand (its fsync runs
        in a worker thread, which cancelling the task would not stop) and exits, and
        only then is the WAL closed; closing it under a running fsync corrupted it."""
        self._stopping = True
        self._wakeup.set()
        if self._tick_timer is not None:
            self._tick_timer.cancel()
        run_loop = self._tasks[0] if self._tasks else None
        loop_done = True
        if run_loop is not None:
            try:
                await asyncio.wait_for(asyncio.shield(run_loop), STOP_TIMEOUT)
            except TimeoutError:
                loop_done = False
                log.error(
                    "%s: the raft loop did not stop in %ss (a stuck fsync?); leaving the WAL open",
                    self._tag,
                    STOP_TIMEOUT,
                )
                run_loop.cancel()
            except Exception:  # a fatal storage error already logged by the loop
                pass
        if self._transport is not None:
            await self._transport.stop()
        if self._wal is not None and loop_done:
            self._wal.close()
        # Writes still queued never reached the log: they did not happen. The others may
        # be in the log already, so their outcome is unknown, not "dropped".
        for req_id, _ in self._proposals:
            fut = self._pending.pop(req_id, None)
            if fut is not None and not fut.done():
                fut.set_exception(ProposalDroppedError(f"{self._tag}: member is shutting down"))
        self._proposals = []
        self._fail_all(
            StoreTimeoutError(
                f"{self._tag}: member is shutting down; the request may or may not have been "
                "applied"
            )
        )
        log.info("%s: stopped", self._tag)

    def _bootstrap(self, wal_dir: Path) -> None:
        cfg = self.config
        self._wal = WAL.create(wal_dir, msgpack.packb([self.id, cfg.name, cfg.cluster_token]))
        if cfg.initial_cluster_state is ClusterState.EXISTING:
            log.info(
                "%s: joining an existing cluster; waiting for the leader's snapshot", self._tag
            )
            return
        self.members = {member_id(a, cfg.cluster_token): a for a in cfg.initial_cluster.values()}
        conf = ConfState(voters=tuple(sorted(self.members)))
        snap = Snapshot(SnapshotMetadata(1, 1, conf), self._snapshot_data())
        self._persist_snapshot(snap)
        self._wal.sync()
        self._install_snapshot(snap)
        log.info("%s: bootstrapped a new cluster of %d members", self._tag, len(self.members))

    def _recover(self, wal_dir: Path) -> None:
        wal, rec = WAL.open(wal_dir)
        self._wal = wal
        snap = self._snapshotter.load_newest(at_most=rec.snapshot_index)
        snap_index = snap.metadata.index if snap is not None else 0
        if rec.snapshot_index > snap_index:
            raise StoreStorageError(
                f"{self._tag}: the WAL refers to snapshot index {rec.snapshot_index} but no "
                f"snapshot file has it in {self._snapshotter.dir}; restore the member from a "
                "snapshot or remove it and add it back with an empty --data-dir"
            )
        if snap is not None:
            self._install_snapshot(snap)
        self._storage.set_hard_state(rec.hard_state)
        self._storage.append([e for e in rec.entries if e.index > snap_index])
        log.info(
            "%s: recovered: snapshot index %d, %d WAL entries, hard state term %d commit %d",
            self._tag,
            snap_index,
            len(rec.entries),
            rec.hard_state.term,
            rec.hard_state.commit,
        )

    # -- the loop ------------------------------------------------------------------

    @property
    def raw(self) -> RawNode:
        assert self._raw is not None, "node not started"
        return self._raw

    def _catch_up_ticks(self) -> None:
        """Give the core the ticks that fell due since the last ones, before it sees
        anything else: a tick is applied when the member next wakes, not on its own
        wake-up, so the core sees the same sequence as with a tick every interval."""
        interval = self.config.tick_interval
        due = int((asyncio.get_running_loop().time() - self._tick_origin) / interval + TICK_SLACK)
        while self._ticks < due:
            self._ticks += 1
            self.raw.tick()

    def _arm_tick_timer(self) -> None:
        """Wake up at the first tick that will do more than count.

        A follower with a live leader wakes for the leader's heartbeats only, not also
        ten times a second to count (a sixth to a quarter of an idle follower's CPU);
        a leader still wakes every heartbeat interval. A timer already set for an
        earlier time stays: it wakes the member early, which costs one wake-up, not a
        tick."""
        if self._stopping:
            return
        due = self._ticks + self.raw.ticks_until_action()
        when = self._tick_origin + due * self.config.tick_interval
        timer = self._tick_timer
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._tick_timer = asyncio.get_running_loop().call_at(when, self._on_tick_timer)

    def _on_tick_timer(self) -> None:
        self._tick_timer = None
        if self._stopping:
            return
        self._catch_up_ticks()
        self._wakeup.set()  # the loop sends what the ticks produced and re-arms

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._stopping:
                self._arm_tick_timer()
                await self._wakeup.wait()
                self._wakeup.clear()
                self._catch_up_ticks()
                while not self._stopping:
                    # Proposals that arrived meanwhile (e.g. during the last fsync)
                    # enter the log together: one append per follower for the batch.
                    self._flush_proposals()
                    if not self.raw.has_ready():
                        break
                    rd = self.raw.ready()
                    leading = self.raw.raft.state is StateType.LEADER
                    if leading:
                        self._send(rd.messages)
                    if rd.must_persist():
                        traced = self._traced_appends(rd, leading)
                        # Heartbeats skip the hand-off to the WAL thread: ten times a
                        # second, it was most of an idle member's work.
                        sync = await loop.run_in_executor(None, self._persist, rd, bool(traced))
                        if traced and sync is not None:
                            assert self._spans is not None
                            self._spans.synced(traced, sync, len(rd.entries))
                    if not leading:
                        self._send(rd.messages)
                    self._apply(rd)
                    self.raw.advance(rd)
                    self._maybe_snapshot()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            # Storage failed (disk full, I/O error), or a bug: the member cannot go on
            # safely. A bug's traceback goes to the log, since nothing else shows it.
            self._fatal = exc
            log.critical(
                "%s: stopping the raft loop: %s",
                self._tag,
                _fatal_cause(exc),
                exc_info=not isinstance(exc, _STORAGE_ERRORS),
            )
            self._fail_all(self._stopped_error())
            raise

    def _traced_appends(self, rd: Ready, leading: bool) -> list[Context]:
        """The trace contexts of the Ready's traced entries (`spans`); none untraced."""
        if self._spans is None or not rd.entries:
            return []
        traced = [(e, _decode_request(e.data)[3]) for e in rd.entries if spans.is_traced(e)]
        return self._spans.appended(traced, leading) if traced else []

    def _persist(self, rd: Ready, timed: bool = False) -> spans.Sync | None:
        """Make the Ready durable (runs in a worker thread; nothing else touches the WAL
        or snapshot files meanwhile). With `timed`, what its fsync took, for its span."""
        assert self._wal is not None
        start = time.time_ns() if timed else 0
        if rd.snapshot is not None:
            self._persist_snapshot(rd.snapshot)
        if rd.hard_state is not None or rd.entries:
            self._wal.save(rd.hard_state, rd.entries)
        if not rd.must_sync:
            return None
        nbytes = self._wal.unsynced_bytes
        seconds = self._wal.sync()
        if self.on_fsync is not None:
            self.on_fsync(seconds)
        return spans.Sync(start, time.time_ns(), seconds, nbytes) if timed else None

    def _persist_snapshot(self, snap: Snapshot) -> None:
        assert self._wal is not None
        self._snapshotter.save(snap)
        self._wal.save_snapshot_marker(snap.metadata.index, snap.metadata.term)

    def _send(self, messages: list[Message]) -> None:
        if not messages:
            return
        assert self._transport is not None
        out = []
        now = asyncio.get_running_loop().time()
        for m in messages:
            if self._redundant_heartbeat(m, now):
                self.heartbeats_skipped += 1
                continue
            if m.type is MessageType.SNAP:
                m = replace(m, snapshot=self._fresh_snapshot())
                log.info("%s: sending snapshot at index %d to %x", self._tag, self._applied, m.to)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s: send %s", self._tag, describe_message(m))
            out.append(m)
        self._transport.send(out)
        for m in out:
            if m.type is MessageType.SNAP:
                # The transport is fire-and-forget: report success; if the snapshot was
                # lost, the follower's next rejection makes the leader send another.
                self.raw.report_snapshot(m.to, ok=True)

    def _redundant_heartbeat(self, m: Message, now: float) -> bool:
        """Whether `m` is a regular heartbeat to a follower that heard from this leader
        less than a heartbeat interval ago; notes the contact otherwise.

        Any message from the leader resets a follower's election timer, and its answer
        counts toward the leader's check-quorum, so the heartbeat adds nothing but a
        round trip, which at rest is most of what a member sends: the kernel's network
        path for a TLS record costs more than the Raft work behind it. Skipping it is
        where kubelab departs from etcd's raft, which sends every heartbeat. A follower
        still hears from the leader about every two intervals at worst (plus a late
        timer's delay), well inside the election timeout; heartbeats that carry a
        read's context (ReadIndex) are always sent, since the read waits on their
        answers."""
        if m.type is MessageType.HEARTBEAT and not m.context:
            return now - self._last_contact.get(m.to, -math.inf) < self.config.tick_interval
        if m.type in _CONTACT:
            self._last_contact[m.to] = now
        return False

    def _apply(self, rd: Ready) -> None:
        if rd.soft_state is not None:
            self._on_soft_state(rd.soft_state.lead, rd.soft_state.raft_state)
        if rd.snapshot is not None:
            self._install_snapshot(rd.snapshot)
        if rd.hard_state is not None:
            self._storage.set_hard_state(rd.hard_state)
        self._storage.append(rd.entries)
        for e in rd.committed_entries:
            self._apply_entry(e)
        for rs in rd.read_states:
            fut = self._reads.pop(rs.request_ctx, None)
            if fut is not None and not fut.done():
                fut.set_result(rs.index)
        self._release_apply_waiters()

    def _apply_entry(self, e: Entry) -> None:
        self._applied = e.index
        if not e.data:
            return  # a new leader's empty entry
        if e.type is EntryType.CONF_CHANGE:
            self._apply_conf_change(e)
            return
        proposer, req_id, payload, traceparent = _decode_request(e.data)
        fut = self._pending.pop(req_id, None) if proposer == self.id else None
        if traceparent and self._spans is not None:
            self._spans.committed(e, self._acknowledged)
        start = time.time_ns() if traceparent else 0
        try:
            result = self.sm.apply(e.index, payload)
        except Exception as exc:  # a bad command fails its request, not the member
            log.warning("%s: entry %d failed to apply: %s", self._tag, e.index, exc)
            if fut is not None and not fut.done():
                fut.set_exception(exc)
            return
        if traceparent and self._spans is not None:
            revision = getattr(result, "revision", None)  # a KV or lease response's
            self._spans.applied(e, traceparent, start, revision)
        self.proposals_committed += 1
        if fut is not None and not fut.done():
            fut.set_result(result)

    def _apply_conf_change(self, e: Entry) -> None:
        cc = ConfChange.decode(e.data)
        proposer, req_id, addr = (
            msgpack.unpackb(cc.context, raw=False) if cc.context else (0, 0, None)
        )
        fut = self._pending.pop(req_id, None) if proposer == self.id else None
        try:
            self._conf = self.raw.apply_conf_change(cc)
        except Exception as exc:
            log.warning("%s: conf change at %d refused: %s", self._tag, e.index, exc)
            if fut is not None and not fut.done():
                fut.set_exception(exc)
            return
        if cc.type is ConfChangeType.REMOVE_NODE:
            self.members.pop(cc.node_id, None)
            if cc.node_id == self.id:
                log.warning("%s: this member was removed from the cluster", self._tag)
        elif addr is not None:
            host, port = addr
            self.members[cc.node_id] = (host, port)
        self._sync_peers()
        log.info(
            "%s: applied conf change %s %x; voters=%s learners=%s",
            self._tag,
            cc.type.name,
            cc.node_id,
            [f"{v:x}" for v in self._conf.voters],
            [f"{v:x}" for v in self._conf.learners],
        )
        if fut is not None and not fut.done():
            fut.set_result(self._conf)

    def _acknowledged(self, index: int) -> list[int]:
        """The voters whose log holds `index`, as this member's tracker knows them (the
        leader's is the one that counts: a follower's is empty)."""
        prs = self.raw.raft.prs
        return sorted(m for m in prs.voters if prs.progress[m].match >= index)

    def _on_soft_state(self, lead: int, role: StateType) -> None:
        self.leader_changes += 1
        if self._spans is not None and role is not StateType.LEADER:
            self._spans.lost_leadership()
        log.info(
            "%s: leader is now %s (this member: %s)",
            self._tag,
            f"{lead:x}" if lead else "unknown",
            role.value,
        )
        if self.on_leader_change is not None:
            self.on_leader_change(lead)

    # -- snapshots -----------------------------------------------------------------

    def _snapshot_data(self) -> bytes:
        data: bytes = msgpack.packb(
            [{mid: list(addr) for mid, addr in self.members.items()}, self.sm.snapshot()],
            use_bin_type=True,
        )
        return data

    def _install_snapshot(self, snap: Snapshot) -> None:
        """Load a snapshot's membership and state machine image (start-up or leader)."""
        members, sm_data = msgpack.unpackb(snap.data, raw=False, strict_map_key=False)
        self.members = {int(mid): (a[0], int(a[1])) for mid, a in members.items()}
        self.sm.restore(sm_data)
        self._conf = snap.metadata.conf_state
        self._applied = snap.metadata.index
        self._snapshot_index = snap.metadata.index
        if self._storage.snapshot().metadata.index < snap.metadata.index:
            self._storage.apply_snapshot(snap)
        self._sync_peers()

    def _sync_peers(self) -> None:
        """Make the transport's peers the members (this one aside), at their addresses.

        After a snapshot it is the snapshot's membership that counts: a member removed
        (and maybe added back) in the entries the snapshot replaced is dropped here, so
        that the peers always match what later membership changes expect."""
        if self._transport is None:
            return  # start() adds the peers
        peers = self._transport.peers
        for mid in peers.keys() - self.members.keys():
            self._transport.remove_peer(mid)
        for mid, (host, port) in self.members.items():
            if mid == self.id:
                continue
            if mid not in peers:
                self._transport.add_peer(mid, host, port)
            elif peers[mid] != (host, port):
                self._transport.update_peer(mid, host, port)

    def _fresh_snapshot(self) -> Snapshot:
        meta = SnapshotMetadata(self._applied, self._storage.term(self._applied), self._conf)
        return Snapshot(meta, self._snapshot_data())

    def _maybe_snapshot(self) -> None:
        if self._applied - self._snapshot_index < self.config.snapshot_count:
            return
        snap = self._storage.create_snapshot(self._applied, self._conf, self._snapshot_data())
        assert self._wal is not None
        self._persist_snapshot(snap)
        self._wal.sync()
        self._snapshot_index = self._applied
        compact_to = self._applied - self.config.catch_up_entries
        if compact_to > self._storage.first_index():
            self._storage.compact(compact_to)
        self._wal.release_to(snap.metadata.index)
        self._snapshotter.purge()
        log.info(
            "%s: saved snapshot at index %d, compacted log to %d",
            self._tag,
            self._applied,
            self._storage.first_index(),
        )

    # -- transport callbacks ---------------------------------------------------------

    def _on_peer_message(self, m: Message) -> None:
        if self._raw is None or self._stopping:
            return
        self._catch_up_ticks()
        self._raw.step(m)
        self._wakeup.set()

    def _on_unreachable(self, peer: int) -> None:
        if self._raw is not None and not self._stopping:
            self._catch_up_ticks()
            self._raw.report_unreachable(peer)
            self._wakeup.set()  # a follower that lost its leader says so at once

    # -- client API ------------------------------------------------------------------

    def _check_alive(self) -> None:
        if self._fatal is not None:
            raise self._stopped_error()

    def _stopped_error(self) -> StoreStorageError:
        """What requests get once the Raft loop has stopped, those in flight included."""
        assert self._fatal is not None
        return StoreStorageError(f"{self._tag}: member stopped after {_fatal_cause(self._fatal)}")

    async def propose(self, command: bytes, timeout: float | None = None) -> Any:
        """Replicate `command`; returns the state machine's result once applied here."""
        self._check_alive()
        if self._tracer is not None and trace.get_current_span().is_recording():
            with self._tracer.start_as_current_span("Raft.propose"):
                return await self._propose(command, timeout, spans.traceparent())
        return await self._propose(command, timeout, "")

    async def _propose(self, command: bytes, timeout: float | None, traceparent: str) -> Any:
        req_id = next(self._req_ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        data = _encode_request(self.id, req_id, command, traceparent)
        self._proposals.append((req_id, data))
        self._wakeup.set()
        return await self._await(fut, req_id, timeout, "write")

    def _flush_proposals(self) -> None:
        """Step the queued proposals into the core as one multi-entry proposal.

        Stepping each alone made the leader send an append per proposal to every
        follower (and get as many answers): with many clients that message traffic, not
        the fsync, bounded throughput. A refused batch (no leader) fails each of its
        requests at once with the core's reason; nothing of it reached the log."""
        if not self._proposals:
            return
        batch, self._proposals = self._proposals, []
        try:
            self.raw.propose_batch([data for _, data in batch])
        except ProposalDroppedError as exc:
            self.proposals_failed += len(batch)
            for req_id, _ in batch:
                fut = self._pending.pop(req_id, None)
                if fut is not None and not fut.done():
                    fut.set_exception(ProposalDroppedError(str(exc)))

    async def propose_conf_change(
        self,
        kind: ConfChangeType,
        node_id: int,
        peer_addr: tuple[str, int] | None = None,
        timeout: float | None = None,
    ) -> ConfState:
        self._check_alive()
        req_id = next(self._req_ids)
        ctx = msgpack.packb([self.id, req_id, list(peer_addr) if peer_addr else None])
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        try:
            self.raw.propose_conf_change(ConfChange(kind, node_id, ctx))
        except Exception:
            self._pending.pop(req_id, None)
            raise
        self._wakeup.set()
        conf: ConfState = await self._await(fut, req_id, timeout, "membership change")
        return conf

    async def read_index(self, timeout: float | None = None) -> int:
        """A linearizable read point: returns once this member has applied everything
        committed before the call; read the state machine right after."""
        self._check_alive()
        ctx = f"{self.id:x}/{next(self._req_ids)}".encode()
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._reads[ctx] = fut
        try:
            self.raw.read_index(ctx)
        except ProposalDroppedError:
            self._reads.pop(ctx, None)
            raise
        self._wakeup.set()
        deadline = time.monotonic() + (timeout or self.config.request_timeout)
        try:
            index = await asyncio.wait_for(fut, deadline - time.monotonic())
        except TimeoutError:
            self._reads.pop(ctx, None)
            raise StoreTimeoutError(
                f"{self._tag}: linearizable read timed out: the leader could not confirm it "
                "still leads (no quorum?); retry, or use a serializable read"
            ) from None
        await self.wait_applied(index, max(0.0, deadline - time.monotonic()))
        return index

    async def wait_applied(self, index: int, timeout: float) -> None:
        if self._applied >= index:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._apply_waiters.append((index, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise StoreTimeoutError(
                f"{self._tag}: timed out waiting to apply index {index} (applied {self._applied})"
            ) from None

    def _release_apply_waiters(self) -> None:
        keep = []
        for index, fut in self._apply_waiters:
            if fut.done():
                continue
            if self._applied >= index:
                fut.set_result(None)
            else:
                keep.append((index, fut))
        self._apply_waiters = keep

    async def _await(
        self, fut: asyncio.Future[Any], req_id: int, timeout: float | None, what: str
    ) -> Any:
        try:
            return await asyncio.wait_for(fut, timeout or self.config.request_timeout)
        except TimeoutError:
            self._pending.pop(req_id, None)
            self.proposals_failed += 1
            raise StoreTimeoutError(
                f"{self._tag}: {what} timed out after {timeout or self.config.request_timeout}s"
                ": it may or may not have been applied (no quorum, or a leader change); check "
                "the cluster with `endpoint status` and retry"
            ) from None

    async def transfer_leadership(self, to: int) -> None:
        self.raw.transfer_leader(to)
        self._wakeup.set()

    def _fail_all(self, exc: BaseException) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()
        for rfut in self._reads.values():
            if not rfut.done():
                rfut.set_exception(exc)
        self._reads.clear()

    # -- inspection ----------------------------------------------------------------

    @property
    def term(self) -> int:
        """The current Raft term (cheap: response headers read it on every request)."""
        return self.raw.raft.term

    @property
    def leader(self) -> int:
        """The leader this member knows of, 0 if none."""
        return self.raw.raft.lead

    def status(self) -> NodeStatus:
        st = self.raw.status()
        return NodeStatus(
            id=self.id,
            name=self.config.name,
            leader=st.soft_state.lead,
            term=st.hard_state.term,
            commit=st.hard_state.commit,
            applied=self._applied,
            role=st.soft_state.raft_state,
            voters=self._conf.voters,
            learners=self._conf.learners,
            members=dict(self.members),
        )


def restore_data_dir(config: NodeConfig, sm: StateMachine, state: bytes) -> None:
    """Make `config.data_dir` the data dir of a member of a NEW cluster whose state is
    `state` (a state machine snapshot), as `etcdctl snapshot restore` does: run it for
    every member with the same --initial-cluster, then start them all."""
    wal_dir = config.data_dir / "member" / "wal"
    if any(wal_dir.glob("*.wal")):
        raise StoreStorageError(
            f"{config.data_dir} already holds a member's data; restore into a new --data-dir"
        )
    sm.restore(state)
    node = RaftNode(config, sm)
    node._bootstrap(wal_dir)
    assert node._wal is not None
    node._wal.close()
