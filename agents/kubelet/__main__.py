"""`python -m agents.kubelet` (the `kubelet` command): the node service, on the node's
own Docker Engine, with kube-kubelet's flags (agents.kubelet.config)."""

from __future__ import annotations

import logging
import signal
import sys
import threading

from prometheus_client import CollectorRegistry

from agents.kubelet import certificates
from agents.kubelet import config as kconfig
from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import HostMachine
from agents.kubelet.runtime.docker import DockerRuntime
from kubelab import pki, tracing
from kubelab.client import KubeconfigError, RestClient

log = logging.getLogger("kubelab.kubelet")


def main(argv: list[str] | None = None) -> None:
    args = kconfig.parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.v >= 4 else logging.INFO if args.v >= 1 else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config = kconfig.from_args(args)
    if not (config.tls_cert_file and config.tls_private_key_file and config.client_ca_file):
        sys.exit(
            "kubelet: --tls-cert-file, --tls-private-key-file and --client-ca-file are "
            "required (the HTTPS server on --port refuses anonymous callers)"
        )
    assert config.kubeconfig is not None  # a required flag
    try:
        credentials = certificates.bootstrap(
            config.kubeconfig,
            config.bootstrap_kubeconfig,
            config.cert_dir or config.root_dir / "pki",
            config.node_name,
        )
        client = RestClient(credentials, qps=50, burst=100)
    except (KubeconfigError, certificates.CertificateError) as exc:
        sys.exit(f"kubelet: {exc}")
    runtime = DockerRuntime(
        config.node_name,
        base_url=args.container_runtime_endpoint or None,
        pause_image=config.pod_infra_container_image,
        network=config.pod_network,
    )
    serving = pki.server_ssl_context(
        config.client_ca_file,
        config.tls_cert_file,
        config.tls_private_key_file,
        require_client_cert=False,
    )
    config.root_dir.mkdir(parents=True, exist_ok=True)
    registry = CollectorRegistry()  # the server's /metrics
    traced = tracing.setup("kubelet", config.node_name, registry, args.tracing_endpoint)
    kubelet = Kubelet(
        config,
        client,
        runtime,
        HostMachine(config.root_dir),
        serving=serving,
        tracing=traced,
        registry=registry,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    kubelet.start(timeout=300)
    if config.pod_network not in ("none", "host"):
        # The pods' bridge is made in the node's podCIDR, which node IPAM sets after
        # registration; until then sandboxes fail (FailedCreatePodSandBox) and are retried.
        while not stop.is_set() and not kubelet.node_status.pod_cidr():
            stop.wait(2.0)
            kubelet.node_status.refresh()
        if kubelet.node_status.pod_cidr():
            runtime.ensure_network(config.pod_network, kubelet.node_status.pod_cidr())
    stop.wait()
    kubelet.stop()


if __name__ == "__main__":
    main()
