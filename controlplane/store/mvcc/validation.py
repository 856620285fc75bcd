"""The checks etcd's gRPC layer makes before proposing a request: they depend on the
request alone, so a server can make them before a Raft round trip, and `MVCCStore.apply`
makes them again so that every member refuses the same commands."""

from __future__ import annotations

from controlplane.store.mvcc.errors import (
    ERR_DUPLICATE_KEY,
    ERR_EMPTY_KEY,
    ERR_LEASE_PROVIDED,
    ERR_TOO_MANY_OPS,
    ERR_VALUE_PROVIDED,
    InvalidRequestError,
)
from controlplane.store.mvcc.types import (
    CompactionRequest,
    DeleteRangeRequest,
    LeaseGrantRequest,
    LeaseKeepAliveRequest,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    Request,
    RequestOp,
    TxnRequest,
)

# etcd's default --max-txn-ops: each of a txn's compare/success/failure lists may hold this many.
MAX_TXN_OPS = 128


def check_request(req: Request) -> None:
    """Reject what etcd's gRPC layer rejects before proposing; raises InvalidRequestError.

    The server can call this before proposing to spare a Raft round trip; `apply` calls it
    too, so a request that skipped it still fails the same way on every member.
    """
    match req:
        case RangeRequest() | DeleteRangeRequest():
            _require_key(req.key)
        case PutRequest():
            _check_put_request(req)
        case TxnRequest():
            _check_txn_request(req)
            # Overlaps are looked for in each top-level branch separately: only one runs.
            _txn_writes(req.success)
            _txn_writes(req.failure)
        case (
            CompactionRequest()
            | LeaseGrantRequest()
            | LeaseRevokeRequest()
            | LeaseKeepAliveRequest()
        ):
            pass


def is_read_only(req: TxnRequest) -> bool:
    """True when no branch at any depth writes: etcd serves such a txn without Raft."""
    return all(
        isinstance(op, RangeRequest) or (isinstance(op, TxnRequest) and is_read_only(op))
        for op in (*req.success, *req.failure)
    )


def _require_key(key: bytes) -> None:
    if not key:
        raise InvalidRequestError(ERR_EMPTY_KEY)


def _check_put_request(req: PutRequest) -> None:
    _require_key(req.key)
    if req.ignore_value and req.value:
        raise InvalidRequestError(ERR_VALUE_PROVIDED)
    if req.ignore_lease and req.lease:
        raise InvalidRequestError(ERR_LEASE_PROVIDED)


def _check_txn_request(req: TxnRequest) -> None:
    if max(len(req.compare), len(req.success), len(req.failure)) > MAX_TXN_OPS:
        raise InvalidRequestError(ERR_TOO_MANY_OPS)
    for c in req.compare:
        _require_key(c.key)
    for op in (*req.success, *req.failure):
        match op:
            case RangeRequest() | DeleteRangeRequest():
                _require_key(op.key)
            case PutRequest():
                _check_put_request(op)
            case TxnRequest():
                _check_txn_request(op)


def _txn_writes(ops: list[RequestOp]) -> tuple[set[bytes], list[tuple[bytes, bytes]]]:
    """The keys `ops` may put and the ranges they may delete; raises on a conflict.

    etcd refuses a txn in which a key is put twice or put inside a deleted range, because
    the outcome would depend on op order. Its rules, reproduced here:

    * the two branches of a nested txn may put the same key (only one runs);
    * a put conflicts with earlier nested txns' puts and with every delete at its own
      level or in earlier nested txns, but a nested txn's puts are not checked against
      deletes in nested txns *after* it, and deletes never conflict with each other;
    * the delete ranges are tested as plain intervals [key, range_end), so a delete with
      range_end b"\\0" ("every key from key on") conflicts with nothing. Checked against
      etcd 3.4: a txn deleting [t1, "\\0") and putting t1 is accepted and does both.
    """
    deletes = [(op.key, op.range_end) for op in ops if isinstance(op, DeleteRangeRequest)]
    puts: set[bytes] = set()
    for op in ops:
        if not isinstance(op, TxnRequest):
            continue
        then_puts, then_deletes = _txn_writes(op.success)
        else_puts, else_deletes = _txn_writes(op.failure)
        for key in (*then_puts, *else_puts):
            if key in puts or _overlaps_delete(key, deletes):
                raise InvalidRequestError(ERR_DUPLICATE_KEY)
        puts |= then_puts | else_puts
        deletes += then_deletes + else_deletes
    for op in ops:
        if isinstance(op, PutRequest):
            if op.key in puts or _overlaps_delete(op.key, deletes):
                raise InvalidRequestError(ERR_DUPLICATE_KEY)
            puts.add(op.key)
    return puts, deletes


def _overlaps_delete(key: bytes, deletes: list[tuple[bytes, bytes]]) -> bool:
    return any(key == start if not end else start <= key < end for start, end in deletes)
