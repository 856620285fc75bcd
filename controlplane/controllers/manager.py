"""`python -m controlplane.controllers.manager`: kubelab's kube-controller-manager, the
process that runs the cluster's controllers. Its flags are kube-controller-manager's:

    --kubeconfig FILE              the apiserver, and who we are to it
                                   (system:kube-controller-manager); default: as kubectl
                                   finds one, then the pod's service account
    --controllers LIST             '*' every controller, 'foo' on, '-foo' off; the first
                                   mention of a name wins (default '*')
    --leader-elect[=BOOL]          run the controllers only while holding the Lease
                                   (default true)
    --leader-elect-lease-duration, --leader-elect-renew-deadline,
    --leader-elect-retry-period    15s, 10s, 2s
    --leader-elect-resource-namespace, --leader-elect-resource-name
                                   the Lease: kube-system/kube-controller-manager
                                   (these six: `kubelab.leaderelectionconfig`, the
                                   scheduler's too)
    --root-ca-file FILE            the CA published as kube-root-ca.crt (default: the CA
                                   of the kubeconfig)
    --concurrent-gc-syncs N        garbage collector workers (20)
    --concurrent-namespace-syncs N namespace controller workers (10)
    --concurrent-replicaset-syncs, --concurrent-rc-syncs, --concurrent-deployment-syncs,
    --concurrent-statefulset-syncs N
                                   workers of those controllers (5 each)
    --concurrent-daemonset-syncs N daemonset controller workers (2)
    --kube-api-qps, --kube-api-burst
                                   the rate limit of each controller's client (20, 30)
    --secure-port N                /healthz, /readyz, /metrics over HTTPS (10257; 0: off)
    --bind-address IP              where to serve them (0.0.0.0)
    --tls-cert-file, --tls-private-key-file
                                   the serving certificate; without them a self-signed
                                   one is made in --cert-dir (a temporary directory if
                                   not given), as kube-controller-manager does
    --client-ca-file, --authentication-kubeconfig, --authorization-kubeconfig,
    --authorization-always-allow-paths
                                   who may read /metrics: delegated to the apiserver
                                   (these: `kubelab.serving`, the scheduler's too)
    --allocate-node-cidrs, --cluster-cidr CIDR, --node-cidr-mask-size N
                                   node IPAM (off unless allocating; /24 per node)
    --node-monitor-grace-period, --node-startup-grace-period
                                   node lifecycle (40s, 60s)
    --terminated-pod-gc-threshold N
                                   terminated pods kept before PodGC deletes the
                                   oldest (12500; 0: none deleted)
    --pod-gc-quarantine            kubelab's own: 40s, how long PodGC waits before it
                                   asks whether a node missing from its cache is gone
    --cluster-signing-cert-file, --cluster-signing-key-file, --cluster-signing-duration
                                   the CSR signer's CA (off without it) and validity (1y)
    --max-endpoints-per-slice N    100
    --resource-quota-sync-period   5m
    --horizontal-pod-autoscaler-sync-period   15s
    --concurrent-{endpoint,service-endpoint,job,cron-job,resource-quota}-syncs N   5
    --job-pod-failure-backoff      kubelab's own: 10s, Kubernetes' fixed back-off
                                   before a Job replaces a failed pod (tests shorten it)
    --load-balancer-ip-range RANGE kubelab's own: the addresses LoadBalancer Services get
                                   (a CIDR or first-last; none: they stay pending)
    --tracing-endpoint URL         send spans (OTLP/HTTP) there, e.g. the lab's collector;
                                   default: OTEL_EXPORTER_OTLP_ENDPOINT, else off
                                   (controllers.base, "Tracing")
    -v N                           4 and more: debug logs

Controllers (`--controllers` also takes their older names in parentheses):
garbage-collector-controller (garbagecollector), namespace-controller (namespace),
serviceaccount-controller (serviceaccount), root-ca-certificate-publisher-controller
(root-ca-cert-publisher), replicaset-controller (replicaset),
replicationcontroller-controller (replicationcontroller), deployment-controller
(deployment), statefulset-controller (statefulset), daemonset-controller (daemonset),
node-ipam-controller (nodeipam), endpoints-controller
(endpoint), endpointslice-controller (endpointslice), endpointslice-mirroring-controller
(endpointslicemirroring), node-lifecycle-controller
(nodelifecycle), taint-eviction-controller (taint-eviction),
pod-garbage-collector-controller (podgc), clusterrole-aggregation-controller
(clusterrole-aggregation),
certificatesigningrequest-approving-controller (csrapproving),
certificatesigningrequest-signing-controller (csrsigning), token-cleaner-controller
(tokencleaner), bootstrap-signer-controller (bootstrapsigner), job-controller (job),
ttl-after-finished-controller (ttl-after-finished), cronjob-controller (cronjob),
resourcequota-controller (resourcequota), disruption-controller (disruption),
horizontal-pod-autoscaler-controller (horizontalpodautoscaling),
persistentvolume-binder-controller (persistentvolume-binder),
persistentvolumeclaim-protection-controller (pvc-protection),
persistentvolume-protection-controller (pv-protection),
service-lb-controller (service) and kubelab's local-path-provisioner (the StorageClass
`standard`'s volumes: k3s runs it as a Deployment; here it is a controller, as it needs
no more than the API).

Leadership. Several controller-managers may run for availability, but only the holder
of the Lease kube-system/kube-controller-manager runs controllers: two garbage
collectors or two namespace controllers acting on one cluster would race each other.
A term of leadership goes: make the shared informers; build each enabled controller
(it asks for informers and registers its handlers); start the informers; wait until
every cache has synced; start the controllers' workers. When the term ends the workers
finish the key they hold and stop.

A departure: kube-controller-manager exits when it loses its lease, and counts on its
supervisor (the kubelet running its static pod) to start it again. A local control
plane has no supervisor, so this manager starts again in-process instead: once the
lost term's workers have stopped, it campaigns anew, and a new term builds new
informers and controllers, so nothing of the old one carries over. Workers that do not
stop within `TERM_STOP_TIMEOUT` make it exit after all.

SIGTERM or SIGINT ends the term and, once its workers have stopped, releases the Lease
(a successor need not wait for it to expire) and exits. If running the controllers
fails, the term ends too (the Lease is released) and the manager exits with status 1.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry import trace

from kubelab import leaderelectionconfig, serving, tracing
from kubelab.client import ClientConfig, KubeconfigError, RestClient, load_config
from kubelab.client.leaderelection import Term
from kubelab.flags import duration, flag_bool
from kubelab.process import configure_logging, stop_on_signals
from kubelab.serving import HealthServer

from . import (
    bootstrapsigner,
    certificates,
    clusterroleaggregation,
    cronjob,
    daemonset,
    deployment,
    disruption,
    endpoints,
    endpointslice,
    endpointslicemirroring,
    garbagecollector,
    job,
    localpath,
    namespace,
    nodeipam,
    nodelifecycle,
    persistentvolume,
    podautoscaler,
    podgc,
    replicaset,
    resourcequota,
    serviceaccounts,
    servicelb,
    statefulset,
    volumeprotection,
)
from .base import Controller, ControllerContext, InformerFactory
from .metrics import ManagerMetrics

log = logging.getLogger("kubelab.controller-manager")

COMPONENT = "kube-controller-manager"
"""Its Lease's name, its user agent's first part, its serving certificate's name."""

CONTROLLERS: dict[str, Callable[[ControllerContext], Controller]] = {
    garbagecollector.NAME: garbagecollector.GarbageCollector,
    namespace.NAME: namespace.NamespaceController,
    serviceaccounts.SERVICE_ACCOUNT_CONTROLLER: serviceaccounts.ServiceAccountsController,
    serviceaccounts.ROOT_CA_PUBLISHER: serviceaccounts.RootCACertPublisher,
    replicaset.REPLICASET_CONTROLLER: replicaset.ReplicaSetController,
    replicaset.REPLICATION_CONTROLLER: replicaset.ReplicationControllerController,
    deployment.NAME: deployment.DeploymentController,
    statefulset.NAME: statefulset.StatefulSetController,
    daemonset.NAME: daemonset.DaemonSetController,
    nodeipam.NAME: nodeipam.NodeIpamController,
    endpoints.NAME: endpoints.EndpointsController,
    endpointslice.NAME: endpointslice.EndpointSliceController,
    endpointslicemirroring.NAME: endpointslicemirroring.EndpointSliceMirroringController,
    nodelifecycle.NAME: nodelifecycle.NodeLifecycleController,
    nodelifecycle.TAINT_EVICTION: nodelifecycle.TaintEvictionController,
    podgc.NAME: podgc.PodGCController,
    clusterroleaggregation.NAME: clusterroleaggregation.ClusterRoleAggregationController,
    certificates.APPROVING: certificates.CSRApprovingController,
    certificates.SIGNING: certificates.CSRSigningController,
    certificates.TOKEN_CLEANER: certificates.TokenCleaner,
    bootstrapsigner.NAME: bootstrapsigner.BootstrapSigner,
    job.NAME: job.JobController,
    job.TTL_AFTER_FINISHED: job.TTLAfterFinishedController,
    cronjob.NAME: cronjob.CronJobController,
    resourcequota.NAME: resourcequota.ResourceQuotaController,
    disruption.NAME: disruption.DisruptionController,
    podautoscaler.NAME: podautoscaler.HorizontalPodAutoscalerController,
    persistentvolume.NAME: persistentvolume.PersistentVolumeController,
    localpath.NAME: localpath.LocalPathProvisioner,
    volumeprotection.CLAIM_PROTECTION: volumeprotection.ClaimProtectionController,
    volumeprotection.VOLUME_PROTECTION: volumeprotection.VolumeProtectionController,
    servicelb.NAME: servicelb.ServiceLBController,
}
"""Every controller, by the name `--controllers` takes, in the order they are started."""

SETTINGS_CHECKS: dict[str, Callable[[argparse.Namespace], bool]] = {
    nodeipam.NAME: nodeipam.check_settings,
    certificates.SIGNING: certificates.check_signing_settings,
    podgc.NAME: podgc.check_settings,
}
"""For controllers with flags of their own: whether the flags let the controller run
(Kubernetes skips node IPAM without --allocate-node-cidrs); a ValueError saying what to
fix if they are wrong."""

ALIASES = {
    "garbagecollector": garbagecollector.NAME,
    "namespace": namespace.NAME,
    "serviceaccount": serviceaccounts.SERVICE_ACCOUNT_CONTROLLER,
    "root-ca-cert-publisher": serviceaccounts.ROOT_CA_PUBLISHER,
    "replicaset": replicaset.REPLICASET_CONTROLLER,
    "replicationcontroller": replicaset.REPLICATION_CONTROLLER,
    "deployment": deployment.NAME,
    "statefulset": statefulset.NAME,
    "daemonset": daemonset.NAME,
    "nodeipam": nodeipam.NAME,
    "endpoint": endpoints.NAME,
    "endpointslice": endpointslice.NAME,
    "endpointslicemirroring": endpointslicemirroring.NAME,
    "nodelifecycle": nodelifecycle.NAME,
    "taint-eviction": nodelifecycle.TAINT_EVICTION,
    "podgc": podgc.NAME,
    "clusterrole-aggregation": clusterroleaggregation.NAME,
    "csrapproving": certificates.APPROVING,
    "csrsigning": certificates.SIGNING,
    "tokencleaner": certificates.TOKEN_CLEANER,
    "bootstrapsigner": bootstrapsigner.NAME,
    "job": job.NAME,
    "ttl-after-finished": job.TTL_AFTER_FINISHED,
    "cronjob": cronjob.NAME,
    "resourcequota": resourcequota.NAME,
    "disruption": disruption.NAME,
    "horizontalpodautoscaling": podautoscaler.NAME,
    "persistentvolume-binder": persistentvolume.NAME,
    "pvc-protection": volumeprotection.CLAIM_PROTECTION,
    "pv-protection": volumeprotection.VOLUME_PROTECTION,
    "service": servicelb.NAME,
}
"""The names kube-controller-manager used before its controllers' names ended in
"-controller"; it still accepts them."""

TERM_STOP_TIMEOUT = 60.0
"""Seconds a term's workers get to stop (a request in flight may take its timeout)."""

INFORMER_STOP_TIMEOUT = 40.0
"""Seconds a term's informers get to stop before their clients are closed under them
(a list in flight may take the request timeout, 30 s)."""


def enabled_controllers(spec: str) -> list[str]:
    """The controllers `--controllers` enables, e.g. "*,-namespace-controller"."""
    wildcard = False
    chosen: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        if item == "*":
            wildcard = True
            continue
        enable = not item.startswith("-")
        name = item if enable else item[1:]
        name = ALIASES.get(name, name)
        if name not in CONTROLLERS:
            raise ValueError(
                f"--controllers: {name!r} is not a known controller; known: "
                + ", ".join(CONTROLLERS)
            )
        chosen.setdefault(name, enable)
    return [name for name in CONTROLLERS if chosen.get(name, wildcard)]


def runnable_controllers(args: argparse.Namespace) -> tuple[str, ...]:
    """The controllers `--controllers` enables, less those their flags switch off
    (`SETTINGS_CHECKS`, which also raise ValueError for wrong flags)."""
    return tuple(
        name
        for name in enabled_controllers(args.controllers)
        if name not in SETTINGS_CHECKS or SETTINGS_CHECKS[name](args)
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="kube-controller-manager", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument("--kubeconfig", type=Path)
    p.add_argument("--controllers", default="*")
    leaderelectionconfig.add_flags(p)
    p.add_argument("--root-ca-file", type=Path)
    p.add_argument("--concurrent-gc-syncs", type=int, default=20)
    p.add_argument("--concurrent-namespace-syncs", type=int, default=10)
    p.add_argument("--concurrent-replicaset-syncs", type=int, default=5)
    p.add_argument("--concurrent-rc-syncs", type=int, default=5)
    p.add_argument("--concurrent-deployment-syncs", type=int, default=5)
    p.add_argument("--concurrent-statefulset-syncs", type=int, default=5)
    p.add_argument("--concurrent-daemonset-syncs", type=int, default=2)
    p.add_argument("--kube-api-qps", type=float, default=20.0)
    p.add_argument("--kube-api-burst", type=int, default=30)
    serving.add_flags(p, secure_port=10257)
    # Node IPAM, node lifecycle, endpoints, certificates, jobs, quota.
    p.add_argument("--allocate-node-cidrs", type=flag_bool, nargs="?", const=True, default=False)
    p.add_argument("--cluster-cidr", type=nodeipam.cluster_cidr)
    p.add_argument("--node-cidr-mask-size", type=int)
    p.add_argument("--node-monitor-grace-period", type=duration, default=40.0)
    p.add_argument("--node-startup-grace-period", type=duration, default=60.0)
    p.add_argument("--terminated-pod-gc-threshold", type=int, default=podgc.DEFAULT_THRESHOLD)
    # kubelab's own, for tests: Kubernetes' quarantine of a missing node is a constant.
    p.add_argument("--pod-gc-quarantine", type=duration, default=podgc.QUARANTINE)
    p.add_argument("--cluster-signing-cert-file", type=Path)
    p.add_argument("--cluster-signing-key-file", type=Path)
    p.add_argument(
        "--cluster-signing-duration", type=duration, default=certificates.DEFAULT_DURATION
    )
    p.add_argument("--concurrent-job-syncs", type=int, default=5)
    p.add_argument("--concurrent-cron-job-syncs", type=int, default=5)
    # kubelab's own, for tests: Kubernetes waits 10s before replacing a failed pod.
    p.add_argument("--job-pod-failure-backoff", type=duration, default=job.POD_FAILURE_BACKOFF)
    p.add_argument("--concurrent-resource-quota-syncs", type=int, default=5)
    p.add_argument(
        "--resource-quota-sync-period", type=duration, default=resourcequota.DEFAULT_SYNC_PERIOD
    )
    p.add_argument(
        "--horizontal-pod-autoscaler-sync-period",
        type=duration,
        default=podautoscaler.SYNC_PERIOD,
    )
    p.add_argument("--concurrent-endpoint-syncs", type=int, default=5)
    p.add_argument("--concurrent-service-endpoint-syncs", type=int, default=5)
    p.add_argument(
        "--max-endpoints-per-slice", type=int, default=endpointslice.MAX_ENDPOINTS_PER_SLICE
    )
    # kubelab's own: the cloud's part of the service controller (controllers.servicelb).
    p.add_argument("--load-balancer-ip-range", type=servicelb.address_range)
    tracing.add_flags(p)
    p.add_argument("-v", "--v", type=int, default=2, help="log verbosity (0-5)")
    return p.parse_args(argv)


@dataclass(frozen=True)
class Options:
    """What the controllers are run with."""

    controllers: tuple[str, ...]
    root_ca: bytes
    workers: dict[str, int]
    """Workers per controller; 1 for those not listed."""
    qps: float
    burst: int
    args: argparse.Namespace = field(default_factory=argparse.Namespace)
    """The command line, for the flags controllers read themselves."""


class ControllerManager:
    """Runs terms of leadership (module docstring) with the same configuration; with a
    `tracer`, the controllers trace their work (`controllers.base`, "Tracing")."""

    def __init__(
        self,
        config: ClientConfig,
        options: Options,
        metrics: ManagerMetrics | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._config = config
        self._options = options
        self._metrics = metrics or ManagerMetrics()
        self._tracer = tracer

    def run(self, stop: threading.Event) -> None:
        """One term: run the enabled controllers until `stop` is set."""
        opts = self._options
        informer_client = RestClient(
            self._config,
            user_agent="kube-controller-manager/shared-informers",
            qps=opts.qps,
            burst=opts.burst,
        )
        informers = InformerFactory(informer_client, self._tracer)
        ctx = ControllerContext(
            self._config,
            informers,
            root_ca=opts.root_ca,
            qps=opts.qps,
            burst=opts.burst,
            args=opts.args,
            tracer=self._tracer,
        )
        try:
            controllers = [CONTROLLERS[name](ctx) for name in opts.controllers]
            informers.start(stop)
            log.info("waiting for the caches of %d resources to sync", len(informers))
            if not informers.wait_for_sync(stop):
                return
            self._metrics.term_started(controllers)
            threads = []
            for controller in controllers:
                workers = opts.workers.get(controller.name, 1)
                thread = threading.Thread(
                    target=controller.run, args=(workers, stop), name=controller.name, daemon=True
                )
                thread.start()
                threads.append(thread)
                log.info(
                    "Starting %s controller (%s, %d workers)",
                    controller.name.removesuffix("-controller"),
                    controller.name,
                    workers,
                )
            for thread in threads:
                thread.join()
            log.info("controllers stopped")
        finally:
            self._metrics.term_ended()
            # The clients go only once the informers are done with them: closing one
            # removes its TLS files. Informers that are still running past the bound
            # are cut short by the close (their requests fail with ClientClosed).
            running = informers.join(timeout=INFORMER_STOP_TIMEOUT)
            if running:
                log.warning(
                    "%d informers still running after %gs, closing their clients: %s",
                    len(running),
                    INFORMER_STOP_TIMEOUT,
                    ", ".join(running),
                )
            ctx.close()
            informer_client.close()


def run_with_leader_election(
    manager: ControllerManager,
    config: ClientConfig,
    election: leaderelectionconfig.LeaderElectionConfiguration,
    stop: threading.Event,
) -> int:
    """Campaign, lead, and campaign again after a lost lease, until `stop` is set
    (`kubelab.leaderelectionconfig.run`); the exit status."""
    return leaderelectionconfig.run(
        election,
        config,
        component=COMPONENT,
        identity=leaderelectionconfig.new_identity(),
        new_term=lambda: Term(manager.run),
        stop=stop,
        stop_timeout=TERM_STOP_TIMEOUT,
    )


def _root_ca(path: Path | None, config: ClientConfig) -> bytes:
    """The CA to publish: `--root-ca-file`, else the one the kubeconfig trusts (as
    kube-controller-manager falls back to its client configuration's CA)."""
    if path is not None:
        return path.read_bytes()
    return config.ca_data or b""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.v)
    try:
        election = leaderelectionconfig.configuration(args, COMPONENT)
        config = load_config(args.kubeconfig)
        controllers = runnable_controllers(args)
        root_ca = _root_ca(args.root_ca_file, config)
        if not root_ca and serviceaccounts.ROOT_CA_PUBLISHER in controllers:
            raise ValueError(
                f"{serviceaccounts.ROOT_CA_PUBLISHER} has no CA to publish: "
                "--root-ca-file is empty or not given, and the kubeconfig has no CA"
            )
        options = Options(
            controllers=controllers,
            root_ca=root_ca,
            workers={
                garbagecollector.NAME: args.concurrent_gc_syncs,
                namespace.NAME: args.concurrent_namespace_syncs,
                replicaset.REPLICASET_CONTROLLER: args.concurrent_replicaset_syncs,
                replicaset.REPLICATION_CONTROLLER: args.concurrent_rc_syncs,
                deployment.NAME: args.concurrent_deployment_syncs,
                statefulset.NAME: args.concurrent_statefulset_syncs,
                daemonset.NAME: args.concurrent_daemonset_syncs,
                endpoints.NAME: args.concurrent_endpoint_syncs,
                job.NAME: args.concurrent_job_syncs,
                cronjob.NAME: args.concurrent_cron_job_syncs,
                resourcequota.NAME: args.concurrent_resource_quota_syncs,
                endpointslice.NAME: args.concurrent_service_endpoint_syncs,
            },
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
            args=args,
        )
    except (KubeconfigError, ValueError) as exc:
        log.error("%s", exc)
        return 2
    except OSError as exc:
        log.error("cannot read %s: %s", exc.filename, exc.strerror)
        return 2

    stop = stop_on_signals(log)
    log.info("controllers: %s; apiserver %s", ", ".join(options.controllers), config.server)
    metrics = ManagerMetrics()
    try:
        health = _serve_health(args, metrics, stop)
    except serving.ServingError as exc:
        log.error("%s", exc)
        return 1
    traced = tracing.setup(
        "controller-manager", socket.gethostname(), metrics.registry, args.tracing_endpoint
    )
    manager = ControllerManager(config, options, metrics, traced.tracer if traced.enabled else None)
    try:
        if election.leader_elect:
            status = run_with_leader_election(manager, config, election, stop)
        else:
            manager.run(stop)
            status = 0
    finally:
        if health is not None:
            health.stop()
        traced.shutdown()
    log.info("stopped")
    return status


def _serve_health(
    args: argparse.Namespace, metrics: ManagerMetrics, stop: threading.Event
) -> HealthServer | None:
    """The HTTPS endpoint (`kubelab.serving`; `--secure-port`, 0: none). Healthy while
    the process runs; ready too, as kube-controller-manager is, whether or not it leads
    (a standby is ready to take over), until it is stopping."""
    return serving.serve(
        args,
        COMPONENT,
        metrics.registry,
        healthz={"ping": lambda: None},
        readyz={"shutdown": lambda: "stopping" if stop.is_set() else None},
    )


if __name__ == "__main__":
    sys.exit(main())
