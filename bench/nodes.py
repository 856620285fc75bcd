"""Benchmark: the node image's build times and what an idle node costs, on this machine.

* Builds: `lab.images` with everything current (the digest checks alone), and the node's
  fast layer rebuilt (`--force`: a COPY of kubelab's source onto the base), which is
  what a source change costs. A cold build of the base (debootstrap) takes minutes and
  is timed by `python -m lab.images build node-base --force`, not here.
* Nodes: time from `docker run` to the inner dockerd answering, for `--nodes` nodes
  started one after another; then, after `--settle` seconds at rest, each node's memory
  and CPU (docker stats): first with only runit, dockerd, containerd and sshd, then
  with the network agent and kube-proxy running against an in-process apiserver
  (`lab.testenv`, reached through `lab.relay`).

The two cores are shared with whatever else runs on the machine; say so next to any
figure.

    python -m bench.nodes [--nodes 2] [--settle 20]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any

from lab.images import Builder
from lab.nodes import Node, NodeCluster
from lab.relay import NodeAPI
from lab.testenv import Environment


def timed(action: str, run: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(run, check=True, capture_output=True)
    seconds = time.monotonic() - started
    print(f"{action}: {seconds:.1f} s")
    return seconds


def stats(cluster: NodeCluster) -> None:
    """Memory and CPU of every node, one docker stats sample."""
    for node in cluster.nodes:
        sample: dict[str, Any] = node.container.stats(stream=False)  # type: ignore[assignment]
        memory = sample["memory_stats"]
        used = memory["usage"] - memory.get("stats", {}).get("cache", 0)
        cpu, system = sample["cpu_stats"], sample["precpu_stats"]
        delta = cpu["cpu_usage"]["total_usage"] - system["cpu_usage"]["total_usage"]
        window = cpu.get("system_cpu_usage", 0) - system.get("system_cpu_usage", 0)
        cores = cpu.get("online_cpus", 1)
        percent = 100.0 * delta / window * cores if window else 0.0
        print(f"  {node.name}: memory {used / 2**20:.1f} MiB, CPU {percent:.1f} % of a core")


def start_agents(api: NodeAPI, cluster: NodeCluster, node: Node) -> None:
    assert cluster.addressing is not None
    for name in ("network", "proxy"):
        api.install(node, f"/etc/kubelab/{name}.conf")
        args = f'ARGS="--cluster-cidr {cluster.addressing.subnet}"\n' if name == "proxy" else ""
        node.write_file(f"/etc/default/kubelab-{name}", args.encode(), 0o644)
        node.exec("sv", "up", f"kubelab-{name}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.nodes", description=__doc__)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--settle", type=float, default=20.0)
    args = parser.parse_args()
    builder = Builder()
    builder.ensure(["busybox", "pause", "nginx", "node"])
    timed("lab.images build, all current", [sys.executable, "-m", "lab.images", "build"])
    timed(
        "node layer rebuilt (--force)",
        [sys.executable, "-m", "lab.images", "build", "node", "--force"],
    )
    cluster = NodeCluster(
        prefix=f"kl-bench-nodes-{int(time.time())}", image=builder.tags("node")[0]
    )
    try:
        for _ in range(args.nodes):
            started = time.monotonic()
            (node,) = cluster.start(1)
            print(f"node {node.name} ready (dockerd answers) in {time.monotonic() - started:.1f} s")
        time.sleep(args.settle)
        print(f"idle nodes (runit, dockerd, containerd, sshd), after {args.settle:.0f} s:")
        stats(cluster)
        assert cluster.addressing is not None
        with Environment.start() as env:
            api = NodeAPI.open(env, cluster.addressing.gateway)
            try:
                for node in cluster.nodes:
                    start_agents(api, cluster, node)
                time.sleep(args.settle)
                print(f"with the network agent and kube-proxy, after {args.settle:.0f} s:")
                stats(cluster)
                for node in cluster.nodes:
                    rss = node.sh("ps -o rss=,args= -C python | sort -rn")
                    print(
                        f"  {node.name} agents' RSS (KiB, command):\n    "
                        + "\n    ".join(line.strip() for line in rss.splitlines())
                    )
            finally:
                api.close()
    finally:
        cluster.remove()


if __name__ == "__main__":
    main()
