"""etcd v3's MVCC key-value store as a Raft state machine: what every store member
applies from the log, and serves reads and watches from.

The package's modules, bottom up: `errors` (etcd's refusals, with their gRPC codes and
messages), `types` (key-values, events, leases, and the requests and responses),
`validation` (the checks made before proposing), `encoding` (the bytes of a command and
of a snapshot) and `store` (`MVCCStore`, the state machine itself: its docstring tells
the data model). Callers use the names re-exported here: ``from controlplane.store import
mvcc`` and ``mvcc.MVCCStore``, ``mvcc.PutRequest``, ...
"""

from __future__ import annotations

from controlplane.store.mvcc.encoding import (
    encode_command,
)
from controlplane.store.mvcc.errors import (
    ERR_KEY_NOT_FOUND,
    CompactedError,
    CorruptDataError,
    FutureRevisionError,
    InvalidRequestError,
    LeaseExistsError,
    LeaseNotFoundError,
    LeaseTTLTooLargeError,
    MVCCError,
)
from controlplane.store.mvcc.store import (
    DEFAULT_MIN_LEASE_TTL,
    MVCCStore,
)
from controlplane.store.mvcc.types import (
    CompactionRequest,
    CompactionResponse,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    Event,
    EventType,
    KeyValue,
    Lease,
    LeaseEvent,
    LeaseGrantRequest,
    LeaseGrantResponse,
    LeaseKeepAliveRequest,
    LeaseKeepAliveResponse,
    LeaseRevokeRequest,
    LeaseRevokeResponse,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    Request,
    RequestOp,
    Response,
    ResponseOp,
    SortOrder,
    SortTarget,
    TxnRequest,
    TxnResponse,
)
from controlplane.store.mvcc.validation import (
    MAX_TXN_OPS,
    check_request,
    is_read_only,
)

__all__ = [
    "DEFAULT_MIN_LEASE_TTL",
    "ERR_KEY_NOT_FOUND",
    "MAX_TXN_OPS",
    "CompactedError",
    "CompactionRequest",
    "CompactionResponse",
    "Compare",
    "CompareResult",
    "CompareTarget",
    "CorruptDataError",
    "DeleteRangeRequest",
    "DeleteRangeResponse",
    "Event",
    "EventType",
    "FutureRevisionError",
    "InvalidRequestError",
    "KeyValue",
    "Lease",
    "LeaseEvent",
    "LeaseExistsError",
    "LeaseGrantRequest",
    "LeaseGrantResponse",
    "LeaseKeepAliveRequest",
    "LeaseKeepAliveResponse",
    "LeaseNotFoundError",
    "LeaseRevokeRequest",
    "LeaseRevokeResponse",
    "LeaseTTLTooLargeError",
    "MVCCError",
    "MVCCStore",
    "PutRequest",
    "PutResponse",
    "RangeRequest",
    "RangeResponse",
    "Request",
    "RequestOp",
    "Response",
    "ResponseOp",
    "SortOrder",
    "SortTarget",
    "TxnRequest",
    "TxnResponse",
    "check_request",
    "encode_command",
    "is_read_only",
]
