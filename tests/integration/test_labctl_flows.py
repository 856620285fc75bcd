"""`labctl flows` against real components: the real apiserver in-process (`lab.testenv`),
the Deployment and ReplicaSet controllers and the scheduler in threads, a kubelet on its
in-memory runtime, all exporting OTLP to a real collector in a thread, and the real
kubectl. Create, update, delete and get run as the command runs them on the lab, and
the seeds' table is read from the traces the collector got: a create and an update go
through the controllers and the scheduler to the kubelet, a pod's delete goes to its
kubelet only, a get is the apiserver's alone. (The real-time path needs a kubelet's
HTTPS server behind the apiserver's proxy: tests/e2e.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from prometheus_client import CollectorRegistry
from rich.console import Console

from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import FixedMachine
from agents.kubelet.runtime.memory import MemoryRuntime
from controlplane.collector import server as collector_server
from controlplane.collector.storage import TraceStore
from controlplane.controllers import manager
from controlplane.scheduler import config as scheduler_config
from controlplane.scheduler.metrics import Metrics
from controlplane.scheduler.scheduler import Scheduler
from kubelab import tracing
from kubelab.cli import flows, trace
from kubelab.client import RestClient, load_config
from lab.testenv import Environment
from tests.integration.incluster_controllers import CONTROLLER_MANAGER, controller_manager
from tests.kubelet.kubelet_fixture import Cluster, fast_config, node_client

NODE = "flows-worker1"


class Lab:
    """The traced components, each exporting to the collector at `url`."""

    def __init__(self, url: str, env: Environment, directory: Path) -> None:
        self.env = env
        self.url = url
        self.tracings: list[tracing.Tracing] = []
        self.stop = threading.Event()
        self.directory = directory

    def traced(self, component: str, node: str) -> tracing.Tracing:
        traced = tracing.setup(component, node, CollectorRegistry(), self.url, schedule_delay=0.2)
        self.tracings.append(traced)
        return traced

    def fetch(self, params: dict[str, object]) -> list[trace.Span]:
        """The collector's query API, after every component has exported what ended: the
        command's wait for quiet traces then needs no 5 s batches."""
        self.env.server.tracing.force_flush()
        for traced in self.tracings:
            traced.force_flush()
        return trace.collector_fetch(self.url)(params)

    def kubelet(self) -> Kubelet:
        traced = self.traced("kubelet", NODE)
        kubelet = Kubelet(
            fast_config(NODE, self.directory / "kubelet", sync_frequency=0.5),
            node_client(Cluster.of(self.env), NODE),
            MemoryRuntime(NODE),
            FixedMachine(),
            tracing=traced,
            registry=CollectorRegistry(),
        )
        kubelet.start()
        return kubelet

    def scheduler(self) -> threading.Thread:
        client = RestClient(self.env.client_config("system:kube-scheduler", ()), qps=None)
        traced = self.traced("scheduler", "cp1")
        sched = Scheduler(client, scheduler_config.load(None), Metrics(), tracer=traced.tracer)
        thread = threading.Thread(target=sched.run, args=(self.stop,), daemon=True)
        thread.start()
        return thread

    def controller_options(self) -> tuple[manager.Options, Path]:
        args = manager.parse_args(
            [
                "--kubeconfig",
                str(self.env.kubeconfig_for(CONTROLLER_MANAGER)),
                "--leader-elect=false",
                # A pod's service account and its token volume's kube-root-ca.crt.
                "--controllers=deployment-controller,replicaset-controller,"
                "serviceaccount-controller,root-ca-certificate-publisher-controller",
            ]
        )
        options = manager.Options(
            controllers=manager.runnable_controllers(args),
            root_ca=(self.env.directory / "ca.crt").read_bytes(),
            workers={},
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
            args=args,
        )
        return options, args.kubeconfig


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    directory = tmp_path_factory.mktemp("flows")
    store = TraceStore(directory / "traces", max_traces=10_000, max_bytes=10**8)
    collector = collector_server.serve(store, "127.0.0.1", 0)
    exporter = OTLPSpanExporter(endpoint=f"{collector.url}{tracing.OTLP_TRACES_PATH}")
    try:
        with Environment.start(directory=directory / "env", span_exporter=exporter) as env:
            lab = Lab(collector.url, env, directory)
            kubelet = lab.kubelet()
            scheduler = lab.scheduler()
            options, kubeconfig = lab.controller_options()
            controllers = lab.traced("controller-manager", "cp1")
            try:
                with controller_manager(load_config(kubeconfig), options, controllers.tracer):
                    yield lab
            finally:
                lab.stop.set()
                scheduler.join(30)
                kubelet.stop()
                for traced in lab.tracings:
                    traced.shutdown()
    finally:
        collector.shutdown()
        store.close()


def test_the_seeds_operations_give_the_seeds_table_from_their_traces(lab: Lab) -> None:
    kubectl = flows.Kubectl(flows.find_kubectl(), str(lab.env.kubeconfig), None, timeout=100)
    run = flows.Flows(kubectl, lab.fetch, "flows-test", timeout=90, quiet=1.5)
    run.execute(["create", "update", "delete", "get"])
    rows = {r.operation.name: flows.summarize(r.spans) for r in run.results}
    assert list(rows) == ["create", "update", "get", "delete"]
    components = {name: [h.component for h in row.hops] for name, row in rows.items()}

    create = rows["create"]
    assert create.controllers == ("deployment-controller", "replicaset-controller")
    assert len(create.scheduled) == 2
    assert {node for _, node in create.scheduled} == {NODE}
    assert create.source == f"store → kubelet on {NODE}"
    assert create.started == 2
    assert components["create"][0] == "apiserver"
    assert {"controller-manager", "scheduler", "kubelet"} <= set(components["create"])
    assert components["create"].index("scheduler") < components["create"].index("kubelet")

    update = rows["update"]
    assert "deployment-controller" in update.controllers
    assert "replicaset-controller" in update.controllers
    assert len(update.scheduled) == 2  # the new ReplicaSet's pods, no old pod moved
    assert update.started == 2 and update.stopped == 2  # the old pods stopped

    delete = rows["delete"]
    assert delete.scheduled == () and delete.controllers == ()
    assert delete.source == f"store → kubelet on {NODE}"
    assert delete.stopped == 1 and delete.started == 0
    assert "scheduler" not in components["delete"]

    get = rows["get"]
    assert get.source == "watch cache (apiserver), most-recent read"
    assert components["get"] == ["apiserver"]
    assert get.scheduled == () and get.controllers == () and not get.watched

    console = Console(record=True, width=200)
    flows.render(run.results, console)
    text = console.export_text()
    assert "The seeds' operation table, measured on the lab" in text
    assert "Where the seeds simplify" in text
