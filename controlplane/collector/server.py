"""The collector's process: one plain-HTTP port (4318, OTLP/HTTP's) serving

* `POST /v1/traces`: the OTLP/HTTP receiver (`otlp.decode`); 200 with an empty
  `ExportTraceServiceResponse` in the request's encoding, 400 with a `google.rpc.Status`
  naming what is wrong (and nothing stored), 413 for a body over `MAX_BODY`;
* `GET /api/v1/spans`: the query API of `labctl trace` (`storage.Query`'s fields as
  parameters: `trace_id` and `linked_trace_id` (repeatable), `uid`, `kind`, `namespace`,
  `name`, `owner_uid`,
  `since` (RFC 3339), `after` (a cursor), `limit`), answering
  `{"spans": [...], "next": cursor}` with spans in the public shape;
* `GET /metrics`, `/healthz`, `/readyz`.

Plain HTTP, unauthenticated, as the OTLP default: spans carry object names and request
paths, never bodies or secrets. Run it as `python -m controlplane.collector`.
"""

from __future__ import annotations

import argparse
import http.server
import json
import logging
import threading
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from kubelab.process import configure_logging, stop_on_signals

from . import otlp
from .storage import Query, TraceStore

log = logging.getLogger(__name__)

DEFAULT_PORT = 4318
DEFAULT_MAX_TRACES = 10_000
DEFAULT_MAX_BYTES = 200 * 1024 * 1024
MAX_BODY = 64 * 1024 * 1024
"""The largest request body taken: the OTLP exporter's own default limit."""


class Metrics:
    """The collector's `/metrics`."""

    def __init__(self, store: TraceStore) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "kubelab_collector_requests",
            "OTLP export requests by HTTP code.",
            ["code"],
            registry=self.registry,
        )
        self.spans = Counter(
            "kubelab_collector_spans_received",
            "Spans received and stored.",
            registry=self.registry,
        )
        stored = store.stored
        Gauge("kubelab_collector_traces", "Traces kept.", registry=self.registry).set_function(
            lambda: stored.traces
        )
        Gauge(
            "kubelab_collector_stored_bytes",
            "Bytes of span data kept (the bound is --max-bytes).",
            registry=self.registry,
        ).set_function(lambda: stored.bytes)
        Gauge(
            "kubelab_collector_traces_evicted",
            "Traces evicted, oldest first, to keep within the bounds.",
            registry=self.registry,
        ).set_function(lambda: stored.evicted)


class CollectorServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], store: TraceStore) -> None:
        super().__init__(address, _Handler)
        self.store = store
        self.metrics = Metrics(store)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: CollectorServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)

    def do_POST(self) -> None:
        if urlsplit(self.path).path != "/v1/traces":
            self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")
            return
        content_type = self.headers.get("Content-Type", "")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._refuse(413, f"the body is {length} bytes, over {MAX_BODY}", content_type)
            self.close_connection = True
            return
        body = self.rfile.read(length)
        try:
            request = otlp.decode(body, content_type, self.headers.get("Content-Encoding", ""))
            spans = otlp.public_spans(request)
        except otlp.BadRequest as e:
            self._refuse(400, str(e), content_type)
            return
        self.server.store.add(spans)
        self.server.metrics.spans.inc(len(spans))
        self.server.metrics.requests.labels("200").inc()
        response = ExportTraceServiceResponse()
        if content_type.split(";")[0].strip().lower() == otlp.PROTOBUF:
            self._send(200, response.SerializeToString(), otlp.PROTOBUF)
        else:
            self._send(200, b"{}", otlp.JSON)

    def _refuse(self, code: int, message: str, content_type: str) -> None:
        log.info("refused an export from %s: %s", self.client_address[0], message)
        self.server.metrics.requests.labels(str(code)).inc()
        self._send(code, *otlp.error_body(message, content_type))

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/api/v1/spans":
            try:
                query = _query(parse_qs(url.query))
            except ValueError as e:
                self._send(400, json.dumps({"message": str(e)}).encode(), otlp.JSON)
                return
            spans, cursor = self.server.store.query(query)
            self._send(200, json.dumps({"spans": spans, "next": cursor}).encode(), otlp.JSON)
        elif url.path == "/metrics":
            self._send(200, generate_latest(self.server.metrics.registry), CONTENT_TYPE_LATEST)
        elif url.path in ("/healthz", "/readyz", "/livez"):
            self._send(200, b"ok", "text/plain; charset=utf-8")
        else:
            self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _query(params: dict[str, list[str]]) -> Query:
    """The query API's parameters as a `Query`; ValueError names a bad one."""

    def one(name: str) -> str:
        return params.get(name, [""])[-1]

    def number(name: str, default: int) -> int:
        text = one(name)
        if not text:
            return default
        if not text.isdigit():
            raise ValueError(f"{name} must be a non-negative integer, not {text!r}")
        return int(text)

    since = one("since")
    if since:
        try:
            when = datetime.fromisoformat(since)
        except ValueError as e:
            raise ValueError(f"since must be an RFC 3339 time, not {since!r}") from e
        if when.tzinfo is None:
            raise ValueError(f"since must name its time zone (e.g. Z): {since!r}")
        since = otlp.rfc3339(int(when.timestamp() * 1_000_000) * 1000)
    return Query(
        trace_ids=params.get("trace_id", []),
        linked_trace_ids=params.get("linked_trace_id", []),
        uid=one("uid"),
        kind=one("kind"),
        namespace=one("namespace"),
        name=one("name"),
        owner_uid=one("owner_uid"),
        since=since,
        after=number("after", 0),
        limit=min(number("limit", Query.limit), Query.limit),
    )


def serve(store: TraceStore, address: str = "0.0.0.0", port: int = DEFAULT_PORT) -> CollectorServer:
    """Serve in a daemon thread; `shutdown()` the result to stop."""
    server = CollectorServer((address, port), store)
    threading.Thread(target=server.serve_forever, name="collector", daemon=True).start()
    return server


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m controlplane.collector",
        description="kubelab's trace collector: an OTLP/HTTP receiver keeping recent traces "
        "on disk for labctl trace.",
    )
    parser.add_argument("--bind-address", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--data-dir", type=Path, default=Path("/var/lib/kubelab/traces"))
    parser.add_argument(
        "--max-traces",
        type=int,
        default=DEFAULT_MAX_TRACES,
        help="traces kept, at most; the oldest is evicted first",
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=DEFAULT_MAX_BYTES,
        help="bytes of span data kept, at most (the database's indexes come on top)",
    )
    parser.add_argument("-v", type=int, default=0, help="log level (4 and up: debug)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.v)
    try:
        store = TraceStore(args.data_dir, args.max_traces, args.max_bytes)
    except (OSError, ValueError) as e:
        log.error("cannot open the trace store in %s: %s", args.data_dir, e)
        return 2
    stop = stop_on_signals(log)
    try:
        server = serve(store, args.bind_address, args.port)
    except OSError as e:
        log.error("cannot serve on %s:%d: %s", args.bind_address, args.port, e)
        return 2
    log.info(
        "collecting traces on %s into %s (at most %d traces, %d bytes)",
        server.url,
        args.data_dir,
        args.max_traces,
        args.max_bytes,
    )
    stop.wait()
    server.shutdown()
    store.close()
    return 0
