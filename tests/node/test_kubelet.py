"""The kubelet as a service of real node containers (lab.nodes), on the node's own
dockerd, against the session's apiserver (through the relay, lab.relay): pods get IPs
from the node's podCIDR on the `kubepods` bridge, httpGet and tcpSocket probes reach
them at those IPs, and a restart of the node's Docker Engine loses and duplicates
nothing.

Each node's kubelet is set up by `lab.nodekubelet` (its own identity, its serving
certificate, runit's `kubelet` service).
"""

from __future__ import annotations

import ipaddress
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from lab.images import BUSYBOX_IMAGE
from lab.nodekubelet import install_kubelet, stop_kubelet
from lab.nodes import Node, NodeCluster
from lab.relay import NodeAPI
from tests.waiting import until

PODS_PATH = "/api/v1/namespaces/{ns}/pods"


@pytest.fixture(scope="module")
def kubelets(node_api: NodeAPI, pod_network_up: list[Node]) -> Iterator[list[Node]]:
    """The kubelet running in both nodes (after the pod network's fixture registered
    them with their podCIDRs and made the `kubepods` bridge)."""
    for node in pod_network_up:
        install_kubelet(node_api, node, ["--node-status-update-frequency=2"])
    try:
        for node in pod_network_up:
            until(lambda n=node: _ready(node_api, n), f"{node.name}'s kubelet to post Ready")  # type: ignore[misc]
        yield pod_network_up
    finally:
        for node in pod_network_up:
            stop_kubelet(node)


def _ready(api: NodeAPI, node: Node) -> bool:
    found = api.client.request("GET", f"/api/v1/nodes/{node.name}")
    conditions = {c["type"]: c["status"] for c in found.get("status", {}).get("conditions", [])}
    return conditions.get("Ready") == "True"


@pytest.fixture
def ns(node_api: NodeAPI) -> str:
    name = f"kubelet-{uuid.uuid4().hex[:6]}"
    node_api.client.request(
        "POST",
        "/api/v1/namespaces",
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    node_api.client.request(
        "POST",
        f"/api/v1/namespaces/{name}/serviceaccounts",
        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
    )
    ca = node_api.ca_dir.joinpath("ca.crt").read_text()
    node_api.client.request(
        "POST",
        f"/api/v1/namespaces/{name}/configmaps",
        body={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kube-root-ca.crt"},
            "data": {"ca.crt": ca},
        },
    )
    return name


def _create(api: NodeAPI, ns: str, node: Node, name: str, **spec: Any) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node.name, **spec},
    }
    api.client.request("POST", PODS_PATH.format(ns=ns), body=body)


def _status(api: NodeAPI, ns: str, name: str) -> dict[str, Any]:
    pod = api.client.request("GET", f"{PODS_PATH.format(ns=ns)}/{name}")
    return dict(pod.get("status") or {})


WEB = "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"


def test_a_pod_gets_an_ip_from_the_podcidr_and_the_seeds_pod_completes(
    node_cluster: NodeCluster, node_api: NodeAPI, kubelets: list[Node], ns: str
) -> None:
    first = kubelets[0]
    hello = {"name": "hello", "image": BUSYBOX_IMAGE, "command": ["echo", "Hello Kubernetes!"]}
    _create(node_api, ns, first, "hello", restartPolicy="Never", containers=[hello])
    until(lambda: _status(node_api, ns, "hello").get("phase") == "Succeeded", "Succeeded", 60)
    status = _status(node_api, ns, "hello")
    assert ipaddress.ip_address(status["podIP"]) in ipaddress.ip_network(
        node_cluster.pod_cidr(first)
    )
    assert status["hostIP"] == first.ip


def test_http_and_tcp_probes_reach_the_pod_ip(
    node_api: NodeAPI, kubelets: list[Node], ns: str
) -> None:
    first = kubelets[0]
    web = {
        "name": "web",
        "image": BUSYBOX_IMAGE,
        "command": ["sh", "-c", WEB],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
        "livenessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
    }
    _create(node_api, ns, first, "web", containers=[web])

    def ready() -> bool:
        conditions = _status(node_api, ns, "web").get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    until(ready, "the httpGet readiness probe to pass", 60)
    # A tcpSocket liveness probe on a port nothing listens on restarts the container.
    sick = {
        "name": "sick",
        "image": BUSYBOX_IMAGE,
        "command": ["sleep", "3600"],
        "livenessProbe": {"tcpSocket": {"port": 9999}, "periodSeconds": 1, "failureThreshold": 2},
    }
    _create(node_api, ns, first, "sick", containers=[sick])

    def restarted() -> bool:
        statuses = _status(node_api, ns, "sick").get("containerStatuses") or [{}]
        return int(statuses[0].get("restartCount", 0)) >= 1

    until(restarted, "the failing tcpSocket probe to restart the container", 60)
    assert ready()


def _pod_containers(node: Node, ns: str, name: str) -> list[dict[str, Any]]:
    out = node.sh(
        "docker ps -q --filter label=io.kubernetes.pod.namespace="
        f"{ns} --filter label=io.kubernetes.pod.name={name} | xargs -r docker inspect"
    )
    return list(json.loads(out or "[]"))


def test_a_restart_of_the_nodes_docker_engine_loses_and_duplicates_nothing(
    node_api: NodeAPI, kubelets: list[Node], ns: str
) -> None:
    second = kubelets[1]
    keep = {"name": "app", "image": BUSYBOX_IMAGE, "command": ["sh", "-c", WEB]}
    _create(node_api, ns, second, "keep", containers=[keep])
    until(lambda: _status(node_api, ns, "keep").get("phase") == "Running", "Running", 60)
    assert len(_pod_containers(second, ns, "keep")) == 2  # the sandbox and the app
    before = {c["Id"] for c in _pod_containers(second, ns, "keep")}
    # runit's default 7 s is short for dockerd stopping its containers on a loaded machine.
    second.exec("sv", "-w", "90", "restart", "dockerd", timeout=120)
    until(lambda: second.exec("docker", "version", check=False).returncode == 0, "dockerd", 60)

    def back() -> bool:
        running = _pod_containers(second, ns, "keep")
        kinds = sorted(c["Config"]["Labels"].get("io.kubernetes.docker.type", "") for c in running)
        status = _status(node_api, ns, "keep")
        return (
            kinds == ["container", "podsandbox"]
            and status.get("phase") == "Running"
            and all(s.get("ready") for s in status.get("containerStatuses") or [{}])
        )

    until(back, "the pod to run again on the restarted engine", 90)
    # Still exactly one sandbox and one app container running: the engine stopped the old
    # ones (no live-restore), and the kubelet made one new pair, not two.
    running = _pod_containers(second, ns, "keep")
    assert len(running) == 2
    assert not before & {c["Id"] for c in running}
    statuses = _status(node_api, ns, "keep")["containerStatuses"]
    assert statuses[0]["restartCount"] >= 1
