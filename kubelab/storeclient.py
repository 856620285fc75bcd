"""A typed, synchronous client for etcd's v3 JSON gateway.

It covers the gateway's KV service (put, range, delete range, txn, compaction), leases
(grant, revoke, one keep-alive, time-to-live, list), cluster membership (list, add,
remove, promote), maintenance (status, alarms, snapshot), ``GET /health`` and watches.
The labctl CLI, the differential tests, the benchmarks and the apiserver's storage
layer all go through it.

Why the JSON gateway rather than gRPC: kubelab's store speaks exactly the gateway's
dialect (same paths, base64 keys and values, 64-bit integers as decimal strings, error
bodies ``{"error", "message", "code"}`` with gRPC status codes), so one client drives
kubelab's store and a real etcd alike. That is what makes differential testing cheap:
the same calls, against both, must give the same answers.

What the gateway does, as checked against etcd 3.4 (the tests pin it down):

* Fields holding their proto3 default are left out of responses (no ``"lease": "0"``,
  no ``"more": false``, a PUT event has no ``"type"``); the parsers here read a missing
  field as its default. Requests likewise only carry the fields that are set, which also
  keeps them within what a store serving a subset of the API accepts.
* Errors come with an HTTP status derived from the gRPC code (400, 404, 412, 503, ...).
  Several conditions share a code, so the message tells them apart: "required revision
  has been compacted" and "required revision is a future revision" are both OUT_OF_RANGE.
* Streaming calls (``/v3/watch``, ``/v3/lease/keepalive``, ``/v3/maintenance/snapshot``)
  answer with newline-separated frames ``{"result": {...}}``. An error before the stream
  starts is a plain error body; one after it is ``{"error": {"grpc_code", "http_code",
  "message", "http_status"}}`` (e.g. when the member shuts down). A keep-alive stream
  ends once the request body is consumed; a watch stream stays open until closed.
* A snapshot is the member's database file in chunks of at most 32 KiB, each saying how
  many bytes remain, followed by one last chunk with the database's SHA-256.

Endpoints are tried in order, starting from the last one that answered. A request that
never reached a member (connection refused, connect timeout, TLS handshake failure) is
retried on the next endpoint; so are reads that a member answers with UNAVAILABLE (no
leader). A write whose connection broke after it was sent is not retried, because it may
have been applied: the caller gets `Unavailable` saying so.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import http.client
import os
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar
from urllib.parse import urlsplit

import httptools

from kubelab import fastjson, pki, storehttp

# -- errors ------------------------------------------------------------------------------


class GrpcCode(enum.IntEnum):
    """gRPC status codes, as carried in the gateway's error bodies."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class StoreError(Exception):
    """An error answered by the store (or standing in for one), with its gRPC code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidArgument(StoreError):
    """The request is malformed (e.g. "etcdserver: key is not provided")."""


class DeadlineExceeded(StoreError):
    """No answer in time; a write may or may not have been applied."""


class NotFound(StoreError):
    """A lease or member that does not exist."""


class PermissionDenied(StoreError):
    """Authenticated, but not allowed."""


class Unauthenticated(StoreError):
    """Credentials missing or invalid."""


class ResourceExhausted(StoreError):
    """The store is out of space ("database space exceeded") or overloaded."""


class FailedPrecondition(StoreError):
    """The request conflicts with the current state (e.g. promoting a lagging learner)."""


class OutOfRange(StoreError):
    """A revision outside what the store holds."""


class CompactedError(OutOfRange):
    """The revision asked for has been compacted away."""


class FutureRevisionError(OutOfRange):
    """The revision asked for is newer than the store's current revision."""


class Unimplemented(StoreError):
    """The store does not serve this call (kubelab's store grows into the full API)."""


class Internal(StoreError):
    """The store failed internally."""


class Unavailable(StoreError):
    """No endpoint could serve the request: unreachable, or without a leader."""


class Unreachable(Unavailable):
    """Every endpoint failed; the message names each one and why (refused, TLS, ...)."""


_ERROR_CLASSES: dict[int, type[StoreError]] = {
    GrpcCode.INVALID_ARGUMENT: InvalidArgument,
    GrpcCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    GrpcCode.NOT_FOUND: NotFound,
    GrpcCode.PERMISSION_DENIED: PermissionDenied,
    GrpcCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    GrpcCode.FAILED_PRECONDITION: FailedPrecondition,
    GrpcCode.OUT_OF_RANGE: OutOfRange,
    GrpcCode.UNIMPLEMENTED: Unimplemented,
    GrpcCode.INTERNAL: Internal,
    GrpcCode.UNAVAILABLE: Unavailable,
    GrpcCode.UNAUTHENTICATED: Unauthenticated,
}


def error_from(code: int, message: str) -> StoreError:
    """The most specific `StoreError` for a gRPC code and message.

    OUT_OF_RANGE covers both a compacted and a future revision, so the message decides;
    callers (the apiserver's 410 Gone, a watcher's re-list) need to tell them apart.
    """
    if code == GrpcCode.OUT_OF_RANGE:
        if "required revision has been compacted" in message:
            return CompactedError(code, message)
        if "required revision is a future revision" in message:
            return FutureRevisionError(code, message)
    return _ERROR_CLASSES.get(code, StoreError)(code, message)


def _error_from_body(body: Any, http_status: int, where: str) -> StoreError:
    """The error in a gateway error body, either shape (see the module docstring)."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):  # an error frame inside a stream
            code = err.get("grpc_code", GrpcCode.UNKNOWN)
            return error_from(int(code), str(err.get("message", "")))
        if "code" in body:
            return error_from(int(body["code"]), str(body.get("message") or err or ""))
    if http_status in (404, 405):
        return Unimplemented(
            GrpcCode.UNIMPLEMENTED, f"{where} is not served here (HTTP {http_status})"
        )
    code = GrpcCode.UNAVAILABLE if http_status in (502, 503, 504) else GrpcCode.UNKNOWN
    return error_from(code, f"{where}: HTTP {http_status} without an error body")


# -- results -----------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(data: dict[str, Any], name: str) -> bytes:
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
            key=_unb64(d, "key"),
            value=_unb64(d, "value"),
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


# -- requests ----------------------------------------------------------------------------

Bytesish = bytes | str
SortOrder = Literal["NONE", "ASCEND", "DESCEND"]
SortTarget = Literal["KEY", "VERSION", "CREATE", "MOD", "VALUE"]


def _bytes(data: Bytesish) -> bytes:
    return data.encode() if isinstance(data, str) else data


def prefix_end(prefix: Bytesish) -> bytes:
    """The range end that selects every key starting with `prefix` (etcd's rule).

    The last byte below 0xff is incremented and what follows it dropped; a prefix of only
    0xff bytes (or none) has no upper bound, which etcd spells ``b"\\0"``.
    """
    key = bytearray(_bytes(prefix))
    while key:
        if key[-1] < 0xFF:
            key[-1] += 1
            return bytes(key)
        key.pop()
    return b"\0"


def _key_range(key: Bytesish, range_end: Bytesish, prefix: bool) -> tuple[bytes, bytes]:
    """(key, range_end) on the wire; an empty key with `prefix` means every key."""
    k = _bytes(key)
    if prefix:
        return (k or b"\0"), prefix_end(k)
    return k, _bytes(range_end)


def _set(body: dict[str, Any], name: str, value: object, wire: object = None) -> None:
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
        out: dict[str, Any] = {"key": _b64(self.key), "value": _b64(self.value)}
        _set(out, "lease", self.lease, str(self.lease))
        _set(out, "prev_kv", self.prev_kv)
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
        out: dict[str, Any] = {"key": _b64(self.key)}
        _set(out, "range_end", self.range_end, _b64(self.range_end))
        _set(out, "limit", self.limit, str(self.limit))
        _set(out, "revision", self.revision, str(self.revision))
        _set(out, "keys_only", self.keys_only)
        _set(out, "count_only", self.count_only)
        _set(out, "serializable", self.serializable)
        _set(out, "sort_order", self.sort_order)
        _set(out, "sort_target", self.sort_target)
        return out

    def op(self) -> dict[str, Any]:
        return {"request_range": self.body()}


@dataclass(frozen=True)
class Delete:
    key: bytes
    range_end: bytes = b""
    prev_kv: bool = False

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": _b64(self.key)}
        _set(out, "range_end", self.range_end, _b64(self.range_end))
        _set(out, "prev_kv", self.prev_kv)
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
        return cls(_bytes(key), "VALUE", op, _bytes(value))

    @classmethod
    def version(cls, key: Bytesish, op: CompareOp, version: int) -> Compare:
        return cls(_bytes(key), "VERSION", op, version)

    @classmethod
    def create(cls, key: Bytesish, op: CompareOp, revision: int) -> Compare:
        return cls(_bytes(key), "CREATE", op, revision)

    @classmethod
    def mod(cls, key: Bytesish, op: CompareOp, revision: int) -> Compare:
        return cls(_bytes(key), "MOD", op, revision)

    @classmethod
    def lease(cls, key: Bytesish, op: CompareOp, lease_id: int) -> Compare:
        return cls(_bytes(key), "LEASE", op, lease_id)

    def body(self) -> dict[str, Any]:
        field_name = {
            "VALUE": "value",
            "VERSION": "version",
            "CREATE": "create_revision",
            "MOD": "mod_revision",
            "LEASE": "lease",
        }[self.target]
        operand = _b64(self.operand) if isinstance(self.operand, bytes) else str(self.operand)
        out: dict[str, Any] = {
            "key": _b64(self.key),
            "target": self.target,
            "result": _COMPARE_RESULTS[self.op],
            field_name: operand,  # sent even when zero: it selects the compared field
        }
        _set(out, "range_end", self.range_end, _b64(self.range_end))
        return out


@dataclass(frozen=True)
class Txn:
    """A transaction; also usable as an operation nested in another transaction."""

    compare: Sequence[Compare] = ()
    success: Sequence[Op] = ()
    failure: Sequence[Op] = ()

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        _set(out, "compare", [c.body() for c in self.compare])
        _set(out, "success", [o.op() for o in self.success])
        _set(out, "failure", [o.op() for o in self.failure])
        return out

    def op(self) -> dict[str, Any]:
        return {"request_txn": self.body()}


Op = Put | Get | Delete | Txn


# -- transport ---------------------------------------------------------------------------


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it wraps (the OS's and the TLS layer's errors, as causes)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        nested = [e.__cause__, e.__context__, getattr(e, "reason", None)]
        nested.extend(e.args[:1])
        todo.extend(n for n in nested if isinstance(n, BaseException))


def _describe(exc: BaseException) -> str:
    """A short reason for a connection failure ("Connection refused", a TLS error)."""
    for e in _causes(exc):
        if isinstance(e, ssl.SSLCertVerificationError):
            return f"TLS: server certificate not trusted ({e.verify_message})"
        if isinstance(e, ssl.SSLError):
            return f"TLS: {e.reason or e}"
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
    return str(exc) or type(exc).__name__


_JSON_HEADERS = {"Content-Type": "application/json"}


class _Retry(Exception):
    """An endpoint failed in a way that may allow trying the next one."""

    def __init__(self, reason: str, never_sent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.never_sent = never_sent


def _keep_alive(sock: socket.socket) -> None:
    """Probe an idle stream's peer so a member that vanished (a partition, a powered-off
    machine: no FIN, no RST) ends a watch within ~15 s instead of never."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 3)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)


class _Stream:
    """One streamed gateway call on its own HTTP connection.

    Streams use `http.client` rather than the unary calls' pool (`storehttp`) because
    `close` must be able to interrupt a read blocked in another thread (a watch with no
    events): shutting the socket down does that, and only a connection we own exposes its
    socket.
    """

    def __init__(self, endpoint: str, conn: http.client.HTTPConnection) -> None:
        self.endpoint = endpoint
        self._conn = conn
        self._response: http.client.HTTPResponse | None = None
        self._closed = threading.Event()
        # http.client is not thread-safe: while a read is in progress, `close` only shuts
        # the socket down (which wakes the reader) and the reading thread releases the
        # connection. The lock orders the two.
        self._lock = threading.Lock()
        self._reading = False

    @property
    def closed(self) -> bool:
        """Whether `close` was called (so a broken read is expected, not an error)."""
        return self._closed.is_set()

    def open(self, path: str, body: dict[str, Any], timeout: float | None) -> None:
        """Send the request and read the response headers; raise the error if not 200."""
        self._conn.request("POST", path, body=fastjson.dumps(body), headers=_JSON_HEADERS)
        response = self._conn.getresponse()
        if response.status != 200:
            raw = response.read()
            self.close()
            try:
                parsed = fastjson.loads(raw)
            except ValueError:
                parsed = None
            raise _error_from_body(parsed, response.status, f"{self.endpoint}{path}")
        if self._conn.sock is not None:
            self._conn.sock.settimeout(timeout)
            _keep_alive(self._conn.sock)
        self._response = response

    def _readline(self) -> bytes:
        """The next line, or b"" at the end of the stream or once closed."""
        assert self._response is not None
        with self._lock:
            if self.closed:
                return b""
            self._reading = True
        try:
            return self._response.readline()
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if self.closed:
                return b""
            if isinstance(exc, TimeoutError):
                raise DeadlineExceeded(
                    GrpcCode.DEADLINE_EXCEEDED, f"{self.endpoint}: stream read timed out"
                ) from None
            raise Unavailable(
                GrpcCode.UNAVAILABLE, f"{self.endpoint}: stream broken: {_describe(exc)}"
            ) from None
        finally:
            with self._lock:
                self._reading = False
                if self.closed:
                    self._conn.close()

    def frames(self) -> Iterator[dict[str, Any]]:
        """The ``result`` of each frame until the server ends the stream or `close`."""
        while line := self._readline():
            if not line.strip():
                continue
            frame = fastjson.loads(line)
            if "result" not in frame:
                err = _error_from_body(frame, 200, self.endpoint)
                if err.code == GrpcCode.CANCELLED:
                    # Streams are cancelled by closing them, never through the stream, so
                    # this is the member's gateway shutting down: the member went away.
                    err = Unavailable(GrpcCode.UNAVAILABLE, f"{self.endpoint}: {err.message}")
                raise err
            result: dict[str, Any] = frame["result"]
            yield result

    def close(self) -> None:
        """End the stream; safe from any thread, and more than once."""
        self._closed.set()
        with self._lock:
            sock = self._conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):  # already disconnected
                    sock.shutdown(socket.SHUT_RDWR)
            if not self._reading:
                self._conn.close()


class Watch:
    """An open watch: iterate it for `WatchResponse` frames; `close` cancels it.

    `close` may be called from another thread while one is blocked waiting for events;
    iteration then simply stops. Iteration also stops after a canceled response (e.g. a
    compacted start revision). If the member goes away mid-stream, iteration raises
    `Unavailable`: re-watch from the last revision seen plus one.
    """

    def __init__(self, stream: _Stream) -> None:
        self._stream = stream
        self._frames = stream.frames()
        self._done = False

    @property
    def endpoint(self) -> str:
        return self._stream.endpoint

    def __iter__(self) -> Iterator[WatchResponse]:
        return self

    def __next__(self) -> WatchResponse:
        if self._done:
            raise StopIteration
        frame = next(self._frames, None)
        if frame is None:
            self._done = True
            if self._stream.closed:
                raise StopIteration
            raise Unavailable(GrpcCode.UNAVAILABLE, f"{self.endpoint}: watch stream ended")
        response = WatchResponse.parse(frame)
        if response.canceled:
            self.close()
        return response

    def close(self) -> None:
        self._done = True
        self._stream.close()

    def __enter__(self) -> Watch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_T = TypeVar("_T")

_SNAPSHOT_CHUNK_TIMEOUT = 60.0  # a member may take a while to start streaming a big DB


class StoreClient:
    """A client of one store cluster, reached through any of `endpoints`.

    Endpoints are URLs (``http://127.0.0.1:2379``, ``https://...``). With `ca_file` the
    server's certificate is checked against that CA (else against the system's); with
    `cert_file` and `key_file` the client presents its own certificate. `timeout` bounds
    each call (connect and answer), except that a watch waits for events indefinitely.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        ca_file: str | os.PathLike[str] | None = None,
        cert_file: str | os.PathLike[str] | None = None,
        key_file: str | os.PathLike[str] | None = None,
        timeout: float = 5.0,
    ) -> None:
        if not endpoints:
            raise ValueError("at least one endpoint is needed")
        if (cert_file is None) != (key_file is None):
            raise ValueError("a client certificate needs both cert_file and key_file")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.timeout = timeout
        self._tls_files = (ca_file, cert_file, key_file)
        self._preferred = 0
        self._ssl: ssl.SSLContext | None = None
        self._pools: dict[str, storehttp.Pool] = {}
        self.last_endpoint: str | None = None
        """The endpoint that answered the latest call."""

    def for_endpoint(self, endpoint: str) -> StoreClient:
        """A client of just `endpoint`, with the same TLS files and timeout."""
        ca, cert, key = self._tls_files
        return StoreClient(
            [endpoint], ca_file=ca, cert_file=cert, key_file=key, timeout=self.timeout
        )

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()

    def __enter__(self) -> StoreClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------

    def _ordered(self) -> list[tuple[int, str]]:
        n = len(self.endpoints)
        order = [(self._preferred + i) % n for i in range(n)]
        return [(i, self.endpoints[i]) for i in order]

    def _unreachable(self, failures: list[str]) -> Unreachable:
        return Unreachable(
            GrpcCode.UNAVAILABLE,
            "no store endpoint could serve the request: " + "; ".join(failures),
        )

    def _failover(self, attempt: Callable[[str], _T], *, idempotent: bool, what: str) -> _T:
        """Run `attempt(endpoint)` on each endpoint in turn until one answers.

        `attempt` raises `_Retry` for a failure that allows trying the next endpoint.
        """
        failures: list[str] = []
        for index, endpoint in self._ordered():
            try:
                result = attempt(endpoint)
            except _Retry as retry:
                if not (retry.never_sent or idempotent):
                    raise Unavailable(
                        GrpcCode.UNAVAILABLE,
                        f"{endpoint}: connection lost during {what} ({retry.reason}); "
                        "it may or may not have been applied",
                    ) from None
                failures.append(f"{endpoint} ({retry.reason})")
                continue
            self._preferred = index
            self.last_endpoint = endpoint
            return result
        raise self._unreachable(failures)

    def _post(self, path: str, body: dict[str, Any], *, idempotent: bool) -> dict[str, Any]:
        def attempt(endpoint: str) -> dict[str, Any]:
            try:
                status, raw = self._pool(endpoint).request("POST", path, fastjson.dumps(body))
            except storehttp.ResponseTimeout:
                raise DeadlineExceeded(
                    GrpcCode.DEADLINE_EXCEEDED,
                    f"{endpoint}: no answer to {path} within {self.timeout:g}s",
                ) from None
            except storehttp.ConnectFailed as exc:
                raise _Retry(exc.strerror or str(exc), never_sent=True) from None
            except (OSError, httptools.HttpParserError) as exc:
                raise _Retry(_describe(exc), never_sent=False) from None
            try:
                data = fastjson.loads(raw)
            except ValueError:
                data = None
            if status != 200 or not isinstance(data, dict):
                err = _error_from_body(data, status, endpoint + path)
                if isinstance(err, Unavailable) and idempotent:
                    raise _Retry(err.message, never_sent=False)
                raise err
            return data

        return self._failover(attempt, idempotent=idempotent, what=path)

    def _pool(self, endpoint: str) -> storehttp.Pool:
        """The kept-alive connections to `endpoint` for unary calls (`storehttp`: urllib3's
        request path was a quarter of the apiserver's CPU per pod create)."""
        pool = self._pools.get(endpoint)
        if pool is None:
            tls = self._ssl_context() if endpoint.startswith("https:") else None
            pool = self._pools[endpoint] = storehttp.Pool(endpoint, self.timeout, tls)
        return pool

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            ca, cert, key = (Path(f) if f is not None else None for f in self._tls_files)
            if ca is not None:
                self._ssl = pki.client_ssl_context(ca, cert, key)
            else:
                self._ssl = ssl.create_default_context()
                if cert is not None:
                    self._ssl.load_cert_chain(cert, key)
        return self._ssl

    def _stream(self, path: str, body: dict[str, Any], read_timeout: float | None) -> _Stream:
        """Open a streamed call on the first endpoint that answers (all are idempotent)."""

        def attempt(endpoint: str) -> _Stream:
            url = urlsplit(endpoint)
            host, port = url.hostname or "127.0.0.1", url.port
            conn: http.client.HTTPConnection
            if url.scheme == "https":
                conn = http.client.HTTPSConnection(
                    host, port, timeout=self.timeout, context=self._ssl_context()
                )
            else:
                conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
            stream = _Stream(endpoint, conn)
            try:
                conn.connect()
            except OSError as exc:
                conn.close()
                raise _Retry(_describe(exc), never_sent=True) from None
            try:
                stream.open(url.path + path, body, read_timeout)
            except TimeoutError:
                stream.close()
                raise DeadlineExceeded(
                    GrpcCode.DEADLINE_EXCEEDED,
                    f"{endpoint}: no answer to {path} within {self.timeout:g}s",
                ) from None
            except (OSError, http.client.HTTPException) as exc:
                stream.close()
                raise _Retry(_describe(exc), never_sent=False) from None
            except Unavailable as exc:
                raise _Retry(exc.message, never_sent=False) from None
            return stream

        return self._failover(attempt, idempotent=True, what=path)

    # -- KV ------------------------------------------------------------------------------

    def put(
        self, key: Bytesish, value: Bytesish, lease: int = 0, prev_kv: bool = False
    ) -> PutResult:
        body = Put(_bytes(key), _bytes(value), lease, prev_kv).body()
        return PutResult.parse(self._post("/v3/kv/put", body, idempotent=False))

    def get(
        self,
        key: Bytesish,
        range_end: Bytesish = b"",
        *,
        prefix: bool = False,
        limit: int = 0,
        revision: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
        serializable: bool = False,
        sort_order: SortOrder | None = None,
        sort_target: SortTarget | None = None,
    ) -> RangeResult:
        """Read `key`, or the keys in [key, range_end), or those starting with `key`."""
        k, end = _key_range(key, range_end, prefix)
        return self.range(
            Get(
                k,
                end,
                limit,
                revision,
                keys_only,
                count_only,
                serializable,
                sort_order,
                sort_target,
            )
        )

    def range(self, request: Get) -> RangeResult:
        """Run a prepared `Get` (as built for a txn) on its own."""
        return RangeResult.parse(self._post("/v3/kv/range", request.body(), idempotent=True))

    def delete(
        self,
        key: Bytesish,
        range_end: Bytesish = b"",
        *,
        prefix: bool = False,
        prev_kv: bool = False,
    ) -> DeleteResult:
        k, end = _key_range(key, range_end, prefix)
        body = Delete(k, end, prev_kv).body()
        return DeleteResult.parse(self._post("/v3/kv/deleterange", body, idempotent=False))

    def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[Op] = (),
        failure: Sequence[Op] = (),
    ) -> TxnResult:
        body = Txn(compare, success, failure).body()
        return TxnResult.parse(self._post("/v3/kv/txn", body, idempotent=False))

    def compact(self, revision: int, physical: bool = False) -> Response:
        """Discard history before `revision`; with `physical`, return once it is purged."""
        body: dict[str, Any] = {"revision": str(revision)}
        _set(body, "physical", physical)
        d = self._post("/v3/kv/compaction", body, idempotent=False)
        return Response(Header.parse(d), raw=d)

    # -- leases --------------------------------------------------------------------------

    def lease_grant(self, ttl: int, id: int = 0) -> LeaseGrant:
        """A lease of `ttl` seconds; the store picks the id unless `id` is given."""
        body: dict[str, Any] = {"TTL": str(ttl)}
        _set(body, "ID", id, str(id))
        return LeaseGrant.parse(self._post("/v3/lease/grant", body, idempotent=False))

    def lease_revoke(self, id: int) -> Response:
        d = self._post("/v3/lease/revoke", {"ID": str(id)}, idempotent=False)
        return Response(Header.parse(d), raw=d)

    def lease_keepalive_once(self, id: int) -> LeaseKeepAlive:
        """Refresh a lease once. Raises `NotFound` for a lease that is gone.

        The gateway answers a keep-alive as a stream that ends once the request body is
        read; the store reports a lease it does not know with a TTL of 0, which is turned
        into the error etcd's own client raises.
        """
        stream = self._stream("/v3/lease/keepalive", {"ID": str(id)}, self.timeout)
        try:
            frame = next(stream.frames(), None)
        finally:
            stream.close()
        if frame is None:
            raise Unavailable(
                GrpcCode.UNAVAILABLE, f"{stream.endpoint}: keep-alive stream ended empty"
            )
        result = LeaseKeepAlive.parse(frame)
        if result.ttl <= 0:
            raise NotFound(GrpcCode.NOT_FOUND, "etcdserver: requested lease not found")
        return result

    def lease_timetolive(self, id: int, keys: bool = False) -> LeaseTimeToLive:
        body: dict[str, Any] = {"ID": str(id)}
        _set(body, "keys", keys)
        return LeaseTimeToLive.parse(self._post("/v3/lease/timetolive", body, idempotent=True))

    def lease_leases(self) -> LeaseList:
        return LeaseList.parse(self._post("/v3/lease/leases", {}, idempotent=True))

    # -- cluster -------------------------------------------------------------------------

    def member_list(self) -> MemberList:
        return MemberList.parse(self._post("/v3/cluster/member/list", {}, idempotent=True))

    def member_add(self, peer_urls: Sequence[str], is_learner: bool = False) -> MemberAddResult:
        body: dict[str, Any] = {"peerURLs": list(peer_urls)}
        _set(body, "isLearner", is_learner)
        return MemberAddResult.parse(self._post("/v3/cluster/member/add", body, idempotent=False))

    def member_remove(self, id: int) -> MemberList:
        body = {"ID": str(id)}
        return MemberList.parse(self._post("/v3/cluster/member/remove", body, idempotent=False))

    def member_promote(self, id: int) -> MemberList:
        """Make a learner a voter; refused (`FailedPrecondition`) until it has caught up."""
        body = {"ID": str(id)}
        return MemberList.parse(self._post("/v3/cluster/member/promote", body, idempotent=False))

    # -- maintenance ---------------------------------------------------------------------

    def status(self) -> Status:
        return Status.parse(self._post("/v3/maintenance/status", {}, idempotent=True))

    def alarm_list(self) -> AlarmResult:
        body = {"action": "GET"}
        return AlarmResult.parse(self._post("/v3/maintenance/alarm", body, idempotent=True))

    def alarm_disarm(self, member_id: int = 0, alarm: str = "NONE") -> AlarmResult:
        """Disarm one alarm, or (by default) every raised alarm, as etcd's client does."""
        if member_id == 0 and alarm == "NONE":
            disarmed: list[Alarm] = []
            last = self.alarm_list()
            for a in last.alarms:
                last = self.alarm_disarm(a.member_id, a.alarm)
                disarmed.extend(last.alarms)
            return AlarmResult(last.header, disarmed, raw=last.raw)
        body = {"action": "DEACTIVATE", "memberID": str(member_id), "alarm": alarm}
        return AlarmResult.parse(self._post("/v3/maintenance/alarm", body, idempotent=False))

    def snapshot_save(self, path: str | os.PathLike[str]) -> SnapshotSaved:
        """Stream one member's snapshot into `path` (atomically: via ``path.part``).

        Which member: the first endpoint that answers. For etcd the file is its bbolt
        database with a SHA-256 trailer, which ``etcdctl snapshot restore`` verifies.
        """
        target = Path(path)
        part = target.with_name(target.name + ".part")
        stream = self._stream("/v3/maintenance/snapshot", {}, _SNAPSHOT_CHUNK_TIMEOUT)
        size = 0
        try:
            with open(part, "wb") as f:
                for frame in stream.frames():
                    blob = _unb64(frame, "blob")
                    f.write(blob)
                    size += len(blob)
                f.flush()
                os.fsync(f.fileno())
            if size == 0:
                raise Unavailable(
                    GrpcCode.UNAVAILABLE, f"{stream.endpoint}: snapshot stream ended empty"
                )
            os.replace(part, target)
        finally:
            stream.close()
            part.unlink(missing_ok=True)
        return SnapshotSaved(target, size, stream.endpoint)

    def health(self) -> Health:
        """``GET /health`` of the first endpoint that answers."""

        def attempt(endpoint: str) -> Health:
            try:
                status, raw = self._pool(endpoint).request("GET", "/health")
            except (OSError, httptools.HttpParserError) as exc:
                raise _Retry(_describe(exc), never_sent=True) from None
            try:
                data = fastjson.loads(raw)
            except ValueError:
                data = {}
            if not isinstance(data, dict):
                data = {}
            healthy = str(data.get("health")) == "true" and status == 200
            return Health(endpoint, healthy, str(data.get("reason", "")))

        return self._failover(attempt, idempotent=True, what="/health")

    # -- watch ---------------------------------------------------------------------------

    def watch(
        self,
        key: Bytesish,
        range_end: Bytesish = b"",
        *,
        prefix: bool = False,
        start_revision: int = 0,
        prev_kv: bool = False,
        progress_notify: bool = False,
    ) -> Watch:
        """Watch `key` (or a range or prefix) from `start_revision` (0: from now on).

        The stream is open when this returns; its first frame has ``created``. Close the
        returned `Watch` (or use it as a context manager) to cancel.
        """
        k, end = _key_range(key, range_end, prefix)
        create: dict[str, Any] = {"key": _b64(k)}
        _set(create, "range_end", end, _b64(end))
        _set(create, "start_revision", start_revision, str(start_revision))
        _set(create, "prev_kv", prev_kv)
        _set(create, "progress_notify", progress_notify)
        return Watch(self._stream("/v3/watch", {"create_request": create}, None))
