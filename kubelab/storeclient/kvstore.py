"""The store interface the apiserver is written against: etcd v3's KV calls and watches.

Kubernetes' apiserver talks to etcd through `storage.Interface`, which lets its tests
(envtest) run the real registry over something other than a remote etcd. kubelab's
storage layer and watch cache likewise need only a few calls: a range read, a
transaction and a watch (tests and tools add put, delete and compaction). `KVStore`
names them once, as an abstract base:

* `StoreClient` (kubelab's store or a real etcd, over the JSON gateway) is the
  production implementation;
* `lab.memstore.MemStore` (the pure MVCC store and its watch hub, in-process) serves the
  in-process test apiserver `lab.testenv`.

The calls' keyword forms (`get`, `put`, `delete`, `txn`, `watch`) are written here and
build the typed requests of `wire`; an implementation serves those requests (`range`,
`_put`, `_delete_range`, `_txn`, `_watch`) and `compact`. Both answer with the same
typed results and raise the same `StoreError` subclasses (`CompactedError`,
`FutureRevisionError`, `Unavailable`, ...), which is what the apiserver turns into Status
errors; implementations must keep to etcd's semantics, since the watch cache's
consistency argument rests on them (one global revision, watches that deliver every
event in order from their start revision, compaction as 410).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Self

from kubelab.storeclient.wire import (
    Bytesish,
    Compare,
    Delete,
    DeleteResult,
    Get,
    Op,
    Put,
    PutResult,
    RangeResult,
    Response,
    SortOrder,
    SortTarget,
    Txn,
    TxnResult,
    WatchCreate,
    WatchResponse,
    as_bytes,
    key_range,
)


class _Closing(ABC):
    """Something to `close`, also at the end of a ``with`` block."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class WatchStream(_Closing):
    """An open watch: iterate it for `WatchResponse` frames; `close` cancels it.

    Its first frame has `created`; a compacted start revision ends it with a `canceled`
    frame carrying `compact_revision`, after which iteration stops. Iteration raises
    `Unavailable` if the store goes away mid-stream (re-watch from the last revision
    seen plus one), and simply stops after `close`, which may come from another thread
    while one is blocked waiting for events.
    """

    def __iter__(self) -> Iterator[WatchResponse]:
        return self

    @abstractmethod
    def __next__(self) -> WatchResponse: ...

    @abstractmethod
    def close(self) -> None:
        """Cancel the watch; safe from any thread, and more than once."""


class KVStore(_Closing):
    """etcd v3's range, put, delete range, txn, compaction and watch (thread-safe)."""

    # -- the calls, as callers write them --------------------------------------------------

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
        k, end = key_range(key, range_end, prefix)
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

    def put(
        self, key: Bytesish, value: Bytesish, lease: int = 0, prev_kv: bool = False
    ) -> PutResult:
        """Write `key` (attached to `lease` if given); with `prev_kv` the result holds
        the value it replaced."""
        return self._put(Put(as_bytes(key), as_bytes(value), lease, prev_kv))

    def delete(
        self,
        key: Bytesish,
        range_end: Bytesish = b"",
        *,
        prefix: bool = False,
        prev_kv: bool = False,
    ) -> DeleteResult:
        """Delete `key`, or the keys in [key, range_end), or those starting with `key`."""
        k, end = key_range(key, range_end, prefix)
        return self._delete_range(Delete(k, end, prev_kv))

    def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[Op] = (),
        failure: Sequence[Op] = (),
    ) -> TxnResult:
        """Run `success` if every compare holds, else `failure`, at one revision."""
        return self._txn(Txn(compare, success, failure))

    def watch(
        self,
        key: Bytesish,
        range_end: Bytesish = b"",
        *,
        prefix: bool = False,
        start_revision: int = 0,
        prev_kv: bool = False,
        progress_notify: bool = False,
    ) -> WatchStream:
        """Watch `key` (or a range or prefix) from `start_revision` (0: from now on).

        The stream is open when this returns; its first frame has ``created``. Close the
        returned stream (or use it as a context manager) to cancel.
        """
        k, end = key_range(key, range_end, prefix)
        return self._watch(WatchCreate(k, end, start_revision, prev_kv, progress_notify))

    # -- what an implementation serves ---------------------------------------------------

    @abstractmethod
    def range(self, request: Get) -> RangeResult:
        """Run a prepared `Get` (as built for a txn) on its own."""

    @abstractmethod
    def _put(self, request: Put) -> PutResult: ...

    @abstractmethod
    def _delete_range(self, request: Delete) -> DeleteResult: ...

    @abstractmethod
    def _txn(self, request: Txn) -> TxnResult: ...

    @abstractmethod
    def _watch(self, request: WatchCreate) -> WatchStream: ...

    @abstractmethod
    def compact(self, revision: int, physical: bool = False) -> Response:
        """Discard history before `revision`; with `physical`, return once it is purged."""

    @abstractmethod
    def close(self) -> None:
        """Release what the implementation holds (a client's kept-alive connections, an
        in-process store's state)."""
