"""Interactive exec as the official Python client does it: `kubernetes.stream.stream()`
through the apiserver (real processes, which relay the upgraded connection) to the
kubelet's WebSocket server, on both `v5.channel.k8s.io` and `v4.channel.k8s.io`.

The client writes str stdin in WebSocket *text* frames and bytes in binary ones, and
closes stdin with v5's close frame on channel 255; Kubernetes reads every frame type the
same way (first byte the channel), and so must the kubelet, or `write_stdin("...")`
waits forever for an answer (the client's own e2e `test_pod_apis` and
`test_pod_exec_close_channel`). The container is the memory runtime's, with an exec
that behaves as `cat`: what goes in on stdin comes back on stdout, and it exits 0 once
stdin is closed.
"""

from __future__ import annotations

import queue
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.stream import stream
from kubernetes.stream.ws_client import WSClient

from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import FixedMachine
from agents.kubelet.runtime import ExecSession
from agents.kubelet.runtime.memory import MemoryRuntime
from kubelab import pki
from lab.labadm.init import CLUSTER_ADMINS
from tests.integration.controlplane_fixture import Lab, lab, namespace
from tests.kubelet.kubelet_fixture import Cluster, fast_config, node_client, until

__all__ = ["lab", "namespace"]  # pytest fixtures used below (instead of conftest's)

CLUSTER_ROLE_BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"


class CatSession:
    """`cat` as an exec session: stdin back on stdout until stdin is closed."""

    def __init__(self) -> None:
        self._out: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def write(self, data: bytes) -> None:
        self._out.put(data)

    def close_stdin(self) -> None:
        self._out.put(None)

    def read(self) -> tuple[int, bytes]:
        data = self._out.get()
        return (0, b"") if data is None else (1, data)

    def resize(self, width: int, height: int) -> None:
        pass

    def exit_code(self) -> int:
        return 0

    def close(self) -> None:
        self._out.put(None)


class CatRuntime(MemoryRuntime):
    """The memory runtime, with an interactive exec that is `cat` whatever the command."""

    def exec_stream(
        self, container_id: str, command: list[str], *, tty: bool, stdin: bool
    ) -> ExecSession:
        return CatSession()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def node(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A kubelet serving exec on loopback, registered with the control plane, which may
    call it: its kubelet-client certificate's group bound to cluster-admin, as labadm
    binds it."""
    cluster = Cluster.of(lab)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": CLUSTER_ADMINS},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": CLUSTER_ADMINS}
        ],
    }
    assert lab.api("POST", CLUSTER_ROLE_BINDINGS, json=binding).status_code == 201
    name = f"ws-{uuid.uuid4().hex[:6]}"
    tmp = tmp_path_factory.mktemp("kubelet")
    ca = pki.load_pair(cluster.pki_dir, "ca")
    crt, key = pki.write_pair(
        pki.issue(ca, name, server=True, ip_addresses=["127.0.0.1"]), tmp, "k"
    )
    serving = pki.server_ssl_context(cluster.ca_file, crt, key, require_client_cert=False)
    config = fast_config(name, tmp / "root", address="127.0.0.1", port=_free_port())
    kubelet = Kubelet(
        config, node_client(cluster, name), CatRuntime(name), FixedMachine(), serving=serving
    )
    kubelet.start()
    try:
        yield name
    finally:
        kubelet.stop()
        cluster.delete_node(name)


@pytest.fixture
def pod(lab: Lab, namespace: str, node: str) -> str:
    cluster = Cluster.of(lab)
    container = {"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}
    cluster.create_pod(namespace, node, "shell", containers=[container])
    until(
        lambda: cluster.status(namespace, "shell").get("phase") == "Running",
        "the pod to run",
    )
    return "shell"


@pytest.fixture
def core(lab: Lab) -> k8s.CoreV1Api:
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(
        config_file=str(lab.plane.kubeconfig), client_configuration=configuration
    )
    return k8s.CoreV1Api(k8s.ApiClient(configuration))


def _exec(core: k8s.CoreV1Api, namespace: str, pod: str, **kwargs: Any) -> WSClient:
    return stream(  # type: ignore[no-any-return]
        core.connect_get_namespaced_pod_exec,
        pod,
        namespace,
        command=["cat"],
        stdin=True,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
        **kwargs,
    )


def _wait_closed(ws: WSClient, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while ws.is_open() and time.monotonic() < deadline:
        ws.update(timeout=1)
    assert not ws.is_open(), "the kubelet did not end the exec"


def test_v5_stdin_in_text_and_binary_frames_and_close_channel(
    core: k8s.CoreV1Api, namespace: str, pod: str
) -> None:
    ws = _exec(core, namespace, pod)
    try:
        assert ws.subprotocol == "v5.channel.k8s.io"
        ws.write_stdin("typed as text\n")
        assert ws.readline_stdout(timeout=10) == "typed as text"
        ws.write_stdin(b"sent as bytes\n")
        assert ws.readline_stdout(timeout=10) == "sent as bytes"
        ws.write_stdin("x" * 200_000 + "\n")  # many TCP reads for one message
        assert ws.readline_stdout(timeout=10) == "x" * 200_000
        ws.close_channel(0)  # stdin's end: cat exits
        _wait_closed(ws)
        assert ws.returncode == 0
    finally:
        ws.close()


def test_v4_stdin_in_text_frames(core: k8s.CoreV1Api, namespace: str, pod: str) -> None:
    ws = _exec(core, namespace, pod, _headers={"sec-websocket-protocol": "v4.channel.k8s.io"})
    try:
        assert ws.subprotocol == "v4.channel.k8s.io"
        ws.write_stdin("hello over v4\n")
        assert ws.readline_stdout(timeout=10) == "hello over v4"
    finally:
        ws.close()
