"""A typed, synchronous client for etcd's v3 JSON gateway.

The package's modules, bottom up: `errors` (gRPC codes and their exceptions), `wire`
(typed results and requests), `kvstore` (`KVStore` and `WatchStream`, the interface the
apiserver is written against), `http` (kept-alive connections for unary calls), `streams`
(watch, keep-alive and snapshot streams) and `client` (`StoreClient`). Callers use the
names re-exported here: ``from kubelab.storeclient import StoreClient``.

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

Every call, unary or streamed, carries the current span's trace context (W3C
`traceparent`, `opentelemetry.propagate.inject`): the store continues the caller's trace
(the apiserver's request) with its own spans. Outside a span nothing is added.
"""

from __future__ import annotations

from kubelab.grpccodes import GrpcCode
from kubelab.storeclient.client import (
    StoreClient,
)
from kubelab.storeclient.errors import (
    CompactedError,
    DeadlineExceeded,
    FailedPrecondition,
    FutureRevisionError,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    StoreError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unreachable,
    error_from,
)
from kubelab.storeclient.kvstore import (
    KVStore,
    WatchStream,
)
from kubelab.storeclient.streams import (
    Watch,
)
from kubelab.storeclient.wire import (
    Alarm,
    AlarmResult,
    Bytesish,
    Compare,
    CompareOp,
    Delete,
    DeleteResult,
    Event,
    EventType,
    Get,
    Header,
    Health,
    KeyValue,
    LeaseGrant,
    LeaseKeepAlive,
    LeaseList,
    LeaseTimeToLive,
    Member,
    MemberAddResult,
    MemberList,
    Op,
    Put,
    PutResult,
    RangeResult,
    Response,
    SnapshotSaved,
    SortOrder,
    SortTarget,
    Status,
    Txn,
    TxnResult,
    WatchCreate,
    WatchResponse,
    prefix_end,
)

__all__ = [
    "Alarm",
    "AlarmResult",
    "Bytesish",
    "CompactedError",
    "Compare",
    "CompareOp",
    "DeadlineExceeded",
    "Delete",
    "DeleteResult",
    "Event",
    "EventType",
    "FailedPrecondition",
    "FutureRevisionError",
    "Get",
    "GrpcCode",
    "Header",
    "Health",
    "Internal",
    "InvalidArgument",
    "KVStore",
    "KeyValue",
    "LeaseGrant",
    "LeaseKeepAlive",
    "LeaseList",
    "LeaseTimeToLive",
    "Member",
    "MemberAddResult",
    "MemberList",
    "NotFound",
    "Op",
    "OutOfRange",
    "PermissionDenied",
    "Put",
    "PutResult",
    "RangeResult",
    "ResourceExhausted",
    "Response",
    "SnapshotSaved",
    "SortOrder",
    "SortTarget",
    "Status",
    "StoreClient",
    "StoreError",
    "Txn",
    "TxnResult",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Unreachable",
    "Watch",
    "WatchCreate",
    "WatchResponse",
    "WatchStream",
    "error_from",
    "prefix_end",
]
