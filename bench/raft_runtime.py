"""Benchmark of the store runtime: commit latency, throughput and failover.

Three `kubelab-store` processes on loopback (peer mutual TLS, fsync on every Ready that
needs it). Clients put 256-byte values through the leader's client API with 1, 16 and
64 concurrent requests for a fixed time; then the leader is killed with SIGKILL several
times and the time until a write commits on the survivors is measured.

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
import time
from pathlib import Path

import aiohttp
import requests

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


def measure_failover(cluster: LocalCluster, trials: int) -> list[tuple[float, float]]:
    """(time to a new leader, time to a committed write) after kill -9, per trial."""
    results = []
    for trial in range(trials):
        leader = cluster.wait_leader()
        cluster.put(leader, "warm", "x")
        others: list[Member] = [m for m in cluster.members if m is not leader]
        t0 = time.monotonic()
        cluster.kill(leader)
        new_leader = None
        while new_leader is None:
            new_leader = cluster.leader(others)
        elected = time.monotonic() - t0
        committed = None
        while committed is None:
            try:
                cluster.put(new_leader, f"failover/{trial}", "x", timeout=1.0)
            except (requests.RequestException, ValueError):  # not yet
                new_leader = cluster.leader(others) or new_leader
                continue
            committed = time.monotonic() - t0
        results.append((elected, committed))
        cluster.start(leader)
        time.sleep(1.5)  # let it rejoin before the next trial
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="load duration per level")
    p.add_argument("--trials", type=int, default=5, help="failover trials")
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
        finally:
            cluster.stop_all()


if __name__ == "__main__":
    main()
