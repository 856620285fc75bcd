"""Benchmark: how long `kubectl top` takes (issue 26's target: under 1 s on the 3+2 lab).

metrics.k8s.io is answered from the figures the apiserver's scraper keeps
(controlplane/apiserver/metricscache.py), so `kubectl top` should cost an API request,
not the kubelets' answers. Two ways to measure it:

* on this machine (default): a `LocalControlPlane` and `--nodes` stand-in kubelets on
  loopback, each answering `/stats/summary` (with `--pods` pods) only after `--delay`
  seconds, as the Docker lab's kubelets take about 4 s; asked one after another at
  request time, as before, `kubectl top` would take nodes x delay;
* on a running lab (`--kubeconfig`, e.g. the 3+2 lab's admin kubeconfig): its real
  kubelets.

Each of `kubectl top nodes`, `kubectl top pods -A` and `kubectl top pods -A -l app=...`
is run `--runs` times with the real kubectl once the figures are there; reported: p50
and the slowest run of each.

    python -m bench.top [--nodes 5] [--pods 10] [--delay 4] [--runs 10]
    python -m bench.top --kubeconfig ~/.kube/kubelab.conf
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.pods import quantiles
from kubelab import pki
from lab.localplane import LocalControlPlane

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
NAMESPACE = "default"


class _Kubelet(BaseHTTPRequestHandler):
    """A kubelet's /stats/summary, slow as the lab's: the pods of its node, 10m each."""

    server: _KubeletServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path != "/stats/summary":
            self.send_error(404)
            return
        time.sleep(self.server.delay)
        usage = {"cpu": {"usageNanoCores": 10_000_000}, "memory": {"workingSetBytes": 1 << 22}}
        summary = {
            "node": {"nodeName": self.server.node, **usage},
            "pods": [
                {
                    "podRef": {"name": name, "namespace": NAMESPACE},
                    "containers": [{"name": "app", **usage}],
                }
                for name in self.server.pods
            ],
        }
        body = json.dumps(summary).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _KubeletServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, node: str, pods: list[str], delay: float, tls: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _Kubelet)
        self.node, self.pods, self.delay = node, pods, delay
        self.socket = tls.wrap_socket(self.socket, server_side=True)


@contextlib.contextmanager
def _kubelets(
    plane: LocalControlPlane, nodes: int, pods: int, delay: float, directory: Path
) -> Iterator[None]:
    """Stand-in kubelets, their Nodes and their pods in the plane."""
    serving = pki.issue(
        pki.load_pair(plane.pki, "ca"), "kubelet", ip_addresses=["127.0.0.1"], server=True
    )
    cert, key = pki.write_pair(serving, directory, "kubelet")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    http = plane.session()
    servers = []
    for n in range(nodes):
        name = f"worker-{n}"
        names = [f"{name}-pod-{p}" for p in range(pods)]
        server = _KubeletServer(name, names, delay, tls)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": server.server_address[1]}},
            },
        }
        http.post(f"{plane.server}/api/v1/nodes", json=node, timeout=30).raise_for_status()
        for index, pod in enumerate(names):
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod, "labels": {"app": f"app-{index % 5}"}},
                "spec": {
                    "nodeName": name,
                    "containers": [{"name": "app", "image": "busybox:1.36"}],
                },
            }
            url = f"{plane.server}/api/v1/namespaces/{NAMESPACE}/pods"
            http.post(url, json=body, timeout=30).raise_for_status()
    try:
        yield
    finally:
        for server in servers:
            server.shutdown()


def _kubectl(kubeconfig: Path, *args: str) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
    return elapsed, done.stdout


def measure(kubeconfig: Path, runs: int, expected_nodes: int) -> None:
    deadline = time.monotonic() + 60
    while True:  # until the scraper has the figures of every node
        with contextlib.suppress(SystemExit):
            _, shown = _kubectl(kubeconfig, "top", "nodes", "--no-headers")
            if len(shown.splitlines()) >= expected_nodes:
                break
        if time.monotonic() > deadline:
            raise SystemExit("the nodes' figures did not show within 60 s")
        time.sleep(1)
    print(f"| command | p50 | slowest ({runs} runs) |")
    print("| --- | ---: | ---: |")
    for args in (("top", "nodes"), ("top", "pods", "-A"), ("top", "pods", "-A", "-l", "app=app-1")):
        samples = [_kubectl(kubeconfig, *args)[0] for _ in range(runs)]
        p50, _ = quantiles(samples)
        print(f"| `kubectl {' '.join(args)}` | {p50:.3f} s | {max(samples):.3f} s |")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kubeconfig", type=Path, help="measure this running lab instead")
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--pods", type=int, default=10, help="pods per node")
    p.add_argument("--delay", type=float, default=4.0, help="seconds each summary takes")
    p.add_argument("--runs", type=int, default=10)
    args = p.parse_args(argv)
    if args.kubeconfig is not None:
        measure(args.kubeconfig, args.runs, 1)
        return
    with tempfile.TemporaryDirectory(prefix="bench-top-") as tmp:
        plane = LocalControlPlane(Path(tmp) / "plane", store_members=1)
        plane.start(timeout=90)
        try:
            with _kubelets(plane, args.nodes, args.pods, args.delay, Path(tmp)):
                print(
                    f"{args.nodes} stand-in kubelets, {args.pods} pods each, "
                    f"{args.delay:g} s per summary"
                )
                measure(plane.kubeconfig, args.runs, args.nodes)
        finally:
            plane.stop()


if __name__ == "__main__":
    main()
