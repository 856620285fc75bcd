"""The live-data path with a stand-in kubelet: `kubectl logs`, `kubectl top` and the node
proxy go from the apiserver to the node's kubelet over HTTPS, not to the store.

The stand-in serves the kubelet's endpoints (`/containerLogs/...`, `/stats/summary`) on
loopback with a certificate from the cluster CA, and records which client certificate
the apiserver presented. The real kubelet (node-agent issue) serves the same paths.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from kubelab import pki
from lab.localplane import LocalControlPlane
from tests import standin
from tests.integration.controlplane_fixture import Lab, namespace

__all__ = ["namespace"]  # pytest fixtures used below

RESOLUTION = 0.5
"""Seconds between the apiserver's scrapes of the kubelets here (--metric-resolution)."""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The control plane, scraping the stand-in kubelet often enough for `kubectl top`
    to see the figures a test has just set."""
    plane = LocalControlPlane(
        tmp_path_factory.mktemp("plane"),
        store_members=1,
        extra_args=[f"--metric-resolution={RESOLUTION}s"],
    )
    try:
        plane.start(timeout=90)
        yield Lab(plane)
    finally:
        plane.stop()


SUMMARY = {
    "node": {
        "nodeName": "worker-1",
        "cpu": {"time": "2026-11-22T10:00:00Z", "usageNanoCores": 250_000_000},
        "memory": {"workingSetBytes": 512 * 1024 * 1024},
    },
    "pods": [],
}


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _ws_frame(opcode: int, payload: bytes) -> bytes:
    """An unmasked (server-to-client) WebSocket frame."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + n.to_bytes(2, "big")
    else:
        head += bytes([127]) + n.to_bytes(8, "big")
    return head + payload


class FakeKubelet(standin.StandInServer):
    """The stand-in kubelet: what it was asked (path, client certificate's CN) and the
    pods its summary reports."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.requests: list[tuple[str, str]] = []
        self.pods: list[dict[str, Any]] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    server: FakeKubelet

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        peer = self.connection.getpeercert() or {}  # type: ignore[attr-defined]
        subject = dict(x[0] for x in peer.get("subject", ()))
        self.server.requests.append((self.path, str(subject.get("commonName", ""))))
        if (
            self.path.startswith("/exec/")
            and self.headers.get("Upgrade", "").lower() == "websocket"
        ):
            self._exec_over_websocket()
        elif self.path.startswith("/containerLogs/"):
            body = b"".join(f"line {i}\n".encode() for i in range(3))
            self._send(body, "text/plain")
        elif self.path == "/stats/summary":
            self._send(
                json.dumps({**SUMMARY, "pods": self.server.pods}).encode(), "application/json"
            )
        else:
            self.send_error(404, "no such kubelet path")

    def _exec_over_websocket(self) -> None:
        """Answer like a kubelet's exec with the v5.channel.k8s.io protocol: the command's
        stdout on channel 1, then its status on channel 3, then close."""
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        assert "v5.channel.k8s.io" in offered, offered
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
        self.end_headers()
        command = parse_qs(urlsplit(self.path).query).get("command", [])
        status = json.dumps({"metadata": {}, "status": "Success"}).encode()
        for frame in (b"\x01" + " ".join(command[1:]).encode() + b"\n", b"\x03" + status):
            self.wfile.write(_ws_frame(0x2, frame))
        self.wfile.write(_ws_frame(0x8, b"\x03\xe8"))  # close: normal
        self.wfile.flush()
        self.close_connection = True

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def kubelet(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubelet]:
    # A serving certificate from the cluster CA; the apiserver's client one is noted.
    ca_dir = lab.plane.pki
    tls = standin.tls_context(
        pki.load_pair(ca_dir, "ca"),
        tmp_path_factory.mktemp("kubelet"),
        "worker-1",
        client_ca=ca_dir / "ca.crt",
    )
    with standin.serve(_Handler, tls=tls, server_class=FakeKubelet) as server:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "worker-1"},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": server.port}},
            },
        }
        r = lab.api("POST", "/api/v1/nodes", json=node)
        assert r.status_code in (201, 409), r.text
        yield server
    lab.api("DELETE", "/api/v1/nodes/worker-1")


def _pod_on_worker(
    lab: Lab, namespace: str, name: str = "web", labels: dict[str, str] | None = None
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"nodeName": "worker-1", "containers": [{"name": "app", "image": "busybox:1.36"}]},
    }
    r = lab.api("POST", f"/api/v1/namespaces/{namespace}/pods", json=pod)
    assert r.status_code == 201, r.text


def test_kubectl_logs_come_from_the_nodes_kubelet(
    lab: Lab, namespace: str, kubelet: FakeKubelet
) -> None:
    _pod_on_worker(lab, namespace)
    out = lab.kubectl("logs", "web", "-n", namespace, "--tail=3").stdout
    assert out.splitlines() == ["line 0", "line 1", "line 2"]
    path, client = kubelet.requests[-1]
    assert path == f"/containerLogs/{namespace}/web/app?tailLines=3"
    assert client == "kube-apiserver-kubelet-client"


def test_logs_of_an_unscheduled_pod_or_unknown_container_are_clear_errors(
    lab: Lab, namespace: str, kubelet: FakeKubelet
) -> None:
    r = lab.api(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        json={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "pending"},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]},
        },
    )
    assert r.status_code == 201
    done = lab.kubectl("logs", "pending", "-n", namespace, check=False)
    assert done.returncode == 1 and "not scheduled to a node" in done.stderr
    _pod_on_worker(lab, namespace, "other")
    done = lab.kubectl("logs", "other", "-c", "nope", "-n", namespace, check=False)
    assert "container nope is not valid for pod other" in done.stderr


def _pod_stats(namespace: str, name: str, nano_cores: int, mebibytes: int) -> dict[str, Any]:
    return {
        "podRef": {"name": name, "namespace": namespace},
        "containers": [
            {
                "name": "app",
                "cpu": {"usageNanoCores": nano_cores},
                "memory": {"workingSetBytes": mebibytes * 1024 * 1024},
            }
        ],
    }


def test_kubectl_top_and_the_node_proxy(lab: Lab, namespace: str, kubelet: FakeKubelet) -> None:
    _pod_on_worker(lab, namespace, "busy", labels={"app": "busy"})
    _pod_on_worker(lab, namespace, "idle", labels={"app": "idle"})
    kubelet.pods = [
        _pod_stats(namespace, "busy", 5_000_000, 8),
        _pod_stats(namespace, "idle", 1_000_000, 2),
    ]
    time.sleep(3 * RESOLUTION)  # a scrape since the figures were set
    nodes = lab.kubectl("top", "node", "worker-1").stdout.splitlines()
    assert nodes[1].split()[:2] == ["worker-1", "250m"]
    pods = lab.kubectl("top", "pod", "-n", namespace).stdout.splitlines()
    assert sorted(line.split() for line in pods[1:]) == [
        ["busy", "5m", "8Mi"],
        ["idle", "1m", "2Mi"],
    ]
    # Selectors select on the pods' own labels and fields, as metrics-server does.
    for selector in (["-l", "app=idle"], ["--field-selector", "metadata.name=idle"]):
        shown = lab.kubectl("top", "pod", "-n", namespace, *selector).stdout.splitlines()
        assert [line.split()[0] for line in shown[1:]] == ["idle"], selector
    raw = json.loads(
        lab.kubectl("get", "--raw", "/api/v1/nodes/worker-1/proxy/stats/summary").stdout
    )
    assert raw["node"]["nodeName"] == "worker-1"


def test_kubectl_exec_is_tunnelled_to_the_kubelet(
    lab: Lab, namespace: str, kubelet: FakeKubelet
) -> None:
    _pod_on_worker(lab, namespace, "shell")
    done = lab.kubectl("exec", "shell", "-n", namespace, "--", "echo", "hello", "world")
    assert done.stdout == "hello world\n"
    path, client = kubelet.requests[-1]
    assert path.startswith(f"/exec/{namespace}/shell/app?")
    assert "command=echo" in path and client == "kube-apiserver-kubelet-client"


def _wait_for(what: str, check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _run_on_worker(lab: Lab, namespace: str, pod: str) -> None:
    """What the scheduler and the kubelet would do: bind `pod` to worker-1 and report it
    running and Ready since long enough for its figures to count."""
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "worker-1"},
    }
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}"
    assert lab.api("POST", f"{path}/binding", json=binding).status_code == 201
    current = lab.api("GET", path).json()
    stamp = "2026-01-01T00:00:00Z"
    current["status"] = {
        "phase": "Running",
        "startTime": stamp,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": stamp}],
    }
    r = lab.api("PUT", f"{path}/status", json=current)
    assert r.status_code == 200, r.text


def test_kubectl_autoscale_scales_on_the_scraped_figures(
    lab: Lab, namespace: str, kubelet: FakeKubelet
) -> None:
    """The real path: the stand-in kubelet's figures, scraped by the apiserver, read by
    the controller-manager's HPA controller through metrics.k8s.io."""
    lab.kubectl(
        "create", "deployment", "burn", "--image=busybox:1.36", "-n", namespace, "--replicas=1"
    )
    lab.kubectl("set", "resources", "deployment", "burn", "--requests=cpu=100m", "-n", namespace)

    def pods() -> list[str]:
        found = lab.kubectl_json("get", "pods", "-l", "app=burn", "-n", namespace)["items"]
        spec_cpu = [p for p in found if p["spec"]["containers"][0].get("resources")]
        return [p["metadata"]["name"] for p in spec_cpu]

    (pod,) = _wait_for("the deployment's pod with its request", pods)
    _run_on_worker(lab, namespace, pod)
    kubelet.pods = [_pod_stats(namespace, pod, 90_000_000, 8)]  # 90% of the request
    lab.kubectl(
        "autoscale", "deployment", "burn", "--cpu-percent=50", "--min=1", "--max=5", "-n", namespace
    )

    def scaled() -> bool:
        shown = lab.kubectl_json("get", "deployment", "burn", "-n", namespace)
        return bool(shown["spec"]["replicas"] == 2)

    _wait_for("the deployment scaled to 2", scaled)
    table = lab.kubectl("get", "hpa", "burn", "-n", namespace).stdout
    assert "cpu: 90%/50%" in table, table
    described = lab.kubectl("describe", "hpa", "burn", "-n", namespace).stdout
    assert "New size: 2; reason: cpu resource utilization (percentage of request) above target" in (
        described
    ), described
