"""Benchmark of the store runtime: commit latency, throughput and failover.

Three `kubelab-store` processes on loopback (peer mutual TLS, fsync on every Ready that
needs it). Clients put 256-byte values through the leader's client API with 1, 16 and
64 concurrent requests for a fixed time; then the leader is killed with SIGKILL several
times and the time until a client's write commits on the survivors is measured. Last,
the members' CPU under an idle lab's load (`--rest-seconds`): 1.6 writes and 3.3
linearizable reads a second, the reads spread over the members as the three apiservers
spread theirs, with the regular heartbeats the leader skipped meanwhile.

The figures include the thin HTTP/JSON client API in front of Raft: that is the path
every client of the store takes. Run with `make bench`; the results are recorded in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import statistics
import tempfile
import threading
import time
from pathlib import Path

import aiohttp

from bench import cpu_seconds
from kubelab.storeclient import StoreClient, StoreError
from lab.localcluster import LocalCluster, Member


def _percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def _load(url: str, clients: int, seconds: float) -> tuple[int, list[float], int]:
    value = base64.b64encode(b"v" * 256).decode()
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client(cid: int) -> None:
            nonlocal errors
            n = 0
            while time.monotonic() < deadline:
                key = base64.b64encode(f"bench/{cid}/{n}".encode()).decode()
                n += 1
                t0 = time.perf_counter()
                async with session.post(f"{url}/v3/kv/put", json={"key": key, "value": value}) as r:
                    await r.read()
                    if r.status != 200:
                        errors += 1
                        continue
                latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(client(i) for i in range(clients)))
    return len(latencies), latencies, errors


def measure_writes(cluster: LocalCluster, clients: int, seconds: float) -> dict[str, float]:
    leader = cluster.wait_leader()
    ok, lat, errors = asyncio.run(_load(leader.client_url, clients, seconds))
    return {
        "clients": clients,
        "writes_per_s": ok / seconds,
        "p50_ms": _percentile(lat, 0.5) * 1000,
        "p99_ms": _percentile(lat, 0.99) * 1000,
        "errors": errors,
    }


def failover_trial(cluster: LocalCluster, trial: int) -> tuple[float, float]:
    """Kill -9 the leader; return (seconds until the survivors name a new leader, seconds
    until a client's write commits), then restart the killed member.

    The client is what an application has: a `StoreClient` of every member that was
    writing to the leader, retrying a failed write every 10 ms (a write the client
    reports as possibly applied is retried too: the key is the trial's own). Its
    time therefore includes finding a live member and any request stuck on the dead
    leader, not just the election. The leader is watched meanwhile from another thread.
    """
    leader = cluster.wait_leader()
    others: list[Member] = [m for m in cluster.members if m is not leader]
    urls = [leader.client_url] + [m.client_url for m in others]
    with StoreClient(urls, timeout=1.0) as client:
        client.put("warm", b"x")  # its preferred member is now the leader
        elected: list[float] = []

        def watch_leader() -> None:
            while cluster.leader(others) is None:
                time.sleep(0.01)
            elected.append(time.monotonic() - t0)

        t0 = time.monotonic()
        cluster.kill(leader)
        watcher = threading.Thread(target=watch_leader, name="failover-leader-watch")
        watcher.start()
        while True:
            try:
                client.put(f"failover/{trial}", b"x")
                break
            except StoreError:
                time.sleep(0.01)
        committed = time.monotonic() - t0
        watcher.join()
    cluster.start(leader)
    cluster.wait_serving(leader)
    time.sleep(1.5)  # let it catch up before the next trial
    return elected[0], committed


def measure_failover(cluster: LocalCluster, trials: int) -> list[tuple[float, float]]:
    """(time to a new leader, time to a client's committed write), per trial."""
    return [failover_trial(cluster, trial) for trial in range(trials)]


def _cpu_seconds(m: Member) -> float:
    assert m.process is not None
    return cpu_seconds(m.process.pid)


SKIPPED = "kubelab_store_heartbeats_skipped_total"


def measure_rest(cluster: LocalCluster, seconds: float) -> tuple[dict[str, float], float]:
    """Each member's CPU (% of a core, the leader's name starred) under an idle lab's
    load, and the regular heartbeats the leader skipped a second, per follower."""
    leader = cluster.wait_leader()
    for m in cluster.members:
        cluster.wait_serving(m)
    time.sleep(2.0)  # the catch-up after the failover trials
    cpu = {m.name: _cpu_seconds(m) for m in cluster.members}
    skipped = cluster.metrics(leader)[SKIPPED]
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < seconds:
        cluster.put(leader, f"rest/{n % 50}", "v" * 200)
        for j in range(2):
            cluster.get(cluster.members[(n + j) % len(cluster.members)], f"rest/{n % 50}")
            time.sleep(0.3)
        n += 1
    elapsed = time.monotonic() - started
    usage = {
        m.name + ("*" if m is leader else ""): 100.0 * (_cpu_seconds(m) - cpu[m.name]) / elapsed
        for m in cluster.members
    }
    followers = len(cluster.members) - 1
    return usage, (cluster.metrics(leader)[SKIPPED] - skipped) / elapsed / followers


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="load duration per level")
    p.add_argument("--trials", type=int, default=5, help="failover trials")
    p.add_argument(
        "--rest-seconds", type=float, default=60.0, help="duration of the idle lab's load"
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-") as tmp:
        cluster = LocalCluster(Path(tmp), 3)
        cluster.start_all()
        try:
            cluster.wait_leader()
            print(
                "kubelab store runtime: 3 members on loopback, peer mTLS, fsync on, 256-byte values"
            )
            print(f"{'clients':>7} {'writes/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}")
            for clients in (1, 16, 64):
                r = measure_writes(cluster, clients, args.seconds)
                print(
                    f"{clients:>7} {r['writes_per_s']:>9.0f} {r['p50_ms']:>8.2f} "
                    f"{r['p99_ms']:>8.2f} {r['errors']:>6.0f}"
                )
            fo = measure_failover(cluster, args.trials)
            elect = [e for e, _ in fo]
            commit = [c for _, c in fo]
            print(
                f"failover after kill -9 of the leader ({args.trials} trials, election "
                "timeout 1000 ms, heartbeat 100 ms):"
            )
            print(f"  new leader:       mean {statistics.mean(elect):.2f}s  max {max(elect):.2f}s")
            print(
                f"  committed write:  mean {statistics.mean(commit):.2f}s  "
                f"max {max(commit):.2f}s  (target <= 2 s)"
            )
            usage, skipped = measure_rest(cluster, args.rest_seconds)
            members = ", ".join(f"{name} {percent:.2f}" for name, percent in usage.items())
            print(
                f"an idle lab's load ({args.rest_seconds:.0f} s): CPU {members} % of a core, "
                f"{sum(usage.values()):.2f} % in all; the leader skipped {skipped:.1f} "
                "of each follower's 10 heartbeats a second"
            )
        finally:
            cluster.stop_all()


if __name__ == "__main__":
    main()
