"""Benchmark: kubelab's apiserver against a 3-member kubelab store, on this machine.

It starts a `LocalControlPlane` (3 store members, one apiserver, real TLS) in a temporary
directory and measures, with an asyncio load generator presenting the admin's client
certificate:

* single-object GET and pod create at a fixed arrival rate (100 and 500 requests/s,
  on 64 connections opened beforehand, open loop: requests leave on schedule whether
  or not earlier ones have answered, and latency counts from the scheduled time, so a
  stall shows up instead of being hidden by a slower sender), p50 and p99. The requests
  are prebuilt bytes on plain asyncio connections (`_Connection`), because the generator
  shares the cores with what it measures;
* LIST of 5,000 pods in one namespace: one full list (served from the watch cache) and a
  paginated walk with ``limit=500`` as kubectl does it (served from the store);
* watch fan-out: 200 watchers on one namespace, pods created at 20/s; the delivery
  latency of each event to each watcher is the time it is read minus the time its create
  was sent (same process, same clock), p50 and p99.

Targets (the apiserver issue, from the Kubernetes SLOs, tightened): mutating and
single-object calls p99 <= 100 ms, a list of 5,000 pods <= 1 s, watch delivery p99 <=
200 ms. There is no peer to compare with (no kube-apiserver can be installed here).

The two cores are shared by the store's three members, the apiserver and the generator,
so the CPU each used is printed with the figures.

With `--tracing` it measures instead what tracing costs the apiserver (issue 23: at most
5 % worse): pod creates and single-object GETs, closed loop on `--connections` kept-alive
connections for `--seconds` each, with the apiserver started without tracing and then with
`--tracing-endpoint` pointing at a real collector process (`python -m
controlplane.collector` on a free loopback port, its data in the temporary directory), so
the spans' export (the batch processor's thread, the OTLP encoding and POST) is paid by
the apiserver as it would be in the lab (after each call, the CPU of a quiet 6 s counts
as the call's: the batch processor exports up to 5 s after a span ends, which would
otherwise charge the creates' export to the GETs). The two alternate for `--rounds`
rounds on the same store, as the machine's other load drifts; each prints the
apiserver's CPU per request and the throughput, then the ratio on/off of the rounds'
sums. Last, where the
cost is (`tracing_pieces`): the tracing calls a create makes in the apiserver, each timed
alone in this process (one thread, the SDK and the OTLP encoder as the apiserver uses
them, no request around them), and the encoding of the spans for export.

    python -m bench.apiserver [--seconds 10] [--pods 5000] [--watchers 200] [--markdown]
    python -m bench.apiserver --tracing [--seconds 10] [--rounds 2] [--connections 8]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry
from werkzeug.datastructures import Headers

from bench import cpu_seconds
from controlplane.apiserver import traces
from controlplane.apiserver.requestinfo import parse
from kubelab import storeclient, tracing
from lab.localcluster import free_port
from lab.localplane import LocalControlPlane

TARGET_P99_MS = 100.0
TARGET_LIST_S = 1.0
TARGET_WATCH_P99_MS = 200.0
WARM_CONNECTIONS = 64
EXPORT_DRAIN_SECONDS = 6.0
"""With --tracing, the quiet wait after each call whose CPU counts as the call's: the
batch span processor's 5 s schedule delay, and a second."""


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox:1.36", "resources": {"requests": {"cpu": "10m"}}}
            ]
        },
    }


def _quantiles(samples: list[float]) -> tuple[float, float]:
    if not samples:
        return float("nan"), float("nan")
    s = sorted(samples)
    return s[len(s) // 2], s[min(len(s) - 1, int(len(s) * 0.99))]


@dataclass
class RateResult:
    what: str
    rate: int
    sent: int
    errors: int
    p50_ms: float
    p99_ms: float
    apiserver_cpu: float
    store_cpu: float


class _Connection(asyncio.Protocol):
    """A kept-alive HTTP/1.1 connection with one request in flight, for the rate levels.

    The generator shares the two cores with the apiserver and the store, and aiohttp
    spends about 0.85 ms of CPU per request (measured), which at 500 requests/s is
    a core the measured processes lose. This sends prebuilt bytes and reads only the
    status line and Content-Length, a fraction of that. The apiserver answers single
    objects with a Content-Length; anything else is counted as an error.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[int] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def call(self, request: bytes) -> asyncio.Future[int]:
        """Send `request`; the future resolves to the response's status code."""
        assert self.transport is not None and self.waiter is None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None:
            return
        status_line, *headers = bytes(self.buffer[:end]).split(b"\r\n")
        fields = dict(h.lower().split(b":", 1) for h in headers)
        if b"content-length" not in fields:
            self._finish(ValueError("response without Content-Length"))
            return
        size = end + 4 + int(fields[b"content-length"])
        if len(self.buffer) < size:
            return
        del self.buffer[:size]
        self._finish(int(status_line[9:12]))

    def _finish(self, result: int | Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is None or waiter.done():
            return
        if isinstance(result, Exception):
            waiter.set_exception(result)
        else:
            waiter.set_result(result)

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(ConnectionError("the apiserver closed the connection"))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Bench:
    def __init__(self, plane: LocalControlPlane) -> None:
        self.plane = plane
        ctx = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
        ctx.load_cert_chain(plane.pki / "admin.crt", plane.pki / "admin.key")
        self.ssl = ctx
        self.base = plane.server

    def session(self, limit: int = 200) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.ssl, limit=limit),
            timeout=aiohttp.ClientTimeout(total=60),
        )

    def _cpu(self) -> tuple[float, float]:
        assert self.plane.process is not None and self.plane.store is not None
        api = cpu_seconds(self.plane.process.pid)
        store = sum(
            cpu_seconds(m.process.pid) for m in self.plane.store.members if m.process is not None
        )
        return api, store

    async def create_namespace(self, s: aiohttp.ClientSession, name: str) -> None:
        for path, body in (
            (
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            ),
            (
                f"/api/v1/namespaces/{name}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
            ),
        ):
            async with s.post(self.base + path, json=body) as r:
                assert r.status == 201, await r.text()

    async def at_rate(self, what: str, rate: int, seconds: float, ns: str) -> RateResult:
        """`what` ("get" or "create") at `rate` requests/s for `seconds` (open loop)."""
        if what == "get":
            async with (
                self.session() as s,
                s.post(f"{self.base}/api/v1/namespaces/{ns}/pods", json=_pod("target")) as r,
            ):
                assert r.status in (201, 409)
        host, port = "127.0.0.1", self.plane.port
        total = int(rate * seconds)
        requests = [self._request(what, ns, f"r{rate}-{i}") for i in range(total)]
        loop = asyncio.get_running_loop()
        idle: asyncio.Queue[_Connection] = asyncio.Queue()
        for _ in range(WARM_CONNECTIONS):
            _, conn = await loop.create_connection(_Connection, host, port, ssl=self.ssl)
            idle.put_nowait(conn)
        latencies: list[float] = []
        errors = 0
        cpu0 = self._cpu()
        start = loop.time() + 0.2

        async def one(i: int) -> None:
            nonlocal errors
            due = start + i / rate
            await asyncio.sleep(max(0.0, due - loop.time()))
            conn = await idle.get()
            try:
                status = await conn.call(requests[i])
            except (ConnectionError, ValueError):
                errors += 1
            else:
                errors += status >= 300
                idle.put_nowait(conn)
            latencies.append((loop.time() - due) * 1000)

        await asyncio.gather(*(one(i) for i in range(total)))
        cpu1 = self._cpu()
        while not idle.empty():
            idle.get_nowait().close()
        p50, p99 = _quantiles(latencies)
        elapsed = seconds + 0.2
        return RateResult(
            what,
            rate,
            total,
            errors,
            p50,
            p99,
            (cpu1[0] - cpu0[0]) / elapsed,
            (cpu1[1] - cpu0[1]) / elapsed,
        )

    async def closed_loop(
        self, what: str, seconds: float, ns: str, connections: int, prefix: str
    ) -> tuple[int, int, float, float]:
        """`what` ("get" or "create") as fast as `connections` kept-alive connections,
        one request in flight each, are answered for `seconds`: the requests answered,
        the errors, the seconds taken and the apiserver's CPU seconds meanwhile."""
        loop = asyncio.get_running_loop()
        conns = [
            (await loop.create_connection(_Connection, "127.0.0.1", self.plane.port, ssl=self.ssl))[
                1
            ]
            for _ in range(connections)
        ]
        done = errors = 0
        cpu0 = self._cpu()[0]
        started = loop.time()
        deadline = started + seconds

        async def worker(n: int, conn: _Connection) -> None:
            nonlocal done, errors
            i = 0
            while loop.time() < deadline:
                status = await conn.call(self._request(what, ns, f"{prefix}-{n}-{i}"))
                errors += status >= 300
                done += 1
                i += 1

        await asyncio.gather(*(worker(n, c) for n, c in enumerate(conns)))
        elapsed = loop.time() - started
        cpu = self._cpu()[0] - cpu0
        for conn in conns:
            conn.close()
        return done, errors, elapsed, cpu

    def _request(self, what: str, ns: str, name: str) -> bytes:
        """One HTTP/1.1 request, built before the timed run."""
        if what == "get":
            return (
                f"GET /api/v1/namespaces/{ns}/pods/target HTTP/1.1\r\n"
                "Host: 127.0.0.1\r\nAccept: application/json\r\n\r\n"
            ).encode()
        body = json.dumps(_pod(name)).encode()
        head = (
            f"POST /api/v1/namespaces/{ns}/pods HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Accept: application/json\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    async def fill(self, ns: str, count: int) -> float:
        """Create `count` pods with 32 concurrent writers; returns the seconds it took."""
        started = time.monotonic()
        async with self.session() as s:
            queue = list(range(count))

            async def writer() -> None:
                while queue:
                    i = queue.pop()
                    async with s.post(
                        f"{self.base}/api/v1/namespaces/{ns}/pods", json=_pod(f"p{i:05d}")
                    ) as r:
                        assert r.status == 201, await r.text()

            await asyncio.gather(*(writer() for _ in range(32)))
        return time.monotonic() - started

    async def list_pods(self, ns: str, limit: int = 0) -> tuple[float, int]:
        async with self.session() as s:
            started = time.monotonic()
            items, token = 0, ""
            while True:
                params = {"limit": str(limit)} if limit else {}
                if token:
                    params["continue"] = token
                async with s.get(f"{self.base}/api/v1/namespaces/{ns}/pods", params=params) as r:
                    body = await r.json()
                items += len(body["items"])
                token = body["metadata"].get("continue", "")
                if not token:
                    return time.monotonic() - started, items

    async def watch_fanout(
        self, ns: str, watchers: int, events: int, rate: float
    ) -> tuple[float, float, int]:
        sent: dict[str, float] = {}
        latencies: list[float] = []
        loop = asyncio.get_running_loop()
        async with self.session(limit=watchers + 20) as s:
            ready = asyncio.Event()
            opened = 0

            async def watch() -> None:
                nonlocal opened
                url = f"{self.base}/api/v1/namespaces/{ns}/pods?watch=1&timeoutSeconds=120"
                async with s.get(url) as r:
                    opened += 1
                    if opened == watchers:
                        ready.set()
                    seen = 0
                    async for line in r.content:
                        ev = json.loads(line)
                        name = ev["object"]["metadata"]["name"]
                        if ev["type"] == "ADDED" and name in sent:
                            latencies.append((loop.time() - sent[name]) * 1000)
                            seen += 1
                            if seen == events:
                                return

            tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
            await asyncio.wait_for(ready.wait(), 60)
            await asyncio.sleep(0.5)
            for i in range(events):
                name = f"w{i:04d}"
                sent[name] = loop.time()
                async with s.post(f"{self.base}/api/v1/namespaces/{ns}/pods", json=_pod(name)) as r:
                    assert r.status == 201, await r.text()
                await asyncio.sleep(1 / rate)
            await asyncio.wait_for(asyncio.gather(*tasks), 120)
        p50, p99 = _quantiles(latencies)
        return p50, p99, len(latencies)


def _row(cells: list[str], markdown: bool) -> str:
    return "| " + " | ".join(cells) + " |" if markdown else "  ".join(f"{c:>16}" for c in cells)


async def run(args: argparse.Namespace, plane: LocalControlPlane) -> None:
    b = Bench(plane)
    md = args.markdown
    async with b.session() as s:
        for ns in ("bench-rate", "bench-list", "bench-watch"):
            await b.create_namespace(s, ns)
    print("\nsingle-object GET and pod create at a fixed arrival rate (open loop)")
    print(
        _row(
            [
                "call",
                "rate/s",
                "sent",
                "errors",
                "p50 ms",
                "p99 ms",
                "target",
                "apiserver cores",
                "store cores",
            ],
            md,
        )
    )
    if md:
        print("|" + "---|" * 9)
    for what in ("get", "create"):
        for rate in (100, 500):
            res = await b.at_rate(what, rate, args.seconds, "bench-rate")
            verdict = "met" if res.p99_ms <= TARGET_P99_MS and not res.errors else "MISSED"
            print(
                _row(
                    [
                        what,
                        str(rate),
                        str(res.sent),
                        str(res.errors),
                        f"{res.p50_ms:.1f}",
                        f"{res.p99_ms:.1f}",
                        f"p99 <= {TARGET_P99_MS:.0f} ms: {verdict}",
                        f"{res.apiserver_cpu:.2f}",
                        f"{res.store_cpu:.2f}",
                    ],
                    md,
                ),
                flush=True,
            )
    took = await b.fill("bench-list", args.pods)
    print(
        f"\nfilled {args.pods} pods in {took:.1f} s ({args.pods / took:.0f} creates/s, 32 writers)"
    )
    full, n_full = await b.list_pods("bench-list")
    paged, n_paged = await b.list_pods("bench-list", limit=500)
    print(_row(["list", "pods", "seconds", "target"], md))
    if md:
        print("|---|---|---|---|")
    for label, secs, n in (
        ("one request (watch cache)", full, n_full),
        ("limit=500 pages (store)", paged, n_paged),
    ):
        verdict = "met" if secs <= TARGET_LIST_S else "MISSED"
        print(_row([label, str(n), f"{secs:.3f}", f"<= {TARGET_LIST_S:.0f} s: {verdict}"], md))
    p50, p99, count = await b.watch_fanout(
        "bench-watch", args.watchers, args.events, args.event_rate
    )
    verdict = "met" if p99 <= TARGET_WATCH_P99_MS else "MISSED"
    print(
        f"\nwatch fan-out: {args.watchers} watchers x {args.events} events at "
        f"{args.event_rate:.0f}/s: {count} deliveries, p50 {p50:.1f} ms, p99 {p99:.1f} ms "
        f"(target p99 <= {TARGET_WATCH_P99_MS:.0f} ms: {verdict})"
    )


@dataclass
class TracingTally:
    """What one setting (tracing off or on) added up to over the rounds."""

    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    cpu: float = 0.0

    def add(self, requests: int, errors: int, seconds: float, cpu: float) -> None:
        self.requests += requests
        self.errors += errors
        self.seconds += seconds
        self.cpu += cpu

    @property
    def ms_per_request(self) -> float:
        return 1000 * self.cpu / max(1, self.requests)

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def start_collector(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A collector process on a free loopback port, its data in `directory`; its base URL
    once it answers /readyz."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (directory / "collector.log").open("ab")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controlplane.collector",
            "--bind-address",
            "127.0.0.1",
            "--port",
            str(port),
            "--data-dir",
            str(directory / "traces"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    log.close()
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
                if r.status == 200:
                    return process, url
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(
                    f"the collector did not become ready; see {directory / 'collector.log'}"
                ) from None
        time.sleep(0.1)


def run_tracing(args: argparse.Namespace, plane: LocalControlPlane, collector: str) -> None:
    """The tracing comparison (module docstring): the apiserver restarted off and on in
    turn, each round measuring creates then GETs."""
    md = args.markdown
    tallies = {(what, on): TracingTally() for what in ("create", "get") for on in (False, True)}
    print(
        f"\ntracing off and on: closed loop, {args.connections} connections, "
        f"{args.seconds:.0f} s per call and setting, {args.rounds} rounds"
    )
    print(_row(["round", "tracing", "call", "requests", "errors", "req/s", "CPU ms/req"], md))
    if md:
        print("|" + "---|" * 7)
    for round_ in range(1, args.rounds + 1):
        for on in (False, True):
            plane.stop_apiserver()
            plane.extra_args = ["--tracing-endpoint", collector] if on else []
            plane.start_apiserver(timeout=120)
            b = Bench(plane)
            for what in ("create", "get"):
                # A second of each first, not counted: a fresh apiserver's first requests
                # cost several times the later ones.
                asyncio.run(b.closed_loop(what, 1.0, "bench-rate", args.connections, "warm"))
                done, errors, elapsed, cpu = asyncio.run(
                    b.closed_loop(
                        what, args.seconds, "bench-rate", args.connections, f"t{round_}{on:d}"
                    )
                )
                # The spans of the last seconds' requests are exported up to the batch
                # processor's schedule delay later: their export is these requests' cost,
                # not the next call's, so the CPU of a quiet wait that long counts here
                # (off, the apiserver's idle CPU over the same wait).
                before = b._cpu()[0]
                time.sleep(EXPORT_DRAIN_SECONDS)
                cpu += b._cpu()[0] - before
                tallies[(what, on)].add(done, errors, elapsed, cpu)
                print(
                    _row(
                        [
                            str(round_),
                            "on" if on else "off",
                            what,
                            str(done),
                            str(errors),
                            f"{done / elapsed:.0f}",
                            f"{1000 * cpu / max(1, done):.2f}",
                        ],
                        md,
                    ),
                    flush=True,
                )
    print()
    print(_row(["call", "CPU ms/req off", "on", "ratio", "req/s off", "on", "ratio"], md))
    if md:
        print("|" + "---|" * 7)
    for what in ("create", "get"):
        off, on_ = tallies[(what, False)], tallies[(what, True)]
        print(
            _row(
                [
                    what,
                    f"{off.ms_per_request:.2f}",
                    f"{on_.ms_per_request:.2f}",
                    f"{on_.ms_per_request / off.ms_per_request:.3f}",
                    f"{off.throughput:.0f}",
                    f"{on_.throughput:.0f}",
                    f"{on_.throughput / off.throughput:.3f}",
                ],
                md,
            )
        )
    pieces = tracing_pieces()
    print("\nwhere tracing's CPU goes per create (each call alone, one thread)")
    print(_row(["piece", "us per create"], md))
    if md:
        print("|---|---|")
    for piece, micros in pieces.items():
        print(_row([piece, f"{micros:.1f}"], md))
    print(_row(["total", f"{sum(pieces.values()):.1f}"], md))


class _Keep(SpanExporter):
    """Keeps the ended spans, to encode them apart."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def tracing_pieces(creates: int = 2000) -> dict[str, float]:
    """Microseconds of CPU per create of each tracing call the apiserver makes for a pod
    create (the calls of `app.py`, `admission/chain.py`, `registry.py`, `storage.py` and
    `watchcache.py`, in order, with values of a create's size), and of the OTLP encoding
    of its spans for export."""
    keep = _Keep()
    traced = tracing.setup("apiserver", "bench", CollectorRegistry(), exporter=keep)
    headers = Headers({"User-Agent": "kubectl/v1.31.0 (linux/amd64) kubernetes/0000000"})
    stored = storeclient.TxnResult(
        header=storeclient.Header(cluster_id=1, member_id=1, revision=42, raft_term=2),
        succeeded=True,
        responses=[],
    )
    plugins = ", ".join(f"{p} 3us" for p in ("NamespaceLifecycle", "LimitRanger", "PodSecurity"))
    admitted = {"kubelab.admission.mutating": plugins, "kubelab.admission.validating": plugins}
    authorized = {traces.USER: "admin", traces.REASON: "system:masters"}
    spent: dict[str, float] = {}

    @contextlib.contextmanager
    def timed(piece: str) -> Iterator[None]:
        started = time.process_time()
        yield
        spent[piece] = spent.get(piece, 0.0) + time.process_time() - started

    for i in range(creates):
        info = parse("POST", "/api/v1/namespaces/bench/pods", {})
        with timed("request span started"):
            request = traces.begin(traced, info, "POST", headers)
        assert request is not None and request.span is not None
        with timed("authentication, authorization"):
            request.span.set_attributes(authorized)
        with timed("admission"):
            request.span.set_attributes(admitted)
        with timed("validation"), traces.step(traced, traces.VALIDATION_SECONDS):
            pass
        meta = {"name": f"p{i}", "namespace": "bench", "uid": f"{i:08d}-0000-0000-0000-0000"}
        with timed("annotation stamped"):
            tracing.inject(meta)
        with timed("store transaction"):
            traces.store_outcome(request.span, "create", stored, 0.001)
        obj = {"kind": "Pod", "metadata": {**meta, "resourceVersion": "42"}}
        with timed("object answered"):
            traces.describe(obj)
        with timed("request span ended"):
            request.finish(201)
            request.close()
        with timed("watch fan-out span"):
            span = traced.tracer.start_span(
                "WatchCache.dispatch",
                context=tracing.extract(obj),
                attributes={traces.EVENT_TYPE: "ADDED"},
            )
            span.set_attribute(traces.WATCHERS, 3)
            span.end()
    traced.force_flush()
    started = time.process_time()
    batch = tracing.MAX_EXPORT_BATCH_SIZE
    for first in range(0, len(keep.spans), batch):
        encode_spans(keep.spans[first : first + batch]).SerializeToString()
    spent["OTLP encoding of the spans"] = time.process_time() - started
    traced.shutdown()
    return {piece: 1e6 * seconds / creates for piece, seconds in spent.items()}


async def _prepare_tracing(plane: LocalControlPlane) -> None:
    b = Bench(plane)
    async with b.session() as s:
        await b.create_namespace(s, "bench-rate")
        async with s.post(f"{b.base}/api/v1/namespaces/bench-rate/pods", json=_pod("target")) as r:
            assert r.status == 201, await r.text()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="bench.apiserver", description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="duration of each rate level")
    p.add_argument("--pods", type=int, default=5000, help="pods in the listed namespace")
    p.add_argument("--watchers", type=int, default=200)
    p.add_argument("--events", type=int, default=100, help="pods created during the watch")
    p.add_argument("--event-rate", type=float, default=20.0)
    p.add_argument("--markdown", action="store_true")
    p.add_argument(
        "--tracing",
        action="store_true",
        help="measure what tracing costs instead: creates and GETs with tracing off and on",
    )
    p.add_argument("--rounds", type=int, default=2, help="with --tracing: off/on rounds")
    p.add_argument("--connections", type=int, default=8, help="with --tracing: closed loop")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-apiserver-") as tmp:
        # No controller-manager or scheduler: their informers would add load to the
        # figures measured.
        plane = LocalControlPlane(
            Path(tmp), store_members=3, controller_manager=False, scheduler=False
        )
        print("==> starting a 3-member kubelab store and the apiserver", flush=True)
        plane.start(timeout=120)
        collector: subprocess.Popen[bytes] | None = None
        try:
            if args.tracing:
                collector, url = start_collector(Path(tmp))
                asyncio.run(_prepare_tracing(plane))
                run_tracing(args, plane, url)
            else:
                asyncio.run(run(args, plane))
        finally:
            plane.stop()
            if collector is not None:
                collector.terminate()
                collector.wait(15)


if __name__ == "__main__":
    main()
