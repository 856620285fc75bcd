"""`labctl flows` (kubelab.cli.flows) without a cluster: the seeds' table built from span
JSON in the collector's public shape (through the scheduler, the controller-manager, the
data source, the hops and their times), which spans are an operation's, the printed
table, and bad input (a cluster that does not answer, a kubectl command that hangs)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from kubelab.cli import flows
from kubelab.cli.trace import USER_AGENT
from tests.unit.test_labctl_trace import Lab, serving

T0 = datetime(2026, 12, 7, 22, 0, tzinfo=UTC)
KUBECTL_AGENT = "kubectl/v1.37.0 (linux/amd64) kubernetes/abc"


def span(
    name: str,
    component: str,
    start_ms: float,
    duration_ms: float,
    *,
    node: str = "control-plane1",
    trace_id: str = "t1",
    parent: str | None = "p",
    obj: dict[str, Any] | None = None,
    **attributes: Any,
) -> dict[str, Any]:
    """A span as the collector answers it (docs/architecture.md, "The public shape")."""
    start = T0 + timedelta(milliseconds=start_ms)
    span.count += 1  # type: ignore[attr-defined]
    return {
        "trace_id": trace_id,
        "span_id": f"s{span.count}",  # type: ignore[attr-defined]
        "parent_span_id": parent,
        "links": [],
        "name": name,
        "component": component,
        "node": node,
        "start": start.isoformat(),
        "end": (start + timedelta(milliseconds=duration_ms)).isoformat(),
        "object": obj,
        "attributes": {k.replace("__", "."): v for k, v in attributes.items()},
    }


span.count = 0  # type: ignore[attr-defined]


def pod(name: str) -> dict[str, Any]:
    return {"kind": "Pod", "namespace": "flows", "name": name, "uid": f"uid-{name}"}


def reconcile(controller: str, start_ms: float) -> dict[str, Any]:
    return span(
        "Controller.reconcile",
        "controller-manager",
        start_ms,
        2,
        **{"kubelab.controller": controller},
    )


def create_flow() -> list[dict[str, Any]]:
    """A Deployment's create as the lab traces it, with one pod."""
    return [
        span(
            "APIServer.create deployments",
            "apiserver",
            0,
            5,
            parent=None,
            **{"kubelab.store.operation": "create"},
        ),
        span("Raft.apply", "store", 3, 1),
        span("Informer.event", "controller-manager", 10, 0.5),
        reconcile("deployment-controller", 11),
        span("APIServer.create replicasets", "apiserver", 11.5, 1),
        reconcile("replicaset-controller", 20),
        span(
            "Scheduler.schedule",
            "scheduler",
            30,
            4,
            obj=pod("nginx-7d4-x2"),
            **{"kubelab.scheduler.node": "worker1"},
        ),
        span("Kubelet.syncPod", "kubelet", 40, 50, node="worker1"),
        span("Kubelet.startContainer", "kubelet", 60, 10, node="worker1"),
    ]


def test_a_create_goes_through_the_controllers_and_the_scheduler_to_a_kubelet() -> None:
    row = flows.summarize(create_flow())
    assert row.scheduled == (("nginx-7d4-x2", "worker1"),)
    assert flows.scheduler_cell(row, flows.BY_NAME["create"].seeds).splitlines() == [
        "✅ yes",
        "1 pod → worker1",
        "seeds: ✅ yes",
    ]
    assert row.controllers == ("deployment-controller", "replicaset-controller")
    assert row.source == "store → kubelet on worker1"
    assert row.started == 1 and row.stopped == 0
    assert [h.component for h in row.hops] == [
        "apiserver",
        "store",
        "controller-manager",
        "scheduler",
        "kubelet",
    ]
    apiserver, store, manager, scheduler, kubelet = row.hops
    assert (apiserver.start, store.start, scheduler.start, kubelet.start) == (0, 0.003, 0.03, 0.04)
    assert apiserver.busy == pytest.approx(0.005 + 0.001)  # the two requests
    assert manager.busy == pytest.approx(0.0005 + 0.002 + 0.002)
    # Overlapping spans count once: the container's start inside the pod's sync.
    assert kubelet.busy == pytest.approx(0.05) and kubelet.nodes == ("worker1",)
    assert apiserver.names[0] == "APIServer.create deployments"
    assert row.total == pytest.approx(0.09)


def test_a_deleted_pod_is_seen_by_the_informers_and_stopped_by_its_kubelet() -> None:
    spans = [
        span(
            "APIServer.delete pods",
            "apiserver",
            0,
            4,
            parent=None,
            **{"kubelab.store.operation": "update"},
        ),
        span("Informer.event", "controller-manager", 6, 0.3),
        span("Kubelet.syncTerminatingPod", "kubelet", 8, 300, node="worker2"),
        span("Kubelet.stopContainer", "kubelet", 9, 250, node="worker2"),
        span("APIServer.delete pods", "apiserver", 310, 3),
    ]
    row = flows.summarize(spans)
    assert row.scheduled == () and row.controllers == () and row.watched
    seeds = flows.BY_NAME["delete"].seeds
    assert flows.controller_cell(row, seeds).splitlines() == [
        "❌ no",
        "(its informers saw the event; no reconcile in this trace)",
        "seeds: ❌ no",
    ]
    assert flows.scheduler_cell(row, seeds) == "❌ no\nseeds: ❌ no"
    assert row.source == "store → kubelet on worker2"
    assert row.stopped == 1 and flows.kubelet_cell(row) == "stopped 1 container(s)"


def cache_get() -> dict[str, Any]:
    """A get's request span as the apiserver makes it, saying where it read from."""
    return span(
        "APIServer.get pods",
        "apiserver",
        0,
        1.5,
        parent=None,
        kubelab__read__source="watch-cache",
        kubelab__read__resource_version_semantics="most-recent",
        kubelab__read__revision=812,
    )


def test_a_get_is_served_by_the_apiserver_alone_from_its_watch_cache() -> None:
    row = flows.summarize([cache_get()])
    assert row.source == "watch cache (apiserver), most-recent read"
    assert not row.scheduled and not row.controllers and not row.watched
    assert [(h.component, h.busy) for h in row.hops] == [("apiserver", 0.0015)]
    assert flows.kubelet_cell(row) == "-"


def test_the_read_source_is_the_request_spans_not_a_rule() -> None:
    """A paginated list says the store; a span that says nothing is not guessed at."""
    paged = span(
        "APIServer.list pods",
        "apiserver",
        0,
        3,
        parent=None,
        kubelab__read__source="store",
        kubelab__read__resource_version_semantics="most-recent",
    )
    assert flows.summarize([paged]).source == "store, most-recent read"
    assert flows.summarize([paged, cache_get()]).source == (
        "store, most-recent read; watch cache (apiserver), most-recent read"
    )
    bare = span("APIServer.get pods", "apiserver", 0, 1.5, parent=None)
    assert flows.summarize([bare]).source == "apiserver (no read source in its spans)"


def test_logs_are_proxied_to_the_pods_kubelet() -> None:
    spans = [
        span("APIServer.get pods/log", "apiserver", 0, 20, parent=None),
        span("APIServer.proxy", "apiserver", 2, 17),
        span("Kubelet.containerLogs", "kubelet", 4, 12, node="worker1"),
    ]
    row = flows.summarize(spans)
    assert row.source == "kubelet on worker1 (proxied by the apiserver)"
    assert [h.component for h in row.hops] == ["apiserver", "kubelet"]


class FakeCollector:
    """The collector's query API over a list of spans: namespace, since, trace_id,
    linked_trace_id."""

    def __init__(self, spans: list[dict[str, Any]]) -> None:
        self.spans = spans

    def __call__(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        found = self.spans
        if "trace_id" in params:
            found = [s for s in found if s["trace_id"] in params["trace_id"]]
        if "linked_trace_id" in params:
            wanted = params["linked_trace_id"]
            found = [s for s in found if any(ln["trace_id"] in wanted for ln in s["links"])]
        if "namespace" in params:
            namespace = params["namespace"]
            found = [s for s in found if s["attributes"].get("k8s.object.namespace") == namespace]
        if "since" in params:
            since = datetime.fromisoformat(params["since"])
            found = [s for s in found if datetime.fromisoformat(s["start"]) >= since]
        return found


def request(name: str, start_ms: float, trace_id: str, agent: str = KUBECTL_AGENT) -> Any:
    return span(
        name,
        "apiserver",
        start_ms,
        2,
        trace_id=trace_id,
        parent=None,
        **{USER_AGENT: agent, "k8s.object.namespace": "flows"},
    )


def test_an_operations_traces_are_kubectls_requests_while_its_command_ran_until_the_next() -> None:
    spans = [
        request("APIServer.create deployments", 10, "create"),
        span("Kubelet.syncPod", "kubelet", 500, 40, trace_id="create"),
        # kubectl rollout status waits outside the operation's moments.
        request("APIServer.watch deployments", 200, "waiting"),
        # The controllers' own requests are not kubectl's.
        request("APIServer.create replicasets", 20, "create-rs", agent="kube-controller-manager"),
        request("APIServer.get pods", 1000, "get"),
        # The create's trace grows after the next operation began: not the create's.
        span("Scheduler.schedule", "scheduler", 1200, 3, trace_id="create"),
    ]
    run = flows.Flows(lambda *a, **k: "", FakeCollector(spans), "flows", timeout=5, quiet=0)
    ms = timedelta(milliseconds=1)
    create, get = flows.BY_NAME["create"], flows.BY_NAME["get"]
    run.results = [
        flows.Result(create, "kubectl create deployment", T0 + 5 * ms, T0 + 50 * ms, T0 + 990 * ms),
        flows.Result(get, "kubectl get pod", T0 + 990 * ms, T0 + 1010 * ms, T0 + 1100 * ms),
    ]
    run.gather(T0)
    assert [s["name"] for s in run.results[0].spans] == [
        "APIServer.create deployments",
        "Kubelet.syncPod",
    ]
    assert [s["name"] for s in run.results[1].spans] == ["APIServer.get pods"]


def test_traces_that_never_come_are_an_error_naming_the_command() -> None:
    run = flows.Flows(lambda *a, **k: "", FakeCollector([]), "flows", timeout=0, quiet=0)
    run.results = [flows.Result(flows.BY_NAME["get"], "kubectl get pod web", T0, T0)]
    with pytest.raises(
        flows.CommandError, match="no span of the apiserver's requests for `kubectl get pod web`"
    ):
        run.gather(T0)


def test_the_table_puts_the_measured_rows_beside_the_seeds_and_says_where_they_simplify() -> None:
    console = Console(record=True, width=220)
    create = flows.Result(flows.BY_NAME["create"], "kubectl create deployment nginx", T0, T0)
    create.spans = create_flow()
    get = flows.Result(flows.BY_NAME["get"], "kubectl get pod nginx-7d4-x2", T0, T0)
    get.spans = [cache_get()]
    flows.render([create, get], console)
    text = console.export_text()
    for fragment in (
        "The seeds' operation table, measured on the lab",
        "Create",
        "1 pod → worker1",
        "replicaset-controller",
        "store → kubelet on worker1",
        "Query (static)",
        "watch cache (apiserver), most-recent read",
        "seeds: etcd → node",
        "Create: kubectl create deployment nginx",
        "Where the seeds simplify",
        "No component watches etcd",
        "reads from its watch cache",
    ):
        assert fragment in text, fragment
    assert "Deleting a pod a ReplicaSet owns" not in text  # only the notes of what ran
    hop = next(line for line in text.splitlines() if line.lstrip().startswith("4 "))
    assert hop.split()[:2] == ["4", "scheduler"] and "30.0 ms" in hop


def test_unknown_operations_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        flows.parse_args(["create", "scale"])
    assert exited.value.code == 2
    assert "'scale' is none of create, update, delete" in capsys.readouterr().err
    assert flows.parse_args([]).operations == []


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that takes connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


def kubeconfig(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "kubeconfig"
    server = {"server": f"https://127.0.0.1:{port}", "insecure-skip-tls-verify": True}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": server}],
        "users": [{"name": "admin", "user": {"token": "abc"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "admin"}}],
        "current-context": "lab",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_cluster_that_does_not_answer_is_a_message_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = kubeconfig(tmp_path, closed_port())
    with serving(tmp_path / "traces", Lab()) as collector:
        status = flows.main(["get", "--kubeconfig", str(config), "--collector", collector])
    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the cluster does not answer (`kubectl get --raw /readyz")
    assert "labctl up" in err and "Traceback" not in err


def test_a_kubectl_command_that_hangs_is_cut_off_with_a_message(
    tmp_path: Path, silent_port: int
) -> None:
    kubectl = flows.Kubectl(
        flows.find_kubectl(), str(kubeconfig(tmp_path, silent_port)), None, timeout=1
    )
    with pytest.raises(flows.StepFailed, match=r"`kubectl get pods` did not finish within 1 s"):
        kubectl("get", "pods")
