"""The MVCC store's values, requests and responses: etcd v3's `mvccpb` and
`etcdserverpb` messages as immutable Python values (the `Lease` record excepted)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypeAlias


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    create_revision: int
    mod_revision: int
    version: int
    value: bytes
    lease: int = 0


class EventType(enum.IntEnum):
    PUT = 0
    DELETE = 1


@dataclass(frozen=True, slots=True)
class Event:
    """One change. For a DELETE, `kv` is the tombstone: key and mod_revision, rest zero."""

    type: EventType
    kv: KeyValue
    prev_kv: KeyValue | None = None


@dataclass(slots=True)
class Lease:
    """A granted lease and the live keys attached to it (kept in sync by the store)."""

    id: int
    ttl: int
    keys: set[bytes] = field(default_factory=set)


# -- requests ------------------------------------------------------------------------


class LeaseEvent(enum.Enum):
    GRANTED = "granted"
    RENEWED = "renewed"
    REVOKED = "revoked"


class SortOrder(enum.IntEnum):
    NONE = 0
    ASCEND = 1
    DESCEND = 2


class SortTarget(enum.IntEnum):
    KEY = 0
    VERSION = 1
    CREATE = 2
    MOD = 3
    VALUE = 4


class CompareResult(enum.IntEnum):
    EQUAL = 0
    GREATER = 1
    LESS = 2
    NOT_EQUAL = 3


class CompareTarget(enum.IntEnum):
    VERSION = 0
    CREATE = 1
    MOD = 2
    VALUE = 3
    LEASE = 4


@dataclass(frozen=True, slots=True)
class RangeRequest:
    """etcd's RangeRequest. range_end: b"" one key, b"\\0" every key >= key, else [key, end)."""

    key: bytes
    range_end: bytes = b""
    limit: int = 0
    revision: int = 0
    keys_only: bool = False
    count_only: bool = False
    sort_order: SortOrder = SortOrder.NONE
    sort_target: SortTarget = SortTarget.KEY
    min_mod_revision: int = 0
    max_mod_revision: int = 0
    min_create_revision: int = 0
    max_create_revision: int = 0


@dataclass(frozen=True, slots=True)
class PutRequest:
    key: bytes
    value: bytes = b""
    lease: int = 0
    prev_kv: bool = False
    ignore_value: bool = False
    ignore_lease: bool = False


@dataclass(frozen=True, slots=True)
class DeleteRangeRequest:
    key: bytes
    range_end: bytes = b""
    prev_kv: bool = False


@dataclass(frozen=True, slots=True)
class Compare:
    """A txn guard on one key or a range of keys (then it must hold for every live key).

    `value` is bytes for the VALUE target and an int for the others; etcd's protobuf keeps
    it in a oneof, which a Python union cannot tie to the target, hence the check here.
    """

    result: CompareResult
    target: CompareTarget
    key: bytes
    value: int | bytes
    range_end: bytes = b""

    def __post_init__(self) -> None:
        if isinstance(self.value, bytes) != (self.target is CompareTarget.VALUE):
            raise TypeError(
                f"a {self.target.name} compare takes "
                f"{'bytes' if self.target is CompareTarget.VALUE else 'an int'}, "
                f"not {type(self.value).__name__}"
            )


@dataclass(frozen=True, slots=True)
class TxnRequest:
    compare: list[Compare] = field(default_factory=list)
    success: list[RequestOp] = field(default_factory=list)
    failure: list[RequestOp] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    """`physical` is accepted for etcd parity; compaction here is always complete on return."""

    revision: int
    physical: bool = False


@dataclass(frozen=True, slots=True)
class LeaseGrantRequest:
    """The server picks `id` before proposing (etcd picks a random one; we must not)."""

    id: int
    ttl: int


@dataclass(frozen=True, slots=True)
class LeaseRevokeRequest:
    id: int


@dataclass(frozen=True, slots=True)
class LeaseKeepAliveRequest:
    """A keep-alive, replicated so that every member (the next leader included) hears of
    it; the store only checks the lease exists. See `controlplane.store.lessor`."""

    id: int


RequestOp: TypeAlias = RangeRequest | PutRequest | DeleteRangeRequest | TxnRequest
Request: TypeAlias = (
    RequestOp | CompactionRequest | LeaseGrantRequest | LeaseRevokeRequest | LeaseKeepAliveRequest
)


# -- responses -----------------------------------------------------------------------
# `revision` is what etcd puts in the response header: the store revision after the
# request. In a txn each op's response carries the revision as of that op (the txn's new
# revision once it has written something), and a nested txn's response carries 0: etcd
# 3.4 leaves that header empty.


@dataclass(frozen=True, slots=True)
class RangeResponse:
    kvs: list[KeyValue]
    more: bool
    count: int
    revision: int


@dataclass(frozen=True, slots=True)
class PutResponse:
    prev_kv: KeyValue | None
    revision: int


@dataclass(frozen=True, slots=True)
class DeleteRangeResponse:
    deleted: int
    prev_kvs: list[KeyValue]
    revision: int


@dataclass(frozen=True, slots=True)
class TxnResponse:
    succeeded: bool
    responses: list[ResponseOp]
    revision: int


@dataclass(frozen=True, slots=True)
class CompactionResponse:
    revision: int


@dataclass(frozen=True, slots=True)
class LeaseGrantResponse:
    id: int
    ttl: int
    revision: int


@dataclass(frozen=True, slots=True)
class LeaseRevokeResponse:
    revision: int


@dataclass(frozen=True, slots=True)
class LeaseKeepAliveResponse:
    id: int
    ttl: int
    revision: int


ResponseOp: TypeAlias = RangeResponse | PutResponse | DeleteRangeResponse | TxnResponse
Response: TypeAlias = (
    ResponseOp
    | CompactionResponse
    | LeaseGrantResponse
    | LeaseRevokeResponse
    | LeaseKeepAliveResponse
)
