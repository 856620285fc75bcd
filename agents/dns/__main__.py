"""`python -m agents.dns`: the cluster DNS server.

--kubeconfig FILE      the apiserver, and who we are to it (default: as kubectl
                       finds one, then the pod's service account)
--cluster-domain D     the zone (default cluster.local)
--listen ADDR:PORT     where to answer, UDP and TCP (default 0.0.0.0:53)
--upstream ADDR[:PORT] where to forward other names (repeatable); none: refuse them
--ttl SECONDS          the answers' TTL (default 30)
--tracing-endpoint URL send spans (OTLP/HTTP) there, e.g. the lab's collector; default:
                       OTEL_EXPORTER_OTLP_ENDPOINT, else off. A zone rebuilt after
                       changes is `DNS.sync`, with a `DNS.updateRecords` per changed
                       Service or EndpointSlice, linked to its writer (kubelab.nodeagent)
-v N                   4 and more: debug logs (every query)
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys

from prometheus_client import CollectorRegistry

from agents.dns.server import ClusterDNS
from kubelab import tracing
from kubelab.client import RestClient, load_config
from kubelab.process import configure_logging, stop_on_signals


def host_port(text: str, default_port: int) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    try:
        return host, int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected ADDRESS[:PORT]") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents.dns", description=__doc__)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--cluster-domain", default="cluster.local")
    parser.add_argument("--listen", type=lambda t: host_port(t, 53), default=("0.0.0.0", 53))
    parser.add_argument("--upstream", type=lambda t: host_port(t, 53), action="append", default=[])
    parser.add_argument("--ttl", type=int, default=30)
    tracing.add_flags(parser)
    parser.add_argument("-v", "--v", type=int, default=1)
    args = parser.parse_args(argv)
    configure_logging(args.v)
    client = RestClient(load_config(args.kubeconfig), user_agent="kubelab-dns")
    # No /metrics yet: the counters of dropped spans go to a registry nobody reads.
    traced = tracing.setup("dns", socket.gethostname(), CollectorRegistry(), args.tracing_endpoint)
    dns = ClusterDNS(
        client,
        domain=args.cluster_domain,
        ttl=args.ttl,
        upstreams=args.upstream,
        tracer=traced.tracer if traced.enabled else None,
    )
    stop = stop_on_signals(logging.getLogger("kubelab.dns"))
    address, port = args.listen
    dns.run(address, port, stop)
    client.close()
    traced.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
