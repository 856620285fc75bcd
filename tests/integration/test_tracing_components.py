"""The controller-manager's and the scheduler's spans against the real apiserver
(`lab.testenv`), each component running in a thread with its spans in memory: a
Deployment's reconcile continues the trace kept in its annotation, and the scheduler's
filter span gives each node's verdict, a control-plane node rejected for its taint.

A test apiserver of the module's own: the controllers and the scheduler act on the whole
cluster (its nodes, every namespace's pods).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from controlplane.scheduler import config as scheduler_config
from controlplane.scheduler.metrics import Metrics
from controlplane.scheduler.scheduler import Scheduler
from kubelab import tracing
from kubelab.client import RestClient, resource_for
from lab.testenv import Environment
from tests.conftest import new_namespace
from tests.integration.incluster_controllers import controller_manager, controller_options
from tests.unit.client.conftest import eventually

DEPLOYMENTS = resource_for("apps/v1", "Deployment")
REPLICA_SETS = resource_for("apps/v1", "ReplicaSet")
NODES = resource_for("v1", "Node")
PODS = resource_for("v1", "Pod")
RS = "ReplicaSet"
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def apiserver_spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, apiserver_spans: InMemorySpanExporter
) -> Iterator[Environment]:
    directory = tmp_path_factory.mktemp("testenv")
    with Environment.start(directory=directory, span_exporter=apiserver_spans) as env:
        yield env


@pytest.fixture
def admin(env: Environment) -> Iterator[RestClient]:
    with RestClient(env.client_config(), qps=None) as client:
        yield client


def in_memory(component: str) -> tuple[tracing.Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    return tracing.setup(component, "cp1", CollectorRegistry(), exporter=exporter), exporter


def spans_named(exporter: InMemorySpanExporter, name: str, **attributes: Any) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.name == name and all((s.attributes or {}).get(k) == v for k, v in attributes.items())
    ]


def test_a_deployments_reconcile_continues_the_trace_in_its_annotation(
    env: Environment, admin: RestClient, apiserver_spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    ns = new_namespace(env, "traced")
    traced, exporter = in_memory("controller-manager")
    kubectl, _ = in_memory("apiserver")
    config, options = controller_options(env, "--controllers=deployment-controller")
    writer = kubectl.tracer.start_span("kubectl create deployment")
    labels = {"app": "web"}
    body = {
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        },
    }
    with controller_manager(config, options, traced.tracer):
        with trace.use_span(writer):  # the request carries its traceparent
            deployment = admin.create(DEPLOYMENTS, body)
        eventually(lambda: admin.list(REPLICA_SETS, ns)["items"])
        traced.force_flush()
        eventually(
            lambda: spans_named(exporter, "Client.create", **{tracing.OBJECT_KIND: "ReplicaSet"})
        )

        def informer_events() -> list[ReadableSpan]:
            # The create may reach the informer by its first list, which is not traced;
            # the controller's status write that follows is a watch event all the same.
            traced.force_flush()
            return spans_named(
                exporter, "Informer.event", **{tracing.OBJECT_UID: deployment["metadata"]["uid"]}
            )

        eventually(informer_events)
    traced.force_flush()  # the spans that ended while the controllers stopped
    writer_trace = writer.get_span_context().trace_id
    reconciles = spans_named(
        exporter, "Controller.reconcile", **{tracing.OBJECT_UID: deployment["metadata"]["uid"]}
    )
    assert reconciles
    first = reconciles[0]
    assert first.context.trace_id == writer_trace
    # Its parent is the apiserver's request that wrote the Deployment, the writer's child.
    env.server.tracing.force_flush()
    (request,) = spans_named(
        apiserver_spans, "APIServer.create deployments", **{tracing.OBJECT_NAMESPACE: ns}
    )
    assert request.parent is not None
    assert request.parent.span_id == writer.get_span_context().span_id
    assert first.parent is not None and first.parent.span_id == request.context.span_id
    assert first.attributes is not None
    assert first.attributes[tracing.OBJECT_KIND] == "Deployment"
    assert first.attributes[tracing.OBJECT_NAME] == "web"
    assert first.attributes[tracing.OBJECT_NAMESPACE] == ns
    assert first.attributes["kubelab.controller"] == "deployment-controller"
    # The informer's event and the queue wait are in the same trace, before the reconcile.
    events = informer_events()
    assert events
    assert {e.context.trace_id for e in events} == {writer_trace}
    waits = spans_named(exporter, "WorkQueue.wait", **{"kubelab.workqueue.key": f"{ns}/web"})
    assert waits[0].context.trace_id == writer_trace
    # The ReplicaSet's creation is the reconcile's child: its request carried the context.
    creates = spans_named(exporter, "Client.create", **{tracing.OBJECT_KIND: "ReplicaSet"})
    assert any(
        c.parent is not None and c.parent.span_id in {r.context.span_id for r in reconciles}
        for c in creates
    )
    assert creates[0].context.trace_id == writer_trace


@pytest.fixture
def scheduler(env: Environment) -> Iterator[tuple[tracing.Tracing, InMemorySpanExporter]]:
    traced, exporter = in_memory("scheduler")
    stop = threading.Event()
    client = RestClient(env.client_config("system:kube-scheduler", ()), qps=None)
    sched = Scheduler(client, scheduler_config.load(None), Metrics(), tracer=traced.tracer)
    thread = threading.Thread(target=sched.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield traced, exporter
    finally:
        stop.set()
        thread.join(30)
        client.close()


def add_node(admin: RestClient, name: str, taints: list[dict[str, str]]) -> None:
    admin.create(
        NODES,
        {"metadata": {"name": name, "labels": {"tier": "traced"}}, "spec": {"taints": taints}},
    )
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    admin.patch(
        NODES,
        name,
        {"status": {"capacity": allocatable, "allocatable": allocatable}},
        subresource="status",
    )


def test_the_scheduler_gives_each_nodes_verdict_in_the_pods_trace(
    env: Environment, admin: RestClient, scheduler: tuple[tracing.Tracing, InMemorySpanExporter]
) -> None:
    traced, exporter = scheduler
    ns = new_namespace(env, "scheduled")
    add_node(admin, "traced-cp", [CONTROL_PLANE_TAINT])
    add_node(admin, "traced-w1", [])
    add_node(admin, "traced-w2", [])
    kubectl, _ = in_memory("apiserver")
    writer = kubectl.tracer.start_span("kubectl run")
    with trace.use_span(writer):  # the request carries its traceparent
        pod = admin.create(
            PODS,
            {
                "metadata": {"name": "hello", "namespace": ns},
                "spec": {
                    "nodeSelector": {"tier": "traced"},
                    "containers": [{"name": "hello", "image": "busybox"}],
                },
            },
        )
    eventually(lambda: admin.get(PODS, "hello", ns)["spec"].get("nodeName"))
    node = admin.get(PODS, "hello", ns)["spec"]["nodeName"]
    traced.force_flush()
    eventually(lambda: spans_named(exporter, "Scheduler.bind"))
    (cycle,) = spans_named(
        exporter, "Scheduler.schedule", **{tracing.OBJECT_UID: pod["metadata"]["uid"]}
    )
    assert cycle.context.trace_id == writer.get_span_context().trace_id
    assert cycle.attributes is not None
    assert cycle.attributes["kubelab.scheduler.node"] == node
    assert cycle.attributes["kubelab.scheduler.result"] == "scheduled"
    (queued,) = spans_named(exporter, "Scheduler.queue")
    assert queued.context.trace_id == cycle.context.trace_id
    (filtered,) = spans_named(exporter, "Scheduler.filter")
    assert filtered.parent is not None and filtered.parent.span_id == cycle.context.span_id
    verdicts = dict(filtered.attributes or {})
    assert verdicts["kubelab.scheduler.nodes.evaluated"] == admin_node_count(admin)
    (taint,) = verdicts["kubelab.scheduler.filter.TaintToleration.rejected"]
    assert taint.startswith("traced-cp: node(s) had untolerated taint")
    assert "node-role.kubernetes.io/control-plane" in taint
    assert verdicts["kubelab.scheduler.nodes.feasible"] == 2
    (scored,) = spans_named(exporter, "Scheduler.score")
    assert sorted(scored.attributes["kubelab.scheduler.score.nodes"]) == [  # type: ignore[index,arg-type]
        "traced-w1",
        "traced-w2",
    ]
    (bind,) = spans_named(exporter, "Scheduler.bind")
    assert bind.parent is not None and bind.parent.span_id == cycle.context.span_id
    assert bind.attributes is not None and bind.attributes["kubelab.scheduler.node"] == node


def admin_node_count(admin: RestClient) -> int:
    return len(admin.list(NODES)["items"])


def test_create_deployment_is_one_trace_from_kubectl_to_the_bind(
    env: Environment,
    admin: RestClient,
    apiserver_spans: InMemorySpanExporter,
    scheduler: tuple[tracing.Tracing, InMemorySpanExporter],
) -> None:
    """The seeds' create flow as one trace: kubectl's request (no traceparent: the
    apiserver starts the trace), the Deployment's reconcile, the ReplicaSet's create, the
    pods' creates, their scheduling cycles and binds."""
    scheduled, scheduler_spans = scheduler
    ns = new_namespace(env, "chain")
    add_node(admin, f"{ns}-w1", [])
    traced, controller_spans = in_memory("controller-manager")
    config, options = controller_options(
        env, "--controllers=deployment-controller,replicaset-controller"
    )
    kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
    with controller_manager(config, options, traced.tracer):
        subprocess.run(
            [
                kubectl,
                "--kubeconfig",
                str(env.kubeconfig),
                "-n",
                ns,
                "create",
                "deployment",
                "web",
                "--image=nginx",
                "--replicas=2",
            ],
            check=True,
            capture_output=True,
        )

        def bound() -> bool:
            pods = admin.list(PODS, ns)["items"]
            return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

        eventually(bound)
        scheduled.force_flush()
        eventually(lambda: len(spans_named(scheduler_spans, "Scheduler.bind")) >= 2)
    traced.force_flush()
    env.server.tracing.force_flush()
    (request,) = spans_named(
        apiserver_spans, "APIServer.create deployments", **{tracing.OBJECT_NAMESPACE: ns}
    )
    assert request.parent is None
    assert str((request.attributes or {})["user_agent.original"]).startswith("kubectl/")
    chain = request.context.trace_id
    spans = [
        *apiserver_spans.get_finished_spans(),
        *controller_spans.get_finished_spans(),
        *scheduler_spans.get_finished_spans(),
    ]
    in_chain = [s for s in spans if s.context.trace_id == chain]
    names = {s.name for s in in_chain}
    for step in (
        "Controller.reconcile",
        "APIServer.create replicasets",
        "APIServer.create pods",
        "Scheduler.schedule",
        "Scheduler.bind",
        "APIServer.create pods/binding",
    ):
        assert step in names, step
    pod_creates = [s for s in in_chain if s.name == "APIServer.create pods"]
    assert len(pod_creates) == 2
    cycles = [s for s in in_chain if s.name == "Scheduler.schedule"]
    assert {(c.attributes or {})[tracing.OBJECT_NAMESPACE] for c in cycles} == {ns}


def test_a_deleted_pods_replacement_is_its_replicasets_reconcile_linked_to_the_deletion(
    env: Environment, admin: RestClient
) -> None:
    """`kubectl delete pod` of a ReplicaSet's pod: the real replicaset controller's
    reconcile stays in the ReplicaSet's trace but links to the pod's event in the
    deletion's trace, and the replacement's create is that reconcile's child."""
    ns = new_namespace(env, "traced-replace")
    traced, exporter = in_memory("controller-manager")
    kubectl, _ = in_memory("apiserver")
    config, options = controller_options(env, "--controllers=replicaset-controller")
    labels = {"app": "solo"}
    body = {
        "metadata": {"name": "solo", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                # Bound at once: its deletion is a graceful mark, as on a lab's node.
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    with controller_manager(config, options, traced.tracer):
        with trace.use_span(kubectl.tracer.start_span("kubectl create replicaset")):
            admin.create(REPLICA_SETS, body)
        eventually(lambda: len(admin.list(PODS, ns)["items"]) == 1)
        (first,) = admin.list(PODS, ns)["items"]
        deletion = kubectl.tracer.start_span("kubectl delete pod")
        with trace.use_span(deletion):
            admin.delete(PODS, first["metadata"]["name"], ns)
        eventually(lambda: len(admin.list(PODS, ns)["items"]) == 2)
        (replacement,) = [
            p
            for p in admin.list(PODS, ns)["items"]
            if p["metadata"]["uid"] != first["metadata"]["uid"]
        ]

        def linked() -> list[ReadableSpan]:
            traced.force_flush()
            deleting = deletion.get_span_context().trace_id
            return [
                s
                for s in spans_named(
                    exporter, "Controller.reconcile", **{tracing.OBJECT_NAME: "solo"}
                )
                if any(link.context.trace_id == deleting for link in s.links)
            ]

        eventually(linked)
    traced.force_flush()
    reconciles = {s.context.span_id: s for s in linked()}
    creates = spans_named(
        exporter, "Client.create", **{tracing.OBJECT_UID: replacement["metadata"]["uid"]}
    )
    (create,) = creates
    assert create.parent is not None and create.parent.span_id in reconciles
    reconcile = reconciles[create.parent.span_id]
    assert reconcile.context.trace_id != deletion.get_span_context().trace_id  # the RS's own
    events = {s.context.span_id: s for s in spans_named(exporter, "Informer.event")}
    (event,) = [
        events[link.context.span_id]
        for link in reconcile.links
        if link.context.trace_id == deletion.get_span_context().trace_id
    ]
    assert (event.attributes or {})[tracing.OBJECT_UID] == first["metadata"]["uid"]
