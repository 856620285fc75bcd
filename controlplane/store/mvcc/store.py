"""The MVCC key-value state machine: etcd v3's data model, replicated by our Raft log.

This is what the store's Raft log is for. Every member applies the same commands in the
same order, so `MVCCStore` is deliberately pure: no I/O, no clock, no randomness, no
iteration over unordered containers that could reach a result. Anything that needs time
(lease expiry) or choice (lease ids) is decided by the leader *before* proposing and
arrives here inside the command.

The semantics are etcd 3.4's, down to its quirks, because the apiserver and etcdctl are
the clients: revisions, versions, range options, txn compares and branches, leases,
compaction and the error codes and messages. Where etcd's behaviour was not obvious it
was checked against a real etcd 3.4.23 and the answer is noted next to the code.

Data layout (all in memory):

* `_keys`: a sorted list of every key that still has history, so a range is two bisects
  and a slice;
* `_hist[key]`: that key's revisions in order, as `KeyValue` records. A deletion is a
  tombstone record (version 0, empty value, create revision 0), which is also exactly the
  `kv` etcd puts in a DELETE event;
* `_log`: the events of every revision still retained, for watches. Events share their
  `KeyValue` objects with `_hist`, so the log costs little more than the references.

Compaction at C keeps, per key, every record from C on plus the newest record before C
if it is live (the value a read at C sees, and the prev_kv of an event at C); keys whose
newest record before C is a tombstone and that have nothing after it disappear.
"""

from __future__ import annotations

import contextlib
import logging
import operator
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, TypeAlias

from controlplane.store.mvcc.encoding import (
    SnapshotImage,
    decode_command,
    decode_snapshot,
    encode_snapshot,
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
    Response,
    ResponseOp,
    SortOrder,
    SortTarget,
    TxnRequest,
    TxnResponse,
)
from controlplane.store.mvcc.validation import check_request, is_read_only

log = logging.getLogger(__name__)

# etcd's lease.MaxLeaseTTL (about 285 years); a larger grant is refused.
MAX_LEASE_TTL = 9_000_000_000
# etcd raises shorter grants to ceil(1.5 * election timeout); 2 s with its default 1 s.
DEFAULT_MIN_LEASE_TTL = 2

# Rough per-revision cost beyond key and value bytes: etcd stores each revision under a
# 17-byte revision key with the KeyValue protobuf's integer fields around the payload.
_RECORD_OVERHEAD = 48


def _in_range(key: bytes, start: bytes, end: bytes) -> bool:
    """Whether `key` is in the range a request names (etcd's range_end convention)."""
    if not end:
        return key == start
    return start <= key and (end == b"\0" or key < end)


@dataclass(slots=True)
class _Plan:
    """A txn with every compare already decided: the branch taken, nested txns resolved."""

    succeeded: bool
    steps: list[RangeRequest | PutRequest | DeleteRangeRequest | _Plan]

    def flat(self) -> Iterator[RangeRequest | PutRequest | DeleteRangeRequest]:
        """The ops that will run, in the order they will run."""
        for step in self.steps:
            if isinstance(step, _Plan):
                yield from step.flat()
            else:
                yield step


_mod_revision = operator.attrgetter("mod_revision")

_SORT_KEYS: dict[SortTarget, Callable[[KeyValue], Any]] = {
    SortTarget.VERSION: operator.attrgetter("version"),
    SortTarget.CREATE: operator.attrgetter("create_revision"),
    SortTarget.MOD: operator.attrgetter("mod_revision"),
    SortTarget.VALUE: operator.attrgetter("value"),
}

_INT_TARGETS: dict[CompareTarget, Callable[[KeyValue], int]] = {
    CompareTarget.VERSION: operator.attrgetter("version"),
    CompareTarget.CREATE: operator.attrgetter("create_revision"),
    CompareTarget.MOD: operator.attrgetter("mod_revision"),
    CompareTarget.LEASE: operator.attrgetter("lease"),
}

Listener: TypeAlias = Callable[[int, list[Event]], None]


class MVCCStore:
    """etcd v3's MVCC store as a deterministic Raft state machine.

    Writes (put, delete range, txn, compaction, lease grant and revoke) arrive through
    `apply` as commands built by `encode_command`; reads are served locally by `range`
    and `read_txn`, and watchers use `events` and `subscribe`.
    """

    def __init__(self, min_lease_ttl: int = DEFAULT_MIN_LEASE_TTL) -> None:
        # Configuration, like etcd's: every member must be started with the same value.
        self._min_lease_ttl = min_lease_ttl
        self._listeners: list[Listener] = []
        # Told of every applied grant, keep-alive and revoke (the lessor's deadlines).
        self.lease_listener: Callable[[LeaseEvent, int, int], None] | None = None
        self._reset()

    def _reset(self) -> None:
        self._rev = 1  # etcd: an empty store is at revision 1
        # etcd's compactMainRev starts at -1, which is why compacting at 0 succeeds once.
        self._compact_rev = -1
        self._keys: list[bytes] = []
        self._hist: dict[bytes, list[KeyValue]] = {}
        self._log_revs: list[int] = []
        self._log: list[tuple[Event, ...]] = []
        self._leases: dict[int, Lease] = {}
        self._size = 0
        # Events of the write in progress; they all get revision self._rev + 1.
        self._pending: list[Event] = []

    # -- state -------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        return self._rev

    @property
    def compact_revision(self) -> int:
        """The revision of the last compaction (0 before the first one)."""
        return max(self._compact_rev, 0)

    @property
    def leases(self) -> Mapping[int, Lease]:
        """Granted leases by id; a read-only view, do not mutate the `Lease`s either."""
        return MappingProxyType(self._leases)

    def lease_ids(self) -> list[int]:
        return sorted(self._leases)

    def lease_keys(self, lease_id: int) -> list[bytes]:
        lease = self._leases.get(lease_id)
        if lease is None:
            raise LeaseNotFoundError()
        return sorted(lease.keys)

    def size_bytes(self) -> int:
        """Approximate bytes of live data and retained history (for the space quota)."""
        return self._size

    # -- the state machine ----------------------------------------------------------

    def apply(self, index: int, command: bytes) -> Response:
        """Execute a committed command; the response (or the exception) goes to the proposer.

        An exception leaves the store untouched: every check runs before the first change.
        """
        req = decode_command(command, index)
        check_request(req)
        match req:
            case RangeRequest():
                return self.range(req)
            case PutRequest():
                # etcd checks a plain put's lease before the key's existence, and a put
                # inside a txn the other way round (verified against etcd 3.4).
                self._check_put(req, lease_first=True)
                put_resp = self._put(req)
                self._commit()
                return put_resp
            case DeleteRangeRequest():
                delete_resp = self._delete_range(req)
                self._commit()
                return delete_resp
            case TxnRequest():
                return self._txn(req)
            case CompactionRequest():
                self._compact(req.revision)
                return CompactionResponse(self._rev)
            case LeaseGrantRequest():
                granted = self._grant(req)
                self._lease_event(LeaseEvent.GRANTED, granted.id, granted.ttl)
                return granted
            case LeaseRevokeRequest():
                self._revoke(req.id)
                self._lease_event(LeaseEvent.REVOKED, req.id, 0)
                return LeaseRevokeResponse(self._rev)
            case LeaseKeepAliveRequest():
                lease = self._leases.get(req.id)
                if lease is None:
                    raise LeaseNotFoundError()
                self._lease_event(LeaseEvent.RENEWED, req.id, lease.ttl)
                return LeaseKeepAliveResponse(req.id, lease.ttl, self._rev)

    # -- reads -------------------------------------------------------------------------

    def range(self, req: RangeRequest) -> RangeResponse:
        """Serve a range locally (the server has already established linearizability)."""
        check_request(req)
        self._check_read_revision(req.revision)
        return self._range(req, self._rev)

    def read_txn(self, req: TxnRequest) -> TxnResponse:
        """Serve a txn without writes locally, as etcd does; refuses one that writes."""
        check_request(req)
        if not is_read_only(req):
            raise InvalidRequestError("kubelab: read_txn given a txn that writes")
        return self._txn(req)

    def events(self, key: bytes, range_end: bytes, start_revision: int) -> list[Event]:
        """Every retained event on key/range_end at or after `start_revision`, in order.

        Raises CompactedError when `start_revision` is before the compaction point: etcd
        cancels such a watch, reporting the compact revision. A watch from exactly the
        compact revision is allowed and, unlike etcd's, complete: etcd drops a tombstone
        at the compact revision once the compaction has run on disk, so its watch from
        there misses that delete (verified with 3.4: the delete event is delivered only
        if the watch starts before the background compaction finishes).
        """
        if start_revision < self._compact_rev:
            raise CompactedError(self.compact_revision)
        out: list[Event] = []
        for events in self._log[bisect_left(self._log_revs, start_revision) :]:
            out.extend(e for e in events if _in_range(e.kv.key, key, range_end))
        return out

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(revision, events)` after each write revision; returns unsubscribe.

        Listeners run inside `apply`, after the revision is complete, and must be quick.
        An exception from one is logged and swallowed: the write has happened and must
        still be reported to its proposer and to the other listeners.
        """
        self._listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return unsubscribe

    def _check_read_revision(self, revision: int) -> None:
        if revision > self._rev:
            raise FutureRevisionError()
        # Reads at exactly the compact revision are allowed (etcd: rev < compactMainRev).
        if 0 < revision < self._compact_rev:
            raise CompactedError(self.compact_revision)

    def _span(self, key: bytes, range_end: bytes) -> list[bytes]:
        """Keys with history in the range; range_end < key is an empty range, as in etcd."""
        if not range_end:
            return [key] if key in self._hist else []
        lo = bisect_left(self._keys, key)
        if range_end == b"\0":
            return self._keys[lo:]
        return self._keys[lo : bisect_left(self._keys, range_end, lo)]

    def _visible(self, key: bytes, revision: int) -> KeyValue | None:
        """The key's live KeyValue as of `revision`, None if absent or deleted then."""
        hist = self._hist[key]
        kv = hist[-1]
        if kv.mod_revision > revision:
            i = bisect_right(hist, revision, key=_mod_revision)
            if i == 0:
                return None
            kv = hist[i - 1]
        return kv if kv.version else None

    def _range(self, req: RangeRequest, current: int) -> RangeResponse:
        """A range as seen at revision `current` (inside a txn: including its own writes).

        The order of filtering, sorting and truncating is etcd's, checked against 3.4:
        `count` is the number of keys in the range before the mod/create revision filters;
        without a sort order the first limit+1 keys (in key order) are taken before the
        filters, so with a non-KEY sort target and no order etcd sorts (ascending) only
        those. Ties keep key order in both directions; so do etcd's for up to 12 keys,
        beyond which Go's unstable sort leaves them in an order that depends on its version.
        """
        revision = req.revision if req.revision > 0 else current
        kvs: list[KeyValue] = []
        for key in self._span(req.key, req.range_end):
            kv = self._visible(key, revision)
            if kv is not None:
                kvs.append(kv)
        count = len(kvs)
        if req.count_only:
            return RangeResponse([], False, count, current)
        filtered = bool(
            req.min_mod_revision
            or req.max_mod_revision
            or req.min_create_revision
            or req.max_create_revision
        )
        if req.limit > 0 and req.sort_order is SortOrder.NONE and not filtered:
            kvs = kvs[: req.limit + 1]
        if filtered:
            kvs = [kv for kv in kvs if _passes_filters(req, kv)]
        order = req.sort_order
        if order is SortOrder.NONE and req.sort_target is not SortTarget.KEY:
            order = SortOrder.ASCEND
        if req.sort_target is SortTarget.KEY:
            if order is SortOrder.DESCEND:
                kvs.reverse()
        elif order is not SortOrder.NONE:
            kvs.sort(key=_SORT_KEYS[req.sort_target], reverse=order is SortOrder.DESCEND)
        more = 0 < req.limit < len(kvs)
        if more:
            kvs = kvs[: req.limit]
        if req.keys_only:
            kvs = [replace(kv, value=b"") for kv in kvs]
        return RangeResponse(kvs, more, count, current)

    # -- writes ------------------------------------------------------------------------

    def _view_revision(self) -> int:
        """The revision a read sees mid-write: the new one once something has changed."""
        return self._rev + 1 if self._pending else self._rev

    def _append(self, kv: KeyValue) -> None:
        hist = self._hist.get(kv.key)
        if hist is None:
            self._hist[kv.key] = [kv]
            insort(self._keys, kv.key)
        else:
            hist.append(kv)
        self._size += _record_size(kv)

    def _check_put(self, req: PutRequest, *, lease_first: bool) -> None:
        """The data-dependent checks of a put, made before anything changes."""
        if lease_first:
            self._check_lease(req.lease)
        if (req.ignore_value or req.ignore_lease) and (
            req.key not in self._hist or self._visible(req.key, self._rev) is None
        ):
            raise InvalidRequestError(ERR_KEY_NOT_FOUND)
        if not lease_first:
            self._check_lease(req.lease)

    def _check_lease(self, lease_id: int) -> None:
        if lease_id and lease_id not in self._leases:
            raise LeaseNotFoundError()

    def _put(self, req: PutRequest) -> PutResponse:
        revision = self._rev + 1
        hist = self._hist.get(req.key)
        prev = hist[-1] if hist and hist[-1].version else None
        value, lease = req.value, req.lease
        if prev is None:
            kv = KeyValue(req.key, revision, revision, 1, value, lease)
        else:
            if req.ignore_value:
                value = prev.value
            if req.ignore_lease:
                lease = prev.lease
            kv = KeyValue(req.key, prev.create_revision, revision, prev.version + 1, value, lease)
            if prev.lease and prev.lease != lease:
                self._leases[prev.lease].keys.discard(req.key)
        if lease:
            self._leases[lease].keys.add(req.key)
        self._pending.append(_event(kv, hist or []))
        self._append(kv)
        return PutResponse(prev if req.prev_kv else None, revision)

    def _delete_range(self, req: DeleteRangeRequest) -> DeleteRangeResponse:
        deleted = [
            prev
            for key in self._span(req.key, req.range_end)
            if (prev := self._delete_key(key)) is not None
        ]
        return DeleteRangeResponse(
            len(deleted), deleted if req.prev_kv else [], self._view_revision()
        )

    def _delete_key(self, key: bytes) -> KeyValue | None:
        """Tombstone `key` at the write's revision; returns what was deleted, if anything."""
        hist = self._hist[key]
        prev = hist[-1]
        if not prev.version:
            return None
        tombstone = KeyValue(key, 0, self._rev + 1, 0, b"", 0)
        if prev.lease:
            self._leases[prev.lease].keys.discard(key)
        self._pending.append(_event(tombstone, hist))
        self._append(tombstone)
        return prev

    def _commit(self) -> None:
        """Close the write: a new revision if anything changed, then tell the listeners."""
        if not self._pending:
            return
        self._rev += 1
        events = tuple(self._pending)
        self._pending = []
        self._log_revs.append(self._rev)
        self._log.append(events)
        for listener in tuple(self._listeners):
            try:
                listener(self._rev, list(events))
            except Exception:
                log.exception("mvcc listener %r failed at revision %d", listener, self._rev)

    # -- txn ---------------------------------------------------------------------------

    def _txn(self, req: TxnRequest) -> TxnResponse:
        """Run a txn as etcd 3.4 does: decide, check, then execute at one revision.

        All compares, nested txns' included, are evaluated first against the state before
        the txn, so a nested compare does not see the outer txn's earlier writes (verified:
        put n1=1 then a nested txn comparing n1 == "1" takes the failure branch on a store
        without n1). The ops that will run are then checked (puts first, then the
        revisions of ranges, as etcd orders them), and only then does anything change.

        One check is ours: the conflict rules let a put follow a delete of [k, "\\0")
        covering its key (see `_txn_writes`). etcd then finds an ignore_value or
        ignore_lease put's key gone mid-txn and panics; we refuse such a txn up front
        with etcd's "key not found", after etcd's own checks so that their errors win.
        """
        plan = self._plan(req)
        ops = list(plan.flat())
        for op in ops:
            if isinstance(op, PutRequest):
                self._check_put(op, lease_first=False)
        for op in ops:
            if isinstance(op, RangeRequest):
                self._check_read_revision(op.revision)
        deleted: list[tuple[bytes, bytes]] = []
        for op in ops:
            if isinstance(op, DeleteRangeRequest):
                deleted.append((op.key, op.range_end))
            elif (
                isinstance(op, PutRequest)
                and (op.ignore_value or op.ignore_lease)
                and any(_in_range(op.key, start, end) for start, end in deleted)
            ):
                raise InvalidRequestError(ERR_KEY_NOT_FOUND)
        responses = self._execute(plan)
        self._commit()
        return TxnResponse(plan.succeeded, responses, self._rev)

    def _plan(self, req: TxnRequest) -> _Plan:
        succeeded = all(self._compare(c) for c in req.compare)
        return _Plan(
            succeeded,
            [
                self._plan(op) if isinstance(op, TxnRequest) else op
                for op in (req.success if succeeded else req.failure)
            ],
        )

    def _compare(self, c: Compare) -> bool:
        """A compare over its key or range at the current revision.

        A missing key compares as create/mod/version/lease 0, but any VALUE compare on a
        missing key (or an empty range) fails, even NOT_EQUAL (verified against etcd 3.4).
        """
        kvs = [
            kv
            for key in self._span(c.key, c.range_end)
            if (kv := self._visible(key, self._rev)) is not None
        ]
        if not kvs:
            return _compare_kv(c, None)
        return all(_compare_kv(c, kv) for kv in kvs)

    def _execute(self, plan: _Plan) -> list[ResponseOp]:
        responses: list[ResponseOp] = []
        for step in plan.steps:
            match step:
                case RangeRequest():
                    responses.append(self._range(step, self._view_revision()))
                case PutRequest():
                    responses.append(self._put(step))
                case DeleteRangeRequest():
                    responses.append(self._delete_range(step))
                case _Plan():
                    responses.append(TxnResponse(step.succeeded, self._execute(step), 0))
        return responses

    # -- compaction and leases -------------------------------------------------------

    def _compact(self, revision: int) -> None:
        if revision <= self._compact_rev:
            raise CompactedError(self.compact_revision)
        if revision > self._rev:
            raise FutureRevisionError()
        self._compact_rev = revision
        for key in self._keys:
            hist = self._hist[key]
            first_kept = bisect_left(hist, revision, key=_mod_revision)
            if first_kept and hist[first_kept - 1].version:
                first_kept -= 1  # the value a read at `revision` sees, or its prev_kv
            if first_kept:
                self._size -= sum(_record_size(kv) for kv in hist[:first_kept])
                del hist[:first_kept]
            if not hist:
                del self._hist[key]
        if len(self._hist) != len(self._keys):
            self._keys = [key for key in self._keys if key in self._hist]
        first_event = bisect_left(self._log_revs, revision)
        del self._log_revs[:first_event]
        del self._log[:first_event]

    def _grant(self, req: LeaseGrantRequest) -> LeaseGrantResponse:
        """Grant as etcd's lessor does: id 0 is "not found", the TTL is raised to the minimum.

        Verified against etcd 3.4: TTL 0 and -5 are granted with TTL 2 (its minimum with
        default timing), 9000000001 is refused with code 11, negative ids are accepted.
        """
        if req.id == 0:
            raise LeaseNotFoundError()
        if req.ttl > MAX_LEASE_TTL:
            raise LeaseTTLTooLargeError()
        if req.id in self._leases:
            raise LeaseExistsError()
        ttl = max(req.ttl, self._min_lease_ttl)
        self._leases[req.id] = Lease(req.id, ttl)
        return LeaseGrantResponse(req.id, ttl, self._rev)

    def _lease_event(self, kind: LeaseEvent, lease_id: int, ttl: int) -> None:
        if self.lease_listener is not None:
            self.lease_listener(kind, lease_id, ttl)

    def _revoke(self, lease_id: int) -> None:
        """Delete the lease's keys in one revision, in key order (as etcd's lessor does)."""
        lease = self._leases.get(lease_id)
        if lease is None:
            raise LeaseNotFoundError()
        for key in sorted(lease.keys):
            self._delete_key(key)
        del self._leases[lease_id]
        self._commit()

    # -- snapshots ---------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The whole state: retained history, leases, revision and compaction point.

        Every retained record is either one of the records kept from before the compact
        revision (at most one per key) or the `kv` of a logged event, so the image lists
        those two groups and `restore` rebuilds history, event log and prev_kvs by
        replaying the log. Lease membership is derived from the live keys' lease ids.
        """
        image = SnapshotImage(
            self._rev,
            self._compact_rev,
            [
                kv
                for key in self._keys
                for kv in self._hist[key]
                if kv.mod_revision < self._compact_rev
            ],
            [[e.kv for e in events] for events in self._log],
            [(lease_id, lease.ttl) for lease_id, lease in sorted(self._leases.items())],
        )
        return encode_snapshot(image)

    def restore(self, data: bytes) -> None:
        """Replace the state with a snapshot's.

        Listeners stay subscribed and are not told: the watch hub must resynchronise its
        watchers from `events`. A corrupt image raises CorruptDataError and leaves the
        store empty rather than half restored.
        """
        try:
            image = decode_snapshot(data)
            self._reset()
            self._rev, self._compact_rev = image.revision, image.compact_revision
            self._leases = {i: Lease(i, ttl) for i, ttl in image.leases}
            for kv in image.base:
                self._hist[kv.key] = [kv]
                self._size += _record_size(kv)
            for kvs in image.revisions:
                events = []
                for kv in kvs:
                    hist = self._hist.setdefault(kv.key, [])
                    events.append(_event(kv, hist))
                    hist.append(kv)
                    self._size += _record_size(kv)
                self._log_revs.append(events[0].kv.mod_revision)
                self._log.append(tuple(events))
            self._keys = sorted(self._hist)
            for key, hist in self._hist.items():
                if hist[-1].lease and hist[-1].version:
                    self._leases[hist[-1].lease].keys.add(key)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            self._reset()
            raise CorruptDataError(f"undecodable MVCC snapshot: {exc}") from exc


def _passes_filters(req: RangeRequest, kv: KeyValue) -> bool:
    return not (
        (req.min_mod_revision and kv.mod_revision < req.min_mod_revision)
        or (req.max_mod_revision and kv.mod_revision > req.max_mod_revision)
        or (req.min_create_revision and kv.create_revision < req.min_create_revision)
        or (req.max_create_revision and kv.create_revision > req.max_create_revision)
    )


def _compare_kv(c: Compare, kv: KeyValue | None) -> bool:
    """One key against a compare; None is a missing key (zeros, for the int targets)."""
    if isinstance(c.value, bytes):
        if kv is None:
            return False  # etcd: a missing value cannot be told from b"", so never matches
        diff = (kv.value > c.value) - (kv.value < c.value)
    else:
        mine = _INT_TARGETS[c.target](kv) if kv is not None else 0
        diff = (mine > c.value) - (mine < c.value)
    match c.result:
        case CompareResult.EQUAL:
            return diff == 0
        case CompareResult.GREATER:
            return diff > 0
        case CompareResult.LESS:
            return diff < 0
        case CompareResult.NOT_EQUAL:
            return diff != 0


def _event(kv: KeyValue, hist: list[KeyValue]) -> Event:
    """The event for the new record `kv`, given the key's history before it.

    prev_kv follows etcd's watch: none for a create (create == mod revision), else the
    key's value at mod_revision - 1. That differs from "the value just before this op"
    only when one txn writes a key twice (the conflict rules allow a few such txns, see
    `_txn_writes`): a put after a delete of the key is a create, without prev_kv, and a
    delete after a put reports the value from before the txn (both verified against etcd
    3.4), while the delete response's prev_kvs holds the value the txn put.
    """
    prev = None
    if kv.create_revision != kv.mod_revision:
        for old in reversed(hist):
            if old.mod_revision < kv.mod_revision:
                prev = old if old.version else None
                break
    return Event(EventType.PUT if kv.version else EventType.DELETE, kv, prev)


def _record_size(kv: KeyValue) -> int:
    return len(kv.key) + len(kv.value) + _RECORD_OVERHEAD
