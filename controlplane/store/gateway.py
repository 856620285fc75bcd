"""etcd v3's JSON gateway encoding: JSON bodies <-> MVCC requests and responses.

etcd serves its gRPC API as JSON through grpc-gateway, with the protobuf field names as
written in the .proto files (`create_revision`, `prev_kv`, but `ID` and `TTL` for leases),
bytes as base64, 64-bit integers as strings, enums by name, and fields holding their
default value (0, false, empty) left out. kubelab's store speaks exactly that, so that the
same client (and the apiserver's storage layer) works against either.

Every integer is checked against the range of its protobuf type (int64, or uint64 for
member ids) as etcd's decoding does, so nothing out of range is ever proposed or reaches
msgpack. Where we are stricter than etcd: an unknown field, an enum number that names no
value, a txn op or watch request holding two kinds at once, and txns nested more than
`MAX_TXN_DEPTH` deep are a 400 with a message naming the field (etcd's gateway ignores
unknown fields silently, which hides typos such as "prefix": true, and acts on meaningless
enum numbers). docs/store-differences.md lists these differences with their reasons.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from dataclasses import dataclass
from typing import Any

from controlplane.store import mvcc
from controlplane.store.watch import WatchBatch


class BadRequest(ValueError):
    """A request body that does not decode; the message names the field."""


INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)
MAX_TXN_DEPTH = 16
"""Txns nested deeper are refused: every member applies a txn recursively, and a depth
that exhausted Python's stack on apply would stop the whole cluster. etcd has no such
limit below its JSON parser's 10,000 levels; no client nests txns at all."""

MAX_JSON_DEPTH = 100
"""Bodies nested deeper are refused before parsing ("exceeded max depth", as etcd says
at 10,000 levels): Python's parser recurses, and near its recursion limit even
unrelated finalizers fail. A txn nested MAX_TXN_DEPTH deep needs about 50 levels."""
_STRUCTURE = re.compile(r'[\[\]{}]|"[^"\\]*(?:\\.[^"\\]*)*"')

# A JSON number without fraction or exponent, the only form protobuf's JSON decoding
# takes for an integer in a string ("010", "1e3", "+1" and "1_000" are refused).
_INTEGER = re.compile(r"\s*(-?(?:0|[1-9][0-9]*))\s*", re.ASCII)


# -- decoding requests ----------------------------------------------------------------


def check_depth(text: str) -> None:
    """BadRequest if the JSON `text` nests deeper than MAX_JSON_DEPTH. Cheap for what
    clients send: only a text with that many opening brackets is scanned."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return
    depth = 0
    for match in _STRUCTURE.finditer(text):
        char = text[match.start()]
        if char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise BadRequest(f"malformed JSON: exceeded max depth ({MAX_JSON_DEPTH})")
        elif char in "]}":
            depth -= 1


def fields(body: Any, allowed: set[str], where: str) -> dict[str, Any]:
    """`body` as an object with only `allowed` keys; BadRequest naming the rest."""
    if not isinstance(body, dict):
        raise BadRequest(f"{where}: expected a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise BadRequest(f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")
    return body


def _bytes(body: dict[str, Any], name: str) -> bytes:
    value = body.get(name)
    if value is None:
        return b""
    if not isinstance(value, str):
        raise BadRequest(f"{name}: must be a base64 string")
    try:
        # Go's base64 decoder, which etcd's gateway uses, skips line breaks.
        return base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):  # ValueError: a character beyond ASCII
        raise BadRequest(f"{name}: not valid base64 (keys and values are base64)") from None


def _int(body: dict[str, Any], name: str, bounds: tuple[int, int] = INT64) -> int:
    """An integer field; `bounds` is the range of its protobuf type."""
    value = body.get(name)
    if value is None:
        return 0
    if isinstance(value, str):
        match = _INTEGER.fullmatch(value)
        if match is None:
            raise BadRequest(f"{name}: {value[:40]!r} is not an integer")
        digits = match.group(1)
        if len(digits) > 21:  # beyond any 64-bit value (and Python's int() digit limit)
            raise BadRequest(f"{name}: {digits[:24]}... is out of range for a 64-bit integer")
        value = int(digits)
    elif isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{name}: must be an integer (or a string holding one)")
    low, high = bounds
    if not low <= value <= high:
        kind = "uint64" if bounds == UINT64 else "int64"
        raise BadRequest(f"{name}: {value} is out of range for {kind} ({low} to {high})")
    return value


def _bool(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{name}: must be true or false")
    return value


def _enum(body: dict[str, Any], name: str, kind: type[Any]) -> Any:
    """An enum by name or number. A number that names no value is refused: etcd acts on
    it (a compare with `result: 7` is always true, `sort_target: 7` crashes etcd 3.4)."""
    value = body.get(name)
    if value is None:
        return kind(0)
    try:
        if isinstance(value, str):
            return kind[value]
        if isinstance(value, int) and not isinstance(value, bool):
            return kind(value)
    except (KeyError, ValueError):
        pass
    names = [m.name for m in kind]
    raise BadRequest(
        f"{name}: {str(value)[:40]!r} is not one of {names} (or 0 to {len(names) - 1})"
    )


RANGE_FIELDS = {
    "key", "range_end", "limit", "revision", "sort_order", "sort_target", "serializable",
    "keys_only", "count_only", "min_mod_revision", "max_mod_revision",
    "min_create_revision", "max_create_revision",
}  # fmt: skip


def range_request(body: Any) -> tuple[mvcc.RangeRequest, bool]:
    """The request, and whether the client asked for a serializable read."""
    b = fields(body, RANGE_FIELDS, "range")
    req = mvcc.RangeRequest(
        key=_bytes(b, "key"),
        range_end=_bytes(b, "range_end"),
        limit=_int(b, "limit"),
        revision=_int(b, "revision"),
        keys_only=_bool(b, "keys_only"),
        count_only=_bool(b, "count_only"),
        sort_order=_enum(b, "sort_order", mvcc.SortOrder),
        sort_target=_enum(b, "sort_target", mvcc.SortTarget),
        min_mod_revision=_int(b, "min_mod_revision"),
        max_mod_revision=_int(b, "max_mod_revision"),
        min_create_revision=_int(b, "min_create_revision"),
        max_create_revision=_int(b, "max_create_revision"),
    )
    return req, _bool(b, "serializable")


def put_request(body: Any) -> mvcc.PutRequest:
    b = fields(body, {"key", "value", "lease", "prev_kv", "ignore_value", "ignore_lease"}, "put")
    return mvcc.PutRequest(
        key=_bytes(b, "key"),
        value=_bytes(b, "value"),
        lease=_int(b, "lease"),
        prev_kv=_bool(b, "prev_kv"),
        ignore_value=_bool(b, "ignore_value"),
        ignore_lease=_bool(b, "ignore_lease"),
    )


def delete_request(body: Any) -> mvcc.DeleteRangeRequest:
    b = fields(body, {"key", "range_end", "prev_kv"}, "deleterange")
    return mvcc.DeleteRangeRequest(_bytes(b, "key"), _bytes(b, "range_end"), _bool(b, "prev_kv"))


def _compare(body: Any) -> mvcc.Compare:
    targets = {"version", "create_revision", "mod_revision", "value", "lease"}
    b = fields(body, {"result", "target", "key", "range_end"} | targets, "compare")
    target = _enum(b, "target", mvcc.CompareTarget)
    value: int | bytes
    if target is mvcc.CompareTarget.VALUE:
        value = _bytes(b, "value")
    else:
        name = {
            mvcc.CompareTarget.VERSION: "version",
            mvcc.CompareTarget.CREATE: "create_revision",
            mvcc.CompareTarget.MOD: "mod_revision",
            mvcc.CompareTarget.LEASE: "lease",
        }[target]
        value = _int(b, name)
    return mvcc.Compare(
        _enum(b, "result", mvcc.CompareResult),
        target,
        _bytes(b, "key"),
        value,
        _bytes(b, "range_end"),
    )


def _request_op(body: Any, depth: int) -> mvcc.RequestOp:
    """One op of a txn. Two kinds in one op are refused: etcd keeps the last in the
    .proto's order and silently drops the other."""
    kinds = {"request_range", "request_put", "request_delete_range", "request_txn"}
    b = fields(body, kinds, "request op")
    if len(b) != 1:
        raise BadRequest(f"request op: exactly one of {sorted(kinds)} is needed")
    kind, inner = next(iter(b.items()))
    if kind == "request_range":
        return range_request(inner)[0]
    if kind == "request_put":
        return put_request(inner)
    if kind == "request_delete_range":
        return delete_request(inner)
    return txn_request(inner, depth + 1)


def txn_request(body: Any, depth: int = 1) -> mvcc.TxnRequest:
    if depth > MAX_TXN_DEPTH:
        raise BadRequest(f"txn: nested more than {MAX_TXN_DEPTH} levels deep")
    b = fields(body, {"compare", "success", "failure"}, "txn")
    lists = {}
    for name in ("compare", "success", "failure"):
        value = b.get(name, [])
        if not isinstance(value, list):
            raise BadRequest(f"txn.{name}: must be a list")
        lists[name] = value
    return mvcc.TxnRequest(
        [_compare(c) for c in lists["compare"]],
        [_request_op(op, depth) for op in lists["success"]],
        [_request_op(op, depth) for op in lists["failure"]],
    )


@dataclass(frozen=True, slots=True)
class WatchCreate:
    key: bytes
    range_end: bytes
    start_revision: int
    prev_kv: bool
    progress_notify: bool
    filter_put: bool
    filter_delete: bool
    watch_id: int


@dataclass(frozen=True, slots=True)
class WatchCancel:
    watch_id: int


@dataclass(frozen=True, slots=True)
class WatchProgress:
    pass


WATCH_CREATE_FIELDS = {
    "key", "range_end", "start_revision", "progress_notify", "filters", "prev_kv",
    "watch_id", "fragment",
}  # fmt: skip
_WATCH_FILTERS = {"NOPUT": "NOPUT", 0: "NOPUT", "NODELETE": "NODELETE", 1: "NODELETE"}


def _is_filter(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool) and value in _WATCH_FILTERS


def watch_request(body: Any) -> WatchCreate | WatchCancel | WatchProgress | None:
    """One request of a watch stream; None for an empty one, which etcd ignores.
    `fragment` is accepted and has no effect: responses are never split, which a client
    that asked for fragments reads just as well."""
    b = fields(body, {"create_request", "cancel_request", "progress_request"}, "watch")
    if not b:
        return None
    if len(b) != 1:
        raise BadRequest("watch: exactly one of create_request, cancel_request or "
                         "progress_request is needed")  # fmt: skip
    if "cancel_request" in b:
        return WatchCancel(_int(fields(b["cancel_request"], {"watch_id"}, "cancel_request"),
                                "watch_id"))  # fmt: skip
    if "progress_request" in b:
        fields(b["progress_request"], set(), "progress_request")
        return WatchProgress()
    c = fields(b["create_request"], WATCH_CREATE_FIELDS, "create_request")
    filters = c.get("filters") or []
    if not isinstance(filters, list) or not all(_is_filter(f) for f in filters):
        raise BadRequest("filters: must be a list of NOPUT and NODELETE (or 0 and 1)")
    named = {_WATCH_FILTERS[f] for f in filters}
    _bool(c, "fragment")  # checked, then ignored (see above)
    return WatchCreate(
        key=_bytes(c, "key"),
        range_end=_bytes(c, "range_end"),
        start_revision=_int(c, "start_revision"),
        prev_kv=_bool(c, "prev_kv"),
        progress_notify=_bool(c, "progress_notify"),
        filter_put="NOPUT" in named,
        filter_delete="NODELETE" in named,
        watch_id=_int(c, "watch_id"),
    )


def compaction_request(body: Any) -> mvcc.CompactionRequest:
    b = fields(body, {"revision", "physical"}, "compaction")
    return mvcc.CompactionRequest(_int(b, "revision"), _bool(b, "physical"))


class AlarmAction(enum.IntEnum):
    GET = 0
    ACTIVATE = 1
    DEACTIVATE = 2


class AlarmType(enum.IntEnum):
    NONE = 0
    NOSPACE = 1
    CORRUPT = 2


def alarm_request(body: Any) -> tuple[AlarmAction, int, AlarmType]:
    """(action, memberID, alarm) of an AlarmRequest."""
    b = fields(body, {"action", "memberID", "alarm"}, "alarm")
    member = _int(b, "memberID", UINT64)
    return _enum(b, "action", AlarmAction), member, _enum(b, "alarm", AlarmType)


def lease_id(body: Any) -> int:
    return _int(fields(body, {"ID"}, "lease"), "ID")


def member_id(body: Any, where: str) -> int:
    """The ID of a member remove or promote (a uint64, where lease ids are int64)."""
    return _int(fields(body, {"ID"}, where), "ID", UINT64)


def lease_grant(body: Any) -> tuple[int, int]:
    """(requested TTL, requested ID or 0)."""
    b = fields(body, {"TTL", "ID"}, "lease grant")
    return _int(b, "TTL"), _int(b, "ID")


def lease_timetolive(body: Any) -> tuple[int, bool]:
    b = fields(body, {"ID", "keys"}, "lease timetolive")
    return _int(b, "ID"), _bool(b, "keys")


# -- encoding responses ---------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kv_json(kv: mvcc.KeyValue, keys_only: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"key": b64(kv.key)}
    if kv.create_revision:
        out["create_revision"] = str(kv.create_revision)
    if kv.mod_revision:
        out["mod_revision"] = str(kv.mod_revision)
    if kv.version:
        out["version"] = str(kv.version)
    if kv.value and not keys_only:
        out["value"] = b64(kv.value)
    if kv.lease:
        out["lease"] = str(kv.lease)
    return out


def event_json(ev: mvcc.Event) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if ev.type is mvcc.EventType.DELETE:
        out["type"] = "DELETE"
    out["kv"] = kv_json(ev.kv)
    if ev.prev_kv is not None:
        out["prev_kv"] = kv_json(ev.prev_kv)
    return out


def range_json(resp: mvcc.RangeResponse, keys_only: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if resp.kvs:
        out["kvs"] = [kv_json(kv, keys_only) for kv in resp.kvs]
    if resp.more:
        out["more"] = True
    if resp.count:
        out["count"] = str(resp.count)
    return out


def put_json(resp: mvcc.PutResponse) -> dict[str, Any]:
    return {"prev_kv": kv_json(resp.prev_kv)} if resp.prev_kv is not None else {}


def delete_json(resp: mvcc.DeleteRangeResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if resp.deleted:
        out["deleted"] = str(resp.deleted)
    if resp.prev_kvs:
        out["prev_kvs"] = [kv_json(kv) for kv in resp.prev_kvs]
    return out


def txn_json(
    resp: mvcc.TxnResponse, header: dict[str, str], req: mvcc.TxnRequest
) -> dict[str, Any]:
    ops = req.success if resp.succeeded else req.failure
    out: dict[str, Any] = {"header": header}
    if resp.succeeded:
        out["succeeded"] = True
    if resp.responses:
        out["responses"] = [
            _response_op_json(r, op) for r, op in zip(resp.responses, ops, strict=True)
        ]
    return out


def _response_op_json(resp: mvcc.ResponseOp, op: mvcc.RequestOp) -> dict[str, Any]:
    # Each op's header carries only the revision as of that op (etcd fills in the ids
    # and term of the top-level header alone); a nested txn's is empty.
    h = {"revision": str(resp.revision)} if resp.revision else {}
    if isinstance(resp, mvcc.RangeResponse):
        keys_only = isinstance(op, mvcc.RangeRequest) and op.keys_only
        return {"response_range": {"header": h, **range_json(resp, keys_only)}}
    if isinstance(resp, mvcc.PutResponse):
        return {"response_put": {"header": h, **put_json(resp)}}
    if isinstance(resp, mvcc.DeleteRangeResponse):
        return {"response_delete_range": {"header": h, **delete_json(resp)}}
    assert isinstance(op, mvcc.TxnRequest)
    inner = txn_json(resp, h, op)
    if not h:
        inner.pop("header")
        inner = {"header": {}, **inner}
    return {"response_txn": inner}


def watch_batch_json(batch: WatchBatch, created_at: int) -> tuple[dict[str, Any], int | None]:
    """A watch frame's fields for `batch` (events or a cancellation), and the revision its
    header carries (None: the current one; 0: none), for a watch created at revision
    `created_at`.

    etcd reports a compacted start revision with `compact_revision` and a header without
    a revision (and no cancel_reason). For events, the header holds the store's revision
    while history from before the watch was created is caught up on, else the events'.
    """
    if batch.canceled:
        if not batch.compact_revision:
            return {"canceled": True}, None
        return {"canceled": True, "compact_revision": str(batch.compact_revision)}, 0
    if batch.events[0].kv.mod_revision <= created_at:
        revision = batch.revision
    else:
        revision = batch.events[-1].kv.mod_revision
    return {"events": [event_json(e) for e in batch.events]}, revision
