"""The store interface the apiserver is written against: etcd v3's KV calls it really uses.

Kubernetes' apiserver talks to etcd through `storage.Interface`, which lets its tests
(envtest) run the real registry over something other than a remote etcd. kubelab's
storage layer and watch cache likewise need only a few calls: a range read, a
transaction and a watch. This module names them as a `typing.Protocol`, so that:

* `kubelab.storeclient.StoreClient` (kubelab's store or a real etcd, over the JSON
  gateway) is the production implementation;
* `lab.memstore.MemStore` (the pure MVCC store and its watch hub, in-process) serves the
  in-process test apiserver `lab.testenv`.

Both answer with the same typed results and raise the same `storeclient.StoreError`
subclasses (`CompactedError`, `FutureRevisionError`, `Unavailable`, ...), which is what
the apiserver turns into Status errors; implementations must keep to etcd's semantics,
since the watch cache's consistency argument rests on them (one global revision, watches
that deliver every event in order from their start revision, compaction as 410).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Protocol, Self

from kubelab.storeclient import (
    Bytesish,
    Compare,
    Op,
    RangeResult,
    SortOrder,
    SortTarget,
    TxnResult,
    WatchResponse,
)


class WatchStream(Protocol):
    """An open watch: its first frame has `created`; a compacted start revision ends it
    with a `canceled` frame carrying `compact_revision`. Iteration raises `Unavailable`
    if the store goes away mid-stream, and simply stops after `close` (from any
    thread)."""

    def __iter__(self) -> Iterator[WatchResponse]: ...

    def __next__(self) -> WatchResponse: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class KVStore(Protocol):
    """etcd v3's range, txn and watch, as `StoreClient` spells them (thread-safe)."""

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
    ) -> RangeResult: ...

    def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[Op] = (),
        failure: Sequence[Op] = (),
    ) -> TxnResult: ...

    def watch(
        self,
        key: Bytesish,
        range_end: Bytesish = b"",
        *,
        prefix: bool = False,
        start_revision: int = 0,
        prev_kv: bool = False,
        progress_notify: bool = False,
    ) -> WatchStream: ...

    def close(self) -> None: ...
