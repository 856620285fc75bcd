"""The kubelet against the real apiserver, with the in-memory runtime: registration,
heartbeat, and the pod worker's logic (the seeds' busybox pod, restarts and back-off,
probes, graceful deletion, adoption after a restart). The same tests' Docker twins are
in test_kubelet_docker.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.kubelet.kubelet import Kubelet
from agents.kubelet.runtime import ExecResult, State
from agents.kubelet.runtime.memory import MemoryRuntime
from kubelab.api.errors import StatusError
from kubelab.api.quantity import parse_quantity
from tests.integration.controlplane_fixture import Lab, lab, namespace
from tests.kubelet.kubelet_fixture import fast_config, node_client, start_kubelet, until

__all__ = ["lab", "namespace"]


def _liveness(container: Any, command: list[str]) -> ExecResult:
    """Exec probes: `cat /tmp/healthy` fails, anything else succeeds."""
    return ExecResult(1 if command == ["cat", "/tmp/healthy"] else 0, b"")


@pytest.fixture
def node(tmp_path: Path) -> str:
    return f"mem-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def runtime(node: str) -> MemoryRuntime:
    return MemoryRuntime(node, exec_handler=_liveness)


@pytest.fixture
def kubelet(lab: Lab, node: str, runtime: MemoryRuntime, tmp_path: Path) -> Iterator[Kubelet]:
    k = start_kubelet(lab, fast_config(node, tmp_path), runtime)
    yield k
    k.stop()
    lab.api("DELETE", f"/api/v1/nodes/{node}")


def _pod(lab: Lab, namespace: str, node: str, name: str, **spec: Any) -> None:
    containers = spec.pop("containers", None) or [
        {
            "name": "hello",
            "image": "busybox:1.36",
            "command": spec.pop("command", ["sh", "-c", 'echo "Hello Kubernetes!"']),
        }
    ]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": containers, **spec},
    }
    r = lab.api("POST", f"/api/v1/namespaces/{namespace}/pods", json=body)
    assert r.status_code == 201, r.text


def _get(lab: Lab, namespace: str, name: str) -> dict[str, Any]:
    r = lab.api("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _reasons(lab: Lab, namespace: str, name: str) -> list[str]:
    events = lab.api("GET", f"/api/v1/namespaces/{namespace}/events").json()["items"]
    return [e["reason"] for e in events if e["involvedObject"]["name"] == name]


def test_node_registers_heartbeats_and_is_held_to_itself(lab: Lab, kubelet: Kubelet) -> None:
    name = kubelet.name
    node = lab.kubectl_json("get", "node", name)
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == name
    assert (labels["kubernetes.io/os"], labels["kubernetes.io/arch"]) == ("linux", "amd64")
    status = node["status"]
    assert status["capacity"] == {
        "cpu": "4",
        "memory": "16Gi",
        "ephemeral-storage": "100Gi",
        "pods": "110",
    }
    # allocatable: memory minus the 100Mi hard eviction threshold
    assert parse_quantity(status["allocatable"]["memory"]) == parse_quantity("16284Mi")
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "Ready": "True",
        "MemoryPressure": "False",
        "DiskPressure": "False",
        "PIDPressure": "False",
    }
    assert status["addresses"][0] == {"type": "InternalIP", "address": "127.0.0.1"}
    assert status["nodeInfo"]["containerRuntimeVersion"] == "memory://0.1.0"
    assert "kubeletEndpoint" in status["daemonEndpoints"]
    lease = lab.kubectl_json("get", "lease", "-n", "kube-node-lease", name)
    assert lease["spec"]["holderIdentity"] == name
    first = lease["spec"]["renewTime"]
    until(
        lambda: (
            lab.kubectl_json("get", "lease", "-n", "kube-node-lease", name)["spec"]["renewTime"]
            != first
        ),
        "the lease to be renewed",
        timeout=10,
    )
    # The Node authorizer: this kubelet's credentials cannot touch another node.
    with pytest.raises(StatusError) as refused:
        kubelet.client.request("PATCH", "/api/v1/nodes/some-other-node", body={})
    assert refused.value.code == 403


def test_the_seeds_busybox_pod_completes(lab: Lab, namespace: str, kubelet: Kubelet) -> None:
    _pod(lab, namespace, kubelet.name, "hello", restartPolicy="Never")
    pod = until(
        lambda: (p := _get(lab, namespace, "hello"))["status"].get("phase") == "Succeeded" and p,
        "the pod to succeed",
    )
    (status,) = pod["status"]["containerStatuses"]
    assert status["state"]["terminated"]["reason"] == "Completed"
    assert status["state"]["terminated"]["exitCode"] == 0
    assert status["imageID"] and status["containerID"].startswith("memory://")
    assert pod["status"]["hostIP"] == "127.0.0.1" and pod["status"]["startTime"]
    reasons = _reasons(lab, namespace, "hello")
    for reason in ("Pulling", "Pulled", "Created", "Started"):
        assert reason in reasons


def test_a_crashing_container_backs_off_longer_each_time(
    lab: Lab, namespace: str, kubelet: Kubelet
) -> None:
    _pod(lab, namespace, kubelet.name, "crash", command=["sh", "-c", "exit 1"])
    pod = until(
        lambda: (
            (p := _get(lab, namespace, "crash"))["status"]
            .get("containerStatuses", [{}])[0]
            .get("restartCount", 0)
            >= 3
            and p
        ),
        "three restarts",
        timeout=40,
    )
    (status,) = pod["status"]["containerStatuses"]
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert status["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff" or (
        "running" in status["state"]
    )
    runtime = kubelet.runtime
    assert isinstance(runtime, MemoryRuntime)
    starts = sorted(c.started_at or 0 for c in runtime.list_containers() if c.name == "hello")
    # Only the last two containers are kept; their starts are at least 2 s apart (the
    # back-off has doubled from 1 s).
    assert starts[-1] - starts[-2] >= 2.0
    assert "BackOff" in _reasons(lab, namespace, "crash")


def test_a_failing_liveness_probe_restarts_the_container(
    lab: Lab, namespace: str, kubelet: Kubelet
) -> None:
    probe = {
        "exec": {"command": ["cat", "/tmp/healthy"]},
        "periodSeconds": 1,
        "failureThreshold": 2,
    }
    container = {
        "name": "app",
        "image": "busybox:1.36",
        "command": ["nginx"],
        "livenessProbe": probe,
    }
    _pod(lab, namespace, kubelet.name, "sick", containers=[container])
    until(
        lambda: (
            _get(lab, namespace, "sick")["status"]
            .get("containerStatuses", [{}])[0]
            .get("restartCount", 0)
            >= 1
        ),
        "a restart",
    )
    reasons = _reasons(lab, namespace, "sick")
    assert "Unhealthy" in reasons and "Killing" in reasons


def test_deleting_a_pod_stops_it_and_the_kubelet_confirms(
    lab: Lab, namespace: str, kubelet: Kubelet, runtime: MemoryRuntime
) -> None:
    _pod(lab, namespace, kubelet.name, "web", command=["nginx"])
    until(lambda: _get(lab, namespace, "web")["status"].get("phase") == "Running", "Running")
    lab.kubectl("delete", "pod", "web", "-n", namespace, "--wait=false")
    until(
        lambda: lab.api("GET", f"/api/v1/namespaces/{namespace}/pods/web").status_code == 404,
        "the kubelet to confirm the deletion",
        timeout=20,
    )
    until(lambda: not runtime.list_containers(), "the containers to be removed", timeout=10)


def test_a_restarted_kubelet_adopts_its_containers(
    lab: Lab, namespace: str, node: str, runtime: MemoryRuntime, tmp_path: Path
) -> None:
    first = start_kubelet(lab, fast_config(node, tmp_path), runtime)
    try:
        _pod(lab, namespace, node, "keep", command=["nginx"])
        until(lambda: _get(lab, namespace, "keep")["status"].get("phase") == "Running", "Running")
        before = {c.id for c in runtime.list_containers()}
        sandboxes = {s.id for s in runtime.list_sandboxes()}
    finally:
        first.stop()
    # While the kubelet is down, one of its pods is deleted for good.
    lab.api(
        "DELETE",
        f"/api/v1/namespaces/{namespace}/pods/keep",
        json={"gracePeriodSeconds": 0},
    )
    _pod(lab, namespace, node, "again", command=["nginx"])
    second = start_kubelet(lab, fast_config(node, tmp_path), runtime)
    try:
        until(lambda: _get(lab, namespace, "again")["status"].get("phase") == "Running", "Running")
        until(
            lambda: not (before & {c.id for c in runtime.list_containers()}),
            "the deleted pod's container to be removed",
        )
        assert not sandboxes & {s.id for s in runtime.list_sandboxes()}
        running = [c for c in runtime.list_containers() if c.state == State.RUNNING]
        assert len(running) == 1
    finally:
        second.stop()
        lab.api("DELETE", f"/api/v1/nodes/{node}")


def test_env_from_configmap_and_a_missing_one(lab: Lab, namespace: str, kubelet: Kubelet) -> None:
    container = {
        "name": "app",
        "image": "busybox:1.36",
        "command": ["nginx"],
        "env": [
            {
                "name": "GREETING",
                "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}},
            },
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "MSG", "value": "$(GREETING) from $(POD)"},
        ],
    }
    _pod(lab, namespace, kubelet.name, "configured", containers=[container])
    waiting = until(
        lambda: (
            _get(lab, namespace, "configured")["status"]
            .get("containerStatuses", [{}])[0]
            .get("state", {})
            .get("waiting", {})
            .get("reason")
            == "CreateContainerConfigError"
        ),
        "CreateContainerConfigError",
    )
    assert waiting
    lab.kubectl("create", "configmap", "settings", "-n", namespace, "--from-literal=greeting=hello")
    until(lambda: _get(lab, namespace, "configured")["status"].get("phase") == "Running", "Running")
    runtime = kubelet.runtime
    assert isinstance(runtime, MemoryRuntime)
    (c,) = [c for c in runtime._containers.values() if c.config.name == "app"]
    assert dict(c.config.env)["MSG"] == "hello from configured"
    assert node_client  # the client helper is shared with the Docker tests
