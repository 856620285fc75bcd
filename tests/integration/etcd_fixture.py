"""Throwaway real-etcd clusters for tests, on free loopback ports in a temporary dir.

The client and CLI tests run against a real etcd so that what they assert is etcd's
behaviour, not our reading of its docs; the same tests then hold kubelab's store to it.

    cluster = start_etcd_cluster(tmp_path, members=3)
    try:
        ... cluster.endpoints ...
    finally:
        cluster.stop()

`start_etcd_cluster` returns once every member answers ``GET /health`` with
``{"health": "true"}``, which etcd only does with a leader and after a quorum read went
through Raft, so the cluster is ready for writes. Ports are picked by binding port 0 and
releasing it; if another process grabs one before etcd binds it, etcd exits with
"address already in use" and the cluster is started again on new ports.

With ``tls=True`` clients must use HTTPS, present a certificate signed by the cluster's
CA (``--client-cert-auth``), and verify the server against it: `ca_file`, `cert_file`,
`key_file` are the files a client needs. Peers talk plain HTTP (this is about clients).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from kubelab import pki
from lab.localcluster import free_port

ETCD = shutil.which("etcd")
ETCDCTL = shutil.which("etcdctl")


class EtcdStartError(RuntimeError):
    """etcd did not come up; the message quotes the end of the failing member's log."""


@dataclass
class EtcdMember:
    name: str
    client_url: str
    peer_url: str
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class EtcdCluster:
    directory: Path
    members: list[EtcdMember]
    pki_dir: Path | None = None
    """With TLS: ca.crt, server.crt/key (the members') and client.crt/key."""
    token: str = "kubelab-test"
    stopped: bool = field(default=False, init=False)

    @property
    def tls(self) -> bool:
        return self.pki_dir is not None

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    def _pki_file(self, name: str) -> Path | None:
        return self.pki_dir / name if self.pki_dir is not None else None

    @property
    def ca_file(self) -> Path | None:
        return self._pki_file("ca.crt")

    @property
    def cert_file(self) -> Path | None:
        return self._pki_file("client.crt")

    @property
    def key_file(self) -> Path | None:
        return self._pki_file("client.key")

    # -- members -------------------------------------------------------------------------

    def new_member(self, name: str) -> EtcdMember:
        """A member with fresh ports and paths, not yet started nor part of the cluster."""
        scheme = "https" if self.tls else "http"
        return EtcdMember(
            name=name,
            client_url=f"{scheme}://127.0.0.1:{free_port()}",
            peer_url=f"http://127.0.0.1:{free_port()}",
            data_dir=self.directory / f"{name}.etcd",
            log_path=self.directory / f"{name}.log",
        )

    def _command(self, m: EtcdMember, initial: list[EtcdMember], state: str) -> list[str]:
        assert ETCD is not None
        cmd = [
            ETCD,
            "--name", m.name,
            "--data-dir", str(m.data_dir),
            "--listen-client-urls", m.client_url,
            "--advertise-client-urls", m.client_url,
            "--listen-peer-urls", m.peer_url,
            "--initial-advertise-peer-urls", m.peer_url,
            "--initial-cluster", ",".join(f"{x.name}={x.peer_url}" for x in initial),
            "--initial-cluster-state", state,
            "--initial-cluster-token", self.token,
            "--logger", "zap",
            "--log-outputs", "stderr",
        ]  # fmt: skip
        if self.pki_dir is not None:
            pki_dir = self.pki_dir
            cmd += [
                "--cert-file", str(pki_dir / "server.crt"),
                "--key-file", str(pki_dir / "server.key"),
                "--trusted-ca-file", str(pki_dir / "ca.crt"),
                "--client-cert-auth",
            ]  # fmt: skip
        return cmd

    def _spawn(self, m: EtcdMember, initial: list[EtcdMember], state: str) -> None:
        with open(m.log_path, "ab") as log:
            m.process = subprocess.Popen(
                self._command(m, initial, state),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def join(self, m: EtcdMember, timeout: float = 30.0) -> None:
        """Start `m`, already added with ``member add``, and wait until it is healthy."""
        self._spawn(m, [*self.members, m], "existing")
        self.members.append(m)
        self.wait_healthy([m], timeout)

    def stop_member(self, m: EtcdMember) -> None:
        """SIGTERM, then SIGKILL after 10 s; etcd shuts down cleanly on SIGTERM."""
        if m.process is None:
            return
        if m.process.poll() is None:
            m.process.send_signal(signal.SIGTERM)
            try:
                m.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                m.process.kill()
                m.process.wait(timeout=10)
        m.process = None

    def stop(self) -> None:
        for m in self.members:
            self.stop_member(m)
        self.stopped = True

    # -- health --------------------------------------------------------------------------

    def _healthy(self, m: EtcdMember) -> bool:
        verify: str | bool = str(self.ca_file) if self.ca_file else True
        cert = (str(self.cert_file), str(self.key_file)) if self.tls else None
        try:
            r = requests.get(m.client_url + "/health", timeout=2, verify=verify, cert=cert)
            return r.status_code == 200 and r.json().get("health") == "true"
        except (requests.RequestException, ValueError):
            return False

    def wait_healthy(self, members: list[EtcdMember] | None = None, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        pending = list(members if members is not None else self.members)
        while pending:
            for m in list(pending):
                if not m.alive():
                    raise EtcdStartError(
                        f"etcd member {m.name} exited during start-up; its log ends:\n"
                        + m.log_tail()
                    )
                if self._healthy(m):
                    pending.remove(m)
            if pending and time.monotonic() > deadline:
                names = ", ".join(m.name for m in pending)
                raise EtcdStartError(
                    f"etcd member(s) {names} not healthy after {timeout}s; "
                    f"{pending[0].name}'s log ends:\n{pending[0].log_tail()}"
                )
            time.sleep(0.05)


def _write_pki(directory: Path) -> None:
    ca = pki.new_ca("etcd-test-ca")
    pki.write_pair(ca, directory, "ca")
    # etcd's JSON gateway dials the member's own gRPC port presenting the member's
    # certificate, so with --client-cert-auth that certificate must allow client use too.
    server = pki.issue(
        ca, "etcd", dns_names=["localhost"], ip_addresses=["127.0.0.1"], server=True, client=True
    )
    pki.write_pair(server, directory, "server")
    pki.write_pair(pki.issue(ca, "labctl", client=True), directory, "client")


def start_etcd_cluster(
    directory: Path, members: int = 1, *, tls: bool = False, timeout: float = 30.0
) -> EtcdCluster:
    """Start `members` etcd processes in `directory` and wait until all are healthy.

    Raises `EtcdStartError` (with the log's tail) if etcd is missing or does not come up.
    Always pair with `EtcdCluster.stop`.
    """
    if ETCD is None:
        raise EtcdStartError("etcd is not installed (Debian: apt-get install etcd-server)")
    directory.mkdir(parents=True, exist_ok=True)
    pki_dir = directory / "pki" if tls else None
    if pki_dir is not None:
        _write_pki(pki_dir)
    for attempt in range(3):
        cluster = EtcdCluster(directory / f"try{attempt}", [], pki_dir)
        cluster.directory.mkdir()
        cluster.members = [cluster.new_member(f"etcd{i + 1}") for i in range(members)]
        for m in cluster.members:
            cluster._spawn(m, cluster.members, "new")
        try:
            cluster.wait_healthy(timeout=timeout)
            return cluster
        except EtcdStartError as exc:
            cluster.stop()
            if "address already in use" not in str(exc):
                raise
    raise EtcdStartError("etcd could not bind free loopback ports after 3 tries")
