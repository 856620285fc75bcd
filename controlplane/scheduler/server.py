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
    --client-ca-file, --authentication-kubeconfig, --authorization-kubeconfig,
    --authorization-always-allow-paths
                                   who may read /metrics: delegated to the apiserver
                                   (`kubelab.serving`, as the controller-manager's)
    --kube-api-qps, --kube-api-burst
                                   the client's rate limit (50, 100)
    --tracing-endpoint URL         send spans (OTLP/HTTP) there, e.g. the lab's collector;
                                   default: OTEL_EXPORTER_OTLP_ENDPOINT, else off
                                   (scheduler.py, "Tracing")
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

/healthz, /readyz and /metrics are served over HTTPS by `kubelab.serving`, as the
controller-manager's are: /metrics to whom the apiserver authorizes (TokenReview,
SubjectAccessReview), the health endpoints to anyone.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry import trace

from kubelab import leaderelectionconfig, serving, tracing
from kubelab.client import ClientConfig, KubeconfigError, RestClient, load_config
from kubelab.client.leaderelection import Term
from kubelab.process import configure_logging, stop_on_signals
from kubelab.serving import HealthServer

from .config import ConfigError, SchedulerConfig, load
from .metrics import Metrics
from .scheduler import Scheduler

log = logging.getLogger("kubelab.scheduler")

COMPONENT = "kube-scheduler"
"""Its Lease's name, its user agent's first part, its serving certificate's name."""

STOP_TIMEOUT = 30.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="kube-scheduler", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--config", type=Path)
    p.add_argument("--kubeconfig", type=Path)
    leaderelectionconfig.add_flags(p)
    serving.add_flags(p, secure_port=10259)
    p.add_argument("--kube-api-qps", type=float)
    p.add_argument("--kube-api-burst", type=int)
    p.add_argument("--bind-workers", type=int, default=16, help="concurrent bindings")
    tracing.add_flags(p)
    p.add_argument("-v", "--v", type=int, default=2, help="log verbosity (0-5)")
    return p.parse_args(argv)


class Settings:
    """The flags over the config file over kube-scheduler's defaults (a ValueError
    that names the setting if they do not fit together)."""

    def __init__(self, args: argparse.Namespace, config: SchedulerConfig) -> None:
        cc = config.client_connection

        def pick(flag: Any, key: str, default: Any, src: dict[str, Any]) -> Any:
            return flag if flag is not None else src.get(key, default)

        self.leader_election = leaderelectionconfig.configuration(
            args, COMPONENT, config.leader_election
        )
        kubeconfig = args.kubeconfig or cc.get("kubeconfig")
        self.kubeconfig = Path(kubeconfig) if kubeconfig else None
        self.qps = float(pick(args.kube_api_qps, "qps", 50.0, cc))
        self.burst = int(pick(args.kube_api_burst, "burst", 100, cc))


def serve_health(
    args: argparse.Namespace, metrics: Metrics, ready: threading.Event, stop: threading.Event
) -> HealthServer | None:
    """The HTTPS endpoint (`kubelab.serving`; `--secure-port`, 0: none). Healthy while
    the process runs; ready once set up (`ready`), whether or not it leads, until it is
    stopping."""
    return serving.serve(
        args,
        COMPONENT,
        metrics.registry,
        healthz={"ping": lambda: None},
        readyz={
            "started": lambda: None if ready.is_set() else "not set up yet",
            "shutdown": lambda: "stopping" if stop.is_set() else None,
        },
    )


def new_term_maker(
    client: RestClient,
    event_client: RestClient,
    config: SchedulerConfig,
    metrics: Metrics,
    identity: str,
    bind_workers: int,
    tracer: trace.Tracer | None = None,
) -> Callable[[], Term]:
    """What each term of leadership runs: a fresh Scheduler until leadership ends."""

    def schedule(leading: threading.Event) -> None:
        Scheduler(
            client,
            config,
            metrics,
            event_client=event_client,
            bind_workers=bind_workers,
            identity=identity,
            tracer=tracer,
        ).run(leading)

    return lambda: Term(schedule)


def campaign(
    settings: Settings,
    client_config: ClientConfig,
    identity: str,
    new_term: Callable[[], Term],
    stop: threading.Event,
) -> int:
    """Campaign, lead, and campaign again after a lost lease, until `stop` is set
    (`kubelab.leaderelectionconfig.run`); the exit status (1 if scheduling failed)."""
    return leaderelectionconfig.run(
        settings.leader_election,
        client_config,
        component=COMPONENT,
        identity=identity,
        new_term=new_term,
        stop=stop,
        stop_timeout=STOP_TIMEOUT,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.v)
    try:
        config = load(args.config)
        settings = Settings(args, config)
        client_config = load_config(settings.kubeconfig)
    except (ConfigError, KubeconfigError, ValueError) as exc:
        log.error("%s", exc)
        return 2
    except OSError as exc:
        log.error("cannot read %s: %s", exc.filename, exc.strerror)
        return 2

    stop = stop_on_signals(log)
    metrics = Metrics()
    ready = threading.Event()
    try:
        health = serve_health(args, metrics, ready, stop)
    except serving.ServingError as exc:
        log.error("%s", exc)
        return 2
    identity = leaderelectionconfig.new_identity()
    ua = "kube-scheduler/"
    client = RestClient(
        client_config, user_agent=ua + "scheduler", qps=settings.qps, burst=settings.burst
    )
    event_client = RestClient(client_config, user_agent=ua + "events", qps=settings.qps)

    traced = tracing.setup(
        "scheduler", socket.gethostname(), metrics.registry, args.tracing_endpoint
    )
    new_term = new_term_maker(
        client, event_client, config, metrics, identity, args.bind_workers, traced.tracer
    )

    ready.set()
    log.info(
        "profiles: %s; apiserver %s",
        ", ".join(p.scheduler_name for p in config.profiles),
        client_config.server,
    )
    status = 0
    try:
        if not settings.leader_election.leader_elect:
            term = new_term()
            term.lead(stop)
            status = 1 if term.failed else 0
        else:
            status = campaign(settings, client_config, identity, new_term, stop)
    finally:
        client.close()
        event_client.close()
        if health is not None:
            health.stop()
        traced.shutdown()
    log.info("stopped")
    return status


if __name__ == "__main__":
    sys.exit(main())
