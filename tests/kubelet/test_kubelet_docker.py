"""The kubelet on a real Docker Engine, driven through the real apiserver and kubectl:
the seeds' busybox pod and `kubectl logs`, `kubectl exec`, an OOMKilled pod, a graceful
deletion, and a kubelet restart that adopts its containers.

Until the node containers of branch node-images exist, this runs on the machine's own
engine, with `network_mode=none` sandboxes and run-specific names and images
(tests/kubelet/docker_fixture.py): nothing touches the host's network.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import HostMachine
from agents.kubelet.runtime import State
from agents.kubelet.runtime.docker import DockerRuntime
from kubelab import pki
from tests.integration.controlplane_fixture import Lab, lab, namespace
from tests.kubelet.docker_fixture import DockerImages, docker_images
from tests.kubelet.kubelet_fixture import fast_config, node_client, until

__all__ = ["docker_images", "lab", "namespace"]


@pytest.fixture(scope="module")
def apiserver_may_call_kubelets(lab: Lab) -> None:
    """kubeadm binds its kubeadm:cluster-admins group (the apiserver's kubelet-client
    certificate) to cluster-admin; the kubelet asks the apiserver (SubjectAccessReview)."""
    lab.kubectl(
        "create",
        "clusterrolebinding",
        "kubeadm:cluster-admins",
        "--clusterrole=cluster-admin",
        "--group=kubeadm:cluster-admins",
    )


def _start(lab: Lab, node: str, images: DockerImages, tmp: Path) -> Kubelet:
    ca = pki.load_pair(lab.plane.pki, "ca")
    serving = pki.issue(ca, node, server=True, ip_addresses=["127.0.0.1"])
    crt, key = pki.write_pair(serving, tmp, f"kubelet-{uuid.uuid4().hex[:4]}")
    context = pki.server_ssl_context(lab.plane.pki / "ca.crt", crt, key, require_client_cert=False)
    runtime = DockerRuntime(
        node, pause_image=images.pause, network="none", name_prefix=images.prefix
    )
    config = fast_config(node, tmp / "root", address="127.0.0.1")
    kubelet = Kubelet(config, node_client(lab, node), runtime, HostMachine(tmp), serving=context)
    kubelet.start()
    return kubelet


@pytest.fixture
def node() -> str:
    return f"dkr-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def kubelet(
    lab: Lab,
    node: str,
    docker_images: DockerImages,
    tmp_path: Path,
    apiserver_may_call_kubelets: None,
) -> Iterator[Kubelet]:
    k = _start(lab, node, docker_images, tmp_path)
    try:
        yield k
    finally:
        k.stop()
        docker_images.cleanup_containers()
        lab.api("DELETE", f"/api/v1/nodes/{node}")


def _pod(
    lab: Lab, ns: str, node: str, name: str, image: str, command: list[str], **spec: Any
) -> None:
    container = {"name": "app", "image": image, "command": command, **spec.pop("container", {})}
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [container], **spec},
    }
    r = lab.api("POST", f"/api/v1/namespaces/{ns}/pods", json=body)
    assert r.status_code == 201, r.text


def _status(lab: Lab, ns: str, name: str) -> dict[str, Any]:
    return dict(lab.api("GET", f"/api/v1/namespaces/{ns}/pods/{name}").json().get("status", {}))


def test_busybox_pod_completes_and_kubectl_logs_shows_its_line(
    lab: Lab, namespace: str, kubelet: Kubelet, docker_images: DockerImages
) -> None:
    _pod(
        lab,
        namespace,
        kubelet.name,
        "hello",
        docker_images.busybox,
        ["sh", "-c", 'echo "Hello Kubernetes!"'],
        restartPolicy="Never",
    )
    until(lambda: _status(lab, namespace, "hello").get("phase") == "Succeeded", "Succeeded")
    assert lab.kubectl("logs", "hello", "-n", namespace).stdout == "Hello Kubernetes!\n"


def test_kubectl_exec_and_top(
    lab: Lab, namespace: str, kubelet: Kubelet, docker_images: DockerImages
) -> None:
    _pod(lab, namespace, kubelet.name, "shell", docker_images.busybox, ["sleep", "3600"])
    until(lambda: _status(lab, namespace, "shell").get("phase") == "Running", "Running")
    done = lab.kubectl("exec", "shell", "-n", namespace, "--", "sh", "-c", "echo $((6*7))")
    assert done.stdout == "42\n"
    failed = lab.kubectl("exec", "shell", "-n", namespace, "--", "sh", "-c", "exit 3", check=False)
    assert failed.returncode == 3
    summary = json.loads(
        lab.kubectl("get", "--raw", f"/api/v1/nodes/{kubelet.name}/proxy/stats/summary").stdout
    )
    assert [p["podRef"]["name"] for p in summary["pods"]] == ["shell"]
    assert summary["pods"][0]["containers"][0]["memory"]["workingSetBytes"] > 0
    # Nobody else may call the kubelet: anonymous is refused.
    assert kubelet.server is not None
    anonymous = requests.get(
        f"https://127.0.0.1:{kubelet.server.port}/pods",
        verify=str(lab.plane.pki / "ca.crt"),
        timeout=10,
    )
    assert anonymous.status_code == 401


def test_a_pod_over_its_memory_limit_is_oomkilled(
    lab: Lab, namespace: str, kubelet: Kubelet, docker_images: DockerImages
) -> None:
    _pod(
        lab,
        namespace,
        kubelet.name,
        "hog",
        docker_images.busybox,
        ["tail", "/dev/zero"],
        restartPolicy="Never",
        container={"resources": {"limits": {"memory": "16Mi"}}},
    )
    until(lambda: _status(lab, namespace, "hog").get("phase") == "Failed", "Failed")
    term = _status(lab, namespace, "hog")["containerStatuses"][0]["state"]["terminated"]
    assert (term["reason"], term["exitCode"]) == ("OOMKilled", 137)


def test_deleting_a_pod_stops_its_containers_within_the_grace_period(
    lab: Lab, namespace: str, kubelet: Kubelet, docker_images: DockerImages
) -> None:
    # PID 1 ignores SIGTERM here: only the SIGKILL at the end of the grace period stops it.
    _pod(
        lab,
        namespace,
        kubelet.name,
        "stubborn",
        docker_images.busybox,
        ["sh", "-c", "while :; do sleep 1; done"],
        terminationGracePeriodSeconds=3,
    )
    until(lambda: _status(lab, namespace, "stubborn").get("phase") == "Running", "Running")
    began = time.monotonic()
    lab.kubectl("delete", "pod", "stubborn", "-n", namespace, "--wait=true", timeout=30)
    took = time.monotonic() - began
    assert 2.5 <= took <= 15, took
    running = [c for c in kubelet.runtime.list_containers() if c.state == State.RUNNING]
    assert running == []


def test_a_restarted_kubelet_loses_and_duplicates_nothing(
    lab: Lab,
    namespace: str,
    node: str,
    docker_images: DockerImages,
    tmp_path: Path,
    apiserver_may_call_kubelets: None,
) -> None:
    first = _start(lab, node, docker_images, tmp_path)
    try:
        _pod(lab, namespace, node, "keep", docker_images.busybox, ["sleep", "3600"])
        until(lambda: _status(lab, namespace, "keep").get("phase") == "Running", "Running")
        before = {c.id for c in first.runtime.list_containers()}
        first.stop()
        second = _start(lab, node, docker_images, tmp_path)
        try:
            time.sleep(3)  # a few relists and syncs
            after = {c.id for c in second.runtime.list_containers()}
            assert after == before
            status = _status(lab, namespace, "keep")
            assert status["phase"] == "Running"
            assert status["containerStatuses"][0]["restartCount"] == 0
        finally:
            second.stop()
    finally:
        first.stop()
        docker_images.cleanup_containers()
        lab.api("DELETE", f"/api/v1/nodes/{node}")
