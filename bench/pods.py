"""Benchmark: pod startup through the kubelet, create to Running as a watch sees it.

The Kubernetes pod-startup SLO's measure: the time from a pod's creation to the first
watch event that shows it Running, with its image already present. Pods are created
with `spec.nodeName` set (no scheduler in the path), so what is measured is the API's
write and watch plus the kubelet's own work: its informer, the pod worker, the runtime,
and the status it writes back.

Runs, each giving p50 and p99 of create-to-Running:

* a burst: N pods (30) created at once, on one node and over two;
* steady: pods created at a fixed rate (5/s) for a while (60 s), over two nodes.

`--runtime docker`: two node containers (lab.nodes) with their own dockerd, the kubelet
as their runit service (lab.nodekubelet), busybox and pause loaded. Beside each run, the
floor that Docker itself sets here, the peer: the same sandbox + app container pairs
started directly through the Docker API inside the same node(s) (pause on the `kubepods`
bridge, busybox joined to its network namespace), each from a thread of its own, all at
once beside a burst and at the same rate beside the steady run, timed from the moment a
pair is due to its app container started. Each run also prints what it cost the nodes:
Docker API calls per pod (from dockerd's debug log), kubelet and engine CPU per pod, and
the load average. First the idle node: CPU and memory of a node container with its
dockerd and kubelet and no pods, over 20 s.

`--runtime memory`: the same through the in-memory runtime (`MemoryRuntime`): nothing
runs, so the figures are the kubelet's and the API's own overhead, on the hollow node's
setup (`FixedMachine`, no volumes).

The apiserver is `lab.testenv`'s in both (in-process, in-memory store), reached by the
nodes through lab.relay.

The machine has two cores shared with other work: the CPU the process used is printed
next to the figures.

    python -m bench.pods [--runtime memory|docker] [--burst 30] [--rate 5] [--seconds 60]
        [--runs burst,steady] [--no-peer]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker

from agents.kubelet.config import KubeletConfig
from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import FixedMachine
from agents.kubelet.runtime.memory import MemoryRuntime
from kubelab.api.errors import StatusError
from kubelab.client import RestClient, resource_for
from lab.images import BUSYBOX_IMAGE, NODE_VENV, PAUSE_IMAGE, Builder
from lab.nodekubelet import POD_NETWORK, install_kubelet, stop_kubelet
from lab.nodes import Node, NodeCluster
from lab.relay import NodeAPI
from lab.testenv import Environment

PODS = resource_for("v1", "Pod")
NODES = resource_for("v1", "Node")
NAMESPACES = resource_for("v1", "Namespace")
TARGET_RATIO = 1.3
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
    cpu_seconds: float | None
    """CPU this process used (the API, the watch and, in memory, the kubelets); None for
    the peer, which runs in the nodes."""

    def row(self) -> str:
        p50, p99 = quantiles(self.latencies)
        cpu = "-" if self.cpu_seconds is None else f"{self.cpu_seconds:.1f} s"
        return f"| {self.what} | {self.pods} | {p50:.2f} s | {p99:.2f} s | {cpu} |"


def emit(results: list[Result], result: Result) -> None:
    """Keep a result and print its row at once (a later failure keeps what was measured)."""
    results.append(result)
    print(result.row(), flush=True)


def note(notes: list[str], text: str) -> None:
    notes.append(text)
    print(text, flush=True)


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
        """The latencies of `names`, once all are Running; TimeoutError after `timeout`."""
        latencies, missing = self.wait_some(names, timeout)
        if missing:
            raise TimeoutError(f"{missing} pods not Running after {timeout:.0f}s")
        return latencies

    def wait_some(self, names: list[str], timeout: float) -> tuple[list[float], int]:
        """The latencies of those of `names` Running within `timeout`, and how many not."""
        deadline = time.monotonic() + timeout
        with self._done:
            while not all(n in self.running for n in names):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._done.wait(left)
            done = [n for n in names if n in self.running]
            return [self.running[n] - self.created[n] for n in done], len(names) - len(done)

    def close(self) -> None:
        self._watch.close()


def pod(name: str, node: str, image: str = BUSYBOX_IMAGE) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench-pods"}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "app",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "3600"],
                }
            ],
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


def steady(
    watch: RunningWatch, nodes: list[str], rate: float, seconds: float
) -> tuple[list[float], int]:
    """Pods at `rate` per second for `seconds`; the latencies of those Running within two
    minutes of the last create, and how many were not."""
    names = []
    began = time.monotonic()
    for i in range(int(rate * seconds)):
        due = began + i / rate
        time.sleep(max(0.0, due - time.monotonic()))
        name = f"steady-{i}"
        names.append(name)
        watch.create(pod(name, nodes[i % len(nodes)]))
    return watch.wait_some(names, timeout=120)


def run_memory(args: argparse.Namespace) -> list[Result]:
    results: list[Result] = []
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
                    emit(
                        results,
                        Result(
                            f"memory runtime: {args.burst} at once, {count} node(s)",
                            args.burst,
                            latencies,
                            cpu_seconds() - before,
                        ),
                    )
                    if count == 2:
                        before = cpu_seconds()
                        latencies, missing = steady(watch, nodes, args.rate, args.seconds)
                        if missing:
                            print(f"{missing} pods not Running 2 minutes after the last create")
                        emit(
                            results,
                            Result(
                                f"memory runtime: {args.rate:g}/s for {args.seconds:.0f} s, "
                                f"{count} nodes",
                                len(latencies),
                                latencies,
                                cpu_seconds() - before,
                            ),
                        )
                finally:
                    watch.close()
        admin.close()
    return results


# The peer, run inside a node by its Python (which has the docker SDK): `count` sandbox +
# app pairs, pair i requested at wall time `start + i * interval` (interval 0: all at
# once), each by a thread of its own; prints each pair's seconds from its due time to its
# app container started, and the pairs the engine failed (a call not answered in 300 s).
PEER = """
import json, sys, threading, time
import docker
count, interval, start = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
pause, image, network, tag = sys.argv[4:8]
client = docker.from_env(timeout=300)
took = [None] * count
failed = []
def pair(i):
    labels = {"kubelab.bench": tag}
    due = start + i * interval
    time.sleep(max(0.0, due - time.time()))
    try:
        box = client.containers.run(pause, name=f"{tag}-sandbox-{i}", detach=True,
                                    network=network, ipc_mode="shareable", labels=labels)
        client.containers.run(image, ["sleep", "3600"], name=f"{tag}-app-{i}", detach=True,
                              network_mode=f"container:{box.id}",
                              ipc_mode=f"container:{box.id}", labels=labels)
        took[i] = time.time() - due
    except Exception as exc:
        failed.append(f"pair {i}: {exc}")
threads = [threading.Thread(target=pair, args=(i,)) for i in range(count)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"took": [t for t in took if t is not None], "failed": failed}))
"""


def peer(nodes: list[Node], count: int, rate: float | None = None) -> list[float]:
    """The direct-Docker floor: `count` pairs over `nodes`, all at once (`rate` None) or
    at `rate` per second, pair i on node i mod len(nodes) at i / rate, as `steady` creates
    its pods."""
    tag = f"peer-{uuid.uuid4().hex[:6]}"
    n = len(nodes)
    shares = [count // n + (i < count % n) for i in range(n)]
    start = time.time() + 2.0  # every node's threads made before the first is due
    out: list[list[float]] = [[] for _ in nodes]
    failures: list[str] = []

    def run(i: int) -> None:
        interval = n / rate if rate else 0.0
        offset = i / rate if rate else 0.0
        done = nodes[i].exec(
            f"{NODE_VENV}/bin/python", "-c", PEER, str(shares[i]), str(interval),
            str(start + offset), PAUSE_IMAGE, BUSYBOX_IMAGE, POD_NETWORK, tag, timeout=900,
        )  # fmt: skip
        answer = json.loads(done.stdout)
        out[i] = answer["took"]
        if answer["failed"]:
            failures.append(f"{nodes[i].name}: {len(answer['failed'])} pairs failed, as "
                            f"{answer['failed'][0]}")  # fmt: skip

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for node in nodes:
        node.sh(f"docker rm -f $(docker ps -aq --filter label=kubelab.bench={tag})", timeout=900)
    for failure in failures:  # the engine gave up on them: a floor it cannot hold
        print(f"peer: {failure}", flush=True)
    return [x for share in out for x in share]


# Each node's dockerd logs every API request it serves ("Calling GET /v1.41/...") once
# in debug mode, which a reload (SIGHUP) switches on without a restart.
ENGINE_DEBUG = """python3 - <<'PY'
import json
path = "/etc/docker/daemon.json"
with open(path) as f:
    config = json.load(f)
config["debug"] = True
with open(path, "w") as f:
    json.dump(config, f, indent=2)
PY
kill -HUP $(pidof dockerd)"""
# CPU seconds of the kubelet and of the engine (dockerd, containerd) so far.
CPU_SECONDS = """
import os
hz, kubelet, engine = os.sysconf("SC_CLK_TCK"), 0, 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
    except OSError:
        continue
    ticks = int(fields[11]) + int(fields[12])
    if b"agents.kubelet" in argv:
        kubelet += ticks
    elif os.path.basename(argv[0]) in (b"dockerd", b"containerd"):
        engine += ticks
print(kubelet / hz, engine / hz)
"""


def api_call(line: str) -> str:
    """`GET /v1.41/containers/<id>/json?...` as `GET /containers/{id}/json`."""
    method, _, path = line.partition(" ")
    path = re.sub(r"^/v[0-9.]+", "", path.split("?")[0])
    path = re.sub(r"^/images/.+/json$", "/images/{name}/json", path)
    path = re.sub(r"^/(containers|exec|networks)/(?!json$|create$)[^/]+", r"/\1/{id}", path)
    return f"{method} {path}"


class Meter:
    """What the nodes spent during one run: the Docker API calls their engines served
    (kubelet and peer alike, from dockerd's debug log), the CPU of their kubelets and
    engines, and the machine's load average (shared: figures are upper bounds)."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.lines = [int(n.sh("wc -l < /var/log/dockerd.log")) for n in nodes]
        self.cpu = [self._ticks(n) for n in nodes]
        self.load = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_load, daemon=True)
        self._thread.start()

    @staticmethod
    def _ticks(node: Node) -> tuple[float, float]:
        kubelet, engine = node.exec("python3", "-c", CPU_SECONDS).stdout.split()
        return float(kubelet), float(engine)

    def _sample_load(self) -> None:
        while not self._stop.wait(5.0):
            self.load.append(os.getloadavg()[0])

    def report(self, pods: int) -> str:
        """Per pod: Docker API calls (and the most frequent kinds), kubelet and engine CPU."""
        self._stop.set()
        self.load.append(os.getloadavg()[0])
        calls: collections.Counter[str] = collections.Counter()
        kubelet = engine = 0.0
        for node, lines, (k0, e0) in zip(self.nodes, self.lines, self.cpu, strict=True):
            log = node.sh(f"tail -n +{lines + 1} /var/log/dockerd.log", timeout=300)
            calls.update(api_call(m) for m in re.findall(r'msg="Calling ([A-Z]+ [^"]+)"', log))
            k1, e1 = self._ticks(node)
            kubelet, engine = kubelet + k1 - k0, engine + e1 - e0
        top = ", ".join(f"{what} {n / pods:.1f}" for what, n in calls.most_common(6))
        return (
            f"Docker API calls per pod {calls.total() / pods:.1f} ({top}); CPU per pod: "
            f"kubelet {kubelet / pods * 1000:.0f} ms, dockerd+containerd "
            f"{engine / pods * 1000:.0f} ms; load average {min(self.load):.1f}-"
            f"{max(self.load):.1f}"
        )


def delete_pods(admin: RestClient, namespace: str, nodes: list[Node]) -> None:
    """Delete every pod at once, and wait until the kubelets removed their containers."""
    for item in admin.list(PODS, namespace)["items"]:
        admin.delete(PODS, item["metadata"]["name"], namespace, grace_period_seconds=0)
    deadline = time.monotonic() + 300
    for node in nodes:
        while node.sh("docker ps -q --filter label=kubelab.io/node | wc -l").strip() != "0":
            if time.monotonic() > deadline:
                raise TimeoutError(f"the pods' containers are still in {node.name}")
            time.sleep(1)


def idle_usage(client: docker.DockerClient, node: Node, seconds: float = 20.0) -> tuple[float, int]:
    """CPU (cores, averaged over `seconds`) and memory (bytes, without page cache) of a
    node container: its dockerd, kubelet and supervisor."""

    def sample() -> dict[str, Any]:
        stats: dict[str, Any] = client.api.stats(node.container_name, stream=False)
        return stats

    first, began = sample(), time.monotonic()
    time.sleep(seconds)
    last, ended = sample(), time.monotonic()
    cpu = [s["cpu_stats"]["cpu_usage"]["total_usage"] for s in (first, last)]
    used = cpu[1] - cpu[0]
    memory = last["memory_stats"]
    cache = int((memory.get("stats") or {}).get("total_inactive_file", 0))
    return used / 1e9 / (ended - began), int(memory["usage"]) - cache


def measure(
    results: list[Result],
    notes: list[str],
    what: str,
    kubelab: Callable[[], list[float]],
    floor: Callable[[], list[float]] | None,
    nodes: list[Node],
    clear: Callable[[], None],
) -> None:
    """One run through the kubelets, `clear` (their pods deleted: the pod network has
    addresses for 253), then the same through the peer; the rows, the ratios and what
    each cost the nodes."""
    meter, before = Meter(nodes), cpu_seconds()
    latencies = kubelab()
    if latencies:
        what_ = f"kubelab: {what}"
        emit(results, Result(what_, len(latencies), latencies, cpu_seconds() - before))
        note(notes, f"kubelab, {what}: {meter.report(len(latencies))}")
    clear()
    if floor is None:
        return
    meter = Meter(nodes)
    floor_latencies = floor()
    if not floor_latencies:
        note(notes, f"peer, {what}: no pair started")
        return
    emit(
        results,
        Result(f"direct Docker (peer): {what}", len(floor_latencies), floor_latencies, None),
    )
    note(notes, f"peer, {what}: {meter.report(len(floor_latencies))}")
    if latencies:
        (k50, k99), (p50, p99) = quantiles(latencies), quantiles(floor_latencies)
        note(notes, f"{what}: kubelab/peer p50 {k50 / p50:.2f}x, p99 {k99 / p99:.2f}x "
             f"(target {TARGET_RATIO}x)")  # fmt: skip


def run_docker(args: argparse.Namespace) -> tuple[list[Result], list[str]]:
    results: list[Result] = []
    notes: list[str] = []
    builder = Builder(client=docker.from_env(timeout=900))
    builder.ensure(["busybox", "pause", "node"])
    cluster = NodeCluster(
        prefix=f"kl-kubelet-bench-{uuid.uuid4().hex[:6]}",
        client=builder.client,
        image=builder.tags("node")[0],
    )
    try:
        nodes = cluster.start(2)
        for image in (BUSYBOX_IMAGE, PAUSE_IMAGE):
            cluster.load_image(image)
        with Environment.start() as env:
            assert cluster.addressing is not None
            api = NodeAPI.open(env, cluster.addressing.gateway)
            admin = api.client
            try:
                for node in nodes:
                    body = {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": node.name},
                        "spec": {"podCIDR": cluster.pod_cidr(node)},
                    }
                    admin.create(NODES, body)  # node IPAM's podCIDR, before the kubelet
                    install_kubelet(api, node)
                wait_ready(admin, [n.name for n in nodes])
                cpu, memory = idle_usage(builder.client, nodes[0])
                note(
                    notes,
                    f"idle node (dockerd, kubelet, runit, sshd; no pods): CPU {cpu * 1000:.0f} "
                    f"millicores, memory {memory / 2**20:.0f} MiB (without page cache)",
                )
                for node in nodes:
                    node.sh(ENGINE_DEBUG)
                namespace = new_namespace(admin)
                watch = RunningWatch(admin, namespace)
                clear = functools.partial(delete_pods, admin, namespace, nodes)
                try:
                    for count in (1, 2) if "burst" in args.runs else ():
                        used = nodes[:count]
                        what = f"{args.burst} at once, {count} node(s)"
                        measure(
                            results, notes, what,
                            functools.partial(
                                burst, watch, [n.name for n in used], args.burst, f"b{count}"
                            ),
                            functools.partial(peer, used, args.burst) if args.peer else None,
                            used, clear,
                        )  # fmt: skip
                    if "steady" in args.runs:
                        names = [n.name for n in nodes]
                        total = int(args.rate * args.seconds)
                        what = f"{args.rate:g}/s for {args.seconds:g} s, 2 nodes"

                        def kubelab_steady() -> list[float]:
                            latencies, missing = steady(watch, names, args.rate, args.seconds)
                            if missing:
                                note(notes, f"steady: {missing} of {total} pods not Running "
                                     "2 minutes after the last create")  # fmt: skip
                            return latencies

                        measure(
                            results, notes, what, kubelab_steady,
                            (lambda: peer(nodes, total, args.rate)) if args.peer else None,
                            nodes, clear,
                        )  # fmt: skip
                except TimeoutError:
                    for node in nodes:  # why: the kubelets' own words
                        log = node.sh("tail -n 40 /var/log/kubelet.log", check=False)
                        print(f"--- kubelet log of {node.name}:\n{log}", file=sys.stderr)
                    raise
                finally:
                    watch.close()
            finally:
                for node in nodes:
                    stop_kubelet(node)
                api.close()
    finally:
        cluster.remove()
    return results, notes


def wait_ready(admin: RestClient, names: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            try:
                node = admin.get(NODES, name)
                conditions = (node.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                    break
            except StatusError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {name}'s kubelet is not Ready after {timeout:.0f}s")
            time.sleep(1)


def new_namespace(admin: RestClient) -> str:
    """A namespace of the benchmark's own, with its `default` ServiceAccount."""
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    admin.create(NAMESPACES, body)
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    admin.create(resource_for("v1", "ServiceAccount"), account, namespace)
    return namespace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", choices=("memory", "docker"), default="memory")
    parser.add_argument("--burst", type=int, default=30)
    parser.add_argument("--rate", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--peer",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the direct-Docker peer beside each run (--no-peer while iterating)",
    )
    parser.add_argument(
        "--runs",
        default="burst,steady",
        type=lambda v: set(v.split(",")),
        help="which runs, comma-separated: burst (30 at once on one node, then two), "
        "steady (--rate pods/s for --seconds over two nodes); shorter while iterating",
    )
    args = parser.parse_args()
    print("| run | pods | p50 create-to-Running | p99 | CPU of this process |")
    print("| --- | ---: | ---: | ---: | ---: |", flush=True)
    results = run_docker(args)[0] if args.runtime == "docker" else run_memory(args)
    for r in results:
        if "/s for" in r.what:
            p50, p99 = quantiles(r.latencies)
            met99 = "met" if p99 < TARGET_SLO_P99 else "MISSED"
            met50 = "met" if p50 < TARGET_SLO_P50 else "MISSED"
            print(
                f"{r.what}: p99 < {TARGET_SLO_P99:.0f} s {met99}; p50 < {TARGET_SLO_P50} s {met50}"
            )


if __name__ == "__main__":
    main()
