"""The store's spans (controlplane/store/spans.py) in process: a traced client's write is
proposal, fsync, commit and apply spans in the client's trace; an untraced one makes no
span; a shared fsync is the first request's child, linked to the others; the store
client sends the caller's trace context on unary and streamed calls.

The three-member case, over real processes and the collector, is
tests/integration/test_store_tracing.py."""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from controlplane.store import spans
from controlplane.store.raft import Entry
from controlplane.store.server import Store
from kubelab.storeclient import StoreClient
from tests.unit.test_store_server import single_member_config

StoreServing = tuple[TestClient[Any, Any], Store, InMemorySpanExporter]


@pytest.fixture
def client_tracer() -> Iterator[tuple[trace.Tracer, InMemorySpanExporter]]:
    """The tracer of the store's client (the apiserver, in a lab)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("test"), exporter
    provider.shutdown()


@asynccontextmanager
async def traced_store(data_dir: Path) -> AsyncIterator[StoreServing]:
    """A single traced member (its spans into memory), served through aiohttp's client."""
    exporter = InMemorySpanExporter()
    store = Store(
        single_member_config(data_dir), quota_bytes=0, progress_interval=600.0,
        span_exporter=exporter,
    )  # fmt: skip
    await store.start()
    try:
        while not store.node.status().leader:
            await asyncio.sleep(0.01)
        async with TestClient(TestServer(store.app())) as client:
            yield client, store, exporter
    finally:
        await store.stop()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def store_spans(store: Store, exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    store.tracing.force_flush()
    found = exporter.get_finished_spans()
    by_name = {s.name: s for s in found}
    assert len(by_name) == len(found), [s.name for s in found]
    return by_name


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def test_a_traced_put_is_proposal_fsync_commit_and_apply_in_the_clients_trace(
    tmp_path: Path, client_tracer: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, _ = client_tracer

    async def scenario() -> None:
        async with traced_store(tmp_path) as (client, store, exporter):
            with tracer.start_as_current_span("apiserver request") as request:
                headers: dict[str, str] = {}
                propagate.inject(headers)
                body = {"key": b64("/registry/pods/default/web"), "value": b64("{}")}
                answer = await client.post("/v3/kv/put", json=body, headers=headers)
                revision = int((await answer.json())["header"]["revision"])
            got = store_spans(store, exporter)
            assert set(got) == {
                "Store.put", "Raft.propose", "Raft.fsync", "Raft.commit", "Raft.apply"
            }  # fmt: skip
            trace_id = request.get_span_context().trace_id
            assert {s.context.trace_id for s in got.values() if s.context} == {trace_id}
            put, propose = got["Store.put"], got["Raft.propose"]
            assert put.parent is not None
            assert put.parent.span_id == request.get_span_context().span_id
            assert put.kind is trace.SpanKind.SERVER
            assert put.attributes is not None
            assert put.attributes["http.response.status_code"] == 200
            assert propose.parent is not None and propose.parent.span_id == span_id(put)
            for name in ("Raft.fsync", "Raft.commit", "Raft.apply"):
                parent = got[name].parent
                assert parent is not None and parent.span_id == span_id(propose), name
            fsync = got["Raft.fsync"].attributes or {}
            assert fsync[spans.WAL_ENTRIES] >= 1
            assert fsync[spans.WAL_BYTES] > len("/registry/pods/default/web")
            assert fsync[spans.WAL_FDATASYNC_SECONDS] >= 0
            commit = got["Raft.commit"].attributes or {}
            assert list(commit[spans.ACKNOWLEDGED]) == [f"{store.node.id:x}"]
            assert commit[spans.TERM] == store.node.term
            apply = got["Raft.apply"].attributes or {}
            assert apply[spans.REVISION] == revision
            assert apply[spans.INDEX] == commit[spans.INDEX]
            resource = got["Raft.apply"].resource.attributes
            assert (resource["service.name"], resource["host.name"]) == ("store", "s1")

    asyncio.run(scenario())


def test_a_request_without_trace_context_makes_no_span(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with traced_store(tmp_path) as (client, store, exporter):
            body = {"key": b64("k"), "value": b64("v")}
            assert (await client.post("/v3/kv/put", json=body)).status == 200
            assert (await client.post("/v3/kv/range", json={"key": b64("k")})).status == 200
            assert store_spans(store, exporter) == {}

    asyncio.run(scenario())


def test_a_traced_watch_is_a_span_per_watcher_created(
    tmp_path: Path, client_tracer: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, _ = client_tracer

    async def scenario() -> None:
        async with traced_store(tmp_path) as (client, store, exporter):
            with tracer.start_as_current_span("reflector") as reflector:
                headers: dict[str, str] = {}
                propagate.inject(headers)
            create = {"create_request": {"key": b64("/registry/pods/"), "start_revision": "1"}}
            answer = await client.post("/v3/watch", data=json.dumps(create), headers=headers)
            frame = json.loads(await asyncio.wait_for(answer.content.readline(), 5))
            assert frame["result"]["created"]
            answer.close()
            watch = store_spans(store, exporter)["Store.watch"]
            assert watch.parent is not None
            assert watch.parent.span_id == reflector.get_span_context().span_id
            assert (watch.attributes or {})["kubelab.store.key"] == "/registry/pods/"

    asyncio.run(scenario())


def test_one_fsync_for_a_batch_is_the_first_requests_child_linked_to_the_others(
    client_tracer: tuple[trace.Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = client_tracer
    proposals = [tracer.start_span(f"Raft.propose {i}") for i in range(3)]
    parents = []
    for proposal in proposals:
        with trace.use_span(proposal):
            parents.append(spans.traceparent())
    raft_spans = spans.RaftSpans(tracer)
    entries = [(Entry(term=1, index=10 + i), parent) for i, parent in enumerate(parents)]
    contexts = raft_spans.appended(entries, leading=True)
    raft_spans.synced(contexts, spans.Sync(1_000, 2_000, 0.0005, 300), entries=5)
    (fsync,) = [s for s in exporter.get_finished_spans() if s.name == "Raft.fsync"]
    assert fsync.parent is not None and fsync.parent.span_id == span_id_of(proposals[0])
    assert [link.context.span_id for link in fsync.links] == [span_id_of(p) for p in proposals[1:]]
    assert (fsync.start_time, fsync.end_time) == (1_000, 2_000)
    assert fsync.attributes == {
        spans.WAL_ENTRIES: 5, spans.WAL_BYTES: 300, spans.WAL_FDATASYNC_SECONDS: 0.0005
    }  # fmt: skip
    # The leader's commit of each: its own span, in its own request's trace.
    raft_spans.committed(entries[1][0], lambda index: [1, 2])
    (commit,) = [s for s in exporter.get_finished_spans() if s.name == "Raft.commit"]
    assert commit.parent is not None and commit.parent.span_id == span_id_of(proposals[1])
    assert (commit.attributes or {})[spans.ACKNOWLEDGED] == ("1", "2")
    # A leader that lost leadership does not claim the commit of what it appended.
    raft_spans.lost_leadership()
    raft_spans.committed(entries[2][0], lambda index: [1, 2])
    assert [s.name for s in exporter.get_finished_spans()].count("Raft.commit") == 1
    for proposal in proposals:
        proposal.end()


def span_id_of(span: trace.Span) -> int:
    return span.get_span_context().span_id


def test_an_untraced_entry_is_told_from_a_traced_one_by_its_first_byte() -> None:
    from controlplane.store.node import _decode_request, _encode_request

    plain = _encode_request(7, 1, b"payload", "")
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    traced = _encode_request(7, 1, b"payload", parent)
    assert not spans.is_traced(Entry(1, 1, data=plain))
    assert spans.is_traced(Entry(1, 1, data=traced))
    assert _decode_request(plain) == (7, 1, b"payload", "")
    assert _decode_request(traced) == (7, 1, b"payload", parent)


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every store call with an empty success, keeping each request's headers."""

    seen: list[tuple[str, str | None]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.path, self.headers.get("traceparent")))
        body = b'{"header": {"revision": "1"}}'
        if self.path == "/v3/watch":
            body = json.dumps({"result": {"header": {}, "created": True}}).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_store_client_sends_the_callers_trace_context_on_every_call(
    client_tracer: tuple[trace.Tracer, InMemorySpanExporter],
) -> None:
    tracer, _ = client_tracer
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Recorder.seen = []
    client = StoreClient([f"http://127.0.0.1:{server.server_address[1]}"], timeout=5)
    try:
        client.put("outside", "a span")
        with tracer.start_as_current_span("apiserver request") as request:
            client.put("k", "v")
            watch = client.watch("k")
            watch.close()
        context = request.get_span_context()
        parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
        assert _Recorder.seen == [
            ("/v3/kv/put", None), ("/v3/kv/put", parent), ("/v3/watch", parent)
        ]  # fmt: skip
    finally:
        client.close()
        server.shutdown()
        server.server_close()
