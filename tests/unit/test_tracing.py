"""kubelab.tracing: a component's provider and its Resource, the object's attributes,
trace context carried through an object (also across the real apiserver and an
informer, from one component's span to another's), and a collector that is down or
slow costing spans, counted, never the component's time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from controlplane.collector import server as collector_server
from controlplane.collector.storage import Query, TraceStore
from kubelab import tracing
from kubelab.client.informers import SharedInformer
from kubelab.client.rest import Object, RestClient, resource_for
from lab.testenv import Environment
from tests.unit.client.conftest import eventually

PODS = resource_for("v1", "Pod")


def component(
    name: str, node: str = "worker1", **kwargs: object
) -> tuple[tracing.Tracing, InMemorySpanExporter, CollectorRegistry]:
    exporter = InMemorySpanExporter()
    registry = CollectorRegistry()
    traced = tracing.setup(name, node, registry, exporter=exporter, **kwargs)  # type: ignore[arg-type]
    return traced, exporter, registry


def finished(traced: tracing.Tracing, exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    traced.force_flush()
    return list(exporter.get_finished_spans())


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    assert value is not None, f"{name}{labels} is not in /metrics"
    return value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the provider ---------------------------------------------------------------------


def test_spans_name_their_component_and_node() -> None:
    traced, exporter, _ = component("scheduler", node="control-plane1")
    with traced.tracer.start_as_current_span("Scheduler.schedule"):
        pass
    (span,) = finished(traced, exporter)
    attributes = span.resource.attributes
    assert attributes["service.name"] == "scheduler"
    assert attributes["host.name"] == attributes["k8s.node.name"] == "control-plane1"


def test_an_unknown_component_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown component 'etcd'"):
        tracing.setup("etcd", "n", CollectorRegistry())


def test_without_an_endpoint_tracing_is_off_and_its_counters_still_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    registry = CollectorRegistry()
    traced = tracing.setup("kubelet", "worker1", registry)
    assert not traced.enabled
    with traced.tracer.start_as_current_span("Kubelet.syncPod") as span:
        assert not span.get_span_context().is_valid
    assert sample(registry, "kubelab_tracing_spans_exported_total") == 0
    assert sample(registry, "kubelab_tracing_spans_dropped_total", reason="queue_full") == 0


def test_the_standard_endpoint_variable_sends_the_spans_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A user's own Jaeger or Tempo, named the standard way (here a collector stands in
    for it: both take OTLP/HTTP at the base URL's /v1/traces)."""
    store = TraceStore(tmp_path, max_traces=10, max_bytes=10**6)
    server = collector_server.serve(store, "127.0.0.1", 0)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.url)
    traced = tracing.setup("dns", "worker1", CollectorRegistry())
    try:
        assert traced.enabled
        with traced.tracer.start_as_current_span("DNS.sync"):
            pass
        traced.force_flush()
        spans, _ = store.query(Query())
        assert [(s["name"], s["component"], s["node"]) for s in spans] == [
            ("DNS.sync", "dns", "worker1")
        ]
    finally:
        traced.shutdown()
        server.shutdown()
        store.close()


def test_the_flag_takes_a_base_url_as_the_standard_variable_does() -> None:
    assert tracing.traces_url("http://10.0.0.2:4318/") == "http://10.0.0.2:4318/v1/traces"


# -- the object on a span ---------------------------------------------------------------


def test_object_attributes_name_the_object_and_its_controller() -> None:
    pod: Object = {
        "metadata": {
            "name": "web-7d4-x2",
            "namespace": "default",
            "uid": "u-pod",
            "resourceVersion": "42",
            "ownerReferences": [
                {"kind": "Node", "uid": "u-other"},
                {"kind": "ReplicaSet", "uid": "u-rs", "controller": True},
            ],
        }
    }
    assert tracing.object_attributes(pod, kind="Pod") == {
        "k8s.object.kind": "Pod",
        "k8s.object.namespace": "default",
        "k8s.object.name": "web-7d4-x2",
        "k8s.object.uid": "u-pod",
        "k8s.object.resource_version": "42",
        "k8s.object.owner_uid": "u-rs",
    }
    node: Object = {"kind": "Node", "metadata": {"name": "worker1"}}
    assert tracing.object_attributes(node) == {
        "k8s.object.kind": "Node",
        "k8s.object.name": "worker1",
    }


# -- context through an object ----------------------------------------------------------


def test_a_reacting_component_continues_the_writers_trace() -> None:
    apiserver, apiserver_spans, _ = component("apiserver", node="control-plane1")
    kubelet, kubelet_spans, _ = component("kubelet")
    pod: Object = {"metadata": {"name": "web", "annotations": {"keep": "me"}}}
    with apiserver.tracer.start_as_current_span("create pods"):
        tracing.inject(pod["metadata"])
    assert pod["metadata"]["annotations"]["keep"] == "me"
    assert pod["metadata"]["annotations"][tracing.TRACEPARENT_ANNOTATION].startswith("00-")

    with kubelet.tracer.start_as_current_span("Kubelet.syncPod", tracing.extract(pod)):
        pass
    (write,) = finished(apiserver, apiserver_spans)
    (sync,) = finished(kubelet, kubelet_spans)
    assert write.context is not None and sync.context is not None
    assert sync.context.trace_id == write.context.trace_id
    assert sync.parent is not None and sync.parent.span_id == write.context.span_id
    assert sync.resource.attributes["service.name"] == "kubelet"


def test_a_link_points_at_the_span_that_wrote_the_object() -> None:
    apiserver, apiserver_spans, _ = component("apiserver")
    scheduler, scheduler_spans, _ = component("scheduler")
    pod: Object = {"metadata": {"name": "web"}}
    with apiserver.tracer.start_as_current_span("create pods"):
        tracing.inject(pod["metadata"])
    link = tracing.link(pod)
    assert link is not None
    with scheduler.tracer.start_as_current_span("Scheduler.schedule", links=[link]):
        pass
    (write,) = finished(apiserver, apiserver_spans)
    (schedule,) = finished(scheduler, scheduler_spans)
    assert schedule.parent is None
    assert write.context is not None and schedule.context is not None
    assert schedule.context.trace_id != write.context.trace_id
    assert [(lk.context.trace_id, lk.context.span_id) for lk in schedule.links] == [
        (write.context.trace_id, write.context.span_id)
    ]


def test_a_write_outside_any_span_removes_an_earlier_writes_context() -> None:
    apiserver, _, _ = component("apiserver")
    metadata: dict[str, object] = {"name": "web"}
    with apiserver.tracer.start_as_current_span("create pods"):
        tracing.inject(metadata)
    tracing.inject(metadata)
    assert metadata == {"name": "web", "annotations": {}}
    bare: dict[str, object] = {"name": "web"}
    tracing.inject(bare)
    assert bare == {"name": "web"}


def test_an_object_without_or_with_a_malformed_context_starts_a_new_trace() -> None:
    for kept in ({}, {tracing.TRACEPARENT_ANNOTATION: "00-not-a-traceparent"}):
        obj: Object = {"metadata": {"name": "web", "annotations": kept}}
        assert tracing.link(obj) is None
        assert not trace.get_current_span(tracing.extract(obj)).get_span_context().is_valid


def test_context_travels_through_the_apiserver_and_an_informer(
    apiserver: Environment, namespace: str
) -> None:
    """One component writes a pod inside a span, with the context in the pod's
    annotations (the apiserver will set it itself); a second component's informer hands
    the pod to a handler that continues the trace: one trace across both."""
    writer, writer_spans, _ = component("controller-manager", node="control-plane1")
    reactor, reactor_spans, _ = component("kubelet")
    handled = threading.Event()

    def on_add(obj: Object) -> None:
        with reactor.tracer.start_as_current_span("Kubelet.syncPod", tracing.extract(obj)) as s:
            s.set_attributes(tracing.object_attributes(obj, kind="Pod"))
        handled.set()

    stop = threading.Event()
    config = apiserver.client_config(namespace=namespace)
    with RestClient(config, qps=None) as client:
        informer = SharedInformer(client, PODS, namespace=namespace)
        informer.add_event_handler(on_add=on_add)
        informer.start(stop)
        try:
            assert informer.wait_for_sync(30)
            pod: Object = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "traced"},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            }
            with writer.tracer.start_as_current_span("ReplicaSet.createPod"):
                tracing.inject(pod["metadata"])
                created = client.create(PODS, pod, namespace)
            eventually(handled.is_set)
        finally:
            stop.set()
    (write,) = finished(writer, writer_spans)
    (sync,) = finished(reactor, reactor_spans)
    assert write.context is not None and sync.context is not None
    assert sync.context.trace_id == write.context.trace_id
    assert sync.parent is not None and sync.parent.span_id == write.context.span_id
    assert sync.attributes is not None
    assert sync.attributes["k8s.object.uid"] == created["metadata"]["uid"]


# -- a collector that is down or slow ---------------------------------------------------


class _Gate(SpanExporter):
    """An exporter that holds each export until the test opens the gate, then answers
    `result`; it records how many batches reached it."""

    def __init__(self, result: SpanExportResult = SpanExportResult.SUCCESS) -> None:
        self.result = result
        self.open = threading.Event()
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        self.open.wait(30)
        return self.result


def spans(traced: tracing.Tracing, count: int) -> None:
    for i in range(count):
        with traced.tracer.start_as_current_span(f"step {i}"):
            pass


def test_spans_beyond_the_queue_are_dropped_and_counted() -> None:
    gate = _Gate()
    registry = CollectorRegistry()
    traced = tracing.setup(
        "apiserver", "cp1", registry, exporter=gate, max_queue_size=4, schedule_delay=0.01
    )
    spans(traced, 1)
    eventually(lambda: gate.calls == 1)  # the exporter holds the first span
    spans(traced, 10)  # three more fit: four in flight
    assert sample(registry, "kubelab_tracing_spans_dropped_total", reason="queue_full") == 7
    gate.open.set()
    traced.shutdown()
    assert sample(registry, "kubelab_tracing_spans_exported_total") == 4


def test_after_a_failed_export_batches_are_dropped_without_waiting() -> None:
    gate = _Gate(SpanExportResult.FAILURE)
    gate.open.set()
    registry = CollectorRegistry()
    traced = tracing.setup("store", "cp1", registry, exporter=gate, schedule_delay=60)
    spans(traced, 3)
    traced.force_flush()
    spans(traced, 2)
    traced.force_flush()
    assert gate.calls == 1
    assert sample(registry, "kubelab_tracing_spans_dropped_total", reason="export_failed") == 5
    assert sample(registry, "kubelab_tracing_spans_exported_total") == 0


def test_a_collector_that_is_down_costs_the_component_no_time() -> None:
    """The real OTLP exporter at a port where nothing listens."""
    registry = CollectorRegistry()
    endpoint = f"http://127.0.0.1:{free_port()}"
    traced = tracing.setup("scheduler", "cp1", registry, endpoint, schedule_delay=0.01)
    started = time.monotonic()
    spans(traced, 200)
    assert time.monotonic() - started < 2.0
    eventually(
        lambda: (
            sample(registry, "kubelab_tracing_spans_dropped_total", reason="export_failed")
            + sample(registry, "kubelab_tracing_spans_dropped_total", reason="queue_full")
            == 200
        )
    )
    started = time.monotonic()
    traced.shutdown()
    assert time.monotonic() - started < tracing.EXPORT_TIMEOUT + 2
