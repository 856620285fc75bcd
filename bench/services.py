"""Benchmark: how long a LoadBalancer Service waits for its address (issue 28's target:
p99 under 2 s), with the control plane on this machine.

It starts a `LocalControlPlane` (a 1-member store, the apiserver and the
controller-manager with every controller, the service load-balancer controller given a
pool of `--pool`), then creates `--services` Services of `type: LoadBalancer` at
`--rate` per second, open loop, from one thread, as `kubectl expose --type=LoadBalancer`
would. A Service watch notes when each one's `status.loadBalancer.ingress` first shows
an address; create-to-assigned is from the moment its create was answered. Then it
deletes them all and creates as many again, which must get the addresses the first ones
held (the pool is no larger than needed): what is timed then includes the release.

Reported: create-to-assigned p50/p99 of both rounds, and the controller-manager's CPU
per Service. The address's answering on the nodes (kube-proxy's rules, the node holding
it) is not in these figures.

The default pace, 5 Services per second, is under what the controller's own client may
send: each Service costs it three writes (the status and two Events), and like each of
kube-controller-manager's controllers it has `--kube-api-qps` 20 (burst 30) of its own,
so about 6.7 Services per second is its sustained most; at `--rate 20` the Services
queue behind that limit and wait seconds (docs/benchmarks.md has both).

    python -m bench.services [--services 200] [--rate 5] [--markdown]
"""

from __future__ import annotations

import argparse
import ipaddress
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import cpu_seconds
from bench.pods import quantiles
from kubelab.client import RestClient, load_config, resource_for
from lab.localplane import LocalControlPlane

SERVICES = resource_for("v1", "Service")
NAMESPACES = resource_for("v1", "Namespace")
NAMESPACE = "bench"
TARGET_P99 = 2.0


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"bench": "lb"}},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": name},
            "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
        },
    }


class Assignments:
    """When each Service was first seen with an address (a watch of its own)."""

    def __init__(self, client: RestClient) -> None:
        self._client = client
        self.seen: dict[str, tuple[float, str]] = {}
        self.gone: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(30)

    def _run(self) -> None:
        version = self._client.list(SERVICES, NAMESPACE)["metadata"]["resourceVersion"]
        self._ready.set()
        while not self._stop.is_set():
            with self._client.watch(
                SERVICES, NAMESPACE, resource_version=version, timeout_seconds=30
            ) as watch:
                for event in watch:
                    obj = event.object
                    version = obj["metadata"]["resourceVersion"]
                    if event.type == "BOOKMARK":
                        continue
                    uid = obj["metadata"]["uid"]
                    ingress = (obj.get("status") or {}).get("loadBalancer", {}).get("ingress")
                    with self._lock:
                        if event.type == "DELETED":
                            self.gone.add(uid)
                        elif ingress and uid not in self.seen:
                            self.seen[uid] = (time.monotonic(), ingress[0]["ip"])
                    if self._stop.is_set():
                        return

    def stop(self) -> None:
        self._stop.set()

    def wait(self, uids: list[str], timeout: float, gone: bool = False) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                done = self.gone if gone else self.seen
                if all(uid in done for uid in uids):
                    return
            time.sleep(0.05)
        raise SystemExit(f"not every Service was {'deleted' if gone else 'given an address'}")


def round_(
    client: RestClient, watch: Assignments, prefix: str, count: int, rate: float
) -> tuple[list[float], set[str], list[str]]:
    """Create `count` Services at `rate`; their create-to-assigned times, the addresses
    they got, their uids."""
    created: dict[str, float] = {}
    start = time.monotonic()
    for i in range(count):
        pause = start + i / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        obj = client.create(SERVICES, service(f"{prefix}-{i}"), NAMESPACE)
        created[obj["metadata"]["uid"]] = time.monotonic()
    uids = list(created)
    watch.wait(uids, timeout=120)
    latencies = [watch.seen[uid][0] - created[uid] for uid in uids]
    return latencies, {watch.seen[uid][1] for uid in uids}, uids


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="bench.services", description=__doc__.split("\n")[0])
    p.add_argument("--services", type=int, default=200)
    p.add_argument("--rate", type=float, default=5.0, help="Service creates per second")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    network = ipaddress.IPv4Network("10.250.0.0/16")
    first = network.network_address + 0xFE00 + 1
    pool = f"{first}-{first + args.services - 1}"
    with tempfile.TemporaryDirectory(prefix="bench-services-") as tmp:
        plane = LocalControlPlane(
            Path(tmp),
            store_members=1,
            scheduler=False,
            controller_manager_args=[f"--load-balancer-ip-range={pool}"],
        )
        print(f"==> a 1-member store, the apiserver, the controller-manager; pool {pool}")
        plane.start(timeout=120)
        client = RestClient(load_config(plane.kubeconfig), qps=None)
        try:
            client.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            watch = Assignments(client)
            watch.start()
            assert plane.controller_manager is not None
            cpu_before = cpu_seconds(plane.controller_manager.pid)
            first_round, addresses, uids = round_(client, watch, "a", args.services, args.rate)
            for i in range(args.services):
                client.delete(SERVICES, f"a-{i}", NAMESPACE)
            watch.wait(uids, timeout=60, gone=True)
            second_round, again, _ = round_(client, watch, "b", args.services, args.rate)
            cpu = cpu_seconds(plane.controller_manager.pid) - cpu_before
            watch.stop()
        finally:
            client.close()
            plane.stop()
    assert addresses == again and len(addresses) == args.services, "addresses given twice"
    rows = [
        ("first round (a fresh pool)", first_round),
        ("second round (every address released by a delete)", second_round),
    ]
    per_service = cpu / (2 * args.services) * 1000
    if args.markdown:
        print("| round | Services | create-to-assigned p50 | p99 |")
        print("| --- | --- | --- | --- |")
        for what, latencies in rows:
            p50, p99 = quantiles(latencies)
            print(f"| {what} | {len(latencies)} | {p50 * 1000:.0f} ms | {p99 * 1000:.0f} ms |")
        print(f"\ncontroller-manager CPU: {per_service:.1f} ms per Service")
        return
    for what, latencies in rows:
        p50, p99 = quantiles(latencies)
        verdict = "meets" if p99 <= TARGET_P99 else "MISSES"
        print(
            f"{what}: {len(latencies)} Services at {args.rate:g}/s, create-to-assigned "
            f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms ({verdict} the {TARGET_P99:g} s "
            "target)"
        )
    print(
        f"controller-manager CPU: {per_service:.1f} ms per Service (both rounds, all controllers)"
    )


if __name__ == "__main__":
    main()
