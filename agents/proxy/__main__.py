"""`python -m agents.proxy`: kube-proxy (iptables mode), a service of every node.

--kubeconfig FILE        the apiserver, and who we are to it (default: as kubectl
                         finds one, then the pod's service account)
--cluster-cidr CIDR      the pods' addresses: traffic to a ClusterIP from outside it
                         is masqueraded (default 10.244.0.0/16)
--hostname-override NAME this node (default: the hostname): it holds its share of the
                         LoadBalancer addresses (agents.proxy.announce)
--resync SECONDS         rewrite the rules this often even without changes (30)
--cleanup                remove kube-proxy's chains and jumps, then exit
--tracing-endpoint URL   send spans (OTLP/HTTP) there, e.g. the lab's collector; default:
                         OTEL_EXPORTER_OTLP_ENDPOINT, else off. A sync that changes
                         caused is `Proxy.sync`, with a `Proxy.syncRules` per changed
                         Service or EndpointSlice, linked to its writer (kubelab.nodeagent);
                         the LoadBalancer addresses' sync is `Proxy.announce`, with a
                         `Proxy.announceAddresses` per changed Service or Node
-v N                     4 and more: debug logs
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import threading

from prometheus_client import CollectorRegistry

from agents.proxy.announce import Announcer
from agents.proxy.proxier import Proxier
from kubelab import tracing
from kubelab.client import RestClient, SharedInformer, load_config, resource_for
from kubelab.nodeagent import SyncLoop, SyncTracing
from kubelab.process import configure_logging, stop_on_signals

SERVICES = resource_for("v1", "Service")
ENDPOINT_SLICES = resource_for("discovery.k8s.io/v1", "EndpointSlice")
NODES = resource_for("v1", "Node")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents.proxy", description=__doc__)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--cluster-cidr", default="10.244.0.0/16")
    parser.add_argument("--hostname-override", default=socket.gethostname())
    parser.add_argument("--resync", type=float, default=30.0)
    parser.add_argument("--cleanup", action="store_true")
    tracing.add_flags(parser)
    parser.add_argument("-v", "--v", type=int, default=1)
    args = parser.parse_args(argv)
    configure_logging(args.v)
    proxier = Proxier(args.cluster_cidr)
    announcer = Announcer(args.hostname_override)
    if args.cleanup:
        proxier.cleanup()
        announcer.cleanup()
        return 0
    client = RestClient(load_config(args.kubeconfig), user_agent="kubelab-proxy")
    services = SharedInformer(client, SERVICES)
    slices = SharedInformer(client, ENDPOINT_SLICES)
    nodes = SharedInformer(client, NODES)
    # No /metrics yet: the counters of dropped spans go to a registry nobody reads.
    traced = tracing.setup(
        "kube-proxy", socket.gethostname(), CollectorRegistry(), args.tracing_endpoint
    )
    loop = SyncLoop(
        "proxy",
        lambda: proxier.sync(services.indexer.list(), slices.indexer.list()),
        resync=args.resync,
        sync_tracing=(
            SyncTracing(traced.tracer, "Proxy.sync", "Proxy.syncRules") if traced.enabled else None
        ),
    )
    loop.watch(services)
    loop.watch(slices)
    announce = SyncLoop(
        "announce",
        lambda: announcer.sync(services.indexer.list(), nodes.indexer.list()),
        resync=args.resync,
        sync_tracing=(
            SyncTracing(traced.tracer, "Proxy.announce", "Proxy.announceAddresses")
            if traced.enabled
            else None
        ),
    )
    announce.watch(services)
    announce.watch(nodes)
    stop = stop_on_signals(logging.getLogger("kubelab.proxy"))
    services.start(stop)
    slices.start(stop)
    nodes.start(stop)
    announcing = threading.Thread(
        target=announce.run, args=([services, nodes], stop), name="announce", daemon=True
    )
    announcing.start()
    logging.getLogger("kubelab.proxy").info(
        "kube-proxy: watching Services and EndpointSlices at %s", client.config.server
    )
    loop.run([services, slices], stop)
    announcing.join()
    client.close()
    traced.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
