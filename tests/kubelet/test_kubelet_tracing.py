"""The kubelet's spans (agents/kubelet/podtrace.py, server.py) on its in-memory runtime
against the in-process apiserver: a pod whose annotation carries a trace (as the
apiserver stamps the binding's) is synced in that trace, step by step; syncs that find
nothing to do make no span; its deletion's teardown continues the deletion's trace; a
live-data request continues its `traceparent` header's trace."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from agents.kubelet import podtrace
from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import FixedMachine
from agents.kubelet.runtime import ExecResult
from agents.kubelet.runtime.memory import MemoryRuntime
from kubelab import pki, tracing
from kubelab.client import DeletedFinalStateUnknown
from tests.kubelet.kubelet_fixture import PODS, Cluster, fast_config, node_client, until


class Traced:
    """The writers' side of the test (the apiserver's spans, in a lab) and the kubelet's
    spans, each into memory."""

    def __init__(self) -> None:
        self.writer_spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.writer_spans))
        self.writer = provider.get_tracer("apiserver")
        self.kubelet_spans = InMemorySpanExporter()

    @contextlib.contextmanager
    def writing(self, name: str) -> Iterator[trace.SpanContext]:
        """A write made in span `name`: its request carries the span's traceparent and the
        apiserver stamps that context on the object, as in a lab."""
        with self.writer.start_as_current_span(name) as span:
            yield span.get_span_context()

    def kubelet(self) -> list[ReadableSpan]:
        return list(self.kubelet_spans.get_finished_spans())


@pytest.fixture
def traced() -> Traced:
    return Traced()


@pytest.fixture
def node() -> str:
    return f"trace-{uuid.uuid4().hex[:6]}"


def traced_kubelet(
    cluster: Cluster, node: str, traced: Traced, tmp_path: Path, **serving: object
) -> Kubelet:
    registry = CollectorRegistry()
    kubelet_tracing = tracing.setup(
        "kubelet", node, registry, exporter=traced.kubelet_spans, schedule_delay=0.05
    )
    runtime = MemoryRuntime(node, exec_handler=lambda *_: ExecResult(0, b""))
    kubelet = Kubelet(
        fast_config(node, tmp_path, sync_frequency=0.3, address="127.0.0.1"),
        node_client(cluster, node),
        runtime,
        FixedMachine(),
        tracing=kubelet_tracing,
        registry=registry,
        **serving,  # type: ignore[arg-type]
    )
    kubelet.start()
    return kubelet


@pytest.fixture
def kubelet(cluster: Cluster, node: str, traced: Traced, tmp_path: Path) -> Iterator[Kubelet]:
    k = traced_kubelet(cluster, node, traced, tmp_path)
    yield k
    k.stop()
    cluster.delete_node(node)


def in_trace(spans: list[ReadableSpan], parent: trace.SpanContext) -> list[ReadableSpan]:
    return [s for s in spans if s.context is not None and s.context.trace_id == parent.trace_id]


def children(spans: list[ReadableSpan], of: ReadableSpan) -> list[str]:
    assert of.context is not None
    return [
        s.name for s in spans if s.parent is not None and s.parent.span_id == of.context.span_id
    ]


def test_a_pods_sync_continues_its_trace_and_its_deletion_the_deletions(
    cluster: Cluster, namespace: str, node: str, kubelet: Kubelet, traced: Traced
) -> None:
    readiness = {"exec": {"command": ["true"]}, "periodSeconds": 1}
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "web", "image": "nginx:1.25", "readinessProbe": readiness}],
        },
    }
    with traced.writing("bind") as binding:
        created = cluster.admin.create(PODS, body, namespace)

    def ready() -> bool:
        conditions = cluster.status(namespace, "web").get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    until(ready, "the pod to be Ready")
    assert kubelet.tracing is not None
    kubelet.tracing.force_flush()
    spans = in_trace(traced.kubelet(), binding)
    syncs = [s for s in spans if s.name == podtrace.SYNC_POD]
    assert syncs, [s.name for s in spans]
    first = syncs[0]
    assert first.parent is not None and first.parent.span_id == binding.span_id
    assert first.attributes is not None
    assert first.attributes[tracing.OBJECT_UID] == created["metadata"]["uid"]
    assert first.attributes[tracing.OBJECT_KIND] == "Pod"
    assert children(spans, first) == [
        "Kubelet.runPodSandbox",
        "Kubelet.ensureImage",
        "Kubelet.createContainer",
        "Kubelet.startContainer",
        "Kubelet.updateStatus",
    ]
    steps = {s.name: s for s in spans}
    assert (steps["Kubelet.ensureImage"].attributes or {})[podtrace.IMAGE] == "nginx:1.25"
    assert (steps["Kubelet.startContainer"].attributes or {})[podtrace.CONTAINER] == "web"
    probe = steps["Kubelet.probe"].attributes or {}
    assert probe[podtrace.PROBE] == "readinessProbe"
    assert all(s.resource.attributes["service.name"] == "kubelet" for s in spans)

    # Once the pod runs, syncs (every 0.3 s here) and probes (every 1 s) find nothing
    # to do and make no span.
    time.sleep(1.5)
    kubelet.tracing.force_flush()
    assert len(traced.kubelet()) == len(spans)

    # The deletion is written in a trace of its own (the apiserver stamps its context).
    with traced.writing("delete") as deletion:
        cluster.admin.delete(PODS, "web", namespace)
    until(lambda: not cluster.pod_exists(namespace, "web"), "the pod to be deleted")

    def torn_down() -> list[ReadableSpan]:
        found = in_trace(traced.kubelet(), deletion)
        return found if any(s.name == "Kubelet.removePodSandbox" for s in found) else []

    teardown = until(torn_down, "the pod's teardown spans")
    # The status says the containers stopped once the PLEG relisted them: in this sync,
    # or in a later one (which may then find the pod gone).
    terminating = [s for s in teardown if s.name == podtrace.SYNC_TERMINATING_POD]
    assert all(s.parent is not None and s.parent.span_id == deletion.span_id for s in terminating)
    first = min(terminating, key=lambda s: s.start_time or 0)
    assert children(teardown, first) in (
        ["Kubelet.killPod", "Kubelet.updateStatus", "Kubelet.deletePod"],
        ["Kubelet.killPod", "Kubelet.deletePod"],
    )
    (kill,) = [s for s in teardown if s.name == "Kubelet.killPod"]
    assert children(teardown, kill) == ["Kubelet.stopContainer", "Kubelet.stopPodSandbox"]
    (stop,) = [s for s in teardown if s.name == "Kubelet.stopContainer"]
    assert (stop.attributes or {})[podtrace.GRACE_PERIOD] == 5.0
    (terminated,) = [s for s in teardown if s.name == podtrace.SYNC_TERMINATED_POD]
    assert children(teardown, terminated) == [
        "Kubelet.removeContainer",
        "Kubelet.removePodSandbox",
    ]


def test_a_traced_live_data_request_continues_its_trace(
    cluster: Cluster, namespace: str, node: str, traced: Traced, tmp_path: Path
) -> None:
    ca = pki.load_pair(cluster.pki_dir, "ca")
    serving = pki.issue(ca, node, server=True, ip_addresses=["127.0.0.1"])
    cert_file, key_file = pki.write_pair(serving, tmp_path, "kubelet")
    context = pki.server_ssl_context(cluster.ca_file, cert_file, key_file, False)
    kubelet = traced_kubelet(cluster, node, traced, tmp_path, serving=context)
    try:
        cluster.create_pod(
            namespace, node, "hello", containers=[{"name": "hello", "image": "busybox:1.36"}]
        )
        until(lambda: cluster.status(namespace, "hello").get("phase") == "Running", "Running")
        pair = pki.issue(ca, "kube-apiserver-kubelet-client", organizations=["system:masters"],
                         client=True)  # fmt: skip
        cert = tuple(str(p) for p in pki.write_pair(pair, tmp_path, "apiserver"))
        url = f"https://127.0.0.1:{kubelet.config.port}/containerLogs/{namespace}/hello/hello"
        with traced.writer.start_as_current_span("apiserver proxy") as proxy:
            headers: dict[str, str] = {}
            propagate.inject(headers)
            answer = requests.get(
                url, headers=headers, cert=cert, verify=str(cluster.ca_file), timeout=10
            )
        assert answer.status_code == 200
        untraced = requests.get(url, cert=cert, verify=str(cluster.ca_file), timeout=10)
        assert untraced.status_code == 200
        assert kubelet.tracing is not None
        kubelet.tracing.force_flush()
        logs = [s for s in traced.kubelet() if s.name == "Kubelet.containerLogs"]
        assert len(logs) == 1, "the untraced request made a span"
        (span,) = logs
        assert span.parent is not None
        assert span.parent.span_id == proxy.get_span_context().span_id
        assert span.kind is trace.SpanKind.SERVER
        assert span.attributes is not None
        assert span.attributes[tracing.OBJECT_NAME] == "hello"
        assert span.attributes[podtrace.CONTAINER] == "hello"
    finally:
        kubelet.stop()
        cluster.delete_node(node)


def test_a_pod_deleted_while_the_watch_was_down_is_torn_down_as_that_pod(
    cluster: Cluster, namespace: str, node: str, kubelet: Kubelet, traced: Traced
) -> None:
    """The informer tells of a deletion it missed with the last state it had
    (`DeletedFinalStateUnknown`): the kubelet still tears that pod down, and its spans
    name it, in the trace its last state carries."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "missed"},
        "spec": {"nodeName": node, "containers": [{"name": "web", "image": "nginx:1.25"}]},
    }
    with traced.writing("bind") as binding:
        created = cluster.admin.create(PODS, body, namespace)
    until(lambda: cluster.status(namespace, "missed").get("phase") == "Running", "Running")
    last = kubelet.informer.indexer.get(f"{namespace}/missed")
    assert last is not None
    kubelet._pod_deleted(DeletedFinalStateUnknown(f"{namespace}/missed", last))

    def torn_down() -> list[ReadableSpan]:
        found = [s for s in in_trace(traced.kubelet(), binding)
                 if s.name == podtrace.SYNC_TERMINATED_POD]  # fmt: skip
        return found if found and children(traced.kubelet(), found[0]) else []

    (terminated,) = until(torn_down, "the missed pod's teardown")
    assert (terminated.attributes or {})[tracing.OBJECT_UID] == created["metadata"]["uid"]
    assert children(traced.kubelet(), terminated)[0] == "Kubelet.killPod"
