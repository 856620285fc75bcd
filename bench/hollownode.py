"""Hollow nodes for `bench/scheduler.py` (kubemark's idea): many real kubelets
(`agents.kubelet`) in one process, each with the in-memory runtime, so that the control
plane sees hundreds of nodes without a container being run.

Each hollow node is the kubelet as on a real node, with a `MemoryRuntime` and a
`FixedMachine` of one of three sizes: it registers its Node (capacity, allocatable,
labels: hostname, zone), renews its Lease in `kube-node-lease`, watches its own pods
(`spec.nodeName=<node>`: the watch the apiserver's index serves), runs them (nothing
runs; their containers "start" at once) and reports them Running, and confirms their
deletion. Events, volumes and the HTTPS server are off (`events=False,
volumes=False`), which the kubelet offers for hollow nodes. The kubelets share one
Services informer and one stop event (`services=`, `stop_event=`): the Services are the
same for every node, and a watch and threads each cost the apiserver and this process
(5,501 threads for 500 nodes before, 2,504 after).

    python -m bench.hollownode --kubeconfig admin.conf --nodes 500 [--prefix hollow]

It prints "ready <n>" once every node is registered and its pod informer synced, and
runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from agents.kubelet.config import KubeletConfig
from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import FixedMachine
from agents.kubelet.runtime.memory import MemoryRuntime
from kubelab.client import RestClient, SharedInformer, load_config, resource_for

SERVICES = resource_for("v1", "Service")
ZONES = ("zone-a", "zone-b", "zone-c", "zone-d", "zone-e")
SIZES = ((4, 16), (8, 32), (2, 8))
"""Node sizes in turn (CPUs, GiB of memory): mixed capacity, as a real cluster has."""
NODES_PER_CLIENT = 20
"""Kubelets sharing one REST client: each holds a watch and a few requests at a time,
and the client keeps 64 connections."""


def hollow_kubelet(
    name: str, index: int, client: RestClient, services: SharedInformer, stop: threading.Event
) -> Kubelet:
    cpus, gib = SIZES[index % len(SIZES)]
    config = KubeletConfig(
        node_name=name,
        node_ip=f"10.{index // 250}.{index % 250}.1",
        node_labels={
            "topology.kubernetes.io/zone": ZONES[index % len(ZONES)],
            "kubelab.io/hollow": "true",
        },
        workers=1,
    )
    return Kubelet(
        config,
        client,
        MemoryRuntime(name),
        FixedMachine(cpu_count=cpus, memory_bytes=gib * 1024**3),
        events=False,
        volumes=False,
        services=services,
        stop_event=stop,
    )


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
    config = load_config(args.kubeconfig)
    clients = [
        RestClient(config, user_agent="hollow-kubelet", qps=None)
        for _ in range(0, args.nodes, NODES_PER_CLIENT)
    ]
    # One Services informer and one stop event for them all: the Services are the same
    # for every node, and a watch (and threads) each would cost the apiserver and us.
    services = SharedInformer(clients[0], SERVICES)
    services.start(stop)
    kubelets = [
        hollow_kubelet(f"{args.prefix}-{i:04}", i, clients[i // NODES_PER_CLIENT], services, stop)
        for i in range(args.nodes)
    ]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: k.start(timeout=120), kubelets))
    deadline = time.monotonic() + 120
    while not all(k.informer.has_synced() for k in kubelets) and time.monotonic() < deadline:
        time.sleep(0.2)
    print(f"ready {args.nodes}", flush=True)
    stop.wait()
    for client in clients:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
