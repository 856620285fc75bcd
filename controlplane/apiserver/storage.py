"""The apiserver's storage layer: API objects as JSON values in the store.

Only the apiserver talks to the store (the seeds' hub-and-spoke rule), and only through
this module. Keys are ``/registry/<resource>/<namespace>/<name>`` (cluster-scoped objects
drop the namespace), the store is anything that speaks etcd's v3 API (kubelab's own or
a real etcd), and every write is a transaction guarded by a compare:

* create:  ``create_revision(key) == 0``  -> the name is free;
* update:  ``mod_revision(key) == rv``    -> nobody wrote since the client read;
* delete:  the same, when a precondition is given.

An object's `resourceVersion` is its key's mod_revision and is not stored: it is stamped
on every object read and stripped from every object written, as Kubernetes does, so it can
never disagree with the store. A failed compare reads the current value in the same
transaction (the failure branch), so a conflict costs one round trip, not two.

Errors are the store's facts (`KeyExists`, `KeyNotFound`, `RevisionConflict`, compacted,
unavailable); the REST layer words them as Kubernetes Status objects, because only it
knows which resource and name the key stands for.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from kubelab import fastjson, storeclient, tracing
from kubelab.storeclient import Compare, Delete, Get, KVStore, Op, Put, TxnResult

from . import traces

log = logging.getLogger("kubelab.apiserver.storage")

HEALTH_KEY = "/registry/health"
"""The key the health checks read; nothing writes it (kube-apiserver's etcd check reads
the same one)."""

Object = dict[str, Any]


class StorageError(Exception):
    """A store-level fact about a key; the REST layer turns it into a Status."""

    def __init__(self, key: str, message: str = "") -> None:
        super().__init__(message or key)
        self.key = key


class KeyExists(StorageError):
    pass


class KeyNotFound(StorageError):
    pass


class RevisionConflict(StorageError):
    """The key changed since the revision the writer based its change on."""

    def __init__(self, key: str, current: Object | None) -> None:
        super().__init__(key, f"{key} was modified")
        self.current = current


class InvalidContinue(Exception):
    """A `continue` token this server did not make, or for another list."""


def encode(obj: Object) -> bytes:
    """The stored form: compact JSON without the resourceVersion (the store keeps it)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
    return fastjson.dumps(obj)


def decode(kv: storeclient.KeyValue) -> Object:
    """The stored object, stamped with its resourceVersion; ValueError if the value is
    not a JSON object."""
    obj = fastjson.loads(kv.value)
    if not isinstance(obj, dict):
        raise ValueError(f"{kv.key!r} does not hold a JSON object")
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise ValueError(f"{kv.key!r} has a metadata that is not an object")
    meta["resourceVersion"] = str(kv.mod_revision)
    return obj


@dataclass(frozen=True)
class ListResult:
    items: list[Object]
    revision: int
    """The store revision the list was read at: the list's resourceVersion."""
    continue_token: str = ""
    remaining: int | None = None


def make_continue(prefix: str, revision: int, next_key: str) -> str:
    """A `continue` token: where the next page starts and at which revision, as
    Kubernetes encodes it (base64 JSON), relative to the list's prefix so a token from one
    resource cannot be replayed against another's keys."""
    token = {"v": "meta.k8s.io/v1", "rv": revision, "start": next_key[len(prefix) :]}
    return base64.urlsafe_b64encode(json.dumps(token).encode()).decode()


def parse_continue(prefix: str, token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        revision, start = int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise InvalidContinue("continue key is not valid: " + str(exc)) from exc
    if data.get("v") != "meta.k8s.io/v1" or revision <= 0 or start.startswith("/"):
        raise InvalidContinue("continue key is not valid: unknown version or bad start")
    return revision, prefix + start


class RevisionReader:
    """The store's current revision for consistent reads from the watch cache, with
    concurrent callers sharing one store round trip.

    A consistent read must see every write acknowledged before it arrived, so the
    revision it waits for has to be read after it arrived. At most one read of the store
    is in flight; callers arriving meanwhile join the next one, which starts when that
    one ends. Under load that turns hundreds of quorum reads a second into a few.
    """

    def __init__(self, read: Callable[[], int]) -> None:
        self._read = read
        self._cond = threading.Condition()
        self._running: _Fetch | None = None
        self._next: _Fetch | None = None

    def current(self) -> int:
        with self._cond:
            if self._running is None:
                fetch, lead = _Fetch(), True
                self._running = fetch
            elif self._next is None:
                # The first to queue runs the next read, once the running one ends.
                fetch, lead = _Fetch(), True
                self._next = fetch
                while self._running is not None:
                    self._cond.wait()
                self._running, self._next = fetch, None
            else:
                fetch, lead = self._next, False
        if not lead:
            fetch.done.wait()
            return fetch.result()
        try:
            fetch.value = self._read()
        except Exception as exc:  # every caller sharing the read gets the store's error
            fetch.error = exc
        finally:
            with self._cond:
                self._running = None
                self._cond.notify_all()
            fetch.done.set()
        return fetch.result()


@dataclass
class _Fetch:
    done: threading.Event = field(default_factory=threading.Event)
    value: int = 0
    error: BaseException | None = None

    def result(self) -> int:
        if self.error is not None:
            raise self.error
        return self.value


class Storage:
    """Versioned objects over one store (thread-safe: the client is): a store cluster
    through `StoreClient`, or the in-process MVCC store of the test apiserver."""

    def __init__(self, client: KVStore, traced: tracing.Tracing = tracing.DISABLED) -> None:
        self.client = client
        self.tracing = traced

    def _txn(
        self,
        operation: str,
        compare: Sequence[Compare],
        ops: Sequence[Op],
        failure: Sequence[Op],
    ) -> TxnResult:
        """One write transaction. While a request is traced, its outcome is an attribute
        of the request's span rather than a span of its own (`traces.store_outcome`): the
        store client's request is made in the request's context, so the store's spans
        are that span's children."""
        if not self.tracing.enabled:
            return self.client.txn(compare, ops, failure)
        span = trace.get_current_span()
        if not span.is_recording():
            return self.client.txn(compare, ops, failure)
        started = time.perf_counter()
        res = self.client.txn(compare, ops, failure)
        traces.store_outcome(span, operation, res, time.perf_counter() - started)
        return res

    # -- reads ---------------------------------------------------------------------------

    def get(self, key: str, revision: int = 0) -> Object | None:
        res = self.client.get(key, revision=revision)
        return decode(res.kvs[0]) if res.kvs else None

    def current_revision(self) -> int:
        """The store's newest revision, read through the leader (linearizable)."""
        return self.client.get("/registry/", count_only=True, prefix=True).header.revision

    def check_health(self) -> None:
        """A linearizable read of one key that never exists, as kube-apiserver's etcd
        check reads `/registry/health`: it needs the store's quorum, and unlike counting
        the keys it costs the same whatever the cluster holds. Raises `StoreError`."""
        self.client.get(HEALTH_KEY)

    def list_objects(
        self,
        prefix: str,
        *,
        limit: int = 0,
        continue_token: str = "",
        revision: int = 0,
        keep: Callable[[Object], bool] | None = None,
    ) -> ListResult:
        """Objects under `prefix`, in key order, optionally `limit` of them per page.

        With `keep` (a selector), pages are filled from successive ranges until `limit`
        kept objects are found, as the real apiserver does, so a selective list still
        returns full pages. A compacted `revision` raises `storeclient.CompactedError`.
        """
        start = prefix
        if continue_token:
            revision, start = parse_continue(prefix, continue_token)
        end = storeclient.prefix_end(prefix.encode())
        items: list[Object] = []
        while True:
            want = limit - len(items) if limit else 0
            res = self.client.get(start, end, limit=want, revision=revision)
            revision = revision or res.header.revision
            for kv in res.kvs:
                obj = decode(kv)
                if keep is None or keep(obj):
                    items.append(obj)
            if not res.more or not res.kvs:
                return ListResult(items, revision)
            next_key = res.kvs[-1].key.decode() + "\x00"
            if limit and len(items) >= limit:
                remaining = res.count - len(res.kvs) if keep is None else None
                token = make_continue(prefix, revision, next_key)
                return ListResult(items, revision, token, remaining)
            start = next_key

    def scan(self, prefix: str, page: int = 1000) -> tuple[list[tuple[str, Object]], int]:
        """Every (key, object) under `prefix` at one revision, read in pages (for the
        watch cache's initial list), and that revision. Keys holding something other
        than an API object (allocation markers under /registry/ranges/, or anything an
        operator wrote by hand) are skipped with a warning, never fatal: a relist that
        fails on one value would keep the apiserver from ever becoming ready."""
        out: list[tuple[str, Object]] = []
        start, end, revision = prefix.encode(), storeclient.prefix_end(prefix.encode()), 0
        while True:
            res = self.client.get(start, end, limit=page, revision=revision)
            revision = revision or res.header.revision
            for kv in res.kvs:
                try:
                    obj = decode(kv)
                except ValueError:
                    obj = None
                if isinstance(obj, dict):
                    out.append((kv.key.decode(), obj))
                elif not kv.key.startswith(b"/registry/ranges/"):
                    log.warning("storage: %s holds no API object; skipping it", kv.key)
            if not res.more or not res.kvs:
                return out, revision
            start = res.kvs[-1].key + b"\x00"

    # -- writes --------------------------------------------------------------------------

    def create(self, key: str, obj: Object, also: Sequence[tuple[str, bytes]] = ()) -> Object:
        """Write `obj` at `key` if the key is free; `also` are more keys (e.g. a Service's
        allocated cluster IP) created in the same transaction, each required to be free."""
        keys = [(key, encode(obj)), *also]
        compare = [Compare.create(k, "=", 0) for k, _ in keys]
        puts: list[Op] = [Put(k.encode(), v) for k, v in keys]
        res = self._txn("create", compare, puts, [])
        if not res.succeeded:
            taken = [k for k, _ in keys[1:] if self.client.get(k, count_only=True).count]
            raise KeyExists(taken[0] if taken else key)
        return self._stamped(obj, res.header.revision)

    def update(
        self,
        key: str,
        obj: Object,
        revision: int,
        acquire: Sequence[tuple[str, bytes]] = (),
        release: Sequence[str] = (),
    ) -> Object:
        """Replace the object at `key`, which must still be at `revision`; `acquire` keys
        (each required free) are created and `release` keys deleted in the same txn."""
        compare = [
            Compare.mod(key, "=", revision),
            *(Compare.create(k, "=", 0) for k, _ in acquire),
        ]
        ops: list[Op] = [Put(key.encode(), encode(obj))]
        ops += [Put(k.encode(), v) for k, v in acquire]
        ops += [Delete(k.encode()) for k in release]
        res = self._txn("update", compare, ops, [Get(key.encode())])
        if not res.succeeded:
            failed = self._failed(key, res)
            if (
                isinstance(failed, RevisionConflict)
                and failed.current is not None
                and failed.current["metadata"]["resourceVersion"] == str(revision)
            ):
                raise KeyExists(acquire[0][0] if acquire else key)
            raise failed
        return self._stamped(obj, res.header.revision)

    def delete(self, key: str, revision: int = 0, also: Sequence[str] = ()) -> Object:
        """Delete the object at `key` (only if still at `revision`, when given) and return
        its last state; `also` are keys released with it (a Service's cluster IP)."""
        compare = [Compare.mod(key, "=", revision)] if revision else [Compare.create(key, ">", 0)]
        deletes: list[Op] = [
            Delete(key.encode(), prev_kv=True),
            *(Delete(k.encode()) for k in also),
        ]
        res = self._txn("delete", compare, deletes, [Get(key.encode())])
        if not res.succeeded:
            raise self._failed(key, res)
        deleted = res.responses[0]
        assert isinstance(deleted, storeclient.DeleteResult)
        if not deleted.prev_kvs:
            raise KeyNotFound(key)
        last = decode(deleted.prev_kvs[0])
        last["metadata"]["resourceVersion"] = str(res.header.revision)
        return last

    def guaranteed_update(
        self,
        key: str,
        mutate: Callable[[Object], Object | None],
        *,
        current: Object | None = None,
        guess: Object | None = None,
        retries: int = 16,
        side_keys: Callable[[], tuple[Sequence[tuple[str, bytes]], Sequence[str]]] | None = None,
    ) -> tuple[Object, bool]:
        """Read-modify-write `key` until it sticks: `mutate` gets the current object (a
        copy it may change) and returns the new one, or None for "no change".

        Conflicts with concurrent writers retry with the value that won, which is the
        apiserver's way to apply patches, status merges and finalizer removals without
        losing anyone's write. Errors `mutate` raises (validation, preconditions) end it.
        Returns the stored object and whether it was written.

        `current` is the object as just read from the store. `guess` is a copy that may
        be stale (the watch cache's), tried first instead of a read, as Kubernetes'
        GuaranteedUpdate tries its cached object: the write's revision check catches a
        stale one (the conflict brings the current value). Whatever goes wrong on the
        guess alone (a conflict, an error `mutate` raises, such as a pinned
        resourceVersion the stale copy does not have, or a change that is empty on it) is
        tried again on a fresh read before it counts, so a guess never changes an answer;
        `retries` counts attempts on fresh values only.
        """
        fresh = guess is None or current is not None
        obj = current if current is not None else guess if guess is not None else self.get(key)
        attempts = 0
        while True:
            if obj is None:
                raise KeyNotFound(key)
            revision = int(obj["metadata"]["resourceVersion"])
            try:
                new = mutate(fastjson.copy(obj))
            except Exception:
                if fresh:
                    raise
                obj, fresh = self.get(key), True
                continue
            if new is None:
                if fresh:
                    return obj, False
                obj, fresh = self.get(key), True
                continue
            acquire, release = side_keys() if side_keys is not None else ((), ())
            try:
                return self.update(key, new, revision, acquire, release), True
            except RevisionConflict as exc:
                attempts += fresh
                obj, fresh = exc.current, True
                if attempts >= retries:
                    raise RevisionConflict(key, obj) from None

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _stamped(obj: Object, revision: int) -> Object:
        out = dict(obj)
        out["metadata"] = {**obj.get("metadata", {}), "resourceVersion": str(revision)}
        return out

    @staticmethod
    def _failed(key: str, res: TxnResult) -> StorageError:
        got = res.responses[0] if res.responses else None
        if isinstance(got, storeclient.RangeResult) and got.kvs:
            return RevisionConflict(key, decode(got.kvs[0]))
        return KeyNotFound(key)
