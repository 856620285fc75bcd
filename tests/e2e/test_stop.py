"""Nodes that stop, come and go, on the session's lab (last: these stop containers).

A stopped worker's pods are recreated on the other worker (node lifecycle: NotReady
after the grace period, then taint-based eviction) and the worker, started again, is
Ready again with its services back by themselves (runit); `labctl nodes add` and
`nodes remove` add a worker to the running lab and take it away (drain, reset, its
container and volume gone); `labctl stop` and `labctl start` bring back the same
cluster with its objects and certificates, every node Ready, without a rebuild."""

from __future__ import annotations

import json

import docker.errors
import pytest

from lab import lifecycle
from lab.cluster import Lab
from lab.nodes import NODE_VOLUMES
from tests.e2e.test_seeds import kubectl, running
from tests.waiting import until

QUICK_EVICTION = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: survivor}
spec:
  replicas: 2
  selector: {matchLabels: {app: survivor}}
  template:
    metadata: {labels: {app: survivor}}
    spec:
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute,
         tolerationSeconds: 2}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute,
         tolerationSeconds: 2}
      containers:
      - name: sh
        image: busybox
        command: ["sleep", "3600"]
"""


def node_ready(name: str) -> bool:
    out = kubectl("get", "node", name, "-o", "json", check=False)
    if not out:
        return False
    conditions = json.loads(out)["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_a_stopped_workers_pods_are_recreated_elsewhere(lab: Lab) -> None:
    assert lab.nodes is not None
    kubectl("apply", "-f", "-", stdin=QUICK_EVICTION)
    until(lambda: len(running("app=survivor")) == 2, "2 survivor pods Running", timeout=150)
    stopped = sorted(running("app=survivor").values())[0]
    other = ({"worker1", "worker2"} - {stopped}).pop()
    node = next(n for n in lab.nodes.nodes if n.name == stopped)
    node.container.stop(timeout=10)
    try:
        until(lambda: not node_ready(stopped), f"{stopped} NotReady (grace period)", timeout=120)
        until(
            lambda: (
                set(running("app=survivor").values()) == {other}
                and len(running("app=survivor")) == 2
            ),
            f"both survivor pods Running on {other}",
            timeout=180,
        )
    finally:
        node.container.start()
    # Back by itself: runit starts the kubelet, the network agent and kube-proxy.
    until(lambda: node_ready(stopped), f"{stopped} Ready again after its start", timeout=180)
    kubectl("delete", "deployment", "survivor")


def test_nodes_add_and_remove_a_worker(lab: Lab) -> None:
    node = lifecycle.add_worker(lab)
    assert node.name == "worker3" and node_ready("worker3")
    pod = """
apiVersion: v1
kind: Pod
metadata: {name: on-worker3}
spec:
  nodeName: worker3
  containers: [{name: hello, image: busybox, command: ["echo", "hello from worker3"]}]
"""
    kubectl("apply", "-f", "-", stdin=pod)
    until(
        lambda: "hello from worker3" in kubectl("logs", "on-worker3", check=False),
        "a pod's log on the added worker",
        timeout=120,
    )
    kubectl("delete", "pod", "on-worker3", "--wait=false")
    lifecycle.remove_worker(lab, "worker3")
    assert "worker3" not in kubectl("get", "nodes", "-o", "name")
    client = lab.builder.client
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(node.container_name)
    for suffix in NODE_VOLUMES:
        with pytest.raises(docker.errors.NotFound):
            client.volumes.get(f"{node.container_name}-{suffix}")
    assert "worker3" not in (lab.directory / "state.json").read_text()


def test_the_lab_comes_back_after_stop_and_start(lab: Lab) -> None:
    """Last: every container of the lab stopped and started, as an engine restart does."""
    assert lab.nodes is not None
    kubectl("create", "configmap", "kept", "--from-literal=answer=42")
    admin = lab.kubeconfig.read_text()
    ips = {n.name: n.ip for n in lab.nodes.nodes}
    lifecycle.stop(lab)
    for node in lab.nodes.nodes:
        node.container.reload()
        assert node.container.status == "exited"
    lifecycle.start(lab)
    assert {n.name: n.ip for n in lab.nodes.nodes} == ips
    # The store's data and the certificates are on the nodes' named volumes.
    cp = lab.nodes.nodes[0]
    assert cp.sh("findmnt -n -o TARGET /var/lib/kubelab-store").strip() == "/var/lib/kubelab-store"
    assert cp.sh("ls /etc/kubelab/pki/ca.crt").strip() == "/etc/kubelab/pki/ca.crt"
    assert lab.kubeconfig.read_text() == admin  # the same CA and credentials answer
    for name in ips:
        assert node_ready(name), name
    assert kubectl("get", "configmap", "kept", "-o", "jsonpath={.data.answer}") == "42"
    # The kubelets start the pods of before again (the nginx Deployment of test_seeds).
    until(lambda: len(running("app=nginx")) == 3, "3 nginx pods Running again", timeout=240)
