"""`kubelab-store`: one member of the replicated store, as a daemon.

Flags follow etcd's (`--name`, `--data-dir`, `--listen-client-urls`, `--initial-cluster`,
`--quota-backend-bytes`, TLS files, ...) so that anyone who has run etcd can run this,
and so that `labadm` can write the same static pod manifest for either.

The client API is etcd's v3 JSON gateway: same paths, same JSON shapes (see `gateway`),
same error bodies `{"error", "message", "code"}` with gRPC codes. Writes go through Raft;
reads are linearizable (ReadIndex) unless `serializable` is set; watches and lease
keep-alives are streams of `{"result": ...}` lines.

Tracing (`--tracing-endpoint`; docs/architecture.md, "Tracing"): a unary request that
carries a W3C `traceparent` header is a `Store.<call>` span continuing the client's
trace, and a watch request's each created watcher a `Store.watch` span; its writes'
Raft work is traced on every member (`controlplane.store.spans`). A request without one
makes no span: the store traces what its clients trace.

    kubelab-store --name s1 --data-dir /var/lib/kubelab-store \\
        --listen-client-urls http://127.0.0.1:2379 \\
        --listen-peer-urls https://127.0.0.1:2380 \\
        --initial-cluster s1=https://127.0.0.1:2380,... \\
        --peer-cert-file ... --peer-key-file ... --peer-trusted-ca-file ...
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import contextlib
import json
import logging
import secrets
import signal
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import prometheus_client
from aiohttp import web
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.export import SpanExporter
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from controlplane.store import gateway, mvcc, spans
from controlplane.store.lessor import Lessor, minimum_ttl
from controlplane.store.node import (
    ClusterState,
    NodeConfig,
    RaftNode,
    StoreTimeoutError,
    member_id,
)
from controlplane.store.raft import (
    ConfChangeError,
    ConfChangeType,
    ProposalDroppedError,
)
from controlplane.store.service import (
    DEFAULT_QUOTA_BYTES,
    NOSPACE,
    StoreStateMachine,
    alarm_command,
    attributes_command,
    mvcc_command,
    snapshot_file_bytes,
)
from controlplane.store.wal import StoreStorageError
from controlplane.store.watch import WatchBatch, Watcher, WatchHub
from kubelab import gcpause, pki, tracing
from kubelab.grpccodes import GrpcCode, http_status

log = logging.getLogger("kubelab.store.server")

MAX_REQUEST_BYTES = int(1.5 * 1024 * 1024)  # etcd's --max-request-bytes default
# etcd checks MAX_REQUEST_BYTES against the encoded request, after its gRPC layer took
# messages of up to MAX_REQUEST_BYTES + 512 KiB. Our requests arrive as JSON, where base64
# makes values 4/3 as long, so the body limit is that gRPC limit in base64 terms (plus
# room for field names); the request itself is then measured as etcd measures it.
MAX_BODY_BYTES = (MAX_REQUEST_BYTES + 512 * 1024) * 4 // 3 + 64 * 1024
ERR_TOO_LARGE = "etcdserver: request is too large"
SNAPSHOT_CHUNK = 32 * 1024
LEARNER_READY_FRACTION = 0.9  # etcd's readyPercent: of the leader's log a learner must hold
SHUTDOWN_TIMEOUT = 15.0  # seconds a graceful stop may take before the process exits anyway

VERSION = "3.4.0-kubelab"  # the etcd API version served, and who serves it
CLUSTER_VERSION = "3.4.0"


class GatewayError(Exception):
    def __init__(self, grpc_code: int, message: str) -> None:
        super().__init__(message)
        self.grpc_code = grpc_code


STREAMED = frozenset({"/v3/watch", "/v3/lease/keepalive", "/v3/maintenance/snapshot"})
"""The calls that are streams: no span of their own (a watcher's creation has one)."""

# Span attributes of the store's requests.
HTTP_STATUS_CODE = "http.response.status_code"
WATCH_KEY = "kubelab.store.key"
WATCH_RANGE_END = "kubelab.store.range_end"
WATCH_START_REVISION = "kubelab.store.start_revision"

EMPTY_WATCH_RANGE = {"created": True, "canceled": True,
                     "cancel_reason": "mvcc: watcher range is empty"}  # fmt: skip
"""etcd's answer to a watch whose range_end does not sort after its key."""


@contextlib.contextmanager
def _as_gateway_errors() -> Iterator[None]:
    """The Raft node's refusals as etcd answers them: no leader (a proposal or read the
    core dropped) and a request timed out (no quorum in time)."""
    try:
        yield
    except ProposalDroppedError as exc:
        raise GatewayError(GrpcCode.UNAVAILABLE, f"etcdserver: no leader ({exc})") from None
    except StoreTimeoutError as exc:
        raise GatewayError(
            GrpcCode.DEADLINE_EXCEEDED, f"etcdserver: request timed out ({exc})"
        ) from None


def _empty_range(req: gateway.WatchCreate) -> bool:
    return req.range_end not in (b"", b"\0") and req.key >= req.range_end


def _error_body(code: int, message: str) -> dict[str, Any]:
    return {"error": message, "message": message, "code": code}


def _error_response(code: int, message: str) -> web.Response:
    return web.json_response(_error_body(code, message), status=http_status(code))


def _stream_error(code: int, message: str) -> bytes:
    """An error inside a stream whose 200 has been sent: grpc-gateway's shape for it."""
    status = http_status(code)
    frame = {"grpc_code": code, "http_code": status, "message": message,
             "http_status": HTTPStatus(status).phrase}  # fmt: skip
    return json.dumps({"error": frame}).encode() + b"\n"


class _NodeCounters(Collector):
    """The node's tallies that etcd exposes as counters (its committed-proposals tally is
    a gauge). A `Counter` cannot read a value kept elsewhere, hence a collector."""

    def __init__(self, node: RaftNode) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily("etcd_server_leader_changes_seen_total", "leader changes seen",
                                  value=self.node.leader_changes)  # fmt: skip
        yield CounterMetricFamily("etcd_server_proposals_failed_total", "proposals failed",
                                  value=self.node.proposals_failed)  # fmt: skip
        yield CounterMetricFamily(
            "kubelab_store_heartbeats_skipped_total",
            "regular heartbeats not sent: the follower heard from the leader within the interval",
            value=self.node.heartbeats_skipped,
        )


class Metrics:
    """Prometheus metrics, named (and typed) like etcd's where etcd has one."""

    def __init__(self, store: Store, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = self.registry
        node = store.node
        Gauge("etcd_server_has_leader", "1 if a leader exists", registry=r).set_function(
            lambda: 1.0 if node.leader else 0.0
        )
        Gauge("etcd_server_is_leader", "1 if this member leads", registry=r).set_function(
            lambda: 1.0 if node.leader == node.id else 0.0
        )
        Gauge("kubelab_store_raft_term", "current Raft term", registry=r).set_function(
            lambda: float(node.term)
        )
        r.register(_NodeCounters(node))
        Gauge("etcd_server_proposals_committed_total", "proposals committed",
              registry=r).set_function(lambda: float(node.proposals_committed))  # fmt: skip
        Gauge("etcd_mvcc_db_total_size_in_bytes", "approximate store size",
              registry=r).set_function(lambda: float(store.sm.mvcc.size_bytes()))  # fmt: skip
        Gauge("etcd_debugging_mvcc_watcher_total", "watchers", registry=r).set_function(
            lambda: float(len(store.hub))
        )
        self.fsync = Histogram(
            "etcd_disk_wal_fsync_duration_seconds",
            "WAL fsync latency",
            buckets=(0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1, 2),
            registry=r,
        )
        self.requests = Counter(
            "kubelab_store_requests_total", "client requests", ["path", "code"], registry=r
        )
        node.on_fsync = self.fsync.observe
        # Garbage-collector pauses stop the whole member (Raft loop included); a pause
        # shows up directly in the tail latency, so it is measured.
        self.gc_pause = Histogram(
            "kubelab_store_gc_pause_seconds",
            "Python garbage collector pauses, by generation",
            ["generation"],
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1),
            registry=r,
        )
        gcpause.install(lambda gen, seconds: self.gc_pause.labels(str(gen)).observe(seconds))


class Store:
    """One member: the Raft node, the state machine, watches, leases, and the HTTP API.
    Its spans go to `tracing_endpoint` (`--tracing-endpoint`) or to `span_exporter`
    (tests); with neither (nor the standard variables), it does not trace."""

    def __init__(
        self,
        config: NodeConfig,
        quota_bytes: int,
        progress_interval: float,
        tracing_endpoint: str = "",
        span_exporter: SpanExporter | None = None,
    ) -> None:
        min_ttl = minimum_ttl(config.tick_interval * config.election_ticks)
        self.sm = StoreStateMachine(quota_bytes=quota_bytes, min_lease_ttl=min_ttl)
        registry = CollectorRegistry()
        self.tracing = tracing.setup(
            "store", config.name, registry, tracing_endpoint, exporter=span_exporter
        )
        self._tracer = self.tracing.tracer if self.tracing.enabled else None
        self.node = RaftNode(config, self.sm, self._tracer)
        self.hub = WatchHub(self.sm.mvcc)
        # Header fields that never change, rendered once (every response carries them).
        self._cluster_id = str(member_id(("cluster", 0), config.cluster_token))
        self._member_id = str(self.node.id)
        self._streams: set[asyncio.Queue[Any]] = set()
        self.lessor = Lessor(min_ttl)
        self.progress_interval = progress_interval
        self.metrics = Metrics(self, registry)
        self._lease_task: asyncio.Task[None] | None = None
        self._publish_task: asyncio.Task[None] | None = None
        self.sm.mvcc.lease_listener = self._on_lease
        self.sm.on_restore = self._on_restore
        self.node.on_leader_change = self._on_leader_change

    # -- leases --------------------------------------------------------------------

    def _on_lease(self, kind: mvcc.LeaseEvent, lease_id: int, ttl: int) -> None:
        if kind is mvcc.LeaseEvent.REVOKED:
            self.lessor.revoked(lease_id)
        else:
            self.lessor.granted(lease_id, ttl)

    def _on_restore(self) -> None:
        """A snapshot replaced the state: reset lease deadlines, and make every watcher
        reread the history it has not seen (the revisions the snapshot skipped)."""
        self.lessor.reset((lid, lease.ttl) for lid, lease in self.sm.mvcc.leases.items())
        self.hub.resync_all()

    def close_streams(self) -> None:
        """End every open watch stream, so a shutdown does not wait on them."""
        for out in self._streams:
            out.put_nowait(None)

    def _on_leader_change(self, lead: int) -> None:
        if lead == self.node.id:
            self.lessor.promote()

    async def _expire_leases(self) -> None:
        """The leader revokes expired leases (their keys are deleted in one revision)."""
        while True:
            await asyncio.sleep(0.5)
            if self.node.leader != self.node.id:
                continue
            for lease_id in self.lessor.expired():
                log.info("store: lease %x expired; revoking it", lease_id)
                try:
                    await self.node.propose(mvcc_command(mvcc.LeaseRevokeRequest(lease_id)))
                except mvcc.LeaseNotFoundError:
                    self.lessor.revoked(lease_id)
                except (ProposalDroppedError, StoreTimeoutError):
                    self.lessor.retry(lease_id)

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        await self.node.start()
        self._on_restore()
        self._lease_task = asyncio.create_task(self._expire_leases())
        self._publish_task = asyncio.create_task(self._publish())

    async def _publish(self) -> None:
        """Publish this member's name and client URLs through Raft once a leader accepts
        them (retrying meanwhile), unless the state already holds them."""
        config = self.node.config
        mine = (config.name, list(config.client_urls))
        command = attributes_command(self.node.id, *mine)
        while self.sm.attributes.get(self.node.id) != mine:
            if not self.node.leader:  # no proposal until there is a leader to take it
                await asyncio.sleep(0.1)
                continue
            try:
                await self.node.propose(command)
                log.info("store: published %s's client URLs %s", config.name, ",".join(mine[1]))
            except (ProposalDroppedError, StoreTimeoutError):
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        for task in (self._lease_task, self._publish_task):
            if task is not None:
                task.cancel()
        self.hub.close()
        await self.node.stop()
        self.tracing.shutdown()

    # -- helpers -------------------------------------------------------------------

    def header(self, revision: int | None = None) -> dict[str, str]:
        """A response header as of `revision` (default: the current one). Revision 0 is
        left out, as proto3 leaves out zeros: etcd's cluster calls and its compacted-watch
        cancellation answer with such a header."""
        out = {
            "cluster_id": self._cluster_id,
            "member_id": self._member_id,
            "revision": str(self.sm.mvcc.revision if revision is None else revision),
            "raft_term": str(self.node.term),
        }
        if revision == 0:
            del out["revision"]
        return out

    def _request_context(self, request: web.Request) -> Context | None:
        """The client's trace context (its `traceparent` header) if this member traces
        and the client sent a valid one, else None: the request makes no span."""
        if self._tracer is None:
            return None
        context = propagate.extract(request.headers)
        return context if trace.get_current_span(context).get_span_context().is_valid else None

    async def _read_body(self, request: web.Request) -> Any:
        return parse_json(await request.read() or b"{}")

    async def _write(self, req: mvcc.Request) -> Any:
        mvcc.check_request(req)  # refuse bad requests before they reach the log
        command = mvcc_command(req)
        if len(command) > MAX_REQUEST_BYTES:
            raise GatewayError(GrpcCode.INVALID_ARGUMENT, ERR_TOO_LARGE)
        return await self._propose(command)

    async def _propose(self, command: bytes) -> Any:
        with _as_gateway_errors():
            return await self.node.propose(command)

    async def _linearize(self) -> None:
        with _as_gateway_errors():
            await self.node.read_index()

    # -- KV --------------------------------------------------------------------------

    async def range(self, request: web.Request) -> web.Response:
        req, serializable = gateway.range_request(await self._read_body(request))
        mvcc.check_request(req)
        if not serializable:
            await self._linearize()
        resp = self.sm.mvcc.range(req)
        return web.json_response(
            {"header": self.header(resp.revision), **gateway.range_json(resp, req.keys_only)}
        )

    async def put(self, request: web.Request) -> web.Response:
        resp = await self._write(gateway.put_request(await self._read_body(request)))
        return web.json_response({"header": self.header(resp.revision), **gateway.put_json(resp)})

    async def delete_range(self, request: web.Request) -> web.Response:
        resp = await self._write(gateway.delete_request(await self._read_body(request)))
        return web.json_response(
            {"header": self.header(resp.revision), **gateway.delete_json(resp)}
        )

    async def txn(self, request: web.Request) -> web.Response:
        req = gateway.txn_request(await self._read_body(request))
        if mvcc.is_read_only(req):
            mvcc.check_request(req)
            await self._linearize()
            resp = self.sm.mvcc.read_txn(req)
        else:
            resp = await self._write(req)
        return web.json_response(gateway.txn_json(resp, self.header(resp.revision), req))

    async def compaction(self, request: web.Request) -> web.Response:
        resp = await self._write(gateway.compaction_request(await self._read_body(request)))
        return web.json_response({"header": self.header(resp.revision)})

    # -- watch -----------------------------------------------------------------------

    async def watch(self, request: web.Request) -> web.StreamResponse:
        """A bidirectional watch stream: WatchRequest objects in, `{"result": ...}` out.

        The 200 goes out with the first frame, so a malformed first request is answered
        with a plain 400 error body; a malformed later one ends the stream with an error
        frame, as etcd's gateway does. In a traced request, each watcher created is a
        `Store.watch` span (the stream itself lasts as long as its client: no span).
        """
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        context = self._request_context(request)
        # None in the queue ends the stream: the member is shutting down.
        out: asyncio.Queue[dict[str, Any] | gateway.BadRequest | None] = asyncio.Queue()
        self._streams.add(out)
        watchers: dict[int, Watcher] = {}
        pumps: list[asyncio.Task[None]] = []
        next_id = 0

        async def pump(wid: int, w: Watcher, progress: bool, created_at: int) -> None:
            while True:
                timeout = self.progress_interval if progress else None
                batch: WatchBatch | None = await self.hub.next_batch(w, timeout)
                if batch is None:  # quiet for a progress interval: say where we are
                    out.put_nowait(self._watch_result(wid, {}))
                    continue
                fields, revision = gateway.watch_batch_json(batch, created_at)
                out.put_nowait(self._watch_result(wid, fields, revision))
                if batch.canceled:
                    watchers.pop(wid, None)
                    return

        async def read_requests() -> None:
            nonlocal next_id
            try:
                async for obj in _json_objects(request):
                    req = gateway.watch_request(obj)
                    if req is None:
                        continue  # an empty request: etcd ignores it
                    if isinstance(req, gateway.WatchCreate) and _empty_range(req):
                        out.put_nowait(self._watch_result(-1, EMPTY_WATCH_RANGE))
                    elif isinstance(req, gateway.WatchCreate):
                        wid = req.watch_id or next_id
                        next_id = max(next_id, wid + 1)
                        created_at = self.sm.mvcc.revision
                        with self._watch_span(context, req, created_at):
                            w = self.hub.create(
                                req.key,
                                req.range_end,
                                req.start_revision,
                                prev_kv=req.prev_kv,
                                filter_put=req.filter_put,
                                filter_delete=req.filter_delete,
                            )
                        watchers[wid] = w
                        out.put_nowait(self._watch_result(wid, {"created": True}))
                        pumps.append(
                            asyncio.create_task(pump(wid, w, req.progress_notify, created_at))
                        )
                    elif isinstance(req, gateway.WatchCancel):
                        cancelled = watchers.pop(req.watch_id, None)
                        if cancelled is not None:
                            self.hub.cancel(cancelled)
                    else:
                        out.put_nowait(self._watch_result(-1, {}))
            except gateway.BadRequest as err:
                out.put_nowait(err)

        reader = asyncio.create_task(read_requests())
        try:
            while True:
                frame = await out.get()
                if frame is None:
                    break
                if isinstance(frame, gateway.BadRequest):
                    if not resp.prepared:
                        raise frame
                    await resp.write(_stream_error(GrpcCode.INVALID_ARGUMENT, str(frame)))
                    break
                if not resp.prepared:
                    await resp.prepare(request)
                await resp.write(json.dumps(frame).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._streams.discard(out)
            reader.cancel()
            for task in pumps:
                task.cancel()
            for w in watchers.values():
                self.hub.cancel(w)
        return resp

    @contextlib.contextmanager
    def _watch_span(
        self, context: Context | None, req: gateway.WatchCreate, revision: int
    ) -> Iterator[None]:
        """A watcher's creation as the `Store.watch` span of a traced request."""
        if context is None or self._tracer is None:
            yield
            return
        attributes: dict[str, str | int] = {
            WATCH_KEY: req.key.decode(errors="backslashreplace"),
            WATCH_RANGE_END: req.range_end.decode(errors="backslashreplace"),
            WATCH_START_REVISION: req.start_revision,
            spans.REVISION: revision,
        }
        with self._tracer.start_as_current_span(
            "Store.watch", context=context, kind=trace.SpanKind.SERVER, attributes=attributes
        ):
            yield

    def _watch_result(
        self, wid: int, extra: dict[str, Any], revision: int | None = None
    ) -> dict[str, Any]:
        result: dict[str, Any] = {"header": self.header(revision)}
        if wid:
            result["watch_id"] = str(wid)
        result.update(extra)
        return {"result": result}

    # -- leases ----------------------------------------------------------------------

    async def lease_grant(self, request: web.Request) -> web.Response:
        ttl, lease_id = gateway.lease_grant(await self._read_body(request))
        if lease_id == 0:
            lease_id = secrets.randbits(63) or 1
        resp = await self._write(mvcc.LeaseGrantRequest(lease_id, ttl))
        return web.json_response(
            {"header": self.header(resp.revision), "ID": str(resp.id), "TTL": str(resp.ttl)}
        )

    async def lease_revoke(self, request: web.Request) -> web.Response:
        lease_id = gateway.lease_id(await self._read_body(request))
        resp = await self._write(mvcc.LeaseRevokeRequest(lease_id))
        return web.json_response({"header": self.header(resp.revision)})

    async def lease_keepalive(self, request: web.Request) -> web.StreamResponse:
        """A stream: one `{"result": {ID, TTL}}` per request object; TTL 0 (omitted) for
        a lease that does not exist, as etcd answers. An error before the first answer is
        a plain error response, one after it an error frame that ends the stream."""
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        try:
            async for obj in _json_objects(request):
                lease_id = gateway.lease_id(obj)
                result: dict[str, Any] = {"ID": str(lease_id)}
                try:
                    ka = await self._propose(mvcc_command(mvcc.LeaseKeepAliveRequest(lease_id)))
                    result["TTL"] = str(ka.ttl)
                except mvcc.LeaseNotFoundError:
                    pass
                if not resp.prepared:
                    await resp.prepare(request)
                frame = {"result": {"header": self.header(), **result}}
                await resp.write(json.dumps(frame).encode() + b"\n")
        except (GatewayError, gateway.BadRequest) as err:
            if not resp.prepared:
                raise
            code = err.grpc_code if isinstance(err, GatewayError) else GrpcCode.INVALID_ARGUMENT
            await resp.write(_stream_error(code, str(err)))
        if not resp.prepared:  # an empty request stream: an empty answer
            await resp.prepare(request)
        return resp

    async def lease_timetolive(self, request: web.Request) -> web.Response:
        lease_id, with_keys = gateway.lease_timetolive(await self._read_body(request))
        await self._linearize()
        out: dict[str, Any] = {"header": self.header()}
        if lease_id:  # proto3 leaves a zero ID out
            out["ID"] = str(lease_id)
        lease = self.sm.mvcc.leases.get(lease_id)
        if lease is None:
            out["TTL"] = "-1"
        else:
            out["TTL"] = str(self.lessor.remaining(lease_id))
            out["grantedTTL"] = str(lease.ttl)
            if with_keys and lease.keys:
                out["keys"] = [gateway.b64(k) for k in sorted(lease.keys)]
        return web.json_response(out)

    async def lease_leases(self, request: web.Request) -> web.Response:
        gateway.fields(await self._read_body(request), set(), "lease leases")
        await self._linearize()
        out: dict[str, Any] = {"header": self.header()}
        ids = self.sm.mvcc.lease_ids()
        if ids:
            out["leases"] = [{"ID": str(i)} for i in ids]
        return web.json_response(out)

    # -- cluster ---------------------------------------------------------------------

    def _members_json(self) -> list[dict[str, Any]]:
        st = self.node.status()
        out = []
        for mid, (host, port) in sorted(st.members.items()):
            m: dict[str, Any] = {"ID": str(mid), "peerURLs": [f"https://{host}:{port}"]}
            published = self.sm.attributes.get(mid)
            if published is not None:
                m["name"], m["clientURLs"] = published[0], list(published[1])
            elif mid == self.node.id:
                m["name"] = self.node.config.name
                m["clientURLs"] = list(self.node.config.client_urls)
            if mid in st.learners:
                m["isLearner"] = True
            out.append(m)
        return out

    def _cluster_header(self) -> dict[str, str]:
        """etcd's cluster service answers with a header that has no revision."""
        return self.header(0)

    async def member_list(self, request: web.Request) -> web.Response:
        gateway.fields(await self._read_body(request), {"linearizable"}, "member list")
        return web.json_response(
            {"header": self._cluster_header(), "members": self._members_json()}
        )

    async def _conf_change(
        self, kind: ConfChangeType, mid: int, addr: tuple[str, int] | None = None
    ) -> None:
        try:
            await self.node.propose_conf_change(kind, mid, addr)
        except ProposalDroppedError as exc:
            raise GatewayError(GrpcCode.UNAVAILABLE, f"etcdserver: {exc}") from None
        except ConfChangeError as exc:
            raise GatewayError(GrpcCode.FAILED_PRECONDITION, f"etcdserver: {exc}") from None
        except StoreTimeoutError as exc:
            raise GatewayError(GrpcCode.DEADLINE_EXCEEDED, f"etcdserver: {exc}") from None

    async def member_add(self, request: web.Request) -> web.Response:
        body = gateway.fields(await self._read_body(request), {"peerURLs", "isLearner"},
                               "member add")  # fmt: skip
        urls = body.get("peerURLs") or []
        if not isinstance(urls, list) or not urls:
            raise GatewayError(GrpcCode.INVALID_ARGUMENT, "member add: peerURLs is required")
        try:
            addr = parse_url(str(urls[0]), "peerURLs")
        except ValueError as exc:
            raise GatewayError(GrpcCode.INVALID_ARGUMENT, str(exc)) from None
        mid = member_id(addr, self.node.config.cluster_token)
        if mid in self.node.status().members:
            raise GatewayError(GrpcCode.FAILED_PRECONDITION, "etcdserver: Peer URLs already exists")
        learner = bool(body.get("isLearner"))
        kind = ConfChangeType.ADD_LEARNER_NODE if learner else ConfChangeType.ADD_NODE
        await self._conf_change(kind, mid, addr)
        member: dict[str, Any] = {"ID": str(mid), "peerURLs": [str(urls[0])]}
        if learner:
            member["isLearner"] = True
        return web.json_response(
            {"header": self._cluster_header(), "member": member, "members": self._members_json()}
        )

    async def member_remove(self, request: web.Request) -> web.Response:
        mid = gateway.member_id(await self._read_body(request), "member remove")
        if mid not in self.node.status().members:
            raise GatewayError(GrpcCode.NOT_FOUND, "etcdserver: member not found")
        await self._conf_change(ConfChangeType.REMOVE_NODE, mid)
        return web.json_response(
            {"header": self._cluster_header(), "members": self._members_json()}
        )

    async def member_promote(self, request: web.Request) -> web.Response:
        mid = gateway.member_id(await self._read_body(request), "member promote")
        st = self.node.status()
        if mid not in st.members:
            raise GatewayError(GrpcCode.NOT_FOUND, "etcdserver: member not found")
        if mid not in st.learners:
            raise GatewayError(
                GrpcCode.FAILED_PRECONDITION, "etcdserver: can only promote a learner member"
            )
        self._check_learner_ready(mid)
        await self._conf_change(ConfChangeType.ADD_NODE, mid, st.members[mid])
        return web.json_response(
            {"header": self._cluster_header(), "members": self._members_json()}
        )

    def _check_learner_ready(self, mid: int) -> None:
        """As etcd, refuse to promote a learner whose log lags the leader's (its match
        index under 90 % of the leader's): a voter that far behind raises the quorum
        without helping to reach it, so writes could stall until it caught up.
        Only the leader tracks the members' progress; membership changes are made on
        the leader (a follower refuses them, naming it)."""
        progress = self.node.raw.status().progress
        learner, leader = progress.get(mid), progress.get(self.node.id)
        if (
            learner is not None
            and leader is not None
            and learner.match < leader.match * LEARNER_READY_FRACTION
        ):
            raise GatewayError(
                GrpcCode.FAILED_PRECONDITION,
                "etcdserver: can only promote a learner member which is in sync with leader",
            )

    # -- maintenance -----------------------------------------------------------------

    async def status(self, request: web.Request) -> web.Response:
        gateway.fields(await self._read_body(request), set(), "status")
        st = self.node.status()
        out: dict[str, Any] = {
            "header": self.header(),
            "version": VERSION,
            "dbSize": str(self.sm.mvcc.size_bytes()),
            "leader": str(st.leader),
            "raftIndex": str(st.commit),
            "raftTerm": str(st.term),
            "raftAppliedIndex": str(st.applied),
            "dbSizeInUse": str(self.sm.mvcc.size_bytes()),
        }
        if self.sm.alarms:
            out["errors"] = [f"memberID:{self.node.id} alarm:{a} " for a in sorted(self.sm.alarms)]
        if self.node.id in st.learners:
            out["isLearner"] = True
        return web.json_response(out)

    async def alarm(self, request: web.Request) -> web.Response:
        """etcd's Alarm call: GET lists the raised alarms (every type for NONE), ACTIVATE
        and DEACTIVATE answer with the alarm they changed. Like etcd's, the answer has no
        header.

        Alarms here are cluster-wide state, raised by every member at the same log index,
        so they are listed under the answering member's ID and a DEACTIVATE matches any
        memberID. Only NOSPACE exists: activating CORRUPT is refused.
        """
        action, _member, alarm = gateway.alarm_request(await self._read_body(request))
        alarms: list[str]  # listed, or changed
        if action is gateway.AlarmAction.GET:
            await self._linearize()
            raised = sorted(self.sm.alarms)
            alarms = (
                raised
                if alarm is gateway.AlarmType.NONE
                else [a for a in raised if a == alarm.name]
            )
        elif alarm is gateway.AlarmType.NONE:
            alarms = []  # etcd: activating or deactivating no alarm does nothing
        elif action is gateway.AlarmAction.ACTIVATE and alarm is not gateway.AlarmType.NOSPACE:
            raise GatewayError(
                GrpcCode.INVALID_ARGUMENT, f"alarm: kubelab's store has no {alarm.name} alarm"
            )
        else:
            activate = action is gateway.AlarmAction.ACTIVATE
            alarms = await self._propose(alarm_command(activate, alarm.name))
        out: dict[str, Any] = {}
        if alarms:
            out["alarms"] = [{"memberID": str(self.node.id), "alarm": a} for a in alarms]
        return web.json_response(out)

    async def snapshot(self, request: web.Request) -> web.StreamResponse:
        """The state machine image, in chunks, as etcd streams its backend file."""
        await self._linearize()
        state = self.sm.snapshot()
        blob = snapshot_file_bytes(state)
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for offset in range(0, len(blob), SNAPSHOT_CHUNK):
            chunk = blob[offset : offset + SNAPSHOT_CHUNK]
            remaining = len(blob) - offset - len(chunk)
            result: dict[str, Any] = {"header": self.header(), "blob": gateway.b64(chunk)}
            if remaining:
                result["remaining_bytes"] = str(remaining)
            await resp.write(json.dumps({"result": result}).encode() + b"\n")
        return resp

    async def defragment(self, request: web.Request) -> web.Response:
        """Nothing to defragment (compaction frees memory at once); etcd's answer to a
        defragment has no header."""
        return web.json_response({})

    async def health(self, request: web.Request) -> web.Response:
        """etcd 3.4's answer, plus a `reason` when unhealthy (as etcd 3.5 gives one)."""
        st = self.node.status()
        if not st.leader:
            return web.json_response({"health": "false", "reason": "RAFT NO LEADER"}, status=503)
        if NOSPACE in self.sm.alarms:
            return web.json_response({"health": "false", "reason": "ALARM NOSPACE"}, status=503)
        return web.json_response({"health": "true"})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"etcdserver": VERSION, "etcdcluster": CLUSTER_VERSION})

    async def metrics_endpoint(self, request: web.Request) -> web.Response:
        data = prometheus_client.generate_latest(self.metrics.registry)
        return web.Response(
            body=data, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST}
        )

    # -- the app ---------------------------------------------------------------------

    def app(self) -> web.Application:
        routes = {
            "/v3/kv/range": self.range,
            "/v3/kv/put": self.put,
            "/v3/kv/deleterange": self.delete_range,
            "/v3/kv/txn": self.txn,
            "/v3/kv/compaction": self.compaction,
            "/v3/watch": self.watch,
            "/v3/lease/grant": self.lease_grant,
            "/v3/lease/revoke": self.lease_revoke,
            "/v3/kv/lease/revoke": self.lease_revoke,
            "/v3/lease/keepalive": self.lease_keepalive,
            "/v3/lease/timetolive": self.lease_timetolive,
            "/v3/kv/lease/timetolive": self.lease_timetolive,
            "/v3/lease/leases": self.lease_leases,
            "/v3/kv/lease/leases": self.lease_leases,
            "/v3/cluster/member/list": self.member_list,
            "/v3/cluster/member/add": self.member_add,
            "/v3/cluster/member/remove": self.member_remove,
            "/v3/cluster/member/promote": self.member_promote,
            "/v3/maintenance/status": self.status,
            "/v3/maintenance/alarm": self.alarm,
            "/v3/maintenance/snapshot": self.snapshot,
            "/v3/maintenance/defragment": self.defragment,
        }
        # The unary calls' spans, by path: Store.range, Store.deleteRange, ...
        span_names = {
            path: "Store." + _camel_case(handler.__name__)
            for path, handler in routes.items()
            if path not in STREAMED
        }

        @web.middleware
        async def traced(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            name = span_names.get(request.path)
            context = self._request_context(request) if name else None
            if context is None or name is None or self._tracer is None:
                return await handler(request)
            with self._tracer.start_as_current_span(
                name, context=context, kind=trace.SpanKind.SERVER
            ) as span:
                response = await handler(request)
                span.set_attribute(HTTP_STATUS_CODE, response.status)
                return response

        @web.middleware
        async def errors(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            try:
                response = await handler(request)
            except GatewayError as err:
                response = _error_response(err.grpc_code, str(err))
            except mvcc.MVCCError as err:
                response = _error_response(err.grpc_code, err.message)
            except gateway.BadRequest as err:
                response = _error_response(GrpcCode.INVALID_ARGUMENT, str(err))
            except web.HTTPRequestEntityTooLarge:
                response = _error_response(GrpcCode.INVALID_ARGUMENT, ERR_TOO_LARGE)
            except StoreStorageError as exc:
                log.error("store: %s %s refused: %s", request.method, request.path, exc)
                response = _error_response(GrpcCode.INTERNAL, str(exc))
            except (web.HTTPException, ConnectionResetError):
                raise  # aiohttp's own answers (unknown path, wrong method); a client gone
            except Exception:
                # A bug, never an input's fault (the fuzz test holds every input to a
                # 4xx): logged with its traceback, answered in etcd's shape.
                log.exception("store: %s %s failed", request.method, request.path)
                response = _error_response(GrpcCode.INTERNAL, "etcdserver: internal error")
            self.metrics.requests.labels(request.path, str(response.status)).inc()
            return response

        # Outermost first: a span sees the status the errors middleware answered with.
        # Without tracing, no middleware layer to cross on every request.
        middlewares = [traced, errors] if self._tracer is not None else [errors]
        app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY_BYTES)
        for path, handler in routes.items():
            app.router.add_post(path, handler)
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/metrics", self.metrics_endpoint)
        return app


def _camel_case(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def parse_json(raw: bytes) -> Any:
    """A request body as JSON, or BadRequest: it must be UTF-8 (json.loads would also
    take UTF-16 and UTF-32) and nested no deeper than `gateway.MAX_JSON_DEPTH`."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise gateway.BadRequest(f"the body is not valid UTF-8 (at byte {exc.start})") from None
    gateway.check_depth(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise gateway.BadRequest(f"malformed JSON body: {exc.msg} (at byte {exc.pos})") from None
    except ValueError as exc:  # an integer literal of more than 4300 digits
        raise gateway.BadRequest(f"malformed JSON body: {exc}") from None


async def _json_objects(request: web.Request) -> AsyncIterator[Any]:
    """The JSON objects of a streamed request body, one after another (a watch or
    keep-alive client may send several over one connection). What is not yet a whole
    object is kept, up to the size of a whole request body."""
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    buf = ""
    try:
        async for chunk in request.content.iter_any():
            buf += utf8.decode(chunk)
            while True:
                buf = buf.lstrip()
                if not buf:
                    break
                gateway.check_depth(buf)
                try:
                    obj, end = decoder.raw_decode(buf)
                except json.JSONDecodeError:
                    break  # incomplete: wait for more bytes
                buf = buf[end:]
                yield obj
            if len(buf) > MAX_BODY_BYTES:
                raise gateway.BadRequest(ERR_TOO_LARGE)
        buf += utf8.decode(b"", final=True)
    except UnicodeDecodeError:
        raise gateway.BadRequest("the request stream is not valid UTF-8") from None
    except ValueError as exc:  # an integer literal of more than 4300 digits
        raise gateway.BadRequest(f"malformed JSON in the request stream: {exc}") from None
    if buf.strip():
        raise gateway.BadRequest("malformed JSON in the request stream")


def parse_url(url: str, what: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or not parts.port:
        raise ValueError(f"{what}: {url!r} must look like https://HOST:PORT")
    return parts.hostname, parts.port


def _host_port(url: str, flag: str) -> tuple[str, int]:
    try:
        return parse_url(url, flag)
    except ValueError as exc:
        raise SystemExit(f"kubelab-store: {exc}") from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="kubelab-store", description="A member of kubelab's Raft-replicated store."
    )
    p.add_argument("--name", default="default", help="human-readable name of this member")
    p.add_argument("--data-dir", type=Path, help="where the WAL and snapshots live")
    p.add_argument("--listen-client-urls", default="http://127.0.0.1:2379")
    p.add_argument("--advertise-client-urls", default=None)
    p.add_argument("--listen-peer-urls", default="https://127.0.0.1:2380")
    p.add_argument("--initial-advertise-peer-urls", default=None)
    p.add_argument(
        "--initial-cluster",
        default=None,
        help="every initial member as name=https://host:port, comma-separated",
    )
    p.add_argument("--initial-cluster-state", choices=["new", "existing"], default="new")
    p.add_argument("--initial-cluster-token", default="kubelab-store")
    p.add_argument("--heartbeat-interval", type=int, default=100, help="milliseconds")
    p.add_argument("--election-timeout", type=int, default=1000, help="milliseconds")
    p.add_argument("--snapshot-count", type=int, default=10_000)
    p.add_argument(
        "--experimental-snapshot-catchup-entries",
        type=int,
        default=5_000,
        help="entries kept after a snapshot so slow followers get appends, not snapshots",
    )
    p.add_argument("--cert-file", type=Path)
    p.add_argument("--key-file", type=Path)
    p.add_argument("--trusted-ca-file", type=Path)
    p.add_argument("--client-cert-auth", action="store_true")
    p.add_argument("--peer-cert-file", type=Path)
    p.add_argument("--peer-key-file", type=Path)
    p.add_argument("--peer-trusted-ca-file", type=Path)
    p.add_argument("--quota-backend-bytes", type=int, default=DEFAULT_QUOTA_BYTES)
    p.add_argument(
        "--experimental-watch-progress-notify-interval",
        type=float,
        default=600.0,
        help="seconds between progress notifications on quiet watches that asked for them",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    tracing.add_flags(p)
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> NodeConfig:
    data_dir = args.data_dir or Path(f"{args.name}.kubelab-store")
    peer_listen = _host_port(args.listen_peer_urls, "--listen-peer-urls")
    advertise = args.initial_advertise_peer_urls or args.listen_peer_urls
    initial = args.initial_cluster or f"{args.name}={advertise}"
    cluster: dict[str, tuple[str, int]] = {}
    for item in initial.split(","):
        name, sep, url = item.partition("=")
        if not sep:
            raise SystemExit(
                f"kubelab-store: --initial-cluster: {item!r} must be name=https://host:port"
            )
        cluster[name.strip()] = _host_port(url.strip(), "--initial-cluster")
    if args.election_timeout < 5 * args.heartbeat_interval:
        raise SystemExit(
            "kubelab-store: --election-timeout must be at least 5x --heartbeat-interval "
            f"(got {args.election_timeout} and {args.heartbeat_interval})"
        )
    peer_files = (args.peer_cert_file, args.peer_key_file, args.peer_trusted_ca_file)
    server_ssl = client_ssl = None
    if any(peer_files):
        if not all(peer_files):
            raise SystemExit(
                "kubelab-store: peer TLS needs --peer-cert-file, --peer-key-file and "
                "--peer-trusted-ca-file together"
            )
        server_ssl = pki.server_ssl_context(
            args.peer_trusted_ca_file, args.peer_cert_file, args.peer_key_file
        )
        client_ssl = pki.client_ssl_context(
            args.peer_trusted_ca_file, args.peer_cert_file, args.peer_key_file
        )
    return NodeConfig(
        name=args.name,
        data_dir=data_dir,
        peer_listen=peer_listen,
        initial_cluster=cluster,
        initial_cluster_state=ClusterState(args.initial_cluster_state),
        peer_server_ssl=server_ssl,
        peer_client_ssl=client_ssl,
        tick_interval=args.heartbeat_interval / 1000,
        election_ticks=max(2, args.election_timeout // args.heartbeat_interval),
        snapshot_count=args.snapshot_count,
        catch_up_entries=args.experimental_snapshot_catchup_entries,
        cluster_token=args.initial_cluster_token,
        client_urls=tuple((args.advertise_client_urls or args.listen_client_urls).split(",")),
    )


def client_ssl_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    if not args.cert_file:
        return None
    if not (args.key_file and args.trusted_ca_file):
        raise SystemExit("kubelab-store: client TLS needs --key-file and --trusted-ca-file")
    return pki.server_ssl_context(
        args.trusted_ca_file,
        args.cert_file,
        args.key_file,
        require_client_cert=args.client_cert_auth,
    )


async def serve(args: argparse.Namespace) -> None:
    store = Store(
        build_config(args),
        args.quota_backend_bytes,
        args.experimental_watch_progress_notify_interval,
        args.tracing_endpoint,
    )
    await store.start()
    # Cancel handlers whose client went away, so abandoned watches are cleaned up.
    # A bounded graceful stop: in-flight requests get a few seconds, not aiohttp's 60.
    runner = web.AppRunner(
        store.app(), access_log=None, handler_cancellation=True, shutdown_timeout=5.0
    )
    await runner.setup()
    ssl_ctx = client_ssl_context(args)
    for url in args.listen_client_urls.split(","):
        host, port = _host_port(url, "--listen-client-urls")
        await web.TCPSite(runner, host, port, ssl_context=ssl_ctx).start()
        log.info("store[%s]: serving clients on %s", args.name, url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("store[%s]: shutting down", args.name)
    try:
        await asyncio.wait_for(_shutdown(store, runner, args.name), SHUTDOWN_TIMEOUT)
    except TimeoutError:
        # Seen once under heavy load (idle event loop, something awaited forever): never
        # let a stop hang. Exiting is safe: every acknowledged write is in the fsynced WAL.
        log.error(
            "store[%s]: shutdown did not finish in %ss; exiting anyway",
            args.name,
            SHUTDOWN_TIMEOUT,
        )


async def _shutdown(store: Store, runner: web.AppRunner, name: str) -> None:
    store.close_streams()
    await runner.cleanup()
    log.info("store[%s]: client API closed; stopping the member", name)
    await store.stop()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        asyncio.run(serve(args))
    except StoreStorageError as exc:
        log.critical("%s", exc)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
