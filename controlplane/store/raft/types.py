"""Value types of the Raft core: entries, messages, hard state, snapshots, Ready.

These mirror etcd-io/raft's `raftpb` types. They are plain immutable-ish values: the
core produces them, the runtime persists and ships them (see `controlplane.store.codec`
for the wire and disk encoding), and the simulation inspects them. Nothing here does
I/O.

Node ids are positive integers; 0 means "none" (no leader, no vote).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

NONE = 0
"""The id that means "no node": no leader known, no vote cast."""


class EntryType(enum.IntEnum):
    NORMAL = 0
    CONF_CHANGE = 1


@dataclass(frozen=True, slots=True)
class Entry:
    term: int
    index: int
    type: EntryType = EntryType.NORMAL
    data: bytes = b""

    def size(self) -> int:
        """Approximate byte size, used to bound appends and in-flight bytes."""
        return len(self.data) + 24


class MessageType(enum.IntEnum):
    # Local messages: never sent over the network.
    HUP = 0  # start an election (tick or campaign())
    BEAT = 1  # leader: send heartbeats
    PROP = 2  # a proposal; followers forward it to the leader
    UNREACHABLE = 3  # the runtime reports a peer as unreachable
    SNAP_STATUS = 4  # the runtime reports the outcome of sending a snapshot
    CHECK_QUORUM = 5  # leader: step down unless a quorum was recently active
    # Network messages.
    APP = 10
    APP_RESP = 11
    VOTE = 12
    VOTE_RESP = 13
    PRE_VOTE = 14
    PRE_VOTE_RESP = 15
    SNAP = 16
    HEARTBEAT = 17
    HEARTBEAT_RESP = 18
    TRANSFER_LEADER = 19
    TIMEOUT_NOW = 20
    READ_INDEX = 21
    READ_INDEX_RESP = 22

    @property
    def wire_name(self) -> str:
        """etcd's name for the message type (APP_RESP -> MsgAppResp), used in logs."""
        return "Msg" + "".join(part.capitalize() for part in self.name.split("_"))


LOCAL_MESSAGES = frozenset(
    {
        MessageType.HUP,
        MessageType.BEAT,
        MessageType.UNREACHABLE,
        MessageType.SNAP_STATUS,
        MessageType.CHECK_QUORUM,
    }
)


RESPONSE_MESSAGES = frozenset(
    {
        MessageType.APP_RESP,
        MessageType.VOTE_RESP,
        MessageType.PRE_VOTE_RESP,
        MessageType.HEARTBEAT_RESP,
        MessageType.READ_INDEX_RESP,
    }
)


@dataclass(frozen=True, slots=True)
class ConfState:
    """The membership a snapshot (or the applied log) describes."""

    voters: tuple[int, ...] = ()
    learners: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SnapshotMetadata:
    index: int = 0
    term: int = 0
    conf_state: ConfState = field(default_factory=ConfState)


@dataclass(frozen=True, slots=True)
class Snapshot:
    metadata: SnapshotMetadata = field(default_factory=SnapshotMetadata)
    data: bytes = b""

    def is_empty(self) -> bool:
        return self.metadata.index == 0


@dataclass(frozen=True, slots=True)
class Message:
    type: MessageType
    to: int = NONE
    frm: int = NONE
    term: int = 0
    log_term: int = 0
    index: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    snapshot: Snapshot | None = None
    reject: bool = False
    reject_hint: int = 0
    context: bytes = b""


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be on stable storage before any message of the same Ready is sent."""

    term: int = 0
    vote: int = NONE
    commit: int = 0

    def is_empty(self) -> bool:
        return self == EMPTY_HARD_STATE


EMPTY_HARD_STATE = HardState()


class StateType(enum.Enum):
    FOLLOWER = "StateFollower"
    PRE_CANDIDATE = "StatePreCandidate"
    CANDIDATE = "StateCandidate"
    LEADER = "StateLeader"


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state worth reporting (it need not be persisted)."""

    lead: int
    raft_state: StateType


@dataclass(frozen=True, slots=True)
class ReadState:
    """A linearizable read may be served once the local applied index reaches `index`.

    `request_ctx` is the caller's context passed to `read_index()`, so it can match the
    answer to its request.
    """

    index: int
    request_ctx: bytes


class ConfChangeType(enum.IntEnum):
    ADD_NODE = 0  # add a voter, or promote a learner to voter
    REMOVE_NODE = 1
    ADD_LEARNER_NODE = 2  # add a non-voting member (or demote is refused)


_CONF_CHANGE_HEADER = struct.Struct(">BQ")


@dataclass(frozen=True, slots=True)
class ConfChange:
    """A single-member change; the data of an `EntryType.CONF_CHANGE` entry."""

    type: ConfChangeType
    node_id: int
    context: bytes = b""

    def encode(self) -> bytes:
        return _CONF_CHANGE_HEADER.pack(self.type, self.node_id) + self.context

    @classmethod
    def decode(cls, data: bytes) -> ConfChange:
        kind, node_id = _CONF_CHANGE_HEADER.unpack_from(data)
        return cls(ConfChangeType(kind), node_id, data[_CONF_CHANGE_HEADER.size :])


@dataclass(slots=True)
class Ready:
    """One batch of work the caller must do, in this order, before `advance()`.

    1. Persist `hard_state`, `entries` and `snapshot` (fsync if `must_sync`).
    2. Send `messages` (only after step 1: a vote or an append ack must be durable).
    3. Apply `committed_entries` to the state machine; install `snapshot` into it.
    4. Call `advance()`.
    """

    soft_state: SoftState | None = None
    hard_state: HardState | None = None
    read_states: list[ReadState] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    snapshot: Snapshot | None = None
    committed_entries: list[Entry] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    must_sync: bool = False

    def must_persist(self) -> bool:
        """Whether step 1 has anything to write: a Ready of heartbeats and their
        answers alone has not."""
        return bool(self.hard_state is not None or self.entries or self.snapshot is not None)
