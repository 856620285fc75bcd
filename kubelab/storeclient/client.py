"""`StoreClient`: every call of etcd's JSON gateway, typed, over any of a cluster's
endpoints with failover (the rules are in the package's docstring).
"""

from __future__ import annotations

import http.client
import os
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httptools
from opentelemetry import propagate

from kubelab import fastjson, pki
from kubelab.grpccodes import GrpcCode
from kubelab.storeclient import http as storehttp
from kubelab.storeclient.errors import (
    DeadlineExceeded,
    NotFound,
    Unavailable,
    Unreachable,
    error_from_body,
)
from kubelab.storeclient.http import describe_failure
from kubelab.storeclient.kvstore import KVStore
from kubelab.storeclient.streams import Stream, Watch
from kubelab.storeclient.wire import (
    Alarm,
    AlarmResult,
    Delete,
    DeleteResult,
    Get,
    Header,
    Health,
    LeaseGrant,
    LeaseKeepAlive,
    LeaseList,
    LeaseTimeToLive,
    MemberAddResult,
    MemberList,
    Put,
    PutResult,
    RangeResult,
    Response,
    SnapshotSaved,
    Status,
    Txn,
    TxnResult,
    WatchCreate,
    set_field,
    unb64,
)


def trace_headers() -> bytes:
    """The current span's trace context (`traceparent`, OpenTelemetry's propagators) as
    header lines, so that the store's spans of the call join the caller's trace (the
    apiserver's request); none outside a span."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return "".join(f"{name}: {value}\r\n" for name, value in carrier.items()).encode()


class _Retry(Exception):
    """An endpoint failed in a way that may allow trying the next one."""

    def __init__(self, reason: str, never_sent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.never_sent = never_sent


_T = TypeVar("_T")

_SNAPSHOT_CHUNK_TIMEOUT = 60.0  # a member may take a while to start streaming a big DB


class StoreClient(KVStore):
    """A client of one store cluster, reached through any of `endpoints`: `KVStore`'s
    calls, and leases, membership and maintenance.

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
        headers = trace_headers()

        def attempt(endpoint: str) -> dict[str, Any]:
            try:
                pool = self._pool(endpoint)
                status, raw = pool.request("POST", path, fastjson.dumps(body), headers)
            except storehttp.ResponseTimeout:
                raise DeadlineExceeded(
                    GrpcCode.DEADLINE_EXCEEDED,
                    f"{endpoint}: no answer to {path} within {self.timeout:g}s",
                ) from None
            except storehttp.ConnectFailed as exc:
                raise _Retry(exc.strerror or str(exc), never_sent=True) from None
            except (OSError, httptools.HttpParserError) as exc:
                raise _Retry(describe_failure(exc), never_sent=False) from None
            try:
                data = fastjson.loads(raw)
            except ValueError:
                data = None
            if status != 200 or not isinstance(data, dict):
                err = error_from_body(data, status, endpoint + path)
                if isinstance(err, Unavailable) and idempotent:
                    raise _Retry(err.message, never_sent=False)
                raise err
            return data

        return self._failover(attempt, idempotent=idempotent, what=path)

    def _pool(self, endpoint: str) -> storehttp.Pool:
        """The kept-alive connections to `endpoint` for unary calls (`http`: urllib3's
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

    def _stream(self, path: str, body: dict[str, Any], read_timeout: float | None) -> Stream:
        """Open a streamed call on the first endpoint that answers (all are idempotent)."""

        def attempt(endpoint: str) -> Stream:
            url = urlsplit(endpoint)
            host, port = url.hostname or "127.0.0.1", url.port
            conn: http.client.HTTPConnection
            if url.scheme == "https":
                conn = http.client.HTTPSConnection(
                    host, port, timeout=self.timeout, context=self._ssl_context()
                )
            else:
                conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
            stream = Stream(endpoint, conn)
            try:
                conn.connect()
            except OSError as exc:
                conn.close()
                raise _Retry(describe_failure(exc), never_sent=True) from None
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
                raise _Retry(describe_failure(exc), never_sent=False) from None
            except Unavailable as exc:
                raise _Retry(exc.message, never_sent=False) from None
            return stream

        return self._failover(attempt, idempotent=True, what=path)

    # -- KV ------------------------------------------------------------------------------

    def range(self, request: Get) -> RangeResult:
        return RangeResult.parse(self._post("/v3/kv/range", request.body(), idempotent=True))

    def _put(self, request: Put) -> PutResult:
        return PutResult.parse(self._post("/v3/kv/put", request.body(), idempotent=False))

    def _delete_range(self, request: Delete) -> DeleteResult:
        body = request.body()
        return DeleteResult.parse(self._post("/v3/kv/deleterange", body, idempotent=False))

    def _txn(self, request: Txn) -> TxnResult:
        return TxnResult.parse(self._post("/v3/kv/txn", request.body(), idempotent=False))

    def compact(self, revision: int, physical: bool = False) -> Response:
        body: dict[str, Any] = {"revision": str(revision)}
        set_field(body, "physical", physical)
        d = self._post("/v3/kv/compaction", body, idempotent=False)
        return Response(Header.parse(d), raw=d)

    # -- leases --------------------------------------------------------------------------

    def lease_grant(self, ttl: int, id: int = 0) -> LeaseGrant:
        """A lease of `ttl` seconds; the store picks the id unless `id` is given."""
        body: dict[str, Any] = {"TTL": str(ttl)}
        set_field(body, "ID", id, str(id))
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
        set_field(body, "keys", keys)
        return LeaseTimeToLive.parse(self._post("/v3/lease/timetolive", body, idempotent=True))

    def lease_leases(self) -> LeaseList:
        return LeaseList.parse(self._post("/v3/lease/leases", {}, idempotent=True))

    # -- cluster -------------------------------------------------------------------------

    def member_list(self) -> MemberList:
        return MemberList.parse(self._post("/v3/cluster/member/list", {}, idempotent=True))

    def member_add(self, peer_urls: Sequence[str], is_learner: bool = False) -> MemberAddResult:
        body: dict[str, Any] = {"peerURLs": list(peer_urls)}
        set_field(body, "isLearner", is_learner)
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
                    blob = unb64(frame, "blob")
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
                raise _Retry(describe_failure(exc), never_sent=True) from None
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

    def _watch(self, request: WatchCreate) -> Watch:
        body = {"create_request": request.body()}
        return Watch(self._stream("/v3/watch", body, None))
