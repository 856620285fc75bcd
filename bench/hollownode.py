"""STAND-IN hollow nodes for `bench/scheduler.py` (kubemark's idea), until the real
kubelet with its in-memory runtime lands (branch `kubelet`); then the benchmark must run
that instead and this module goes.

One process hosts many nodes. Each node does the part of a kubelet the control plane
sees, and nothing else (no containers, no probes, no volumes):

* registers its Node (capacity and allocatable, labels: hostname, zone) and its status;
* renews its Lease in `kube-node-lease` every 10 s, as the kubelet does;
* watches its own pods (`spec.nodeName=<node>`, one informer per node, as every kubelet
  does: this is the watch the apiserver's index serves) and reports each new one
  Running and Ready (one status write per pod); a pod being deleted is confirmed gone
  (a delete with grace period 0), as the kubelet does once its containers stopped.

    python -m bench.hollownode --kubeconfig admin.conf --nodes 500 [--prefix hollow]

It prints "ready <n>" once every node is registered, and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import logging
import queue
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client import (
    DeletedFinalStateUnknown,
    RestClient,
    ServerUnreachable,
    SharedInformer,
    load_config,
    resource_for,
)

log = logging.getLogger("bench.hollownode")

NODES = resource_for("v1", "Node")
PODS = resource_for("v1", "Pod")
LEASES = resource_for("coordination.k8s.io/v1", "Lease")
ZONES = ("zone-a", "zone-b", "zone-c", "zone-d", "zone-e")
SIZES = (("4", "16Gi"), ("8", "32Gi"), ("2", "8Gi"))
"""Node sizes, in turn: mixed capacity, as a real cluster has."""
LEASE_SECONDS = 40
RENEW_EVERY = 10.0
NODES_PER_CLIENT = 50
STATUS_WORKERS = 4


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_body(name: str, index: int) -> tuple[dict[str, Any], dict[str, Any]]:
    cpu, memory = SIZES[index % len(SIZES)]
    resources = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "topology.kubernetes.io/zone": ZONES[index % len(ZONES)],
                "kubelab.io/hollow": "true",
            },
        },
        "spec": {},
    }
    status = {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "hollow node (benchmark stand-in)",
                    "lastHeartbeatTime": _now(),
                    "lastTransitionTime": _now(),
                }
            ],
            "addresses": [{"type": "InternalIP", "address": f"10.{index // 250}.{index % 250}.1"}],
            "nodeInfo": {
                "kubeletVersion": "v1.37.0-hollow",
                "containerRuntimeVersion": "hollow://0",
            },
        }
    }
    return node, status


class HollowNodes:
    def __init__(self, kubeconfig: Path | None, count: int, prefix: str) -> None:
        config = load_config(kubeconfig)
        self.names = [f"{prefix}-{i:04}" for i in range(count)]
        self.clients = [
            RestClient(config, user_agent="hollow-kubelet", qps=None, max_retries=3)
            for _ in range(0, count, NODES_PER_CLIENT)
        ]
        self.status_client = RestClient(config, user_agent="hollow-kubelet/status", qps=None)
        self.reports: queue.Queue[tuple[str, str, str, int] | None] = queue.Queue()
        self.reported: set[str] = set()
        self.informers: list[SharedInformer] = []

    def client(self, index: int) -> RestClient:
        return self.clients[index // NODES_PER_CLIENT]

    def register(self, index: int) -> None:
        name = self.names[index]
        node, status = node_body(name, index)
        client = self.client(index)
        try:
            client.create(NODES, node)
        except StatusError as exc:
            if exc.code != 409:
                raise
        client.patch(NODES, name, status, subresource="status")
        self.renew(index)

    def renew(self, index: int) -> None:
        name = self.names[index]
        client = self.client(index)
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": _micro_now(),
        }
        try:
            client.patch(LEASES, name, {"spec": spec}, "kube-node-lease")
        except StatusError as exc:
            if exc.code != 404:
                raise
            body = {"metadata": {"name": name, "namespace": "kube-node-lease"}, "spec": spec}
            client.create(LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", **body})

    def watch(self, index: int, stop: threading.Event) -> None:
        name = self.names[index]
        informer = SharedInformer(self.client(index), PODS, field_selector=f"spec.nodeName={name}")

        def seen(pod: dict[str, Any]) -> None:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                self.reports.put(("delete", meta["namespace"], meta["name"], index))
            elif (pod.get("status") or {}).get("phase") != "Running" and meta[
                "uid"
            ] not in self.reported:
                self.reported.add(meta["uid"])
                self.reports.put(("run", meta["namespace"], meta["name"], index))

        def gone(pod: dict[str, Any] | DeletedFinalStateUnknown) -> None:
            obj = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
            self.reported.discard(obj["metadata"].get("uid", ""))

        informer.add_event_handler(seen, lambda old, new: seen(new), gone)
        informer.start(stop)
        self.informers.append(informer)

    def report(self) -> None:
        """Status writes, from a few workers: Running and Ready, or gone."""
        while True:
            item = self.reports.get()
            if item is None:
                return
            verb, namespace, name, index = item
            try:
                if verb == "delete":
                    self.status_client.delete(PODS, name, namespace, grace_period_seconds=0)
                    continue
                now = _now()
                ready = [
                    {"type": t, "status": "True", "lastTransitionTime": now}
                    for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ]
                status = {
                    "status": {
                        "phase": "Running",
                        "hostIP": f"10.{index // 250}.{index % 250}.1",
                        "podIP": f"10.244.{index % 250}.{len(self.reported) % 250 + 2}",
                        "startTime": now,
                        "conditions": ready,
                    }
                }
                self.status_client.patch(PODS, name, status, namespace, subresource="status")
            except (StatusError, ServerUnreachable) as exc:
                log.warning("hollow node: %s %s/%s: %s", verb, namespace, name, exc)

    def renew_forever(self, stop: threading.Event) -> None:
        """Every node's Lease every RENEW_EVERY seconds, spread over the period."""
        gap = RENEW_EVERY / max(len(self.names), 1)
        while not stop.is_set():
            for index in range(len(self.names)):
                if stop.wait(gap):
                    return
                try:
                    self.renew(index)
                except (StatusError, ServerUnreachable) as exc:
                    log.warning("hollow node %s: lease renewal failed: %s", self.names[index], exc)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hollownode", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--kubeconfig", type=Path)
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--prefix", default="hollow")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    hollow = HollowNodes(args.kubeconfig, args.nodes, args.prefix)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(hollow.register, range(args.nodes)))
    for index in range(args.nodes):
        hollow.watch(index, stop)
    workers = [threading.Thread(target=hollow.report, daemon=True) for _ in range(STATUS_WORKERS)]
    for w in workers:
        w.start()
    threading.Thread(target=hollow.renew_forever, args=(stop,), daemon=True).start()
    deadline = time.monotonic() + 120
    while not all(i.has_synced() for i in hollow.informers) and time.monotonic() < deadline:
        time.sleep(0.2)
    print(f"ready {args.nodes}", flush=True)
    stop.wait()
    # Closing the clients first makes every request in flight fail as ClientClosed.
    for client in [*hollow.clients, hollow.status_client]:
        client.close()
    for _ in workers:
        hollow.reports.put(None)
    for w in workers:
        w.join(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
