"""The apiserver's spans (docs/architecture.md, "Tracing") against the in-process
apiserver with its spans in memory: a request continues the client's `traceparent` or
starts the trace, its steps are its children, the object written keeps the request's
context, a status write keeps the stored one, and a `kubectl logs`-path request reaches
the kubelet carrying its context.

A test apiserver of the module's own, traced into an `InMemorySpanExporter`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kubelab import pki, tracing
from kubelab.client import RestClient, StatusError, resource_for
from lab.testenv import ADMIN, Environment
from tests import standin
from tests.conftest import new_namespace

CONFIG_MAPS = resource_for("v1", "ConfigMap")
NODES = resource_for("v1", "Node")
PODS = resource_for("v1", "Pod")
LEASES = resource_for("coordination.k8s.io/v1", "Lease")
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01"
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, exporter: InMemorySpanExporter
) -> Iterator[Environment]:
    directory = tmp_path_factory.mktemp("testenv")
    with Environment.start(directory=directory, span_exporter=exporter) as env:
        yield env


@pytest.fixture
def admin(env: Environment) -> Iterator[RestClient]:
    with RestClient(env.client_config(), qps=None) as client:
        yield client


def finished(env: Environment, exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    env.server.tracing.force_flush()
    return list(exporter.get_finished_spans())


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.trace_id, "032x")


def request_span(spans: list[ReadableSpan], name: str, object_name: str) -> ReadableSpan:
    found = [
        s
        for s in spans
        if s.name == name and (s.attributes or {}).get(tracing.OBJECT_NAME) == object_name
    ]
    assert len(found) == 1, [s.name for s in spans if s.name.startswith("APIServer.")]
    return found[0]


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[str]:
    assert parent.context is not None
    return [
        s.name for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def annotation_trace(obj: dict[str, Any]) -> str:
    value = (obj["metadata"].get("annotations") or {})[tracing.TRACEPARENT_ANNOTATION]
    return str(value).split("-")[1]


def test_a_create_with_traceparent_is_the_clients_child_with_the_chain_as_its_children(
    env: Environment, exporter: InMemorySpanExporter
) -> None:
    ns = new_namespace(env, "traced-create")
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(env.kubeconfig)))
    api.api_client.set_default_header("traceparent", TRACEPARENT)
    body = k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="traced"), data={"a": "b"})
    created = api.create_namespaced_config_map(ns, body)

    spans = finished(env, exporter)
    span = request_span(spans, "APIServer.create configmaps", "traced")
    assert hex_trace(span) == TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == CLIENT_SPAN_ID
    attributes = span.attributes or {}
    assert attributes["user_agent.original"].startswith("OpenAPI-Generator/")
    assert attributes[tracing.OBJECT_UID] == created.metadata.uid
    assert attributes["http.response.status_code"] == 201
    # The steps are attributes of the request span, the store transaction's included;
    # its one child is the watch cache's dispatch of the event, the child of the context
    # written.
    assert set(children(spans, span)) <= {"WatchCache.dispatch"}
    assert attributes["enduser.id"] == ADMIN
    assert attributes["kubelab.authorization.reason"] == "system:masters"
    # Each admission phase: the plugins that ran, in order, with their time; all
    # admitted (no rejection named).
    mutating = str(attributes["kubelab.admission.mutating"]).split(", ")
    validating = str(attributes["kubelab.admission.validating"]).split(", ")
    assert "NamespaceLifecycle" in [plugin.split()[0] for plugin in mutating]
    assert "ResourceQuota" in [plugin.split()[0] for plugin in validating]
    assert all(re.fullmatch(r"\w+ \d+us", plugin) for plugin in mutating + validating)
    assert not any(key.endswith(".rejection") for key in attributes)
    assert attributes["kubelab.validation.duration_seconds"] >= 0
    assert attributes["kubelab.store.operation"] == "create"
    assert attributes["kubelab.store.revision"] == int(created.metadata.resource_version)
    assert attributes["kubelab.store.duration_seconds"] > 0
    # The object keeps the request's context: what reacts to it continues this trace.
    traceparent = created.metadata.annotations[tracing.TRACEPARENT_ANNOTATION]
    assert span.context is not None
    assert traceparent.startswith(f"00-{TRACE_ID}-{span.context.span_id:016x}-")


def test_an_admission_rejection_is_the_verdict_of_the_plugin_that_made_it(
    env: Environment, exporter: InMemorySpanExporter, admin: RestClient
) -> None:
    ns = "traced-no-such-namespace"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lost"}}
    with pytest.raises(StatusError) as refused:
        admin.create(CONFIG_MAPS, body, namespace=ns)
    assert refused.value.code == 404

    spans = finished(env, exporter)
    span = next(
        s
        for s in spans
        if s.name == "APIServer.create configmaps"
        and (s.attributes or {}).get(tracing.OBJECT_NAMESPACE) == ns
    )
    attributes = span.attributes or {}
    # The chain stopped at the plugin that refused: the last to run, named with the
    # reason and message; those before it admitted.
    ran = str(attributes["kubelab.admission.mutating"]).split(", ")
    assert ran[-1].startswith("NamespaceLifecycle ")
    rejection = str(attributes["kubelab.admission.mutating.rejection"])
    assert rejection.startswith("NamespaceLifecycle: NotFound: ") and ns in rejection
    assert "kubelab.admission.validating" not in attributes
    assert attributes["http.response.status_code"] == 404


def test_a_create_without_traceparent_starts_the_trace(
    env: Environment, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    ns = new_namespace(env, "traced-root")
    subprocess.run(
        [KUBECTL, "--kubeconfig", str(env.kubeconfig), "-n", ns, "create", "configmap", "root"],
        check=True,
        capture_output=True,
    )
    spans = finished(env, exporter)
    span = request_span(spans, "APIServer.create configmaps", "root")
    assert span.parent is None
    assert (span.attributes or {})["user_agent.original"].startswith("kubectl/")
    with RestClient(env.client_config(), qps=None) as admin:
        stored = admin.get(CONFIG_MAPS, "root", ns)
    assert annotation_trace(stored) == hex_trace(span)


def test_a_write_whose_only_change_is_its_trace_context_changes_nothing(
    env: Environment, admin: RestClient
) -> None:
    ns = new_namespace(env, "traced-noop")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "same"}, "data": {}}
    created = admin.create(CONFIG_MAPS, body, ns)
    # Another request, so another trace context; the object as it is otherwise.
    again = admin.update(CONFIG_MAPS, created)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert again["metadata"]["annotations"] == created["metadata"]["annotations"]
    # Without the annotation in the body, too (a `kubectl replace` of a file).
    bare = {**created, "metadata": {**created["metadata"], "annotations": {}}}
    replaced = admin.update(CONFIG_MAPS, bare)
    assert replaced["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    # A real change stamps the new request's context, and is not a managed field.
    changed = admin.update(CONFIG_MAPS, {**again, "data": {"k": "v"}})
    assert annotation_trace(changed) != annotation_trace(created)
    for entry in changed["metadata"].get("managedFields") or []:
        assert "traceparent" not in str(entry.get("fieldsV1"))


def test_a_dry_run_keeps_the_stored_context(env: Environment, admin: RestClient) -> None:
    ns = new_namespace(env, "traced-dry")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}, "data": {}}
    created = admin.create(CONFIG_MAPS, body, ns)
    dry = subprocess.run(
        [
            KUBECTL,
            "--kubeconfig",
            str(env.kubeconfig),
            "-n",
            ns,
            "label",
            "configmap",
            "dry",
            "a=b",
            "--dry-run=server",
            "-o",
            "jsonpath={.metadata.annotations}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    assert created["metadata"]["annotations"][tracing.TRACEPARENT_ANNOTATION] in dry.stdout


def test_a_status_write_keeps_the_context_of_the_desired_state(
    env: Environment, exporter: InMemorySpanExporter, admin: RestClient
) -> None:
    ns = new_namespace(env, "traced-status")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }
    created = admin.create(PODS, pod, ns)
    status = {**created, "status": {"phase": "Running"}}
    written = admin.update_status(PODS, status)
    assert written["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    assert written["metadata"]["annotations"] == created["metadata"]["annotations"]
    spans = finished(env, exporter)
    span = request_span(spans, "APIServer.update pods/status", "web")
    assert (span.attributes or {})["kubelab.store.operation"] == "update"


class _Kubelet(BaseHTTPRequestHandler):
    """A kubelet's log endpoint that records the trace context it was sent."""

    traceparents: list[str] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.traceparents.append(self.headers.get("traceparent", ""))
        body = b"line 1\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_a_log_request_reaches_the_kubelet_in_its_trace(
    env: Environment, exporter: InMemorySpanExporter, admin: RestClient, tmp_path: Path
) -> None:
    ns = new_namespace(env, "traced-logs")
    tls = standin.tls_context(pki.new_ca("kubelet-ca"), tmp_path)
    with standin.serve(_Kubelet, tls=tls) as kubelet:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"{ns}-node"},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet.server_address[1]}},
            },
        }
        admin.create(NODES, node)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "logged"},
            "spec": {"nodeName": f"{ns}-node", "containers": [{"name": "c", "image": "busybox"}]},
        }
        admin.create(PODS, pod, ns)
        logs = subprocess.run(
            [KUBECTL, "--kubeconfig", str(env.kubeconfig), "-n", ns, "logs", "logged"],
            check=True,
            capture_output=True,
            text=True,
        )
    assert logs.stdout == "line 1\n"
    spans = finished(env, exporter)
    span = request_span(spans, "APIServer.get pods/log", "logged")
    assert (span.attributes or {})["user_agent.original"].startswith("kubectl/")
    proxied = [s for s in spans if s.name == "APIServer.proxy" and s.parent == span.context]
    assert len(proxied) == 1
    assert (proxied[0].attributes or {})[tracing.NODE_NAME] == f"{ns}-node"
    assert proxied[0].context is not None
    assert len(_Kubelet.traceparents) == 1
    assert _Kubelet.traceparents[0].startswith(
        f"00-{hex_trace(span)}-{proxied[0].context.span_id:016x}-"
    )


def test_health_checks_and_lease_renewals_are_traced_only_in_a_clients_trace(
    env: Environment, exporter: InMemorySpanExporter, admin: RestClient
) -> None:
    ns = new_namespace(env, "traced-routine")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "heartbeat"},
        "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 40},
    }
    created = admin.create(LEASES, lease, ns)  # a Lease's creation is traced
    finished(env, exporter)
    exporter.clear()
    renewed = admin.update(
        LEASES, {**created, "spec": {**created["spec"], "holderIdentity": "node-b"}}
    )
    admin.get(LEASES, "heartbeat", ns)
    for path in ("/healthz", "/readyz", "/readyz/etcd", "/livez", "/metrics"):
        admin.request("GET", path)
    # No request span; and the renewal stamped no context, so its event has no dispatch
    # span either (those seen here are of the earlier, traced writes).
    assert [s.name for s in finished(env, exporter) if s.name.startswith("APIServer.")] == []
    assert tracing.TRACEPARENT_ANNOTATION not in (renewed["metadata"].get("annotations") or {})

    # A client that sends its sampled context is traced all the same.
    with env.server.tracing.span("client") as client_span:
        admin.request("GET", "/readyz")
        admin.update(LEASES, renewed)
    names = {
        s.name
        for s in finished(env, exporter)
        if s.parent is not None and s.parent.span_id == client_span.get_span_context().span_id
    }
    assert names == {"APIServer.get /readyz", "APIServer.update leases"}


def test_a_read_says_whether_the_watch_cache_or_the_store_served_it(
    env: Environment, exporter: InMemorySpanExporter
) -> None:
    """A get and an unpaginated list come from the watch cache, once it has caught up with
    the store's current revision (resourceVersion unset) or at once ("0"); a paginated
    list (kubectl's `limit=500`) or a page after the first comes from the store."""
    ns = new_namespace(env, "traced-read")
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(env.kubeconfig)))
    for name in ("one", "two"):
        body = k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=name))
        api.create_namespaced_config_map(ns, body)

    def read(number: int, call: Any) -> dict[str, Any]:
        """The request span's read attributes of `call`, made in a trace of its own."""
        trace_id = f"{number:032x}"
        api.api_client.set_default_header("traceparent", f"00-{trace_id}-{CLIENT_SPAN_ID}-01")
        call()
        spans = [s for s in finished(env, exporter) if hex_trace(s) == trace_id]
        (span,) = [s for s in spans if s.name.startswith("APIServer.")]
        return {k: v for k, v in (span.attributes or {}).items() if k.startswith("kubelab.read.")}

    got = read(1, lambda: api.read_namespaced_config_map("one", ns))
    assert got["kubelab.read.source"] == "watch-cache"
    assert got["kubelab.read.resource_version_semantics"] == "most-recent"
    assert int(got["kubelab.read.revision"]) > 0  # the store revision the cache reached
    listed = read(2, lambda: api.list_namespaced_config_map(ns))
    assert listed["kubelab.read.source"] == "watch-cache"
    assert listed["kubelab.read.resource_version_semantics"] == "most-recent"
    assert int(listed["kubelab.read.revision"]) >= int(got["kubelab.read.revision"])
    assert read(3, lambda: api.list_namespaced_config_map(ns, resource_version="0")) == {
        "kubelab.read.source": "watch-cache",
        "kubelab.read.resource_version_semantics": "any",
    }
    first: list[Any] = []
    assert read(4, lambda: first.append(api.list_namespaced_config_map(ns, limit=1))) == {
        "kubelab.read.source": "store",
        "kubelab.read.resource_version_semantics": "most-recent",
    }
    token = first[0].metadata._continue
    assert read(5, lambda: api.list_namespaced_config_map(ns, limit=1, _continue=token)) == {
        "kubelab.read.source": "store",
        "kubelab.read.resource_version_semantics": "continue",
    }
