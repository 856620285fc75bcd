"""A control plane on this machine: the store, an apiserver, the controller-manager and
the scheduler as local processes, with the cluster's PKI and kubeconfigs, the way kubeadm
lays them out.

    .lab/pki/           ca.crt/key (cluster CA), apiserver.crt/key, admin.crt/key,
                        controller-manager.crt/key (CN=system:kube-controller-manager),
                        scheduler.crt/key (CN=system:kube-scheduler),
                        sa.key/sa.pub (service-account token signing)
    .lab/admin.conf     kubeconfig for the real kubectl (O=system:masters)
    .lab/controller-manager.conf, .lab/scheduler.conf   their kubeconfigs
    .lab/store/         the store's members (see `lab.localcluster`)
    .lab/apiserver.log  the apiserver's log; .lab/audit.log its audit log
    .lab/controller-manager.log, .lab/scheduler.log     their logs
    .lab/*.pid          the processes `make up-local` started, for `make down-local`

The controller-manager and the scheduler start once the apiserver is ready and stop
first: they only talk to the apiserver, and stopped after it, they would spend their
last seconds failing to renew their leases.

`make up-local` uses it (`make up` is the Docker lab); the integration tests and
`bench/apiserver` start their own in a temporary directory. The apiserver can also be
pointed at an existing store (a real etcd, say) with `etcd_servers`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubelab import pki
from kubelab.client import write_kubeconfig
from lab.localcluster import LocalCluster, free_port, pid_alive


class StartError(RuntimeError):
    """A process of the control plane did not come up; the message quotes its log."""


CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
CONTROLLER_MANAGER_LEASE = (
    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
)
CLUSTER_CIDR = "10.244.0.0/16"
"""The pods' addresses, cut into one range per node by node IPAM."""
SCHEDULER_USER = "system:kube-scheduler"
SCHEDULER_LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"
MONITORING_USER = "kubelab-monitoring"
MONITORING = "system:monitoring"
"""The group of `monitoring_session`'s identity: the bootstrap policy lets it get /metrics."""
STOP_TIMEOUT = 15.0
"""Seconds a process gets to exit after SIGTERM before it is killed."""


class LocalControlPlane:
    """The processes of a control plane in `directory` (module docstring).

    `controller_manager=False` and `scheduler=False` leave those out, for measuring the
    apiserver alone; `store_args` are extra flags for every store member,
    `scheduler_args` for the scheduler, `controller_manager_args` for the
    controller-manager (after its own: a repeated flag overrides)."""

    def __init__(
        self,
        directory: Path,
        *,
        store_members: int = 3,
        etcd_servers: list[str] | None = None,
        port: int | None = None,
        extra_args: list[str] | None = None,
        controller_manager: bool = True,
        scheduler: bool = True,
        store_args: list[str] | None = None,
        scheduler_args: list[str] | None = None,
        controller_manager_args: list[str] | None = None,
    ) -> None:
        self.dir = directory
        self.pki = directory / "pki"
        self.port = port or free_port()
        self.store = (
            None
            if etcd_servers
            else LocalCluster(directory / "store", size=store_members, extra_args=store_args)
        )
        self.etcd_servers = etcd_servers or [m.client_url for m in self.store.members]  # type: ignore[union-attr]
        self.extra_args = extra_args or []
        self.with_controller_manager = controller_manager
        self.with_scheduler = scheduler
        self.scheduler_args = scheduler_args or []
        self.controller_manager_args = controller_manager_args or []
        self.process: subprocess.Popen[bytes] | None = None
        """The apiserver."""
        self.controller_manager: subprocess.Popen[bytes] | None = None
        self.controller_manager_port = free_port()
        """Where the controller-manager serves /healthz, /readyz and /metrics (HTTPS):
        a free port rather than 10257, so that several planes can run on one machine."""
        # Another port than the apiserver's, which is not bound yet: the kernel may hand
        # the same free port out twice.
        while self.controller_manager_port == self.port:
            self.controller_manager_port = free_port()
        self.scheduler: subprocess.Popen[bytes] | None = None
        self.scheduler_port = 0
        """The scheduler's /healthz, /readyz and /metrics port (HTTPS), once started."""

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "admin.conf"

    @property
    def controller_manager_kubeconfig(self) -> Path:
        return self.dir / "controller-manager.conf"

    @property
    def scheduler_kubeconfig(self) -> Path:
        return self.dir / "scheduler.conf"

    @property
    def scheduler_log(self) -> Path:
        return self.dir / "scheduler.log"

    @property
    def log_path(self) -> Path:
        return self.dir / "apiserver.log"

    @property
    def controller_manager_log(self) -> Path:
        return self.dir / "controller-manager.log"

    def make_pki(self) -> None:
        """The cluster CA, the apiserver's serving cert, the client certs of the admin and
        the controller-manager, and the service-account signing key (kept if they exist:
        re-running keeps the cluster)."""
        if not (self.pki / "ca.crt").exists():
            self._new_pki()
        ca = pki.load_pair(self.pki, "ca")
        if not (self.pki / "controller-manager.crt").exists():
            # Apart from _new_pki, so that a lab made before the controller-manager came
            # along gets one too. The bootstrap RBAC policy binds this user to what the
            # controllers need.
            cert = pki.issue(ca, CONTROLLER_MANAGER_USER, client=True)
            pki.write_pair(cert, self.pki, "controller-manager")
        if not (self.pki / "scheduler.crt").exists():
            cert = pki.issue(ca, SCHEDULER_USER, client=True)
            pki.write_pair(cert, self.pki, "scheduler")
        if not (self.pki / "monitoring.crt").exists():
            cert = pki.issue(ca, MONITORING_USER, organizations=[MONITORING], client=True)
            pki.write_pair(cert, self.pki, "monitoring")
        # Rewritten every time: the port (and so the server URL) may have changed.
        self._write_kubeconfig(self.kubeconfig, "kubernetes-admin", "admin", ca)
        self._write_kubeconfig(
            self.controller_manager_kubeconfig,
            CONTROLLER_MANAGER_USER,
            "controller-manager",
            ca,
        )
        self._write_kubeconfig(self.scheduler_kubeconfig, SCHEDULER_USER, "scheduler", ca)

    def _write_kubeconfig(self, path: Path, user: str, pair: str, ca: pki.CertKey) -> None:
        client = pki.load_pair(self.pki, pair)
        write_kubeconfig(
            path,
            cluster_name="kubelab",
            server=self.server,
            ca_data=ca.cert_pem(),
            user_name=user,
            client_cert_data=client.cert_pem(),
            client_key_data=client.key_pem(),
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

    def controller_manager_command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "controlplane.controllers.manager",
            *self._component_kubeconfig_flags(self.controller_manager_kubeconfig),
            "--root-ca-file",
            str(self.pki / "ca.crt"),
            "--leader-elect=true",
            "--secure-port",
            str(self.controller_manager_port),
            "--bind-address",
            "127.0.0.1",
            "--cert-dir",
            str(self.dir / "controller-manager-serving"),
            # The pod network the node agents route: a /24 of it per node.
            "--allocate-node-cidrs=true",
            f"--cluster-cidr={CLUSTER_CIDR}",
            # Kubelets joining with a bootstrap token get their certificates signed.
            "--cluster-signing-cert-file",
            str(self.pki / "ca.crt"),
            "--cluster-signing-key-file",
            str(self.pki / "ca.key"),
            *self.controller_manager_args,
        ]

    def _component_kubeconfig_flags(self, kubeconfig: Path) -> list[str]:
        """A controller-manager's or scheduler's credentials, for its work and for
        delegating its /metrics' authentication and authorization (as labadm passes
        them)."""
        return [
            "--kubeconfig",
            str(kubeconfig),
            "--authentication-kubeconfig",
            str(kubeconfig),
            "--authorization-kubeconfig",
            str(kubeconfig),
            "--client-ca-file",
            str(self.pki / "ca.crt"),
        ]

    def scheduler_command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "controlplane.scheduler",
            *self._component_kubeconfig_flags(self.scheduler_kubeconfig),
            "--leader-elect=true",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(self.scheduler_port),
            "--cert-dir",
            str(self.pki / "scheduler-serving"),
            *self.scheduler_args,
        ]

    def start(self, timeout: float = 60.0, detach: bool = False) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.make_pki()
        if self.store is not None:
            self.store.start_all(detach=detach)
            self.store.wait_leader(timeout=timeout)
        self.start_apiserver(timeout, detach)
        if self.with_controller_manager:
            self.start_controller_manager(timeout, detach)
        if self.with_scheduler:
            self.start_scheduler(timeout, detach)

    def _spawn(
        self, command: list[str], log_path: Path, pid_file: str, detach: bool
    ) -> subprocess.Popen[bytes]:
        log_file = log_path.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=detach,
        )
        log_file.close()
        (self.dir / pid_file).write_text(str(process.pid))
        return process

    def start_apiserver(self, timeout: float = 60.0, detach: bool = False) -> None:
        """Start the apiserver (after `make_pki`) and wait until it is ready."""
        self.process = self._spawn(self.command(), self.log_path, "apiserver.pid", detach)
        self.wait_ready(timeout)

    def start_controller_manager(self, timeout: float = 60.0, detach: bool = False) -> None:
        """Start the controller-manager (once the apiserver is ready) and wait until it
        holds its lease, when its controllers start."""
        started = datetime.datetime.now(datetime.UTC)
        self.controller_manager = self._spawn(
            self.controller_manager_command(),
            self.controller_manager_log,
            "controller-manager.pid",
            detach,
        )
        self.wait_leading(started, timeout)

    def start_scheduler(self, timeout: float = 60.0, detach: bool = False) -> None:
        """Start the scheduler (once the apiserver is ready) and wait until it holds its
        lease, when it starts scheduling."""
        started = datetime.datetime.now(datetime.UTC)
        self.scheduler_port = self.scheduler_port or free_port()
        self.scheduler = self._spawn(
            self.scheduler_command(), self.scheduler_log, "scheduler.pid", detach
        )
        self.wait_leading(
            started,
            timeout,
            lease=SCHEDULER_LEASE,
            process=self.scheduler,
            log=self.scheduler_log,
            what="the scheduler",
        )

    def monitoring_session(self) -> requests.Session:
        """An HTTP session as a metrics scraper (a client certificate in the group
        `system:monitoring`, whom the bootstrap policy lets get /metrics), for the
        controller-manager's and the scheduler's endpoints; each request names the CA
        of the endpoint's self-signed certificate (`verify=`)."""
        s = requests.Session()
        s.trust_env = False
        s.cert = (str(self.pki / "monitoring.crt"), str(self.pki / "monitoring.key"))
        return s

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

    def wait_leading(
        self,
        since: datetime.datetime,
        timeout: float,
        *,
        lease: str = CONTROLLER_MANAGER_LEASE,
        process: subprocess.Popen[bytes] | None = None,
        log: Path | None = None,
        what: str = "the controller-manager",
    ) -> None:
        """Wait until a lease (default: the controller-manager's) was renewed after
        `since` (a lease left by an earlier, killed holder is older)."""
        deadline = time.monotonic() + timeout
        s = self.session()
        process = process or self.controller_manager
        log = log or self.controller_manager_log
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise StartError(
                    f"{what} exited ({process.returncode}):\n" + self.log_tail(path=log)
                )
            try:
                r = s.get(self.server + lease, timeout=2)
            except requests.RequestException:
                r = None
            if r is not None and r.status_code == 200:
                spec = r.json().get("spec") or {}
                renewed = spec.get("renewTime")
                if (
                    spec.get("holderIdentity")
                    and renewed
                    and datetime.datetime.fromisoformat(renewed) >= since
                ):
                    return
            time.sleep(0.2)
        raise StartError(
            f"{what} did not take its lease within {timeout:.0f}s:\n" + self.log_tail(path=log)
        )

    def log_tail(self, lines: int = 25, path: Path | None = None) -> str:
        """The end of a process's log (default: the apiserver's)."""
        try:
            text = (path or self.log_path).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    @staticmethod
    def _terminate(process: subprocess.Popen[bytes] | None) -> None:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def stop_controller_manager(self) -> None:
        self._terminate(self.controller_manager)

    def stop_scheduler(self) -> None:
        self._terminate(self.scheduler)

    def stop_apiserver(self) -> None:
        """Stop the apiserver, and the controller-manager and scheduler first."""
        self.stop_scheduler()
        self.stop_controller_manager()
        self._terminate(self.process)

    def stop(self) -> None:
        self.stop_apiserver()
        if self.store is not None:
            self.store.stop_all()


# -- make up-local / down-local -------------------------------------------------------


def _store_endpoints(directory: Path) -> list[str]:
    spec = json.loads((directory / "store" / "cluster.json").read_text())
    return [f"http://127.0.0.1:{client}" for client, _ in spec["ports"]]


def cmd_up(directory: Path, port: int) -> None:
    plane = LocalControlPlane(directory, etcd_servers=_store_endpoints(directory), port=port)
    apiserver_up = _alive_from(directory / "apiserver.pid")
    controller_manager_up = _alive_from(directory / "controller-manager.pid")
    scheduler_up = _alive_from(directory / "scheduler.pid")
    if not (apiserver_up and controller_manager_up and scheduler_up):
        directory.mkdir(parents=True, exist_ok=True)
        plane.make_pki()
    if apiserver_up:
        print(f"==> apiserver already running at {plane.server}")
    else:
        print(f"==> starting the apiserver at {plane.server} (log: {plane.log_path})", flush=True)
        try:
            plane.start_apiserver(detach=True)
        except StartError as exc:
            plane.stop_apiserver()
            raise SystemExit(f"the apiserver did not come up: {exc}") from None
        print("==> apiserver ready")
    if controller_manager_up:
        print("==> controller-manager already running")
    else:
        log = plane.controller_manager_log
        print(f"==> starting the controller-manager (log: {log})", flush=True)
        try:
            plane.start_controller_manager(detach=True)
        except StartError as exc:
            plane.stop_controller_manager()
            raise SystemExit(f"the controller-manager did not come up: {exc}") from None
        print("==> controller-manager running its controllers")
    if scheduler_up:
        print("==> scheduler already running")
    else:
        print(f"==> starting the scheduler (log: {plane.scheduler_log})", flush=True)
        try:
            plane.start_scheduler(detach=True)
        except StartError as exc:
            plane.stop_scheduler()
            raise SystemExit(f"the scheduler did not come up: {exc}") from None
        print(f"==> scheduler leading (https://127.0.0.1:{plane.scheduler_port}/healthz)")
    print("\nUse the real kubectl (installed in the venv):")
    print(f"  export KUBECONFIG={plane.kubeconfig.resolve()}")
    print("  .venv/bin/kubectl get namespaces")
    print("  .venv/bin/kubectl api-resources")
    print("Stop: make down")


def cmd_down(directory: Path) -> None:
    # The controller-manager and scheduler first, and to the end: they release their
    # leases on the way out, which they cannot do once the apiserver is gone.
    _stop(directory / "scheduler.pid", "the scheduler")
    _stop(directory / "controller-manager.pid", "the controller-manager")
    _stop(directory / "apiserver.pid", "the apiserver")


def _stop(pid_file: Path, what: str) -> None:
    """SIGTERM the process `pid_file` names and wait for it to exit (or STOP_TIMEOUT)."""
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    if pid_alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        print(f"stopped {what} (pid {pid})")
    pid_file.unlink()


def _alive_from(pid_file: Path) -> bool:
    return pid_file.exists() and pid_alive(int(pid_file.read_text()))


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
