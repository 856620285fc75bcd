"""`python -m agents.ingress`: the ingress controller beside nginx (docs/architecture.md,
"Ingress").

--kubeconfig FILE        the apiserver, and who we are to it (default: as kubectl finds
                         one, then the pod's service account)
--conf-dir DIR           where nginx.conf and the TLS key pairs are written (default
                         /etc/nginx/ingress, the volume nginx's container shares)
--reload-fifo FILE       the FIFO nginx's container reads to reload (default
                         DIR/reload)
--publish-service NS/NAME  the LoadBalancer Service whose address every Ingress shows
                         in status.loadBalancer (as ingress-nginx's flag)
--ingress-class NAME     the IngressClass served (default nginx); Ingresses naming no
                         class are served too
--tracing-endpoint URL   send spans (OTLP/HTTP) there; default OTEL_EXPORTER_OTLP_ENDPOINT,
                         else off
-v N                     4 and more: debug logs
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry

from agents.ingress.controller import CLASS_NAME, IngressController, fifo_reload
from kubelab import tracing
from kubelab.client import RestClient, load_config
from kubelab.process import configure_logging, stop_on_signals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents.ingress", description=__doc__)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--conf-dir", type=Path, default=Path("/etc/nginx/ingress"))
    parser.add_argument("--reload-fifo", type=Path)
    parser.add_argument("--publish-service", default="")
    parser.add_argument("--ingress-class", default=CLASS_NAME)
    tracing.add_flags(parser)
    parser.add_argument("-v", "--v", type=int, default=1)
    args = parser.parse_args(argv)
    configure_logging(args.v)
    if not args.conf_dir.is_dir():
        parser.error(f"--conf-dir {args.conf_dir} is not a directory: create it or name another")
    # No /metrics yet: the counters of dropped spans go to a registry nobody reads.
    traced = tracing.setup(
        "ingress-nginx", socket.gethostname(), CollectorRegistry(), args.tracing_endpoint
    )
    client = RestClient(
        load_config(args.kubeconfig),
        user_agent="kubelab-ingress-controller",
        tracer=traced.tracer if traced.enabled else None,
    )
    controller = IngressController(
        client,
        conf_dir=args.conf_dir,
        reload=fifo_reload(args.reload_fifo or args.conf_dir / "reload"),
        publish_service=args.publish_service,
        class_name=args.ingress_class,
        tracer=traced.tracer if traced.enabled else None,
    )
    stop = stop_on_signals(logging.getLogger("kubelab.ingress"))
    controller.run(stop)
    client.close()
    traced.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
