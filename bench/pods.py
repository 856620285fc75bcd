"""Benchmark: pod startup through the kubelet, create to Running as a watch sees it.

The Kubernetes pod-startup SLO's measure: the time from a pod's creation to the first
watch event that shows it Running, with its image already present. Pods are created
with `spec.nodeName` set (no scheduler in the path), so what is measured is the API's
write and watch plus the kubelet's own work: its informer, the pod worker, the runtime,
and the status it writes back.

Runs (`--runtime memory`, the default; the Docker runs need the node containers of
`lab.nodes`):

* a burst: N pods (30) created at once on one node;
* steady: pods created at a fixed rate (5/s) for a while (60 s), over the nodes;

each giving p50 and p99 of create-to-Running. With the in-memory runtime nothing runs
(`MemoryRuntime`), so the figures are the kubelet's and the API's own overhead; the
apiserver is `lab.testenv`'s (in-process, in-memory store), the kubelet the same code a
node runs, on the hollow node's setup (`FixedMachine`, no volumes).

The machine has two cores shared with other work: the CPU the process used is printed
next to the figures.

    python -m bench.pods [--burst 30] [--rate 5] [--seconds 60]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.kubelet.config import KubeletConfig
from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import FixedMachine
from agents.kubelet.runtime.memory import MemoryRuntime
from kubelab.client import RestClient, resource_for
from lab.testenv import Environment

PODS = resource_for("v1", "Pod")
NAMESPACES = resource_for("v1", "Namespace")
TARGET_SLO_P99 = 5.0
TARGET_SLO_P50 = 1.5


def quantiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 (inclusive method: with few samples, p99 is near the maximum)."""
    if len(samples) == 1:
        return samples[0], samples[0]
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return q[49], q[98]


@dataclass
class Result:
    what: str
    pods: int
    latencies: list[float]
    cpu_seconds: float

    def row(self) -> str:
        p50, p99 = quantiles(self.latencies)
        return (
            f"| {self.what} | {self.pods} | {p50:.2f} s | {p99:.2f} s | {self.cpu_seconds:.1f} s |"
        )


class RunningWatch:
    """Creation times in, create-to-Running latencies out: one watch on the namespace."""

    def __init__(self, client: RestClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.created: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        version = client.list(PODS, namespace)["metadata"]["resourceVersion"]
        self._watch = client.watch(PODS, namespace, resource_version=version)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with contextlib.closing(self._watch):
            for event in self._watch:
                obj = event.object
                if (obj.get("status") or {}).get("phase") != "Running":
                    continue
                now = time.monotonic()
                with self._done:
                    self.running.setdefault(obj["metadata"]["name"], now)
                    self._done.notify_all()

    def create(self, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        with self._lock:
            self.created[name] = time.monotonic()
        self.client.create(PODS, body, self.namespace)

    def wait(self, names: list[str], timeout: float) -> list[float]:
        deadline = time.monotonic() + timeout
        with self._done:
            while not all(n in self.running for n in names):
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [n for n in names if n not in self.running]
                    raise TimeoutError(f"{len(missing)} pods not Running after {timeout:.0f}s")
                self._done.wait(left)
            return [self.running[n] - self.created[n] for n in names]

    def close(self) -> None:
        self._watch.close()


def pod(name: str, node: str, image: str = "busybox:1.36") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench-pods"}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "app", "image": image, "command": ["sleep", "3600"]}],
        },
    }


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def memory_nodes(env: Environment, count: int, root: Path) -> Iterator[list[str]]:
    """`count` kubelets on the in-memory runtime, each with its own node credentials."""
    kubelets = []
    try:
        for i in range(count):
            name = f"bench-mem-{i + 1}"
            client = RestClient(
                env.client_config(f"system:node:{name}", ["system:nodes"]), qps=50, burst=100
            )
            config = KubeletConfig(node_name=name, node_ip=f"10.0.0.{i + 1}", root_dir=root)
            kubelet = Kubelet(
                config, client, MemoryRuntime(name), FixedMachine(), events=False, volumes=False
            )
            kubelet.start()
            kubelets.append(kubelet)
        yield [k.name for k in kubelets]
    finally:
        for kubelet in kubelets:
            kubelet.stop()


def burst(watch: RunningWatch, nodes: list[str], count: int, tag: str) -> list[float]:
    names = [f"{tag}-{i}" for i in range(count)]
    threads = [
        threading.Thread(target=watch.create, args=(pod(n, nodes[i % len(nodes)]),))
        for i, n in enumerate(names)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return watch.wait(names, timeout=120)


def steady(watch: RunningWatch, nodes: list[str], rate: float, seconds: float) -> list[float]:
    names = []
    began = time.monotonic()
    for i in range(int(rate * seconds)):
        due = began + i / rate
        time.sleep(max(0.0, due - time.monotonic()))
        name = f"steady-{i}"
        names.append(name)
        watch.create(pod(name, nodes[i % len(nodes)]))
    return watch.wait(names, timeout=120)


def run_memory(args: argparse.Namespace) -> list[Result]:
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-pods-") as tmp, Environment.start() as env:
        admin = RestClient(env.client_config(), qps=None)
        for count in (1, 2):
            namespace = f"bench-{uuid.uuid4().hex[:6]}"
            admin.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )
            account = {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default"},
            }
            admin.create(resource_for("v1", "ServiceAccount"), account, namespace)
            with memory_nodes(env, count, Path(tmp)) as nodes:
                watch = RunningWatch(admin, namespace)
                try:
                    before = cpu_seconds()
                    latencies = burst(watch, nodes, args.burst, "burst")
                    results.append(
                        Result(
                            f"memory runtime: {args.burst} at once, {count} node(s)",
                            args.burst,
                            latencies,
                            cpu_seconds() - before,
                        )
                    )
                    if count == 2:
                        before = cpu_seconds()
                        latencies = steady(watch, nodes, args.rate, args.seconds)
                        results.append(
                            Result(
                                f"memory runtime: {args.rate:g}/s for {args.seconds:.0f} s, "
                                f"{count} nodes",
                                len(latencies),
                                latencies,
                                cpu_seconds() - before,
                            )
                        )
                finally:
                    watch.close()
        admin.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burst", type=int, default=30)
    parser.add_argument("--rate", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    results = run_memory(args)
    print("| run | pods | p50 create-to-Running | p99 | CPU of this process |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in results:
        print(r.row())
    steady_runs = [r for r in results if "/s for" in r.what]
    for r in steady_runs:
        p50, p99 = quantiles(r.latencies)
        met99 = "met" if p99 < TARGET_SLO_P99 else "MISSED"
        met50 = "met" if p50 < TARGET_SLO_P50 else "MISSED"
        print(f"{r.what}: p99 < {TARGET_SLO_P99:.0f} s {met99}; p50 < {TARGET_SLO_P50} s {met50}")


if __name__ == "__main__":
    main()
