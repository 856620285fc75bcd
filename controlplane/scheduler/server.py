"""`python -m controlplane.scheduler`: kubelab's kube-scheduler. Its flags are
kube-scheduler's:

    --config FILE                  a KubeSchedulerConfiguration (profiles, plugins,
                                   percentageOfNodesToScore, leaderElection,
                                   clientConnection); see `config.py`
    --kubeconfig FILE              the apiserver, and who we are to it
                                   (system:kube-scheduler); default: the config file's
                                   clientConnection.kubeconfig, then as kubectl finds one
    --leader-elect[=BOOL]          schedule only while holding the Lease (default true)
    --leader-elect-lease-duration, --leader-elect-renew-deadline,
    --leader-elect-retry-period    15s, 10s, 2s
    --leader-elect-resource-namespace, --leader-elect-resource-name
                                   the Lease: kube-system/kube-scheduler
    --secure-port N                /healthz, /readyz, /metrics over HTTPS (10259; 0: off)
    --bind-address IP              where to serve them (0.0.0.0)
    --tls-cert-file, --tls-private-key-file
                                   the serving certificate; without them a self-signed
                                   one is made in --cert-dir, as kube-scheduler does
    --kube-api-qps, --kube-api-burst
                                   the client's rate limit (50, 100)
    -v N                           4 and more: debug logs

Leadership. Several schedulers may run for availability; only the holder of the Lease
kube-system/kube-scheduler schedules, since two would make conflicting decisions from
caches that do not know of each other's assumed pods. A scheduler that loses its lease
stops scheduling at once (by then another may be leading). SIGTERM or SIGINT stops
scheduling, releases the lease and exits 0.

A departure, the controller-manager's: kube-scheduler exits when it loses its lease and
counts on its supervisor (the kubelet running its static pod) to start it again. A
local control plane has no supervisor, so this scheduler campaigns again in-process,
and a new term builds a new Scheduler (informers, cache, queue): nothing of the lost
term carries over.

Departure: the HTTPS endpoints need no authentication here (kube-scheduler delegates
/metrics' authorization to the apiserver); they carry no secrets.
"""

from __future__ import annotations

import argparse
import http.server
import logging
import signal
import socket
import ssl
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from kubelab import pki
from kubelab.client import ClientConfig, KubeconfigError, LeaderElector, RestClient, load_config
from kubelab.flags import duration, flag_bool

from .config import ConfigError, SchedulerConfig, load
from .metrics import CONTENT_TYPE_LATEST, Metrics
from .scheduler import Scheduler

log = logging.getLogger("kubelab.scheduler")

STOP_TIMEOUT = 30.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="kube-scheduler", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--config", type=Path)
    p.add_argument("--kubeconfig", type=Path)
    p.add_argument("--leader-elect", type=flag_bool, nargs="?", const=True, default=None)
    p.add_argument("--leader-elect-lease-duration", type=duration)
    p.add_argument("--leader-elect-renew-deadline", type=duration)
    p.add_argument("--leader-elect-retry-period", type=duration)
    p.add_argument("--leader-elect-resource-namespace")
    p.add_argument("--leader-elect-resource-name")
    p.add_argument("--secure-port", type=int, default=10259)
    p.add_argument("--bind-address", default="0.0.0.0")
    p.add_argument("--tls-cert-file", type=Path)
    p.add_argument("--tls-private-key-file", type=Path)
    p.add_argument("--cert-dir", type=Path)
    p.add_argument("--kube-api-qps", type=float)
    p.add_argument("--kube-api-burst", type=int)
    p.add_argument("--bind-workers", type=int, default=16, help="concurrent bindings")
    p.add_argument("-v", "--v", type=int, default=2, help="log verbosity (0-5)")
    return p.parse_args(argv)


def _go_duration(value: Any, default: float) -> float:
    """A duration from the config file ("15s"), or the default."""
    return duration(str(value)) if value else default


class Settings:
    """The flags over the config file over kube-scheduler's defaults."""

    def __init__(self, args: argparse.Namespace, config: SchedulerConfig) -> None:
        le, cc = config.leader_election, config.client_connection

        def pick(flag: Any, key: str, default: Any, src: dict[str, Any]) -> Any:
            return flag if flag is not None else src.get(key, default)

        self.leader_elect = bool(pick(args.leader_elect, "leaderElect", True, le))
        self.lease_duration = args.leader_elect_lease_duration or _go_duration(
            le.get("leaseDuration"), 15.0
        )
        self.renew_deadline = args.leader_elect_renew_deadline or _go_duration(
            le.get("renewDeadline"), 10.0
        )
        self.retry_period = args.leader_elect_retry_period or _go_duration(
            le.get("retryPeriod"), 2.0
        )
        self.lease_namespace = pick(
            args.leader_elect_resource_namespace, "resourceNamespace", "kube-system", le
        )
        self.lease_name = pick(
            args.leader_elect_resource_name, "resourceName", "kube-scheduler", le
        )
        kubeconfig = args.kubeconfig or cc.get("kubeconfig")
        self.kubeconfig = Path(kubeconfig) if kubeconfig else None
        self.qps = float(pick(args.kube_api_qps, "qps", 50.0, cc))
        self.burst = int(pick(args.kube_api_burst, "burst", 100, cc))


class _HealthHandler(http.server.BaseHTTPRequestHandler):
    server: _HealthServer

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/healthz", "/livez"):
            self._reply(200, b"ok", "text/plain")
        elif path == "/readyz":
            ready = self.server.ready.is_set()
            self._reply(200 if ready else 503, b"ok" if ready else b"not ready", "text/plain")
        elif path == "/metrics":
            self._reply(200, self.server.metrics.exposition(), CONTENT_TYPE_LATEST)
        else:
            self._reply(404, b"404 page not found", "text/plain")

    def _reply(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


class _HealthServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], metrics: Metrics, ready: threading.Event) -> None:
        super().__init__(address, _HealthHandler)
        self.metrics = metrics
        self.ready = ready


def _serving_context(args: argparse.Namespace) -> ssl.SSLContext:
    """The serving certificate given, or one made in --cert-dir, signed by a CA of its
    own (`kube-scheduler-ca.crt` there, for clients that want to verify it)."""
    cert, key = args.tls_cert_file, args.tls_private_key_file
    if cert is None or key is None:
        directory = args.cert_dir or Path(tempfile.mkdtemp(prefix="kube-scheduler-"))
        cert, key = directory / "kube-scheduler.crt", directory / "kube-scheduler.key"
        if not cert.exists():
            ca = pki.new_ca(f"kube-scheduler-ca@{socket.gethostname()}")
            serving = pki.issue(
                ca,
                "kube-scheduler",
                server=True,
                dns_names=["localhost", socket.gethostname()],
                ip_addresses=["127.0.0.1"],
            )
            pki.write_pair(serving, directory, "kube-scheduler")
            pki.write_pair(ca, directory, "kube-scheduler-ca")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


def serve_health(
    args: argparse.Namespace, metrics: Metrics, ready: threading.Event
) -> _HealthServer | None:
    if args.secure_port == 0:
        return None
    server = _HealthServer((args.bind_address, args.secure_port), metrics, ready)
    ctx = _serving_context(args)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name="healthz", daemon=True).start()
    log.info("serving /healthz, /readyz, /metrics on https://%s:%d", *server.server_address[:2])
    return server


class Term:
    """One term of leadership: a fresh Scheduler run until leadership ends."""

    def __init__(
        self,
        client: RestClient,
        event_client: RestClient,
        config: SchedulerConfig,
        metrics: Metrics,
        identity: str,
        bind_workers: int,
    ) -> None:
        self.args = (client, config, metrics)
        self.event_client = event_client
        self.identity = identity
        self.bind_workers = bind_workers
        self.led = threading.Event()
        self.failed = False

    def lead(self, leading: threading.Event) -> None:
        client, config, metrics = self.args
        self.led.set()
        scheduler = Scheduler(
            client,
            config,
            metrics,
            event_client=self.event_client,
            bind_workers=self.bind_workers,
            identity=self.identity,
        )
        try:
            scheduler.run(leading)
        except Exception:
            self.failed = True
            log.exception("the scheduler failed")


def campaign(
    settings: Settings,
    client_config: ClientConfig,
    identity: str,
    new_term: Callable[[], Term],
    stop: threading.Event,
) -> int:
    """Campaign, lead, and campaign again after a lost lease, until `stop` is set; the
    exit status (1 if scheduling failed)."""
    lease = f"{settings.lease_namespace}/{settings.lease_name}"
    # A client of its own, whose requests time out within the renew deadline, leaving
    # time for a second attempt: an apiserver that answers in seconds under load should
    # not cost the lease.
    election_client = RestClient(
        client_config,
        user_agent="kube-scheduler/leader-election",
        timeout=settings.renew_deadline / 2.5,
        max_retries=0,
    )
    try:
        while not stop.is_set():
            term = new_term()
            elector = LeaderElector(
                election_client,
                name=settings.lease_name,
                namespace=settings.lease_namespace,
                identity=identity,
                on_started_leading=term.lead,
                on_stopped_leading=lambda: None,
                on_new_leader=lambda who: log.info("the leader of %s is %s", lease, who),
                lease_duration=settings.lease_duration,
                renew_deadline=settings.renew_deadline,
                retry_period=settings.retry_period,
                stop_timeout=STOP_TIMEOUT,
            )
            log.info("campaigning for the lease %s as %s", lease, identity)
            elector.run(stop)
            if term.failed:
                return 1
            if term.led.is_set() and not stop.is_set():
                log.warning("leaderelection lost: %s is no longer ours; campaigning again", lease)
    finally:
        election_client.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.v >= 4 else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = load(args.config)
        settings = Settings(args, config)
        client_config = load_config(settings.kubeconfig)
    except (ConfigError, KubeconfigError, argparse.ArgumentTypeError) as exc:
        log.error("%s", exc)
        return 2
    except OSError as exc:
        log.error("cannot read %s: %s", exc.filename, exc.strerror)
        return 2

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("%s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    metrics = Metrics()
    ready = threading.Event()
    try:
        health = serve_health(args, metrics, ready)
    except (OSError, ssl.SSLError, pki.PKIError) as exc:
        log.error("cannot serve on %s:%d: %s", args.bind_address, args.secure_port, exc)
        return 2
    identity = f"{socket.gethostname()}_{uuid.uuid4()}"
    ua = "kube-scheduler/"
    client = RestClient(
        client_config, user_agent=ua + "scheduler", qps=settings.qps, burst=settings.burst
    )
    event_client = RestClient(client_config, user_agent=ua + "events", qps=settings.qps)

    def new_term() -> Term:
        return Term(client, event_client, config, metrics, identity, args.bind_workers)

    ready.set()
    log.info(
        "profiles: %s; apiserver %s",
        ", ".join(p.scheduler_name for p in config.profiles),
        client_config.server,
    )
    status = 0
    try:
        if not settings.leader_elect:
            term = new_term()
            term.lead(stop)
            status = 1 if term.failed else 0
        else:
            status = campaign(settings, client_config, identity, new_term, stop)
    finally:
        client.close()
        event_client.close()
        if health is not None:
            health.shutdown()
    log.info("stopped")
    return status


if __name__ == "__main__":
    sys.exit(main())
