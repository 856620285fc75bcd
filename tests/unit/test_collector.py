"""The collector (controlplane/collector) in a thread of the test: the SDK's real OTLP
exporter sends it spans through kubelab.tracing; OTLP/JSON and compressed bodies;
malformed bodies refused with a clear 400 and nothing stored; the bounds on traces and
bytes, oldest first; the query API that labctl trace reads."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from controlplane.collector import otlp
from controlplane.collector import server as collector_server
from controlplane.collector.storage import Query, TraceStore
from kubelab import tracing

POD: dict[str, Any] = {
    "kind": "Pod",
    "metadata": {
        "name": "web-1",
        "namespace": "default",
        "uid": "uid-pod",
        "resourceVersion": "7",
        "ownerReferences": [{"uid": "uid-rs", "controller": True}],
    },
}


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[collector_server.CollectorServer]:
    store = TraceStore(tmp_path, max_traces=100, max_bytes=10**7)
    server = collector_server.serve(store, "127.0.0.1", 0)
    yield server
    server.shutdown()
    store.close()


def query(collector: collector_server.CollectorServer, **params: Any) -> list[dict[str, Any]]:
    answer = requests.get(f"{collector.url}/api/v1/spans", params=params, timeout=10)
    assert answer.status_code == 200, answer.text
    spans: list[dict[str, Any]] = answer.json()["spans"]
    return spans


def sdk_spans(count: int = 1, component: str = "kubelet") -> list[ReadableSpan]:
    """Spans made by the SDK as a component makes them, each its own trace."""
    exporter = InMemorySpanExporter()
    traced = tracing.setup(component, "worker1", CollectorRegistry(), exporter=exporter)
    for i in range(count):
        with traced.tracer.start_as_current_span(f"step {i}") as span:
            span.set_attributes(tracing.object_attributes(POD))
    traced.force_flush()
    return list(exporter.get_finished_spans())


def post(collector: collector_server.CollectorServer, body: bytes, **headers: str) -> Any:
    headers.setdefault("Content-Type", "application/x-protobuf")
    return requests.post(f"{collector.url}/v1/traces", data=body, headers=headers, timeout=10)


def test_the_sdks_exporter_delivers_spans_in_the_public_shape(
    collector: collector_server.CollectorServer,
) -> None:
    registry = CollectorRegistry()
    traced = tracing.setup("apiserver", "control-plane1", registry, collector.url)
    with traced.tracer.start_as_current_span("create pods") as parent:
        parent.set_attributes(tracing.object_attributes(POD))
        with traced.tracer.start_as_current_span("store.txn"):
            pass
    traced.shutdown()
    assert registry.get_sample_value("kubelab_tracing_spans_exported_total") == 2

    (create,) = query(collector, uid="uid-pod")
    assert set(create) == {
        "trace_id",
        "span_id",
        "parent_span_id",
        "links",
        "name",
        "component",
        "node",
        "start",
        "end",
        "object",
        "attributes",
    }
    assert create["name"] == "create pods"
    assert (create["component"], create["node"]) == ("apiserver", "control-plane1")
    assert create["object"] == {
        "kind": "Pod",
        "namespace": "default",
        "name": "web-1",
        "uid": "uid-pod",
    }
    assert create["attributes"]["k8s.object.resource_version"] == "7"
    assert create["parent_span_id"] is None and create["links"] == []
    assert len(create["start"]) == len("2026-12-08T10:11:12.123456Z") and create["end"][-1] == "Z"
    assert query(collector, kind="pod", namespace="default", name="web-1") == [create]
    assert query(collector, owner_uid="uid-rs") == [create]

    whole = query(collector, trace_id=create["trace_id"])
    assert [s["name"] for s in whole] == ["store.txn", "create pods"]
    assert whole[0]["parent_span_id"] == create["span_id"] and whole[0]["object"] is None


def test_otlp_json_with_hex_ids_and_gzip_bodies_are_taken(
    collector: collector_server.CollectorServer,
) -> None:
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "Scheduler.schedule",
        "kind": 1,
        "startTimeUnixNano": "1544712660000000000",
        "endTimeUnixNano": "1544712661000000000",
        "attributes": [{"key": "k8s.object.uid", "value": {"stringValue": "uid-json"}}],
        "links": [{"traceId": "5b8efff798038103d269b633813fc60d", "spanId": "eee19b7ec3c1b175"}],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "scheduler"}}]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}
    answer = post(collector, json.dumps(body).encode(), **{"Content-Type": "application/json"})
    assert (answer.status_code, answer.json()) == (200, {})
    (stored,) = query(collector, uid="uid-json")
    assert stored["trace_id"] == span["traceId"] and stored["span_id"] == span["spanId"]
    assert stored["links"] == [
        {"trace_id": "5b8efff798038103d269b633813fc60d", "span_id": "eee19b7ec3c1b175"}
    ]
    assert stored["start"] == "2018-12-13T14:51:00.000000Z"

    compressed = gzip.compress(encode_spans(sdk_spans()).SerializeToString())
    answer = post(collector, compressed, **{"Content-Encoding": "gzip"})
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/x-protobuf"
    assert len(query(collector, uid="uid-pod")) == 1


@pytest.mark.parametrize(
    ("body", "headers", "message"),
    [
        (b"\xff\x00garbage", {}, "not an OTLP ExportTraceServiceRequest"),
        (b"{not json", {"Content-Type": "application/json"}, "not JSON"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": '
            b'[{"traceId": "zz", "spanId": "01"}]}]}]}',
            {"Content-Type": "application/json"},
            "traceId 'zz' is not a hex string",
        ),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "0102", '
            b'"spanId": "0102030405060708", "name": "short"}]}]}]}',
            {"Content-Type": "application/json"},
            "span 'short': trace_id must be 16 bytes",
        ),
        (b"{}", {"Content-Type": "text/plain"}, "unsupported Content-Type 'text/plain'"),
        (b"abc", {"Content-Encoding": "gzip"}, "not valid gzip data"),
    ],
)
def test_a_malformed_body_gets_400_with_what_is_wrong_and_nothing_is_stored(
    collector: collector_server.CollectorServer,
    body: bytes,
    headers: dict[str, str],
    message: str,
) -> None:
    answer = post(collector, body, **headers)
    assert answer.status_code == 400
    if answer.headers["Content-Type"] == "application/json":
        assert message in answer.json()["message"]
    else:
        assert message.encode() in answer.content  # a google.rpc.Status in protobuf
    assert query(collector) == []


def test_one_bad_span_refuses_the_whole_request(
    collector: collector_server.CollectorServer,
) -> None:
    request = encode_spans(sdk_spans(2))
    request.resource_spans[0].scope_spans[0].spans[1].span_id = b"\x01"
    answer = post(collector, request.SerializeToString())
    assert answer.status_code == 400
    assert query(collector) == []
    metrics = requests.get(f"{collector.url}/metrics", timeout=10).text
    assert 'kubelab_collector_requests_total{code="400"} 1.0' in metrics


def test_the_oldest_traces_are_evicted_past_the_bounds(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, max_traces=3, max_bytes=10**7)
    server = collector_server.serve(store, "127.0.0.1", 0)
    try:
        spans = sdk_spans(5)
        for span in spans:  # one request per trace, in order
            assert post(server, encode_spans([span]).SerializeToString()).status_code == 200
        assert [s["name"] for s in query(server)] == ["step 2", "step 3", "step 4"]
        metrics = requests.get(f"{server.url}/metrics", timeout=10).text
        assert "kubelab_collector_traces 3.0" in metrics
        assert "kubelab_collector_traces_evicted 2.0" in metrics
    finally:
        server.shutdown()
        store.close()

    one_trace = store.stored.bytes // 3
    smaller = TraceStore(tmp_path, max_traces=3, max_bytes=2 * one_trace + 1)
    try:
        kept, _ = smaller.query(Query())
        assert [s["name"] for s in kept] == ["step 3", "step 4"]
        assert smaller.stored.bytes <= smaller.max_bytes
    finally:
        smaller.close()


def test_the_query_api_pages_by_arrival_and_filters_by_start(
    collector: collector_server.CollectorServer,
) -> None:
    assert post(collector, encode_spans(sdk_spans(3)).SerializeToString()).status_code == 200
    answer = requests.get(f"{collector.url}/api/v1/spans", params={"limit": 2}, timeout=10)
    first = answer.json()
    assert len(first["spans"]) == 2
    rest = requests.get(
        f"{collector.url}/api/v1/spans", params={"after": first["next"]}, timeout=10
    ).json()
    assert [s["name"] for s in first["spans"] + rest["spans"]] == ["step 0", "step 1", "step 2"]
    assert query(collector, since=rest["spans"][0]["start"]) == rest["spans"]
    assert query(collector, since="2999-01-01T00:00:00+00:00") == []
    for params in ({"after": "x"}, {"since": "yesterday"}, {"since": "2026-01-01T00:00:00"}):
        answer = requests.get(f"{collector.url}/api/v1/spans", params=params, timeout=10)
        assert answer.status_code == 400 and "must" in answer.json()["message"]


def test_health_and_unknown_paths(collector: collector_server.CollectorServer) -> None:
    assert requests.get(f"{collector.url}/healthz", timeout=10).text == "ok"
    assert requests.get(f"{collector.url}/v1/logs", timeout=10).status_code == 404
    assert post(collector, b"", **{"Content-Type": "application/x-protobuf"}).status_code == 200


def test_linked_trace_id_finds_the_spans_that_link_into_a_trace_until_they_are_evicted(
    tmp_path: Path,
) -> None:
    exporter = InMemorySpanExporter()
    traced = tracing.setup("controller-manager", "cp1", CollectorRegistry(), exporter=exporter)
    with traced.tracer.start_as_current_span("Informer.event") as event:
        pass
    cause = event.get_span_context()
    with traced.tracer.start_as_current_span("Controller.reconcile", links=[trace.Link(cause)]):
        pass
    traced.force_flush()
    store = TraceStore(tmp_path, max_traces=2, max_bytes=10**7)
    try:
        store.add(otlp.public_spans(encode_spans(exporter.get_finished_spans())))
        wanted = format(cause.trace_id, "032x")
        linking, _ = store.query(Query(linked_trace_ids=[wanted]))
        assert [s["name"] for s in linking] == ["Controller.reconcile"]
        assert store.query(Query(linked_trace_ids=["0" * 32]))[0] == []
        store.add(otlp.public_spans(encode_spans(sdk_spans(2))))  # the two older traces go
        assert store.query(Query(linked_trace_ids=[wanted]))[0] == []
        (rows,) = store._db.execute("SELECT count(*) FROM links").fetchone()
        assert rows == 0
    finally:
        store.close()
