"""Tracing on the Docker lab, end to end (issue 23): the collector `labctl up` starts on
the first control-plane node, every component of the 3+2 lab sending it spans, read back
with `labctl trace -o json` as a user runs it. The real kubectl creates a Deployment of
two replicas and exposes it; the Deployment's trace is one causal chain from kubectl's
request through the controller-manager, the scheduler (every node's verdict) and the
kubelets of the pods' nodes, the Service's reaches kube-proxy; a deleted pod's trace
holds the kubelet's teardown and no scheduling; `kubectl logs` goes apiserver ->
kubelet. In a namespace of its own, removed at the end."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lab.cluster import Lab
from tests.e2e.test_lab import KUBECTL

NAMESPACE = "tracing-e2e"
Span = dict[str, Any]


QUIET = 6.0
"""Seconds without a new span after which a trace is taken as complete: each component
sends its spans every 5 s, in batches of its own, so a span's parent may come later."""


def settled(
    lab: Lab, what: str, ready: Callable[[list[Span]], bool], timeout: float = 90
) -> list[Span]:
    """The trace of `what` once `ready` holds for it and no span came for `QUIET` s."""
    deadline = time.monotonic() + timeout
    last: list[Span] | None = None
    while True:
        spans = trace(lab, what)
        if not ready(spans):
            last = None
        elif last is not None and len(spans) == len(last):
            return spans
        else:
            last = spans
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s: the trace of {what}"
        time.sleep(QUIET)


def kubectl(lab: Lab, *args: str) -> str:
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(lab.kubeconfig), "-n", NAMESPACE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def trace(lab: Lab, what: str) -> list[Span]:
    """`labctl trace WHAT -o json`'s spans; none while the collector has none."""
    done = subprocess.run(
        [sys.executable, "-m", "lab.labctl", "trace", what, "-n", NAMESPACE, "-o", "json",
         "--collector", lab.collector],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode != 0:
        assert "no trace of" in done.stderr, done.stderr
        return []
    spans: list[Span] = json.loads(done.stdout)["spans"]
    return spans


def named(spans: list[Span], span_name: str, /, **object_: str) -> list[Span]:
    """The spans of that name, about an object with those fields."""
    return [
        s
        for s in spans
        if s["name"] == span_name
        and all((s["object"] or {}).get(key) == value for key, value in object_.items())
    ]


def ancestors(spans: list[Span], span: Span) -> list[Span]:
    """The span's parents, nearest first, as far as the trace holds them."""
    by_id = {s["span_id"]: s for s in spans}
    chain = []
    while (parent := by_id.get(span["parent_span_id"] or "")) is not None:
        chain.append(parent)
        span = parent
    return chain


@pytest.fixture(scope="module")
def nginx(lab: Lab) -> Iterator[dict[str, str]]:
    """Two nginx replicas Running, exposed: their names and nodes."""
    assert lab.collector, "the e2e lab traces by default"
    kubectl(lab, "create", "namespace", NAMESPACE)
    kubectl(lab, "create", "deployment", "nginx", "--image=nginx:1.21", "--replicas=2")
    kubectl(lab, "expose", "deployment", "nginx", "--port=80")
    kubectl(lab, "rollout", "status", "deployment/nginx", "--timeout=180s")
    pods = json.loads(kubectl(lab, "get", "pods", "-l", "app=nginx", "-o", "json"))["items"]
    yield {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    kubectl(lab, "delete", "namespace", NAMESPACE, "--timeout=120s")


def test_a_deployments_trace_is_one_causal_chain_through_every_component(
    lab: Lab, nginx: dict[str, str]
) -> None:
    def started(spans: list[Span]) -> bool:
        return {
            sync["object"]["name"]
            for start in named(spans, "Kubelet.startContainer")
            for sync in ancestors(spans, start)
            if sync["name"] == "Kubelet.syncPod"
        } >= set(nginx)

    spans = settled(lab, "deployment/nginx", started)
    components = {s["component"] for s in spans}
    assert {"apiserver", "store", "controller-manager", "scheduler", "kubelet"} <= components
    # kubectl's create is the root; each pod's sync descends from it, in causal order.
    create = max(  # the latest: a rerun on the same lab finds the first run's too
        (s for s in named(spans, "APIServer.create deployments", namespace=NAMESPACE)
         if s["attributes"].get("user_agent.original", "").startswith("kubectl")),
        key=lambda s: str(s["start"]),
    )  # fmt: skip
    assert create["parent_span_id"] is None
    for pod in nginx:
        sync = min(named(spans, "Kubelet.syncPod", kind="Pod", name=pod), key=lambda s: s["start"])
        chain = ancestors(spans, sync)
        assert chain[-1] == create, f"{pod}'s sync does not descend from kubectl's create"
        path = [(s["component"], s["name"]) for s in [*reversed(chain), sync]]
        steps = [component for component, _ in path]
        for earlier, later in [
            ("apiserver", "controller-manager"),
            ("controller-manager", "scheduler"),
            ("scheduler", "kubelet"),
        ]:
            assert steps.index(earlier) < steps.index(later), path
        assert ("scheduler", "Scheduler.bind") in path, path
        starts = [s["start"] for s in [*reversed(chain), sync]]
        assert starts == sorted(starts), "a cause starts after its effect"
    # Every node's verdict: the control-plane nodes rejected for their taint.
    control_planes = {n.name for n in lab.control_plane_nodes}
    for cycle in named(spans, "Scheduler.filter"):
        attributes = cycle["attributes"]
        assert attributes["kubelab.scheduler.nodes.evaluated"] == len(lab.roles)
        rejected = attributes["kubelab.scheduler.filter.TaintToleration.rejected"]
        assert {entry.split(":")[0] for entry in rejected} == control_planes
        assert all("node-role.kubernetes.io/control-plane" in entry for entry in rejected)
    # The kubelets of the nodes the pods run on, and only those, ran them.
    for pod, node in nginx.items():
        assert {s["node"] for s in spans if s["component"] == "kubelet"
                and (s["object"] or {}).get("name") == pod} == {node}  # fmt: skip


def test_a_services_trace_reaches_kube_proxy_through_its_endpointslice(
    lab: Lab, nginx: dict[str, str]
) -> None:
    def causes(spans: list[Span], rules: Span) -> list[list[Span]]:
        """The chains above the writes a kube-proxy sync links to (those exported yet:
        the components export every 5 s, so a write may come after the sync)."""
        by_id = {s["span_id"]: s for s in spans}
        linked = [by_id.get(link["span_id"]) for link in rules["links"]]
        return [[s, *ancestors(spans, s)] for s in linked if s is not None]

    def from_the_controller(spans: list[Span], rules: Span) -> bool:
        # The sync links to the slice's write, which the EndpointSlice controller made
        # in its reconcile of the Service.
        return any(
            s["attributes"].get("kubelab.controller") == "endpointslice-controller"
            for chain in causes(spans, rules)
            for s in chain
        )

    def traced_nodes(spans: list[Span]) -> set[str]:
        return {
            s["node"]
            for s in named(spans, "Proxy.syncRules", kind="EndpointSlice")
            if s["links"] and from_the_controller(spans, s)
        }

    nodes = set(nginx.values())
    try:
        spans = settled(lab, "service/nginx", lambda spans: traced_nodes(spans) >= nodes)
    except AssertionError:
        spans = trace(lab, "service/nginx")
        syncs = named(spans, "Proxy.syncRules", kind="EndpointSlice")
        chains = {
            s["node"]: [[(c["component"], c["name"]) for c in chain] for chain in causes(spans, s)]
            for s in syncs
            if s["links"]
        }
        raise AssertionError(
            f"no sync traced to the controller on {nodes - traced_nodes(spans)}: {chains}"
        ) from None
    assert {"apiserver", "store", "controller-manager", "kube-proxy"} <= {
        s["component"] for s in spans
    }


def test_a_deleted_pods_trace_is_the_kubelets_teardown_without_scheduling(
    lab: Lab, nginx: dict[str, str]
) -> None:
    pod = sorted(nginx)[0]
    kubectl(lab, "delete", "pod", pod)

    def torn_down(spans: list[Span]) -> bool:
        terminated = named(spans, "Kubelet.syncTerminatedPod", name=pod)
        return any(terminated[0] in ancestors(spans, s)
                   for s in named(spans, "Kubelet.removePodSandbox") if terminated)  # fmt: skip

    spans = settled(lab, f"pod/{pod}", torn_down)
    (delete,) = [
        s
        for s in named(spans, "APIServer.delete pods", name=pod)
        if s["attributes"].get("user_agent.original", "").startswith("kubectl")
    ]
    deletion = [s for s in spans if s["trace_id"] == delete["trace_id"]]
    teardown = {s["name"] for s in deletion if s["component"] == "kubelet"}
    assert {
        "Kubelet.syncTerminatingPod",
        "Kubelet.killPod",
        "Kubelet.stopContainer",
        "Kubelet.deletePod",
        # Once the pod object is gone, the removal is still the pod's, in its deletion.
        "Kubelet.syncTerminatedPod",
        "Kubelet.removeContainer",
    } <= teardown
    assert {s["node"] for s in deletion if s["component"] == "kubelet"} == {nginx[pod]}
    assert not [s for s in deletion if s["component"] == "scheduler"]


def test_kubectl_logs_goes_from_the_apiserver_to_the_kubelet(
    lab: Lab, nginx: dict[str, str]
) -> None:
    pod = sorted(nginx)[-1]
    kubectl(lab, "logs", pod)

    def relayed(spans: list[Span]) -> bool:
        return bool(named(spans, "Kubelet.containerLogs", name=pod))

    spans = settled(lab, f"pod/{pod}", relayed)
    (logs,) = named(spans, "Kubelet.containerLogs", name=pod)
    path = [(s["component"], s["name"]) for s in reversed(ancestors(spans, logs))]
    assert path[0] == ("apiserver", "APIServer.get pods/log"), path
    assert ("apiserver", "APIServer.proxy") in path, path
    assert logs["node"] == nginx[pod]
