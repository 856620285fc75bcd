"""The gateway's wire types: typed results parsed from its JSON (base64 keys and values,
64-bit integers as decimal strings, fields at their proto3 default left out), and the
requests (`Put`, `Get`, `Delete`, `Compare`, `Txn`, `WatchCreate`) that render the JSON
bodies.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(data: dict[str, Any], name: str) -> bytes:
    return base64.b64decode(data.get(name, ""))


def _int(data: dict[str, Any], name: str) -> int:
    return int(data.get(name, 0))


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def parse(cls, d: dict[str, Any]) -> KeyValue:
        return cls(
            key=unb64(d, "key"),
            value=unb64(d, "value"),
            create_revision=_int(d, "create_revision"),
            mod_revision=_int(d, "mod_revision"),
            version=_int(d, "version"),
            lease=_int(d, "lease"),
        )


@dataclass(frozen=True, slots=True)
class Header:
    cluster_id: int
    member_id: int
    revision: int
    raft_term: int

    @classmethod
    def parse(cls, d: dict[str, Any]) -> Header:
        h = d.get("header", {})
        return cls(
            cluster_id=_int(h, "cluster_id"),
            member_id=_int(h, "member_id"),
            revision=_int(h, "revision"),
            raft_term=_int(h, "raft_term"),
        )


@dataclass(frozen=True)
class Response:
    """What every gateway call answers: a header, and the raw JSON it was parsed from.

    `raw` is kept for output that must mirror the wire (``labctl -w json``) and for
    differential tests that compare whole answers.
    """

    header: Header
    raw: dict[str, Any] = field(default_factory=dict, kw_only=True, repr=False, compare=False)


@dataclass(frozen=True)
class RangeResult(Response):
    kvs: list[KeyValue]
    more: bool
    count: int

    @classmethod
    def parse(cls, d: dict[str, Any]) -> RangeResult:
        return cls(
            Header.parse(d),
            [KeyValue.parse(kv) for kv in d.get("kvs", [])],
            bool(d.get("more", False)),
            _int(d, "count"),
            raw=d,
        )


@dataclass(frozen=True)
class PutResult(Response):
    prev_kv: KeyValue | None

    @classmethod
    def parse(cls, d: dict[str, Any]) -> PutResult:
        prev = d.get("prev_kv")
        return cls(Header.parse(d), KeyValue.parse(prev) if prev else None, raw=d)


@dataclass(frozen=True)
class DeleteResult(Response):
    deleted: int
    prev_kvs: list[KeyValue]

    @classmethod
    def parse(cls, d: dict[str, Any]) -> DeleteResult:
        prev = [KeyValue.parse(kv) for kv in d.get("prev_kvs", [])]
        return cls(Header.parse(d), _int(d, "deleted"), prev, raw=d)


@dataclass(frozen=True)
class TxnResult(Response):
    succeeded: bool
    responses: list[RangeResult | PutResult | DeleteResult | TxnResult]

    @classmethod
    def parse(cls, d: dict[str, Any]) -> TxnResult:
        parsers: dict[str, Callable[[dict[str, Any]], Any]] = {
            "response_range": RangeResult.parse,
            "response_put": PutResult.parse,
            "response_delete_range": DeleteResult.parse,
            "response_txn": TxnResult.parse,
        }
        responses = []
        for op in d.get("responses", []):
            ((kind, body),) = op.items()
            responses.append(parsers[kind](body))
        return cls(Header.parse(d), bool(d.get("succeeded", False)), responses, raw=d)


@dataclass(frozen=True)
class LeaseGrant(Response):
    id: int
    ttl: int

    @classmethod
    def parse(cls, d: dict[str, Any]) -> Self:
        return cls(Header.parse(d), _int(d, "ID"), _int(d, "TTL"), raw=d)


@dataclass(frozen=True)
class LeaseKeepAlive(LeaseGrant):
    """A keep-alive's answer: the same fields as a grant's (the TTL granted again)."""


@dataclass(frozen=True)
class LeaseTimeToLive(Response):
    """`ttl` is -1 for a lease that expired, was revoked or never existed."""

    id: int
    ttl: int
    granted_ttl: int
    keys: list[bytes]

    @classmethod
    def parse(cls, d: dict[str, Any]) -> LeaseTimeToLive:
        keys = [base64.b64decode(k) for k in d.get("keys", [])]
        return cls(
            Header.parse(d), _int(d, "ID"), _int(d, "TTL"), _int(d, "grantedTTL"), keys, raw=d
        )


@dataclass(frozen=True)
class LeaseList(Response):
    ids: list[int]

    @classmethod
    def parse(cls, d: dict[str, Any]) -> LeaseList:
        return cls(Header.parse(d), [_int(lease, "ID") for lease in d.get("leases", [])], raw=d)


@dataclass(frozen=True, slots=True)
class Member:
    """A cluster member. A member added but not yet started has no name or client URLs."""

    id: int
    name: str
    peer_urls: list[str]
    client_urls: list[str]
    is_learner: bool

    @classmethod
    def parse(cls, d: dict[str, Any]) -> Member:
        return cls(
            id=_int(d, "ID"),
            name=str(d.get("name", "")),
            peer_urls=list(d.get("peerURLs", [])),
            client_urls=list(d.get("clientURLs", [])),
            is_learner=bool(d.get("isLearner", False)),
        )


@dataclass(frozen=True)
class MemberList(Response):
    members: list[Member]

    @classmethod
    def parse(cls, d: dict[str, Any]) -> MemberList:
        return cls(Header.parse(d), [Member.parse(m) for m in d.get("members", [])], raw=d)


@dataclass(frozen=True)
class MemberAddResult(Response):
    member: Member
    members: list[Member]

    @classmethod
    def parse(cls, d: dict[str, Any]) -> MemberAddResult:
        members = [Member.parse(m) for m in d.get("members", [])]
        return cls(Header.parse(d), Member.parse(d.get("member", {})), members, raw=d)


@dataclass(frozen=True)
class Status(Response):
    """One member's view of itself (``/v3/maintenance/status``)."""

    version: str
    db_size: int
    db_size_in_use: int
    leader: int
    raft_index: int
    raft_term: int
    raft_applied_index: int
    is_learner: bool
    errors: list[str]

    @property
    def is_leader(self) -> bool:
        return self.leader != 0 and self.leader == self.header.member_id

    @classmethod
    def parse(cls, d: dict[str, Any]) -> Status:
        return cls(
            Header.parse(d),
            version=str(d.get("version", "")),
            db_size=_int(d, "dbSize"),
            db_size_in_use=_int(d, "dbSizeInUse"),
            leader=_int(d, "leader"),
            raft_index=_int(d, "raftIndex"),
            raft_term=_int(d, "raftTerm"),
            raft_applied_index=_int(d, "raftAppliedIndex"),
            is_learner=bool(d.get("isLearner", False)),
            errors=list(d.get("errors", [])),
            raw=d,
        )


@dataclass(frozen=True, slots=True)
class Alarm:
    member_id: int
    alarm: str  # "NOSPACE" or "CORRUPT"


@dataclass(frozen=True)
class AlarmResult(Response):
    alarms: list[Alarm]

    @classmethod
    def parse(cls, d: dict[str, Any]) -> AlarmResult:
        alarms = [
            Alarm(_int(a, "memberID"), str(a.get("alarm", "NONE"))) for a in d.get("alarms", [])
        ]
        return cls(Header.parse(d), alarms, raw=d)


@dataclass(frozen=True, slots=True)
class Health:
    """``GET /health`` of one endpoint: etcd answers 503 with ``"health": "false"``."""

    endpoint: str
    healthy: bool
    reason: str


@dataclass(frozen=True, slots=True)
class SnapshotSaved:
    path: Path
    size: int
    endpoint: str


EventType = Literal["PUT", "DELETE"]


@dataclass(frozen=True, slots=True)
class Event:
    type: EventType
    kv: KeyValue
    prev_kv: KeyValue | None

    @classmethod
    def parse(cls, d: dict[str, Any]) -> Event:
        prev = d.get("prev_kv")
        kind: EventType = "DELETE" if d.get("type") == "DELETE" else "PUT"
        return cls(kind, KeyValue.parse(d.get("kv", {})), KeyValue.parse(prev) if prev else None)


@dataclass(frozen=True)
class WatchResponse(Response):
    """One frame of a watch stream.

    The first has `created`. A watch whose start revision was compacted gets one with
    `canceled` and the `compact_revision` to restart from (the stream ends there).
    A progress notification has no events and neither flag.
    """

    watch_id: int
    created: bool
    canceled: bool
    compact_revision: int
    cancel_reason: str
    events: list[Event]

    @classmethod
    def parse(cls, d: dict[str, Any]) -> WatchResponse:
        return cls(
            Header.parse(d),
            watch_id=_int(d, "watch_id"),
            created=bool(d.get("created", False)),
            canceled=bool(d.get("canceled", False)),
            compact_revision=_int(d, "compact_revision"),
            cancel_reason=str(d.get("cancel_reason", "")),
            events=[Event.parse(e) for e in d.get("events", [])],
            raw=d,
        )


Bytesish = bytes | str
SortOrder = Literal["NONE", "ASCEND", "DESCEND"]
SortTarget = Literal["KEY", "VERSION", "CREATE", "MOD", "VALUE"]


def as_bytes(data: Bytesish) -> bytes:
    return data.encode() if isinstance(data, str) else data


def prefix_end(prefix: Bytesish) -> bytes:
    """The range end that selects every key starting with `prefix` (etcd's rule).

    The last byte below 0xff is incremented and what follows it dropped; a prefix of only
    0xff bytes (or none) has no upper bound, which etcd spells ``b"\\0"``.
    """
    key = bytearray(as_bytes(prefix))
    while key:
        if key[-1] < 0xFF:
            key[-1] += 1
            return bytes(key)
        key.pop()
    return b"\0"


def key_range(key: Bytesish, range_end: Bytesish, prefix: bool) -> tuple[bytes, bytes]:
    """(key, range_end) on the wire; an empty key with `prefix` means every key."""
    k = as_bytes(key)
    if prefix:
        return (k or b"\0"), prefix_end(k)
    return k, as_bytes(range_end)


def set_field(body: dict[str, Any], name: str, value: object, wire: object = None) -> None:
    """Add a field only when it differs from its default, as the gateway itself does."""
    if value:
        body[name] = value if wire is None else wire


@dataclass(frozen=True)
class Put:
    key: bytes
    value: bytes
    lease: int = 0
    prev_kv: bool = False

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": b64(self.key), "value": b64(self.value)}
        set_field(out, "lease", self.lease, str(self.lease))
        set_field(out, "prev_kv", self.prev_kv)
        return out

    def op(self) -> dict[str, Any]:
        return {"request_put": self.body()}


@dataclass(frozen=True)
class Get:
    key: bytes
    range_end: bytes = b""
    limit: int = 0
    revision: int = 0
    keys_only: bool = False
    count_only: bool = False
    serializable: bool = False
    sort_order: SortOrder | None = None
    sort_target: SortTarget | None = None

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": b64(self.key)}
        set_field(out, "range_end", self.range_end, b64(self.range_end))
        set_field(out, "limit", self.limit, str(self.limit))
        set_field(out, "revision", self.revision, str(self.revision))
        set_field(out, "keys_only", self.keys_only)
        set_field(out, "count_only", self.count_only)
        set_field(out, "serializable", self.serializable)
        set_field(out, "sort_order", self.sort_order)
        set_field(out, "sort_target", self.sort_target)
        return out

    def op(self) -> dict[str, Any]:
        return {"request_range": self.body()}


@dataclass(frozen=True)
class Delete:
    key: bytes
    range_end: bytes = b""
    prev_kv: bool = False

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": b64(self.key)}
        set_field(out, "range_end", self.range_end, b64(self.range_end))
        set_field(out, "prev_kv", self.prev_kv)
        return out

    def op(self) -> dict[str, Any]:
        return {"request_delete_range": self.body()}


CompareOp = Literal["=", "!=", "<", ">"]
_COMPARE_RESULTS: dict[str, str] = {
    "=": "EQUAL",
    "!=": "NOT_EQUAL",
    "<": "LESS",
    ">": "GREATER",
}


@dataclass(frozen=True)
class Compare:
    """One condition of a txn; build it with `value`, `version`, `create`, `mod`, `lease`.

    ``Compare.mod(b"k", "=", 0)`` holds when ``k`` does not exist, which is how a
    create-if-absent is written.
    """

    key: bytes
    target: Literal["VALUE", "VERSION", "CREATE", "MOD", "LEASE"]
    op: CompareOp
    operand: int | bytes
    range_end: bytes = b""

    @classmethod
    def value(cls, key: Bytesish, op: CompareOp, value: Bytesish) -> Compare:
        return cls(as_bytes(key), "VALUE", op, as_bytes(value))

    @classmethod
    def version(cls, key: Bytesish, op: CompareOp, version: int) -> Compare:
        return cls(as_bytes(key), "VERSION", op, version)

    @classmethod
    def create(cls, key: Bytesish, op: CompareOp, revision: int) -> Compare:
        return cls(as_bytes(key), "CREATE", op, revision)

    @classmethod
    def mod(cls, key: Bytesish, op: CompareOp, revision: int) -> Compare:
        return cls(as_bytes(key), "MOD", op, revision)

    @classmethod
    def lease(cls, key: Bytesish, op: CompareOp, lease_id: int) -> Compare:
        return cls(as_bytes(key), "LEASE", op, lease_id)

    def body(self) -> dict[str, Any]:
        field_name = {
            "VALUE": "value",
            "VERSION": "version",
            "CREATE": "create_revision",
            "MOD": "mod_revision",
            "LEASE": "lease",
        }[self.target]
        operand = b64(self.operand) if isinstance(self.operand, bytes) else str(self.operand)
        out: dict[str, Any] = {
            "key": b64(self.key),
            "target": self.target,
            "result": _COMPARE_RESULTS[self.op],
            field_name: operand,  # sent even when zero: it selects the compared field
        }
        set_field(out, "range_end", self.range_end, b64(self.range_end))
        return out


@dataclass(frozen=True)
class Txn:
    """A transaction; also usable as an operation nested in another transaction."""

    compare: Sequence[Compare] = ()
    success: Sequence[Op] = ()
    failure: Sequence[Op] = ()

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        set_field(out, "compare", [c.body() for c in self.compare])
        set_field(out, "success", [o.op() for o in self.success])
        set_field(out, "failure", [o.op() for o in self.failure])
        return out

    def op(self) -> dict[str, Any]:
        return {"request_txn": self.body()}


Op = Put | Get | Delete | Txn


@dataclass(frozen=True)
class WatchCreate:
    """A watch's create request: `key` (or [key, range_end)) from `start_revision` (0:
    from now on), with each event's previous value if `prev_kv`, and progress
    notifications while quiet if `progress_notify`."""

    key: bytes
    range_end: bytes = b""
    start_revision: int = 0
    prev_kv: bool = False
    progress_notify: bool = False

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": b64(self.key)}
        set_field(out, "range_end", self.range_end, b64(self.range_end))
        set_field(out, "start_revision", self.start_revision, str(self.start_revision))
        set_field(out, "prev_kv", self.prev_kv)
        set_field(out, "progress_notify", self.progress_notify)
        return out
