"""The Raft core of the kubelab store: a pure, deterministic state machine.

Layers, as in etcd-io/raft: `core.Raft` (the algorithm), `rawnode.RawNode` (the
synchronous API producing `Ready` batches), and the asyncio driver that owns the WAL and
the transport (`controlplane.store.node`). Helpers: `log` (stable + unstable log),
`storage` (MemoryStorage), `tracker` (follower progress), `quorum`, `confchange`.
"""

from controlplane.store.raft.core import CAMPAIGN_TRANSFER, Config, Raft, RaftLogger, StdLogger
from controlplane.store.raft.errors import (
    CompactedError,
    ConfChangeError,
    ConfChangePendingError,
    ProposalDroppedError,
    RaftError,
    SnapOutOfDateError,
    StorageError,
    UnavailableError,
)
from controlplane.store.raft.rawnode import ProgressStatus, RawNode, Status
from controlplane.store.raft.storage import MemoryStorage, Storage
from controlplane.store.raft.tracker import ProgressState
from controlplane.store.raft.types import (
    NONE,
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    ReadState,
    Ready,
    Snapshot,
    SnapshotMetadata,
    SoftState,
    StateType,
)

__all__ = [
    "CAMPAIGN_TRANSFER",
    "NONE",
    "CompactedError",
    "ConfChange",
    "ConfChangeError",
    "ConfChangePendingError",
    "ConfChangeType",
    "ConfState",
    "Config",
    "Entry",
    "EntryType",
    "HardState",
    "MemoryStorage",
    "Message",
    "MessageType",
    "ProgressState",
    "ProgressStatus",
    "ProposalDroppedError",
    "Raft",
    "RaftError",
    "RaftLogger",
    "RawNode",
    "ReadState",
    "Ready",
    "SnapOutOfDateError",
    "Snapshot",
    "SnapshotMetadata",
    "SoftState",
    "StateType",
    "Status",
    "StdLogger",
    "Storage",
    "StorageError",
    "UnavailableError",
]
