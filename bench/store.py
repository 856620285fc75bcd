"""Benchmark: the kubelab store against a real etcd 3.4 on the same machine, same load.

One run starts a 3-member kubelab store and a 3-member etcd 3.4, drives both with the
same load generator through etcd's v3 JSON gateway API, and prints every figure with its
kubelab/etcd ratio and, where the store issue sets one, its target.

Set-up, identical for both peers:

* Members are real processes on loopback, started, killed and restarted by
  `LocalCluster`; etcd's members by `EtcdLocalCluster`, the same harness with etcd's
  command line. Peer traffic is mutual TLS with the same certificates (the etcd test
  fixture's clusters use plain-HTTP peers, so it is not used here), fsync is on, the
  heartbeat is 100 ms and the election timeout 1000 ms (etcd's defaults and kubelab's).
* Both clusters run for the whole benchmark, but only one is loaded at a time (an idle
  cluster uses about 0.03 cores). Each level is run on kubelab and on etcd back to back,
  `--rounds` times in alternating order, and the rounds are pooled: the two cores are
  shared with whatever else runs on the machine, and interleaving makes a change in that
  background load hit both peers alike instead of skewing the ratio.
* The load generator is a pool of worker processes (`--processes`, default 2), each an
  asyncio/aiohttp client running its share of the concurrent clients in closed loops
  (send, wait for the answer, send the next) for `--seconds` from a common start time,
  on connections opened beforehand. Several processes because one Python client process
  would saturate before etcd does. The generator shares the two cores with the servers,
  so its CPU use is printed too: it is busier against etcd (which answers faster), which
  caps etcd's figures more than kubelab's, so the ratios flatter kubelab if anything.
* Writes: puts of 256-byte values to fresh keys, sent to the leader (found with
  /v3/maintenance/status). Reads: linearizable ranges of one of 100 preloaded keys,
  spread over the members (client i asks member i mod 3, the leader being member 0, so
  a lone client reads from the leader on both peers); followers' reads go through the
  leader's read index, as they do for an API server talking to its local member.
  1, 16 and 64 concurrent clients; ops/s, p50 and p99 latency.
* Watch delivery latency: a watch on a prefix, opened on a follower with the project's
  `StoreClient`; writers (`--watch-clients`) put values holding the wall-clock time just
  before the put is sent; latency is the time the event is read from the stream minus
  that (same machine, same clock). It therefore includes the put's own commit latency.
* Failover: `raft_runtime.failover_trial`: kill -9 the leader, time until the
  survivors name a new leader and until the write of a client that was using the
  leader commits (it retries every 10 ms on whichever member answers), restart the
  killed member; `--trials` times, kubelab's and etcd's trials alternating.
* CPU: user+system time of the member processes (from /proc) and of the generator
  during each level, and the machine's busy time, so that a miss can be told apart as
  "needs more CPU per request" or "waits for something", and so that a run disturbed by
  other processes shows it.

Targets (the store issues): write throughput at least 0.5x etcd's at 16 and 64 clients,
p99 write latency at most 2x etcd's, the first write after a failover within 2 s and,
on average, no later than etcd's.

    python -m bench.store [--seconds 5] [--rounds 2] [--trials 5] [--markdown]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import math
import multiprocessing
import os
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench import cpu_seconds
from bench.raft_runtime import failover_trial
from kubelab.storeclient import Get, Put, StoreClient, StoreError
from lab.localcluster import LocalCluster, Member

LEVELS = (1, 16, 64)
VALUE_BYTES = 256
READ_KEYS = 100
WATCH_PREFIX = b"watch/"
ETCD = shutil.which("etcd")


class EtcdLocalCluster(LocalCluster):
    """`LocalCluster` running etcd 3.4 members: same ports, certificates, kill/restart and
    leader discovery (etcd's gateway answers /v3/maintenance/status in the same shape),
    so both peers are handled by one piece of code, down to the failover measurement.

    A restarted member finds its data dir and ignores the initial-cluster flags, as a
    restarted kubelab member does."""

    def __init__(self, directory: Path, size: int = 3) -> None:
        super().__init__(directory, size)
        for i, m in enumerate(self.members):
            m.name = f"etcd-{i + 1}"

    def status(self, m: Member, timeout: float = 2.0) -> dict[str, Any] | None:
        """etcd's gateway leaves fields at their proto3 default out: no "leader" while a
        member knows of none (mid-election), where `LocalCluster` expects "0"."""
        st = super().status(m, timeout)
        if st is not None:
            st.setdefault("leader", "0")
        return st

    def command(self, m: Member, initial_cluster_state: str = "new") -> list[str]:
        assert ETCD is not None
        pki_dir = self.dir / "pki"
        initial = ",".join(f"{x.name}={x.peer_url}" for x in self.members)
        return [
            ETCD,
            "--name", m.name,
            "--data-dir", str(self.dir / m.name),
            "--listen-client-urls", m.client_url,
            "--advertise-client-urls", m.client_url,
            "--listen-peer-urls", m.peer_url,
            "--initial-advertise-peer-urls", m.peer_url,
            "--initial-cluster", initial,
            "--initial-cluster-state", initial_cluster_state,
            "--initial-cluster-token", "kubelab-bench",
            "--peer-cert-file", str(pki_dir / f"{m.name}.crt"),
            "--peer-key-file", str(pki_dir / f"{m.name}.key"),
            "--peer-trusted-ca-file", str(pki_dir / "ca.crt"),
            "--peer-client-cert-auth",
            "--heartbeat-interval", "100",
            "--election-timeout", "1000",
            "--logger", "zap",
            "--log-outputs", "stderr",
        ]  # fmt: skip


# -- the load generator (runs in the worker processes) -----------------------------------


@dataclass(frozen=True)
class Job:
    """One worker process's share of a load level."""

    op: str  # "put", "range" or "watch-put" (a put whose value is its send time)
    prefix: str  # of the keys put, so that every run writes fresh keys
    urls: tuple[str, ...]  # client i sends to urls[i % len(urls)]
    first_client: int
    clients: int
    start_at: float  # time.time() at which every worker starts sending
    seconds: float


@dataclass(frozen=True)
class JobResult:
    latencies: list[float]
    errors: int
    elapsed: float
    cpu_seconds: float


def _body(job: Job, client: int, n: int) -> dict[str, Any]:
    if job.op == "range":
        return Get(f"read/{(client + n) % READ_KEYS}".encode()).body()
    key = f"{job.prefix}/{client}/{n}".encode()
    if job.op == "watch-put":
        return Put(key, f"{time.time():.6f}".encode().ljust(VALUE_BYTES)).body()
    return Put(key, b"v" * VALUE_BYTES).body()


async def _drive(job: Job) -> tuple[list[float], int, float, float]:
    path = "/v3/kv/range" if job.op == "range" else "/v3/kv/put"
    latencies: list[float] = []
    errors = 0
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=timeout
    ) as session:
        clients = range(job.first_client, job.first_client + job.clients)
        # Open every client's keep-alive connection before the clock starts.
        warm_ups = [
            session.post(job.urls[c % len(job.urls)] + "/v3/maintenance/status", json={})
            for c in clients
        ]
        for response in await asyncio.gather(*warm_ups):
            response.release()
        await asyncio.sleep(max(0.0, job.start_at - time.time()))
        cpu0 = _own_cpu_seconds()
        deadline = job.start_at + job.seconds

        async def client(c: int) -> None:
            nonlocal errors
            url = job.urls[c % len(job.urls)] + path
            n = 0
            while time.time() < deadline:
                body = _body(job, c, n)
                n += 1
                t0 = time.perf_counter()
                try:
                    async with session.post(url, json=body) as r:
                        await r.read()
                        ok = r.status == 200
                except (aiohttp.ClientError, TimeoutError):
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - t0)
                else:
                    errors += 1

        await asyncio.gather(*(client(c) for c in clients))
        return latencies, errors, time.time() - job.start_at, _own_cpu_seconds() - cpu0


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _run_job(job: Job) -> JobResult:
    return JobResult(*asyncio.run(_drive(job)))


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops the clusters and then the pool."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# -- measuring ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One run of a load level on one peer."""

    latencies: list[float]
    errors: int
    elapsed: float
    server_cpu: float  # seconds of CPU the members used
    generator_cpu: float
    machine_cpu: float  # busy CPU machine-wide: ours, plus whatever else runs


@dataclass(frozen=True)
class Level:
    """A load level's figures, pooled over its rounds."""

    ops_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    server_cores: float  # in cores, of the machine's 2
    generator_cores: float
    machine_cores: float

    @classmethod
    def pooled(cls, samples: list[Sample]) -> Level:
        latencies = [x for s in samples for x in s.latencies]
        elapsed = sum(s.elapsed for s in samples)
        p50, p99 = _p50_p99(latencies)
        return cls(
            ops_per_s=len(latencies) / elapsed,
            p50_ms=p50 * 1000,
            p99_ms=p99 * 1000,
            errors=sum(s.errors for s in samples),
            server_cores=sum(s.server_cpu for s in samples) / elapsed,
            generator_cores=sum(s.generator_cpu for s in samples) / elapsed,
            machine_cores=sum(s.machine_cpu for s in samples) / elapsed,
        )


@dataclass(frozen=True)
class PeerResult:
    """Everything measured on one peer."""

    writes: dict[int, Level]
    reads: dict[int, Level]
    watch_p50_ms: float
    watch_p99_ms: float
    watch_missing: int  # acknowledged puts whose event never arrived
    failover: list[tuple[float, float]]  # (new leader, committed write) seconds per trial
    version: str  # as the members report it in /v3/maintenance/status


def _p50_p99(samples: list[float]) -> tuple[float, float]:
    if len(samples) < 2:
        return math.nan, math.nan
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return q[49], q[98]


def _machine_cpu_seconds() -> float:
    """Busy CPU time of the whole machine so far (/proc/stat: all but idle and iowait)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(x) for x in Path("/proc/stat").read_text().split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _server_cpu_seconds(cluster: LocalCluster) -> float:
    """User+system CPU of the live members so far."""
    return sum(cpu_seconds(m.process.pid) for m in cluster.alive() if m.process is not None)


@dataclass(frozen=True)
class LoadGenerator:
    """The worker pool, driving one cluster at a time."""

    pool: concurrent.futures.Executor
    processes: int
    seconds: float

    def run(
        self, cluster: LocalCluster, op: str, urls: list[str], clients: int, prefix: str
    ) -> Sample:
        """Run `clients` closed-loop clients, split over the worker processes, for
        `seconds`; the members' CPU is that of `cluster`."""
        start_at = time.time() + 1.0  # room for the workers to connect first
        jobs, first = [], 0
        for i in range(self.processes):
            share = clients // self.processes + (1 if i < clients % self.processes else 0)
            if share:
                jobs.append(Job(op, prefix, tuple(urls), first, share, start_at, self.seconds))
                first += share
        futures = [self.pool.submit(_run_job, job) for job in jobs]
        time.sleep(max(0.0, start_at - time.time()))
        server0, machine0 = _server_cpu_seconds(cluster), _machine_cpu_seconds()
        results = [f.result() for f in futures]
        return Sample(
            latencies=[x for r in results for x in r.latencies],
            errors=sum(r.errors for r in results),
            elapsed=max(r.elapsed for r in results),
            server_cpu=_server_cpu_seconds(cluster) - server0,
            generator_cpu=sum(r.cpu_seconds for r in results),
            machine_cpu=_machine_cpu_seconds() - machine0,
        )


def measure_watch(
    load: LoadGenerator, cluster: LocalCluster, writers: int
) -> tuple[list[float], int]:
    """Delivery latencies of a prefix watch on a follower while `writers` put to the
    leader, and how many acknowledged puts were never delivered."""
    leader = cluster.wait_leader()
    follower = next(m for m in cluster.members if m is not leader)
    latencies: list[float] = []
    failures: list[StoreError] = []
    with (
        StoreClient([follower.client_url]) as client,
        client.watch(WATCH_PREFIX, prefix=True) as watch,
    ):
        if not next(watch).created:
            raise RuntimeError(f"{follower.name}: the watch was not created")

        def consume() -> None:
            try:
                for response in watch:
                    now = time.time()
                    latencies.extend(now - float(e.kv.value) for e in response.events)
            except StoreError as exc:
                failures.append(exc)

        reader = threading.Thread(target=consume, name="watch-reader")
        reader.start()
        prefix = WATCH_PREFIX.decode() + "w"
        sample = load.run(cluster, "watch-put", [leader.client_url], writers, prefix)
        put = len(sample.latencies)
        deadline = time.monotonic() + 5.0
        while len(latencies) < put and time.monotonic() < deadline and not failures:
            time.sleep(0.05)
        watch.close()
        reader.join()
    if failures:
        raise failures[0]
    return latencies, max(0, put - len(latencies))


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure_levels(
    load: LoadGenerator, clusters: dict[str, LocalCluster], rounds: int
) -> dict[tuple[str, str, int], Level]:
    """Writes and reads at each concurrency, by (peer, op, clients): each level on every
    peer back to back, `rounds` times in alternating order, pooled."""
    leaders = {name: cluster.wait_leader() for name, cluster in clusters.items()}
    levels = {}
    for op in ("put", "range"):
        for clients in LEVELS:
            samples: dict[str, list[Sample]] = {name: [] for name in clusters}
            for r in range(rounds):
                for name in list(clusters)[:: 1 if r % 2 == 0 else -1]:
                    lead = leaders[name]
                    urls = [lead.client_url]
                    if op == "range":
                        urls += [m.client_url for m in clusters[name].members if m is not lead]
                    prefix = f"bench/{r}/{clients}"
                    samples[name].append(load.run(clusters[name], op, urls, clients, prefix))
            for name in clusters:
                lv = levels[name, op, clients] = Level.pooled(samples[name])
                _progress(
                    f"  {name}: {op}, {_clients(clients)}: {lv.ops_per_s:.0f}/s, "
                    f"p50 {lv.p50_ms:.1f} ms, p99 {lv.p99_ms:.1f} ms, errors {lv.errors}, "
                    f"servers {lv.server_cores:.2f} cores, generator {lv.generator_cores:.2f}, "
                    f"machine {lv.machine_cores:.2f}"
                )
    return levels


def compare(
    clusters: dict[str, LocalCluster], load: LoadGenerator, args: argparse.Namespace
) -> dict[str, PeerResult]:
    """Every measurement on every peer: the load levels and the failover trials
    interleaved, then each peer's watch latency."""
    versions = {}
    for name, cluster in clusters.items():
        leader = cluster.wait_leader()
        for m in cluster.members:
            cluster.wait_serving(m)
        status = cluster.status(leader)
        versions[name] = status["version"] if status else "?"
        with StoreClient([leader.client_url]) as client:
            for i in range(READ_KEYS):
                client.put(f"read/{i}", b"r" * VALUE_BYTES)
    levels = measure_levels(load, clusters, args.rounds)
    failovers: dict[str, list[tuple[float, float]]] = {name: [] for name in clusters}
    names = list(clusters)
    for trial in range(args.trials):
        for name in names if trial % 2 == 0 else names[::-1]:
            elected, committed = failover_trial(clusters[name], trial)
            failovers[name].append((elected, committed))
            _progress(f"  {name}: failover: leader {elected:.2f} s, write {committed:.2f} s")
    results = {}
    for name, cluster in clusters.items():
        watch, missing = measure_watch(load, cluster, args.watch_clients)
        watch_p50, watch_p99 = _p50_p99(watch)
        _progress(
            f"  {name}: watch delivery: {len(watch)} events, p50 {watch_p50 * 1000:.1f} ms, "
            f"p99 {watch_p99 * 1000:.1f} ms, missing {missing}"
        )
        failover = failovers[name]
        results[name] = PeerResult(
            writes={c: levels[name, "put", c] for c in LEVELS},
            reads={c: levels[name, "range", c] for c in LEVELS},
            watch_p50_ms=watch_p50 * 1000,
            watch_p99_ms=watch_p99 * 1000,
            watch_missing=missing,
            failover=failover,
            version=versions[name],
        )
    return results


# -- the table ---------------------------------------------------------------------------


def _clients(n: int) -> str:
    return "1 client" if n == 1 else f"{n} clients"


def _fmt(value: float, unit: str) -> str:
    if math.isnan(value):
        return "-"
    if unit == "/s":
        return f"{value:.0f}"
    if unit == "ms":
        return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"
    return f"{value:.2f} s"


def _row(
    metric: str,
    kubelab: float,
    etcd: float,
    unit: str,
    *,
    min_ratio: float | None = None,
    max_ratio: float | None = None,
    max_value: float | None = None,
) -> list[str]:
    """One table row; the target, if any, is a bound on the ratio or on kubelab's value."""
    ratio = kubelab / etcd if etcd else math.nan
    target = ""
    if min_ratio is not None:
        target = f">= {min_ratio}x: " + ("met" if ratio >= min_ratio else "MISSED")
    elif max_ratio is not None:
        target = f"<= {max_ratio}x: " + ("met" if ratio <= max_ratio else "MISSED")
    elif max_value is not None:
        target = f"<= {_fmt(max_value, unit)}: " + ("met" if kubelab <= max_value else "MISSED")
    shown = "-" if math.isnan(ratio) else f"{ratio:.2f}x"
    return [metric, _fmt(kubelab, unit), _fmt(etcd, unit), shown, target]


def table_rows(k: PeerResult, e: PeerResult) -> list[list[str]]:
    rows = []
    for clients in LEVELS:
        kw, ew = k.writes[clients], e.writes[clients]
        each = _clients(clients)
        rows += [
            _row(
                f"writes/s, {each}",
                kw.ops_per_s,
                ew.ops_per_s,
                "/s",
                min_ratio=0.5 if clients > 1 else None,
            ),
            _row(f"write p50, {each}", kw.p50_ms, ew.p50_ms, "ms"),
            _row(f"write p99, {each}", kw.p99_ms, ew.p99_ms, "ms", max_ratio=2.0),
        ]
    for clients in LEVELS:
        kr, er = k.reads[clients], e.reads[clients]
        each = _clients(clients)
        rows += [
            _row(f"linearizable reads/s, {each}", kr.ops_per_s, er.ops_per_s, "/s"),
            _row(f"read p50, {each}", kr.p50_ms, er.p50_ms, "ms"),
            _row(f"read p99, {each}", kr.p99_ms, er.p99_ms, "ms"),
        ]
    rows += [
        _row("watch delivery p50", k.watch_p50_ms, e.watch_p50_ms, "ms"),
        _row("watch delivery p99", k.watch_p99_ms, e.watch_p99_ms, "ms"),
    ]
    for i, what in enumerate(("new leader", "client's write committed")):
        ks, es = [t[i] for t in k.failover], [t[i] for t in e.failover]
        target = 2.0 if i == 1 else None
        rows += [
            _row(
                f"failover: {what}, mean",
                statistics.mean(ks),
                statistics.mean(es),
                "s",
                max_ratio=1.0,
            ),
            _row(f"failover: {what}, max", max(ks), max(es), "s", max_value=target),
        ]
    return rows


def cpu_rows(k: PeerResult, e: PeerResult) -> list[list[str]]:
    """Where the CPU went: cores busy in servers and generator, server CPU per request."""
    rows = []
    for what, ks, es in (("writes", k.writes, e.writes), ("reads", k.reads, e.reads)):
        for clients in LEVELS:
            kl, el = ks[clients], es[clients]
            rows.append(
                [
                    f"{what}, {_clients(clients)}",
                    f"{kl.server_cores:.2f} + {kl.generator_cores:.2f} of {kl.machine_cores:.2f}",
                    f"{el.server_cores:.2f} + {el.generator_cores:.2f} of {el.machine_cores:.2f}",
                    f"{kl.server_cores / kl.ops_per_s * 1e6:.0f} us",
                    f"{el.server_cores / el.ops_per_s * 1e6:.0f} us",
                ]
            )
    return rows


def render(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    )


# -- main --------------------------------------------------------------------------------


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM: stop the clusters on the way out, as for Ctrl-C


def measure_both(args: argparse.Namespace) -> dict[str, PeerResult]:
    """Start both clusters and the load generator, compare, and stop every member on the
    way out, whatever happens."""
    spawn = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory(prefix="kubelab-bench-store-") as tmp,
        concurrent.futures.ProcessPoolExecutor(
            args.processes, mp_context=spawn, initializer=_ignore_sigint
        ) as pool,
    ):
        # Workers start on demand: start them all now, not in the first measured level.
        for started in [pool.submit(time.sleep, 0.5) for _ in range(args.processes)]:
            started.result()
        clusters = {
            "kubelab": LocalCluster(Path(tmp) / "kubelab", 3),
            "etcd": EtcdLocalCluster(Path(tmp) / "etcd", 3),
        }
        try:
            for name, cluster in clusters.items():
                _progress(f"{name}: starting 3 members in {cluster.dir}")
                cluster.start_all()
            return compare(clusters, LoadGenerator(pool, args.processes, args.seconds), args)
        finally:
            for cluster in clusters.values():
                cluster.stop_all()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="duration of each load level")
    p.add_argument("--rounds", type=int, default=2, help="runs of each level on each peer")
    p.add_argument("--trials", type=int, default=5, help="failover trials per peer")
    p.add_argument("--processes", type=int, default=2, help="load generator processes")
    p.add_argument("--watch-clients", type=int, default=1, help="writers during the watch")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    args = p.parse_args(argv)
    if ETCD is None:
        raise SystemExit("etcd is not installed (Debian: apt-get install etcd-server)")
    signal.signal(signal.SIGTERM, _interrupt)
    began = time.monotonic()
    try:
        results = measure_both(args)
    except KeyboardInterrupt:
        raise SystemExit("interrupted; every member was stopped") from None
    k, e = results["kubelab"], results["etcd"]
    print(
        f"\nkubelab store ({k.version}) vs etcd {e.version}: 3 members each on loopback, "
        f"peer mTLS, fsync on, {VALUE_BYTES}-byte values, JSON gateway API, {args.seconds:g} s "
        f"per level x {args.rounds} rounds, {args.processes} load processes, "
        f"{args.trials} failover trials"
    )
    print(render(["metric", "kubelab", "etcd", "ratio", "target"], table_rows(k, e), args.markdown))
    print(
        "\nCPU busy, in cores of the machine's 2: the 3 members + the load generator, of all "
        "busy cores machine-wide (the rest is other processes); server CPU per request"
    )
    header = ["level", "kubelab", "etcd", "kubelab/op", "etcd/op"]
    print(render(header, cpu_rows(k, e), args.markdown))
    for name, r in results.items():
        errors = sum(lv.errors for lv in [*r.writes.values(), *r.reads.values()])
        if errors or r.watch_missing:
            print(f"{name}: {errors} failed requests, {r.watch_missing} undelivered watch events")
    print(f"\nfull run: {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
