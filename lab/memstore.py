"""etcd's KV API in-process: the pure MVCC store and its watch hub behind `KVStore`.

The in-process test apiserver (`lab.testenv`) runs the real registry and watch cache over
this instead of a store cluster, as Kubernetes' envtest runs the real apiserver over an
etcd it starts; here nothing is started at all, so a test environment is up in a fraction
of a second. It joins two components (the store's MVCC state machine and the
apiserver's store interface), hence it is lab tooling.

The semantics are the store's own, not a re-implementation: every request takes the
path it takes over the wire, minus the socket. `storeclient` builds the gateway body,
`gateway` decodes it into an MVCC request (with the same validation: empty keys,
duplicate keys in a txn, unknown fields), `MVCCStore` applies it, `gateway` encodes the
answer and `storeclient` parses it; errors are the `storeclient.StoreError` subclasses
the store's HTTP server would make a client raise (compacted -> `CompactedError`, future
revision -> `FutureRevisionError`, ...). Watches are the store's `WatchHub`, with the
frames the store's server sends (created, events with their header revision,
cancellation with `compact_revision`, progress notifications).

Left out, because a test apiserver does not need them: leases, cluster membership,
maintenance, the request size limit and the space quota.

Threads: the MVCC store is single-threaded (it is a Raft state machine) and the hub
wakes watchers with asyncio events, so every call runs on one event loop thread this
object owns, as the store's server runs them on its loop; callers may be any thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from controlplane.store import gateway, mvcc
from controlplane.store.watch import WatchBatch, Watcher, WatchHub
from kubelab import storeclient
from kubelab.storeclient import (
    Delete,
    DeleteResult,
    Get,
    GrpcCode,
    KVStore,
    Put,
    PutResult,
    RangeResult,
    Response,
    Txn,
    TxnResult,
    Unavailable,
    WatchCreate,
    WatchResponse,
    WatchStream,
)
from kubelab.storeclient.errors import error_from

_T = TypeVar("_T")

# etcd's default progress notification interval (--experimental-watch-progress-notify-interval).
PROGRESS_INTERVAL = 600.0


class MemStore(KVStore):
    """One in-memory store member serving `KVStore`'s calls.

    `close` ends it: open watches raise `Unavailable` (as when a member goes away) and
    later calls fail with `Unavailable`.
    """

    def __init__(self, progress_interval: float = PROGRESS_INTERVAL) -> None:
        self.progress_interval = progress_interval
        self._mvcc = mvcc.MVCCStore()
        self._index = 0
        # Guards `_closed` and `_waiting`: nothing is put on the loop once it is closing.
        self._lock = threading.Lock()
        self._closed = False
        self._waiting: set[concurrent.futures.Future[WatchBatch | None]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="memstore", daemon=True)
        self._thread.start()
        self._hub = self._call(lambda: WatchHub(self._mvcc))

    # -- the loop ------------------------------------------------------------------------

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run `fn` on the store's loop; MVCC and gateway errors become store errors."""
        with self._lock:
            if self._closed:
                raise Unavailable(GrpcCode.UNAVAILABLE, "memstore: the store was closed")
            done = self._schedule(fn)
        return done.result()

    def _schedule(self, fn: Callable[[], _T]) -> concurrent.futures.Future[_T]:
        """Queue `fn` on the loop; its result (or store error) comes in the future."""
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except mvcc.MVCCError as err:
                done.set_exception(error_from(err.grpc_code, err.message))
            except gateway.BadRequest as err:
                done.set_exception(error_from(GrpcCode.INVALID_ARGUMENT, str(err)))
            except BaseException as exc:
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done

    def _header(self, revision: int | None = None) -> dict[str, str]:
        """The header the store's server sends (one member, always its own leader)."""
        out = {"cluster_id": "1", "member_id": "1", "raft_term": "1"}
        if revision != 0:
            out["revision"] = str(self._mvcc.revision if revision is None else revision)
        return out

    def _apply(self, req: mvcc.Request) -> Any:
        self._index += 1
        return self._mvcc.apply(self._index, mvcc.encode_command(req))

    # -- KV ------------------------------------------------------------------------------

    def range(self, request: Get) -> RangeResult:
        def serve() -> dict[str, Any]:
            req, _ = gateway.range_request(request.body())
            resp = self._mvcc.range(req)
            answer = gateway.range_json(resp, req.keys_only)
            return {"header": self._header(resp.revision), **answer}

        return RangeResult.parse(self._call(serve))

    def _put(self, request: Put) -> PutResult:
        def serve() -> dict[str, Any]:
            resp = self._apply(gateway.put_request(request.body()))
            return {"header": self._header(resp.revision), **gateway.put_json(resp)}

        return PutResult.parse(self._call(serve))

    def _delete_range(self, request: Delete) -> DeleteResult:
        def serve() -> dict[str, Any]:
            resp = self._apply(gateway.delete_request(request.body()))
            return {"header": self._header(resp.revision), **gateway.delete_json(resp)}

        return DeleteResult.parse(self._call(serve))

    def _txn(self, request: Txn) -> TxnResult:
        def serve() -> dict[str, Any]:
            req = gateway.txn_request(request.body())
            resp = self._mvcc.read_txn(req) if mvcc.is_read_only(req) else self._apply(req)
            return gateway.txn_json(resp, self._header(resp.revision), req)

        return TxnResult.parse(self._call(serve))

    def compact(self, revision: int, physical: bool = False) -> Response:
        """Discard history before `revision` (at once: `physical` changes nothing)."""
        body = {"revision": str(revision)}

        def serve() -> dict[str, Any]:
            resp = self._apply(gateway.compaction_request(body))
            return {"header": self._header(resp.revision)}

        raw = self._call(serve)
        return Response(storeclient.Header.parse(raw), raw=raw)

    # -- watch ---------------------------------------------------------------------------

    def _watch(self, request: WatchCreate) -> MemWatch:
        def create() -> tuple[Watcher, int, dict[str, Any]]:
            created_at = self._mvcc.revision
            w = self._hub.create(
                request.key, request.range_end, request.start_revision, prev_kv=request.prev_kv
            )
            return w, created_at, {"header": self._header(), "created": True}

        w, created_at, first = self._call(create)
        timeout = self.progress_interval if request.progress_notify else None
        return MemWatch(self, w, created_at, timeout, WatchResponse.parse(first))

    def _next_batch(self, w: Watcher, timeout: float | None) -> WatchBatch | None:
        with self._lock:
            if self._closed:
                return WatchBatch(0, canceled=True)
            coro = self._hub.next_batch(w, timeout)
            waiting = asyncio.run_coroutine_threadsafe(coro, self._loop)
            self._waiting.add(waiting)
        try:
            return waiting.result()
        finally:
            with self._lock:
                self._waiting.discard(waiting)

    def _cancel(self, w: Watcher) -> None:
        with self._lock:
            if not self._closed:
                self._loop.call_soon_threadsafe(self._hub.cancel, w)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """End the store: watches end with `Unavailable`, calls are refused."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            waiting = list(self._waiting)
        # Cancelling every watcher ends the waits in progress; they need the loop for a
        # few more turns, so it stops only once they are over.
        self._schedule(self._hub.close).result()
        concurrent.futures.wait(waiting, timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


class MemWatch(WatchStream):
    """An open watch on a `MemStore`, frame by frame as the store's server sends them."""

    def __init__(
        self,
        store: MemStore,
        watcher: Watcher,
        created_at: int,
        timeout: float | None,
        first: WatchResponse,
    ) -> None:
        self._store = store
        self._watcher = watcher
        self._created_at = created_at
        self._timeout = timeout
        self._first: WatchResponse | None = first
        self._closed = False
        self._done = False

    def __next__(self) -> WatchResponse:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        if self._done or self._closed:
            raise StopIteration
        batch = self._store._next_batch(self._watcher, self._timeout)
        if self._closed:
            raise StopIteration
        if batch is None:  # quiet for a progress interval: say where the store is
            return WatchResponse.parse({"header": self._store._header()})
        if batch.canceled and not batch.compact_revision:
            # Not closed by us, so the hub ended it: the store went away.
            self._done = True
            raise Unavailable(GrpcCode.UNAVAILABLE, "memstore: watch stream ended")
        fields, revision = gateway.watch_batch_json(batch, self._created_at)
        if batch.canceled:
            self._done = True
        return WatchResponse.parse({"header": self._store._header(revision), **fields})

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._store._cancel(self._watcher)
