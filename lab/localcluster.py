"""A store cluster of local `kubelab-store` processes: `make up-local`, and the harness
of the real-process fault tests and the benchmarks.

Each member is a real OS process with its own data dir, talking to its peers over
loopback TCP with mutual TLS (certificates from a throwaway cluster CA made here). The
cluster can kill members (SIGKILL, like a crash) and restart them on the same data.

    python -m lab.localcluster up --dir .lab --members 3
    python -m lab.localcluster status --dir .lab
    python -m lab.localcluster down --dir .lab
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import requests
from prometheus_client.parser import text_string_to_metric_families

from kubelab import pki


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


InitialClusterState = Literal["new", "existing"]


@dataclass
class Member:
    name: str
    client_port: int
    peer_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"https://127.0.0.1:{self.peer_port}"


class LocalCluster:
    def __init__(
        self,
        directory: Path,
        size: int = 3,
        ports: list[tuple[int, int]] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.dir = directory
        ports = ports or [(free_port(), free_port()) for _ in range(size)]
        self.members = [Member(f"store-{i + 1}", c, p) for i, (c, p) in enumerate(ports)]
        self.extra_args = extra_args or []

    # -- set-up --------------------------------------------------------------------

    def prepare(self) -> None:
        """Make the cluster CA and a peer certificate per member (once)."""
        pki_dir = self.dir / "pki"
        if (pki_dir / "ca.crt").exists():
            return
        ca = pki.new_ca("kubelab-store-ca")
        pki.write_pair(ca, pki_dir, "ca")
        for m in self.members:
            cert = pki.issue(
                ca,
                m.name,
                dns_names=["localhost"],
                ip_addresses=["127.0.0.1"],
                server=True,
                client=True,
            )
            pki.write_pair(cert, pki_dir, m.name)

    def command(self, m: Member, initial_cluster_state: InitialClusterState = "new") -> list[str]:
        """`m`'s command line. With `initial_cluster_state="existing"` it joins the running
        cluster (after `member add`): it waits for the leader's snapshot instead of
        bootstrapping."""
        pki_dir = self.dir / "pki"
        initial = ",".join(f"{x.name}={x.peer_url}" for x in self.members)
        joining = []  # "new" is the server's default
        if initial_cluster_state != "new":
            joining = ["--initial-cluster-state", initial_cluster_state]
        return [
            sys.executable,
            "-m",
            "controlplane.store.server",
            "--name", m.name,
            "--data-dir", str(self.dir / m.name),
            "--listen-client-urls", m.client_url,
            "--listen-peer-urls", m.peer_url,
            "--initial-cluster", initial,
            "--peer-cert-file", str(pki_dir / f"{m.name}.crt"),
            "--peer-key-file", str(pki_dir / f"{m.name}.key"),
            "--peer-trusted-ca-file", str(pki_dir / "ca.crt"),
            *joining,
            *self.extra_args,
        ]  # fmt: skip

    # -- processes -----------------------------------------------------------------

    def start(
        self, m: Member, detach: bool = False, initial_cluster_state: InitialClusterState = "new"
    ) -> None:
        self.prepare()
        logf = open(self.dir / f"{m.name}.log", "ab")  # noqa: SIM115 - owned by the child
        m.process = subprocess.Popen(
            self.command(m, initial_cluster_state),
            stdout=logf,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=detach,
        )
        logf.close()
        (self.dir / f"{m.name}.pid").write_text(str(m.process.pid))

    def start_all(self, detach: bool = False) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.prepare()
        for m in self.members:
            self.start(m, detach)

    def kill(self, m: Member, sig: int = signal.SIGKILL) -> None:
        if m.process is not None and m.process.poll() is None:
            m.process.send_signal(sig)
            m.process.wait(timeout=30)
        m.process = None

    def stop_all(self) -> None:
        for m in self.members:
            self.kill(m, signal.SIGTERM)

    def wipe(self, m: Member) -> None:
        """Delete a stopped member's data dir, as if its disk were replaced: it can then
        only come back as a new member (`member add`, then `start(m,
        initial_cluster_state="existing")`)."""
        assert m.process is None, f"{m.name} is still running"
        shutil.rmtree(self.dir / m.name, ignore_errors=True)

    def alive(self) -> list[Member]:
        return [m for m in self.members if m.process is not None and m.process.poll() is None]

    # -- client calls --------------------------------------------------------------

    def call(self, m: Member, path: str, body: dict[str, Any], timeout: float = 10.0) -> Any:
        r = requests.post(m.client_url + path, json=body, timeout=timeout)
        r.raise_for_status()
        return r.json()

    def metrics(self, m: Member) -> dict[str, float]:
        """Every sample of the member's /metrics (see `metric_samples`)."""
        r = requests.get(m.client_url + "/metrics", timeout=5)
        r.raise_for_status()
        return metric_samples(r.text)

    def status(self, m: Member, timeout: float = 2.0) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = self.call(m, "/v3/maintenance/status", {}, timeout)
            return result
        except (requests.RequestException, ValueError):
            return None

    def leader(self, among: list[Member] | None = None) -> Member | None:
        """The member the live members agree leads, if any."""
        by_id: dict[str, Member] = {}
        votes: dict[str, int] = {}
        for m in among or self.alive():
            st = self.status(m)
            if st is None:
                continue
            by_id[st["header"]["member_id"]] = m
            if st["leader"] != "0":
                votes[st["leader"]] = votes.get(st["leader"], 0) + 1
        for lead, _ in sorted(votes.items(), key=lambda kv: -kv[1]):
            if lead in by_id:
                return by_id[lead]
        return None

    def wait_leader(self, timeout: float = 30.0, among: list[Member] | None = None) -> Member:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lead = self.leader(among)
            if lead is not None:
                return lead
            time.sleep(0.05)
        raise TimeoutError(f"no leader elected within {timeout}s; see the logs in {self.dir}")

    def wait_serving(self, m: Member, timeout: float = 30.0) -> None:
        """Wait until `m` answers on its client port (it may still be catching up)."""
        deadline = time.monotonic() + timeout
        while self.status(m) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{m.name} is not serving after {timeout}s; see its log")
            time.sleep(0.05)

    def put(self, m: Member, key: str, value: str, timeout: float = 10.0) -> Any:
        return self.call(
            m,
            "/v3/kv/put",
            {"key": _b64(key), "value": _b64(value)},
            timeout,
        )

    def get(
        self, m: Member, key: str, serializable: bool = False, retry_for: float = 10.0
    ) -> str | None:
        """Read `key` on `m`. Like etcd's client, retry "no leader" (503) and "timed out"
        (504) answers for up to `retry_for` seconds: a member that just restarted or a
        read caught in a leader change gets them before the cluster settles."""
        deadline = time.monotonic() + retry_for
        body = {"key": _b64(key), "serializable": serializable}
        while True:
            try:
                out = self.call(m, "/v3/kv/range", body)
                break
            except requests.HTTPError as exc:
                retriable = exc.response.status_code in (503, 504)
                if not retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        kvs = out.get("kvs")
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def metric_samples(text: str) -> dict[str, float]:
    """Prometheus text as {sample name: value}, labels folded into the name when present
    (`kubelab_store_requests_total{code=200,path=/v3/kv/put}`)."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return samples


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


# -- make up-local / down-local / status-local -----------------------------------------

_DEFAULT_PORTS = [(12379, 12380), (22379, 22380), (32379, 32380)]


def _saved(directory: Path) -> LocalCluster:
    spec = json.loads((directory / "cluster.json").read_text())
    return LocalCluster(directory, ports=[tuple(p) for p in spec["ports"]])


def cmd_up(directory: Path, size: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / "cluster.json").exists():
        cluster = _saved(directory)
    else:
        ports = _DEFAULT_PORTS[:size] + [(free_port(), free_port()) for _ in range(size - 3)]
        cluster = LocalCluster(directory, ports=ports)
        (directory / "cluster.json").write_text(
            json.dumps({"ports": [[m.client_port, m.peer_port] for m in cluster.members]})
        )
    print(f"==> kubelab store: {size} members in {directory}/ (peer traffic over mutual TLS)")
    for i, m in enumerate(cluster.members, 1):
        pid_file = directory / f"{m.name}.pid"
        if pid_file.exists() and pid_alive(int(pid_file.read_text())):
            print(f"    [{i}/{size}] {m.name} already running")
            continue
        cluster.start(m, detach=True)
        print(f"    [{i}/{size}] started {m.name}: clients {m.client_url}, peers {m.peer_url}")
    print("==> waiting for a leader ...", flush=True)
    try:
        lead = cluster.wait_leader(timeout=30, among=cluster.members)
    except TimeoutError as exc:
        raise SystemExit(f"kubelab store did not come up: {exc}") from None
    _check_started(cluster, directory)
    print(f"==> ready: leader is {lead.name}")
    endpoints = ",".join(m.client_url for m in cluster.members)
    print("\nReach it with labctl (etcdctl's verbs) or etcd's v3 JSON API, e.g.:")
    print("  .venv/bin/labctl store put foo bar")
    print("  .venv/bin/labctl store endpoint status -w table")
    print(f'  curl -s {cluster.members[0].client_url}/v3/kv/range -d \'{{"key":"Zm9v"}}\'')
    print(f"Endpoints: {endpoints}")
    print(f"Logs: {directory}/store-*.log    Stop: make down")


def _check_started(cluster: LocalCluster, directory: Path, grace: float = 2.0) -> None:
    """Fail if a member this command started has exited: something else answering on its
    ports (another store, an etcd) would otherwise pass for the lab."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        for m in cluster.members:
            if m.process is not None and m.process.poll() is not None:
                log = (directory / f"{m.name}.log").read_text().strip().splitlines()
                cluster.stop_all()  # leave nothing half-started behind
                raise SystemExit(
                    f"kubelab store did not come up: {m.name} exited ({log[-1] if log else ''})"
                    f"; is another store or etcd using ports {m.client_port}/{m.peer_port}? "
                    "Stop it (make down-local stops this lab) and run make up-local again"
                )
        time.sleep(0.1)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (the lab's pid files may be stale)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def cmd_down(directory: Path) -> None:
    for pid_file in sorted(directory.glob("store-*.pid")):
        pid = int(pid_file.read_text())
        if pid_alive(pid):
            os.kill(pid, signal.SIGTERM)
            print(f"stopped {pid_file.stem} (pid {pid})")
        pid_file.unlink()


def cmd_status(directory: Path) -> None:
    cluster = _saved(directory)
    print(f"{'NAME':10} {'ENDPOINT':24} {'ID':18} {'LEADER':6} {'TERM':>5} {'INDEX':>7}")
    for m in cluster.members:
        st = cluster.status(m)
        if st is None:
            print(f"{m.name:10} {m.client_url:24} unreachable")
            continue
        mid = int(st["header"]["member_id"])
        is_leader = "yes" if st["leader"] == st["header"]["member_id"] else ""
        print(
            f"{m.name:10} {m.client_url:24} {mid:<18x} {is_leader:6} {st['raftTerm']:>5} "
            f"{st['raftIndex']:>7}"
        )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="localcluster")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--dir", type=Path, default=Path(".lab"))
    p.add_argument("--members", type=int, default=3, choices=[1, 3, 5])
    args = p.parse_args(argv)
    if args.action == "up":
        cmd_up(args.dir, args.members)
    elif args.action == "down":
        cmd_down(args.dir)
    else:
        cmd_status(args.dir)


if __name__ == "__main__":
    main()
