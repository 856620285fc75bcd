"""The bytes of the MVCC store: the commands proposed through Raft and the snapshot
image of the whole state.

A command is a msgpack array: a tag, then the request's fields in declaration order.
Enums travel as their etcd numbers, nested requests as nested arrays. A snapshot image is
a msgpack array too: a format number, the revision and compaction point, the retained
records (see `MVCCStore.snapshot` for what they are) and the leases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from controlplane.store.mvcc.errors import CorruptDataError
from controlplane.store.mvcc.types import (
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    KeyValue,
    LeaseGrantRequest,
    LeaseKeepAliveRequest,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    Request,
    RequestOp,
    SortOrder,
    SortTarget,
    TxnRequest,
)

_SNAPSHOT_FORMAT = 1


def encode_command(req: Request) -> bytes:
    """The bytes to propose for `req`; `MVCCStore.apply` decodes them."""
    return _pack(_request_wire(req))


@dataclass(frozen=True, slots=True)
class SnapshotImage:
    """What a snapshot holds of an `MVCCStore`: its revision and compaction point (as
    etcd keeps it: -1 before the first compaction), the records kept from before the
    compact revision, the records of each retained revision in order, and the leases
    as (id, TTL)."""

    revision: int
    compact_revision: int
    base: list[KeyValue]
    revisions: list[list[KeyValue]]
    leases: list[tuple[int, int]]


def encode_snapshot(image: SnapshotImage) -> bytes:
    return _pack(
        [
            _SNAPSHOT_FORMAT,
            image.revision,
            image.compact_revision,
            [_record_wire(kv) for kv in image.base],
            [[_record_wire(kv) for kv in kvs] for kvs in image.revisions],
            [[lease_id, ttl] for lease_id, ttl in image.leases],
        ]
    )


def decode_snapshot(data: bytes) -> SnapshotImage:
    """The image `encode_snapshot` made; raises ValueError, TypeError (or IndexError) for
    bytes it did not make."""
    fmt, rev, compact_rev, base, revisions, leases = msgpack.unpackb(data, raw=False)
    if fmt != _SNAPSHOT_FORMAT:
        raise ValueError(f"unknown snapshot format {fmt!r}")
    return SnapshotImage(
        int(rev),
        int(compact_rev),
        [_record_unwire(row) for row in base],
        [[_record_unwire(row) for row in rows] for rows in revisions],
        [(int(lease_id), int(ttl)) for lease_id, ttl in leases],
    )


def _pack(obj: Any) -> bytes:
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


def _request_wire(req: Request) -> list[Any]:
    match req:
        case RangeRequest():
            return [
                "range",
                req.key,
                req.range_end,
                req.limit,
                req.revision,
                req.keys_only,
                req.count_only,
                int(req.sort_order),
                int(req.sort_target),
                req.min_mod_revision,
                req.max_mod_revision,
                req.min_create_revision,
                req.max_create_revision,
            ]
        case PutRequest():
            return [
                "put",
                req.key,
                req.value,
                req.lease,
                req.prev_kv,
                req.ignore_value,
                req.ignore_lease,
            ]
        case DeleteRangeRequest():
            return ["delete", req.key, req.range_end, req.prev_kv]
        case TxnRequest():
            return [
                "txn",
                [[int(c.result), int(c.target), c.key, c.value, c.range_end] for c in req.compare],
                [_request_wire(op) for op in req.success],
                [_request_wire(op) for op in req.failure],
            ]
        case CompactionRequest():
            return ["compact", req.revision, req.physical]
        case LeaseGrantRequest():
            return ["grant", req.id, req.ttl]
        case LeaseRevokeRequest():
            return ["revoke", req.id]
        case LeaseKeepAliveRequest():
            return ["keepalive", req.id]


def decode_command(command: bytes, index: int) -> Request:
    """The request `encode_command` made; `index` (its Raft entry's) names a corrupt one."""
    try:
        return _request_unwire(msgpack.unpackb(command, raw=False))
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptDataError(f"undecodable MVCC command at index {index}: {exc}") from exc


def _request_unwire(obj: Any) -> Request:
    tag, *f = obj
    match tag:
        case "range":
            key, end, limit, rev, keys_only, count_only, order, target, *filters = f
            min_mod, max_mod, min_create, max_create = filters
            return RangeRequest(
                _bytes(key),
                _bytes(end),
                _int(limit),
                _int(rev),
                _bool(keys_only),
                _bool(count_only),
                SortOrder(order),
                SortTarget(target),
                _int(min_mod),
                _int(max_mod),
                _int(min_create),
                _int(max_create),
            )
        case "put":
            key, value, lease, prev_kv, ignore_value, ignore_lease = f
            return PutRequest(
                _bytes(key),
                _bytes(value),
                _int(lease),
                _bool(prev_kv),
                _bool(ignore_value),
                _bool(ignore_lease),
            )
        case "delete":
            key, end, prev_kv = f
            return DeleteRangeRequest(_bytes(key), _bytes(end), _bool(prev_kv))
        case "txn":
            compares, success, failure = f
            return TxnRequest(
                [_compare_unwire(c) for c in compares],
                [_op_unwire(op) for op in success],
                [_op_unwire(op) for op in failure],
            )
        case "compact":
            revision, physical = f
            return CompactionRequest(_int(revision), _bool(physical))
        case "grant":
            lease_id, ttl = f
            return LeaseGrantRequest(_int(lease_id), _int(ttl))
        case "revoke":
            (lease_id,) = f
            return LeaseRevokeRequest(_int(lease_id))
        case "keepalive":
            (lease_id,) = f
            return LeaseKeepAliveRequest(_int(lease_id))
    raise ValueError(f"unknown command {tag!r}")


def _op_unwire(obj: Any) -> RequestOp:
    op = _request_unwire(obj)
    if not isinstance(op, RangeRequest | PutRequest | DeleteRangeRequest | TxnRequest):
        raise ValueError(f"{type(op).__name__} cannot be part of a txn")
    return op


def _compare_unwire(obj: Any) -> Compare:
    result, target, key, value, range_end = obj
    if not isinstance(value, int | bytes):
        raise TypeError(f"compare value {value!r}")
    return Compare(
        CompareResult(result), CompareTarget(target), _bytes(key), value, _bytes(range_end)
    )


def _record_wire(kv: KeyValue) -> list[Any]:
    return [kv.key, kv.create_revision, kv.mod_revision, kv.version, kv.value, kv.lease]


def _record_unwire(row: Any) -> KeyValue:
    key, create, mod, version, value, lease = row
    return KeyValue(_bytes(key), _int(create), _int(mod), _int(version), _bytes(value), _int(lease))


def _bytes(v: Any) -> bytes:
    if not isinstance(v, bytes):
        raise TypeError(f"expected bytes, got {type(v).__name__}")
    return v


def _int(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"expected an int, got {type(v).__name__}")
    return v


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"expected a bool, got {type(v).__name__}")
    return v
