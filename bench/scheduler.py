"""Benchmark: the scheduler placing 5,000 pods on 500 hollow nodes, with the whole
control plane on this machine (the scheduling issue's benchmark).

It starts a `LocalControlPlane` (a 1-member store, the apiserver, the controller-manager
and the scheduler) and the hollow nodes (`bench/hollownode.py`: one process hosting 500
real kubelets on the in-memory runtime, each with its Lease, its own pod watch and its
pods' status), then creates (from 64 threads at a stated rate, 16 otherwise):

* 3,000 pods of one app (`app=web`), as a Deployment of 3,000 would make them, but
  created directly, labelled and shaped as its ReplicaSet's: a Deployment object would
  have the ReplicaSet controller create them in its slow-start bursts, not at a stated
  rate (scheduler_perf, too, creates its pods from templates);
* 2,000 bare pods with mixed requests: 200 with a required pod anti-affinity (one per
  node), 200 spread over the 5 zones by a topology spread constraint (maxSkew 1), 200
  with a required node affinity to two zones, the rest plain.

Requests vary (100m-500m CPU, 128Mi-512Mi memory) over nodes of three sizes. A pod watch
notes when each pod is first seen bound; create-to-bound is from the moment its create
was answered. Reported: pods bound per second (from the first create to the last
binding), create-to-bound p50/p99, the CPU each component used, and a check after the
run that every pod is bound to a node where it fits (requests within allocatable, pod
count, node affinity, anti-affinity, spread skew).

The two cores are shared by every process here (and by other work on the machine):
the figures are this machine's, under that load.

The pods are created at a stated pace, `--rate` (100 per second by default: the target),
open loop, as Kubernetes' scheduler_perf creates its pods: so create-to-bound measures the
scheduling path, not a backlog of creates outpacing it. `--rate 0` creates them as fast
as 16 writers go, which measures the most the control plane binds, and then the latency
includes the wait in that backlog.

Before the pods, the cluster is measured at rest for `--idle` seconds: what the 500 nodes
cost each component, the hollow process's threads, and the apiserver's requests per
second by kind. After the run: CPU per pod bound per component (CPU-seconds over pods
bound, which the shared machine's load distorts less than wall time does) and the
apiserver's requests per pod by kind.

With `--tracing` it measures instead what tracing costs the scheduler (issue 23: at most
5 % fewer pods/s): on the same cluster, the scheduler is restarted without tracing and
then with `--tracing-endpoint` pointing at a real collector process (as
`bench.apiserver --tracing` does), and each setting places `--batch` pods of the app
(created as fast as 16 writers go, so pods/s is the most the scheduler binds), for
`--rounds` rounds (after an uncounted batch a fifth the size: a new cluster's first pods
cost more), the order of the two settings swapped every round as the cluster fills and
the machine's other load drifts. Only the scheduler traces: the apiserver and
the hollow kubelets stay as they are, so the difference is the scheduler's spans (the
queue wait, the cycle with every node's filter verdicts and the top scores, the bind)
and their export. Each batch prints its pods/s and the scheduler's CPU per pod, then
the ratio on/off of the rounds' sums.

    python -m bench.scheduler [--nodes 500] [--deployment 3000] [--bare 2000]
                              [--rate PODS_PER_S] [--markdown]
    python -m bench.scheduler --tracing [--nodes 500] [--batch 1000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import cpu_seconds
from bench.apiserver import start_collector
from kubelab.api.podscheduling import pod_requests, required_node_affinity_matches, resource_list
from kubelab.client import (
    RestClient,
    ServerUnreachable,
    StatusError,
    load_config,
    resource_for,
)
from lab.localplane import LocalControlPlane

PODS = resource_for("v1", "Pod")
NAMESPACES = resource_for("v1", "Namespace")
NODES = resource_for("v1", "Node")
NAMESPACE = "bench"
ZONE = "topology.kubernetes.io/zone"
CPUS = ("100m", "250m", "500m")
MEMORIES = ("128Mi", "256Mi", "512Mi")
TARGET_RATE = 100.0
TARGET_P99 = 5.0


def pod_spec(name: str, kind: str, rng: random.Random) -> dict[str, Any]:
    labels = {"app": "web", "pod-template-hash": "5d4f8c7b9"} if kind == "web" else {"app": kind}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "c",
                "image": "nginx:1.21",
                "resources": {
                    "requests": {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)}
                },
            }
        ],
    }
    if kind == "anti":
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "anti"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    elif kind == "spread":
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "spread"}},
            }
        ]
    elif kind == "zonal":
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": ZONE, "operator": "In", "values": ["zone-a", "zone-b"]}
                            ]
                        }
                    ]
                }
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": spec,
    }


def workload(deployment: int, bare: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    kinds = ["web"] * deployment
    special = min(200, bare // 10)
    kinds += ["anti"] * special + ["spread"] * special + ["zonal"] * special
    kinds += ["plain"] * (bare - 3 * special)
    rng.shuffle(kinds)
    counts: Counter[str] = Counter()
    pods = []
    for kind in kinds:
        counts[kind] += 1
        pods.append(pod_spec(f"{kind}-{counts[kind]:05}", kind, rng))
    return pods


class BindWatch:
    """One watch on the namespace's pods: when each was first seen bound."""

    def __init__(self, client: RestClient, resource_version: str) -> None:
        self.bound: dict[str, float] = {}
        self._client = client
        self._rv = resource_version
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._client.watch(
                PODS, NAMESPACE, resource_version=self._rv, timeout_seconds=600
            ) as watch:
                for kind, obj in watch:
                    self._rv = obj["metadata"]["resourceVersion"]
                    name = obj["metadata"].get("name")
                    bound = (obj.get("spec") or {}).get("nodeName")
                    if kind != "BOOKMARK" and bound and name not in self.bound:
                        self.bound[name] = time.monotonic()
                    if self._stop.is_set():
                        return

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()


def check_placement(client: RestClient) -> list[str]:
    """Every pod bound, and bound where it fits; the problems found."""
    nodes = {n["metadata"]["name"]: n for n in client.list(NODES)["items"]}
    pods = client.list(PODS, NAMESPACE)["items"]
    problems = []
    used: dict[str, list[dict[str, Any]]] = {name: [] for name in nodes}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node:
            problems.append(f"{pod['metadata']['name']} is not bound")
        elif node not in nodes:
            problems.append(f"{pod['metadata']['name']} is bound to unknown node {node}")
        else:
            used[node].append(pod)
            if not required_node_affinity_matches(pod, nodes[node]):
                problems.append(f"{pod['metadata']['name']} on {node} breaks its node affinity")
    spread: Counter[str] = Counter()
    for name, placed in used.items():
        alloc = resource_list(nodes[name]["status"]["allocatable"])
        cpu = sum(pod_requests(p).milli_cpu for p in placed)
        memory = sum(pod_requests(p).memory for p in placed)
        if cpu > alloc.milli_cpu or memory > alloc.memory or len(placed) > alloc.pods:
            problems.append(
                f"{name} overcommitted: {cpu}m of {alloc.milli_cpu}m CPU, "
                f"{memory} of {alloc.memory} bytes, {len(placed)} of {alloc.pods} pods"
            )
        anti = sum(1 for p in placed if p["metadata"]["labels"].get("app") == "anti")
        if anti > 1:
            problems.append(f"{name} has {anti} anti-affinity pods")
        zone = nodes[name]["metadata"]["labels"].get(ZONE, "")
        spread[zone] += sum(1 for p in placed if p["metadata"]["labels"].get("app") == "spread")
    if spread and max(spread.values()) - min(spread.values()) > 1:
        problems.append(f"spread pods per zone exceed maxSkew 1: {dict(spread)}")
    return problems


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def scheduler_metric(plane: LocalControlPlane, line_prefix: str) -> float:
    with plane.monitoring_session() as scraper:
        r = scraper.get(
            f"https://127.0.0.1:{plane.scheduler_port}/metrics",
            verify=str(plane.pki / "scheduler-serving" / "kube-scheduler-ca.crt"),
            timeout=5,
        )
    for line in r.text.splitlines():
        if line.startswith(line_prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def request_counts(client: RestClient) -> Counter[str]:
    """The apiserver's requests so far by kind ("VERB resource[/subresource]"), from its
    `apiserver_request_total`; watches count when they open."""
    counts: Counter[str] = Counter()
    for line in str(client.request("GET", "/metrics")).splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
        kind = labels["resource"] + (f"/{labels['subresource']}" if labels["subresource"] else "")
        counts[f"{labels['verb']} {kind or 'other'}"] += int(float(line.rsplit(" ", 1)[1]))
    return counts


def per_kind(counts: Counter[str], divisor: float, fmt: str) -> str:
    """The request kinds, most frequent first, each count divided by `divisor`."""
    return ", ".join(f"{k} {fmt.format(n / divisor)}" for k, n in counts.most_common(12))


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-scheduler-") as tmp:
        plane = LocalControlPlane(
            Path(tmp),
            store_members=1,
            scheduler_args=["--kube-api-qps", "1000", "--kube-api-burst", "2000"],
            # A /26 of the pod network per node: 1,024 nodes (the default /24 gives 256,
            # and the others would get CIDRNotAvailable Events, retried, forever).
            controller_manager_args=["--node-cidr-mask-size=26"],
        )
        print("==> starting a 1-member store, the apiserver, controller-manager, scheduler")
        plane.start(timeout=120)
        hollow: subprocess.Popen[str] | None = None
        try:
            print(f"==> starting {args.nodes} hollow nodes (kubelets, in-memory runtime)")
            hollow = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.hollownode",
                    "--kubeconfig",
                    str(plane.kubeconfig),
                    "--nodes",
                    str(args.nodes),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert hollow.stdout is not None
            line = hollow.stdout.readline()
            if not line.startswith("ready"):
                raise SystemExit(f"the hollow nodes did not start: {line!r}")
            wait_for_nodes(plane, args.nodes)
            if args.tracing:
                return measure_tracing(args, plane)
            return measure(args, plane, hollow)
        finally:
            if hollow is not None:
                hollow.terminate()
                try:
                    hollow.wait(30)
                except subprocess.TimeoutExpired:
                    hollow.kill()
                    hollow.wait()
            plane.stop()


def bench_namespace(plane: LocalControlPlane) -> RestClient:
    """The admin's client, once the namespace of the pods exists with its service
    account (which pods need to be admitted)."""
    client = RestClient(load_config(plane.kubeconfig), qps=None, timeout=60)
    client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            client.get(resource_for("v1", "ServiceAccount"), "default", NAMESPACE)
            return client
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def wait_for_nodes(plane: LocalControlPlane, nodes: int) -> None:
    """Until the scheduler's cache holds every node."""
    deadline = time.monotonic() + 60
    while scheduler_metric(plane, 'scheduler_cache_size{type="nodes"}') < nodes:
        if time.monotonic() > deadline:
            raise SystemExit("the scheduler did not see every node within 60 s")
        time.sleep(0.5)


def measure_tracing(args: argparse.Namespace, plane: LocalControlPlane) -> int:
    """The tracing comparison (module docstring): batches of pods placed by the
    scheduler restarted off and on in turn."""
    client = bench_namespace(plane)
    collector, url = start_collector(plane.dir)
    watch = BindWatch(client, client.list(PODS, NAMESPACE)["metadata"]["resourceVersion"])
    watch.start()
    # A lease that outlasts the machine's worst stalls: a scheduler that loses it in a
    # batch stops scheduling until it wins it back (seen at load 22: the apiserver did not
    # answer a renewal within the client's 2.5 s, and a batch took 250 s).
    untraced = [
        *plane.scheduler_args,
        "--leader-elect-lease-duration=120s",
        "--leader-elect-renew-deadline=100s",
    ]
    rng = random.Random(7)

    def batch(label: str, count: int, on: bool) -> tuple[int, float, float]:
        """`count` pods placed by a scheduler started with tracing `on`: the pods bound,
        the seconds from the first create to the last binding, the scheduler's CPU."""
        plane.stop_scheduler()
        plane.scheduler_args = untraced + (["--tracing-endpoint", url] if on else [])
        plane.start_scheduler(timeout=120)
        wait_for_nodes(plane, args.nodes)
        assert plane.scheduler is not None
        names = [f"{label}-{i:05}" for i in range(count)]
        pods = [pod_spec(name, "web", rng) for name in names]

        def create(pod: dict[str, Any]) -> None:
            # A loaded machine's apiserver may not answer within the client's minute: try
            # again, and a name taken is the earlier attempt that was applied.
            while True:
                try:
                    client.create(PODS, pod)
                    return
                except ServerUnreachable:
                    continue
                except StatusError as exc:
                    if exc.code == 409:
                        return
                    raise

        cpu0, started = cpu_seconds(plane.scheduler.pid), time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(create, pods))
        deadline = time.monotonic() + args.timeout
        while any(n not in watch.bound for n in names) and time.monotonic() < deadline:
            time.sleep(0.2)
        cpu = cpu_seconds(plane.scheduler.pid) - cpu0
        bound = [watch.bound[n] for n in names if n in watch.bound]
        return len(bound), max(bound, default=time.monotonic()) - started, cpu

    # Per setting: pods bound, seconds, the scheduler's CPU seconds.
    sums = {on: [0, 0.0, 0.0] for on in (False, True)}
    print(
        f"\ntracing off and on: the scheduler restarted for each, {args.batch} pods a batch "
        f"from 16 threads, {args.rounds} rounds (after {args.batch // 5} uncounted)"
    )
    print("round  tracing  pods  seconds  pods/s  scheduler CPU ms/pod", flush=True)
    try:
        # The cluster's first pods cost more than the later ones (the hollow kubelets'
        # first pods, caches growing): not counted.
        batch("warm", args.batch // 5, False)
        for round_ in range(1, args.rounds + 1):
            for on in (False, True) if round_ % 2 else (True, False):
                setting = "on" if on else "off"
                bound, seconds, cpu = batch(f"t{round_}{setting}", args.batch, on)
                tally = sums[on]
                tally[0] += bound
                tally[1] += seconds
                tally[2] += cpu
                print(
                    f"{round_:5}  {setting:>7}  {bound:4}  {seconds:7.1f}  "
                    f"{bound / seconds:6.0f}  {1000 * cpu / max(1, bound):.2f}",
                    flush=True,
                )
    finally:
        watch.stop()
        client.close()
        collector.terminate()
        collector.wait(15)
    (off_pods, off_s, off_cpu), (on_pods, on_s, on_cpu) = sums[False], sums[True]
    rate_off, rate_on = off_pods / off_s, on_pods / on_s
    cpu_off, cpu_on = 1000 * off_cpu / max(1, off_pods), 1000 * on_cpu / max(1, on_pods)
    print(
        f"\npods/s off {rate_off:.0f}, on {rate_on:.0f}: ratio {rate_on / rate_off:.3f}; "
        f"scheduler CPU ms/pod off {cpu_off:.2f}, on {cpu_on:.2f}: ratio {cpu_on / cpu_off:.3f}"
    )
    return 0 if off_pods == on_pods == args.rounds * args.batch else 1


def measure(
    args: argparse.Namespace, plane: LocalControlPlane, hollow: subprocess.Popen[str]
) -> int:
    client = bench_namespace(plane)
    pods = workload(args.deployment, args.bare)
    watch = BindWatch(client, client.list(PODS, NAMESPACE)["metadata"]["resourceVersion"])
    watch.start()
    components = {
        "store": [m.process.pid for m in plane.store.members if m.process is not None]
        if plane.store
        else [],
        "apiserver": [plane.process.pid] if plane.process else [],
        "controller-manager": [plane.controller_manager.pid] if plane.controller_manager else [],
        "scheduler": [plane.scheduler.pid] if plane.scheduler else [],
        "hollow nodes": [hollow.pid],
    }

    def cpu_now() -> dict[str, float]:
        return {k: sum(cpu_seconds(p) for p in pids) for k, pids in components.items()}

    # The cluster at rest first: what 500 nodes cost with no pod to place.
    at_rest = dict.fromkeys(components, 0.0)
    if args.idle > 0:
        cpu0, requests0, t0 = cpu_now(), request_counts(client), time.monotonic()
        time.sleep(args.idle)
        cpu1, requests1, t1 = cpu_now(), request_counts(client), time.monotonic()
        print(
            f"at rest ({t1 - t0:.0f} s, {thread_count(hollow.pid)} threads in the hollow "
            "process), CPU in cores: "
            + ", ".join(f"{k} {(cpu1[k] - cpu0[k]) / (t1 - t0):.2f}" for k in components)
        )
        print("  requests/s: " + per_kind(requests1 - requests0, t1 - t0, "{:.1f}"))
        at_rest = {k: (cpu1[k] - cpu0[k]) / (t1 - t0) for k in components}
    cpu0, window0 = cpu_now(), time.monotonic()
    requests0 = request_counts(client)
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    created: dict[str, float] = {}
    pace = f"at {args.rate:g}/s" if args.rate else "as fast as they go"
    # At a stated rate each create leaves at its time (open loop): enough threads that
    # slow answers do not hold later creates back (16 made 83/s of 100/s at load 3).
    writers = 64 if args.rate else 16
    print(f"==> creating {len(pods)} pods from {writers} threads, {pace}", flush=True)
    started = time.monotonic()

    def create(numbered: tuple[int, dict[str, Any]]) -> None:
        i, pod = numbered
        if args.rate:  # open loop: each create leaves at its time, answered or not
            delay = started + i / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        client.create(PODS, pod)
        created[pod["metadata"]["name"]] = time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(writers) as pool:
        list(pool.map(create, enumerate(pods)))
    created_all = time.monotonic()
    deadline = created_all + args.timeout
    while len(watch.bound) < len(pods) and time.monotonic() < deadline:
        time.sleep(0.2)
    finished = max(watch.bound.values(), default=time.monotonic())
    elapsed = finished - started
    cpu1, window = cpu_now(), time.monotonic() - window0
    requests1 = request_counts(client)
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    watch.stop()
    latencies = [watch.bound[n] - created[n] for n in watch.bound if n in created]
    bound = len(watch.bound)
    rate = bound / elapsed if elapsed > 0 else 0.0
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    problems = check_placement(client)
    used = {k: cpu1[k] - cpu0[k] for k in components}
    used["load generator"] = self1.ru_utime + self1.ru_stime - self0.ru_utime - self0.ru_stime
    cpu = {k: v / elapsed for k, v in used.items()}
    print(f"\ncreated {len(pods)} pods in {created_all - started:.1f} s")
    print(
        f"bound {bound}/{len(pods)} in {elapsed:.1f} s: {rate:.0f} pods/s "
        f"(target >= {TARGET_RATE:.0f})"
    )
    print(f"create-to-bound p50 {p50:.2f} s, p99 {p99:.2f} s (target p99 < {TARGET_P99:.0f} s)")
    print("CPU (cores, over the run): " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()))
    print(
        "CPU per pod bound (ms): "
        + ", ".join(f"{k} {1000 * v / max(1, bound):.1f}" for k, v in used.items())
    )
    if args.idle > 0:
        print(
            "  above the at-rest cost (ms): "
            + ", ".join(
                f"{k} {1000 * (used[k] - at_rest[k] * window) / max(1, bound):.1f}"
                for k in components
            )
        )
    print("requests per pod bound: " + per_kind(requests1 - requests0, max(1, bound), "{:.2f}"))
    print(
        "placement check: "
        + ("every pod bound where it fits" if not problems else f"{len(problems)} problems")
    )
    for problem in problems[:20]:
        print("  " + problem)
    if args.markdown:
        print(
            f"\n| {args.nodes} | {len(pods)} | {args.rate or 'max'} | "
            f"{len(pods) / (created_all - started):.0f} | {rate:.0f} | {p50:.2f} | {p99:.2f} | "
            + " | ".join(f"{cpu[k]:.2f}" for k in cpu)
            + f" | {'yes' if not problems else 'NO'} |"
        )
    client.close()
    return 0 if not problems and bound == len(pods) else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.scheduler", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--deployment", type=int, default=3000)
    p.add_argument("--bare", type=int, default=2000)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for bindings")
    p.add_argument(
        "--rate",
        type=float,
        default=TARGET_RATE,
        help="pods created per second (0: as fast as they go)",
    )
    p.add_argument(
        "--idle", type=float, default=20.0, help="seconds measured at rest before the pods"
    )
    p.add_argument("--markdown", action="store_true")
    p.add_argument(
        "--tracing",
        action="store_true",
        help="measure what tracing costs the scheduler instead: pods/s off and on",
    )
    p.add_argument("--batch", type=int, default=1000, help="with --tracing: pods per batch")
    p.add_argument("--rounds", type=int, default=2, help="with --tracing: off/on rounds")
    # SIGTERM unwinds like Ctrl-C, so the control plane and hollow nodes are stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
