"""A control plane on this machine: the store and an apiserver as local processes, with
the cluster's PKI and an admin kubeconfig, the way kubeadm lays them out.

    .lab/pki/           ca.crt/key (cluster CA), apiserver.crt/key, admin.crt/key,
                        sa.key/sa.pub (service-account token signing)
    .lab/admin.conf     kubeconfig for the real kubectl (O=system:masters)
    .lab/store/         the store's members (see `controlplane.store.localcluster`)
    .lab/apiserver.log  the apiserver's log; .lab/audit.log its audit log

`make up` uses it until the Docker lab lands; the integration tests and `bench/apiserver`
start their own in a temporary directory. The apiserver can also be pointed at an existing
store (a real etcd, say) with `etcd_servers`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from controlplane.store.localcluster import LocalCluster
from kubelab import pki
from kubelab.client import write_kubeconfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class StartError(RuntimeError):
    """A process of the control plane did not come up; the message quotes its log."""


class LocalControlPlane:
    def __init__(
        self,
        directory: Path,
        *,
        store_members: int = 3,
        etcd_servers: list[str] | None = None,
        port: int | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.dir = directory
        self.pki = directory / "pki"
        self.port = port or free_port()
        self.store = None if etcd_servers else LocalCluster(directory / "store", size=store_members)
        self.etcd_servers = etcd_servers or [m.client_url for m in self.store.members]  # type: ignore[union-attr]
        self.extra_args = extra_args or []
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "admin.conf"

    @property
    def log_path(self) -> Path:
        return self.dir / "apiserver.log"

    def make_pki(self) -> None:
        """The cluster CA, the apiserver's serving cert, the admin's client cert and the
        service-account signing key (kept if they exist: re-running keeps the cluster)."""
        if not (self.pki / "ca.crt").exists():
            self._new_pki()
        # Rewritten every time: the port (and so the server URL) may have changed.
        ca, admin = pki.load_pair(self.pki, "ca"), pki.load_pair(self.pki, "admin")
        write_kubeconfig(
            self.kubeconfig,
            cluster_name="kubelab",
            server=self.server,
            ca_data=ca.cert_pem(),
            user_name="kubernetes-admin",
            client_cert_data=admin.cert_pem(),
            client_key_data=admin.key_pem(),
        )

    def _new_pki(self) -> None:
        ca = pki.new_ca("kubernetes")
        serving = pki.issue(
            ca,
            "kube-apiserver",
            server=True,
            dns_names=[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ip_addresses=["127.0.0.1", "10.96.0.1"],
        )
        pki.write_pair(serving, self.pki, "apiserver")
        admin = pki.issue(ca, "kubernetes-admin", organizations=["system:masters"], client=True)
        pki.write_pair(admin, self.pki, "admin")
        kubelet_client = pki.issue(
            ca,
            "kube-apiserver-kubelet-client",
            organizations=["kubeadm:cluster-admins"],
            client=True,
        )
        pki.write_pair(kubelet_client, self.pki, "apiserver-kubelet-client")
        sa = ec.generate_private_key(ec.SECP256R1())
        pki.write_atomic(
            self.pki / "sa.key",
            sa.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
            0o600,
        )
        pki.write_atomic(
            self.pki / "sa.pub",
            sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
            0o644,
        )
        # The CA last: its presence means the rest is complete.
        pki.write_pair(ca, self.pki, "ca")

    def command(self) -> list[str]:
        p = self.pki
        return [
            sys.executable,
            "-m",
            "controlplane.apiserver.server",
            "--etcd-servers",
            ",".join(self.etcd_servers),
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(self.port),
            "--advertise-address",
            "127.0.0.1",
            "--tls-cert-file",
            str(p / "apiserver.crt"),
            "--tls-private-key-file",
            str(p / "apiserver.key"),
            "--client-ca-file",
            str(p / "ca.crt"),
            "--service-account-key-file",
            str(p / "sa.pub"),
            "--service-account-signing-key-file",
            str(p / "sa.key"),
            "--kubelet-client-certificate",
            str(p / "apiserver-kubelet-client.crt"),
            "--kubelet-client-key",
            str(p / "apiserver-kubelet-client.key"),
            "--kubelet-certificate-authority",
            str(p / "ca.crt"),
            "--audit-log-path",
            str(self.dir / "audit.log"),
            *self.extra_args,
        ]

    def start(self, timeout: float = 60.0, detach: bool = False) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.make_pki()
        if self.store is not None:
            self.store.start_all(detach=detach)
            self.store.wait_leader(timeout=timeout)
        log_file = self.log_path.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            self.command(),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=detach,
        )
        log_file.close()
        (self.dir / "apiserver.pid").write_text(str(self.process.pid))
        self.wait_ready(timeout)

    def session(self) -> requests.Session:
        """An admin HTTP session (client certificate) for direct API calls."""
        s = requests.Session()
        s.trust_env = False  # REQUESTS_CA_BUNDLE would replace the cluster CA
        s.verify = str(self.pki / "ca.crt")
        s.cert = (str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return s

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        s = self.session()
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise StartError(
                    f"the apiserver exited ({self.process.returncode}):\n" + self.log_tail()
                )
            try:
                if s.get(f"{self.server}/readyz", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise StartError(f"the apiserver was not ready within {timeout:.0f}s:\n" + self.log_tail())

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop_apiserver(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def stop(self) -> None:
        self.stop_apiserver()
        if self.store is not None:
            self.store.stop_all()


# -- make up / down --------------------------------------------------------------------


def _store_endpoints(directory: Path) -> list[str]:
    spec = json.loads((directory / "store" / "cluster.json").read_text())
    return [f"http://127.0.0.1:{client}" for client, _ in spec["ports"]]


def cmd_up(directory: Path, port: int) -> None:
    pid_file = directory / "apiserver.pid"
    plane = LocalControlPlane(directory, etcd_servers=_store_endpoints(directory), port=port)
    if pid_file.exists() and _alive(int(pid_file.read_text())):
        print(f"==> apiserver already running at {plane.server}")
    else:
        print(f"==> starting the apiserver at {plane.server} (log: {plane.log_path})", flush=True)
        try:
            plane.start(detach=True)
        except StartError as exc:
            plane.stop_apiserver()
            raise SystemExit(f"the apiserver did not come up: {exc}") from None
        print("==> apiserver ready")
    print("\nUse the real kubectl (installed in the venv):")
    print(f"  export KUBECONFIG={plane.kubeconfig.resolve()}")
    print("  .venv/bin/kubectl get namespaces")
    print("  .venv/bin/kubectl api-resources")
    print("Stop: make down")


def cmd_down(directory: Path) -> None:
    pid_file = directory / "apiserver.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
            print(f"stopped the apiserver (pid {pid})")
        pid_file.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="localplane")
    p.add_argument("action", choices=["up", "down"])
    p.add_argument("--dir", type=Path, default=Path(".lab"))
    p.add_argument("--port", type=int, default=6443)
    args = p.parse_args(argv)
    if args.action == "up":
        cmd_up(args.dir, args.port)
    else:
        cmd_down(args.dir)


if __name__ == "__main__":
    main()
