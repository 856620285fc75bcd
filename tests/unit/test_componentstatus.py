"""`kubectl get componentstatuses` against the real apiserver (in-process) with the real
kubectl: the three rows kube-apiserver 1.31 answers with, a component's /healthz probed
over HTTPS (an answering one Healthy with its body, a closed port Unhealthy with Go's
dial error), the store's own check, and the deprecation warning."""

from __future__ import annotations

import http.server
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.apiserver import componentstatus
from kubelab import pki
from lab.testenv import Environment

KUBECTL = str(Path(sys.executable).parent / "kubectl")


class _Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"ok" if self.path == "/healthz" else b"no"
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def healthz(tmp_path: Path) -> Iterator[int]:
    """A component's HTTPS /healthz on a free port (a self-signed certificate, which the
    probe does not verify, as kube-apiserver's does not)."""
    ca = pki.new_ca("component")
    cert, key = pki.write_pair(
        pki.issue(ca, "component", ip_addresses=["127.0.0.1"], server=True), tmp_path, "c"
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Healthz)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_kubectl_get_cs_probes_the_components_and_the_store(
    healthz: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = _closed_port()
    monkeypatch.setattr(
        componentstatus, "HTTP_COMPONENTS", {"scheduler": closed, "controller-manager": healthz}
    )
    with Environment.start() as env:

        def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
            argv = [KUBECTL, "--kubeconfig", str(env.kubeconfig), *args]
            return subprocess.run(argv, capture_output=True, text=True, timeout=60)

        got = kubectl("get", "cs")
        assert got.returncode == 0, got.stderr
        assert got.stderr.strip() == "Warning: v1 ComponentStatus is deprecated in v1.19+"
        rows = [line.split(None, 2) for line in got.stdout.splitlines()]
        assert got.stdout.split()[:4] == ["NAME", "STATUS", "MESSAGE", "ERROR"]
        assert [r[:2] for r in rows[1:]] == [
            ["scheduler", "Unhealthy"],
            ["controller-manager", "Healthy"],
            ["etcd-0", "Healthy"],
        ]
        assert rows[1][2].strip() == (
            f'Get "https://127.0.0.1:{closed}/healthz": dial tcp 127.0.0.1:{closed}: connect: '
            "connection refused"
        )
        assert rows[2][2].strip() == rows[3][2].strip() == "ok"

        one = kubectl("get", "componentstatus", "etcd-0", "-o", "jsonpath={.conditions}")
        assert one.stdout == '[{"message":"ok","status":"True","type":"Healthy"}]'
        missing = kubectl("get", "cs", "kube-proxy")
        assert "Component not found: kube-proxy" in missing.stderr
        assert kubectl("api-resources", "--api-group=").stdout.count("componentstatuses") == 1


def test_an_error_status_is_unhealthy_with_the_code() -> None:
    assert componentstatus.statuses(
        lambda: "etcdserver: no leader",
        probe=lambda port: (False, "HTTP probe failed with statuscode: 500"),
    ) == [
        {
            "kind": "ComponentStatus",
            "apiVersion": "v1",
            "metadata": {"name": "scheduler"},
            "conditions": [
                {
                    "type": "Healthy",
                    "status": "False",
                    "message": "HTTP probe failed with statuscode: 500",
                }
            ],
        },
        {
            "kind": "ComponentStatus",
            "apiVersion": "v1",
            "metadata": {"name": "controller-manager"},
            "conditions": [
                {
                    "type": "Healthy",
                    "status": "False",
                    "message": "HTTP probe failed with statuscode: 500",
                }
            ],
        },
        {
            "kind": "ComponentStatus",
            "apiVersion": "v1",
            "metadata": {"name": "etcd-0"},
            "conditions": [
                {"type": "Healthy", "status": "False", "error": "etcdserver: no leader"}
            ],
        },
    ]
