"""The `labadm` command line: init (and `init phase <name>`), join, reset, token, version.

Every subcommand of `init phase` and every name `--skip-phases` accepts come from the
one phase list in `lab.labadm.init`, as kubeadm's workflow derives them.
"""

from __future__ import annotations

import argparse
import datetime
import socket
import sys
import tempfile
from pathlib import Path

from controlplane.controllers import servicelb
from kubelab import pki
from kubelab.client import KubeconfigError, ServerUnreachable, StatusError
from lab.images import NODE_IMAGE
from lab.labadm import tokens
from lab.labadm.init import INIT, InitData, join_command
from lab.labadm.join import JOIN, JoinData
from lab.labadm.layout import API_PORT, Layout, admin_client
from lab.labadm.reset import reset
from lab.labadm.workflow import PhaseError


def node_address(given: str) -> str:
    """The node's address: given, or what its hostname resolves to (a container's
    /etc/hosts names its address on its network)."""
    if given:
        return given
    address = socket.gethostbyname(socket.gethostname())
    if address.startswith("127."):
        raise PhaseError(
            f"this host's name resolves to {address}; pass the address other nodes reach "
            "it at with --apiserver-advertise-address (or --node-ip for join)"
        )
    return address


def _duration(text: str) -> datetime.timedelta:
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        return datetime.timedelta(seconds=float(text[:-1]) * units[text[-1]])
    except (KeyError, ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"{text!r}: a duration like 24h, 30m or 0s") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="labadm", description="Bootstrap a kubelab cluster (kubeadm's role)"
    )
    p.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", required=True)

    def init_flags(q: argparse.ArgumentParser) -> None:
        q.add_argument("--apiserver-advertise-address", default="")
        q.add_argument("--node-name", default="")
        q.add_argument("--pod-network-cidr", default="10.244.0.0/16")
        q.add_argument("--service-cidr", default="10.96.0.0/12")
        q.add_argument(
            "--load-balancer-ip-range",
            default="",
            type=load_balancer_ip_range,
            help="addresses for LoadBalancer Services, a CIDR or first-last on the nodes' "
            "network (default: none, they stay pending)",
        )
        q.add_argument("--image", default=NODE_IMAGE, help="image of the control-plane pods")
        q.add_argument("--token", default="", help="the bootstrap token (default: a new one)")
        q.add_argument("--dry-run", action="store_true", help="write to a temporary folder")
        q.add_argument(
            "--control-plane-endpoint",
            default="",
            help="host:port of a load balancer in front of every apiserver (HA)",
        )
        q.add_argument(
            "--upload-certs",
            action="store_true",
            help="encrypt the shared certs into kube-system/kubeadm-certs for control-plane joins",
        )
        q.add_argument("--certificate-key", default="", help="the key for --upload-certs")
        q.add_argument(
            "--collector",
            action="store_true",
            help="run the lab's trace collector on this node (a static pod, OTLP/HTTP on "
            "port 4318) and send every component's spans to it, the joining nodes' too",
        )
        tracing_flag(q)

    init = sub.add_parser("init", help="Set up the first control-plane node")
    init_flags(init)
    init.add_argument(
        "--skip-phases", default="", help=f"comma-separated, of: {', '.join(INIT.names())}"
    )
    phase = init.add_subparsers(dest="phase_command")
    one = phase.add_parser("phase", help="Run one phase of init")
    one.add_argument("phase", choices=INIT.names())
    init_flags(one)

    join = sub.add_parser("join", help="Join this node to a cluster as a worker")
    join.add_argument("endpoint", help=f"the apiserver's host:port (port {API_PORT})")
    join.add_argument("--token", required=True)
    join.add_argument("--discovery-token-ca-cert-hash", action="append", default=[])
    join.add_argument("--node-name", default="")
    join.add_argument("--node-ip", default="")
    join.add_argument("--dry-run", action="store_true")
    join.add_argument("--control-plane", action="store_true", help="join as control plane")
    join.add_argument("--certificate-key", default="", help="decrypts the uploaded certs")
    join.add_argument("--apiserver-advertise-address", default="", help="default: --node-ip")
    join.add_argument("--image", default=NODE_IMAGE, help="image of the control-plane pods")
    tracing_flag(join)

    r = sub.add_parser("reset", help="Undo init or join on this node")
    r.add_argument("--dry-run", action="store_true")
    r.add_argument("-f", "--force", action="store_true", help="(accepted, as kubeadm's)")

    sub.add_parser("version", help="Print the version of labadm (as kubeadm version)")

    token = sub.add_parser("token", help="Manage bootstrap tokens")
    tsub = token.add_subparsers(dest="token_command", required=True)
    create = tsub.add_parser("create")
    create.add_argument("token", nargs="?", default="")
    create.add_argument("--ttl", type=_duration, default=tokens.DEFAULT_TTL)
    create.add_argument("--description", default="")
    create.add_argument("--print-join-command", action="store_true")
    tsub.add_parser("list")
    delete = tsub.add_parser("delete")
    delete.add_argument("tokens", nargs="+")
    return p


def load_balancer_ip_range(text: str) -> str:
    """`--load-balancer-ip-range`, checked here rather than by a controller-manager
    that would not start."""
    if text:
        servicelb.address_range(text)
    return text


def tracing_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracing-endpoint",
        default="",
        metavar="URL",
        help="the lab's trace collector (OTLP/HTTP), passed to the store member, the "
        "apiserver, the kubelet, the controller-manager, scheduler, kube-proxy and cluster "
        "DNS; default: init's --collector, on join the one init named; else none, they "
        "do not trace",
    )


def run(args: argparse.Namespace) -> None:
    layout = Layout(args.root)
    if getattr(args, "dry_run", False):
        layout = Layout(Path(tempfile.mkdtemp(prefix="labadm-dry-run-")))
        print(f"[dryrun] Writing files to {layout.root} instead of {args.root}")
    if args.command == "init":
        data = InitData(
            layout=layout,
            node_name=(args.node_name or socket.gethostname()).lower(),
            advertise_address=node_address(args.apiserver_advertise_address),
            image=args.image,
            pod_subnet=args.pod_network_cidr,
            service_cidr=args.service_cidr,
            load_balancer_ip_range=args.load_balancer_ip_range,
            dry_run=args.dry_run,
            token=args.token,
            control_plane_endpoint=args.control_plane_endpoint,
            upload_certs=args.upload_certs,
            certificate_key=args.certificate_key,
            tracing_endpoint=args.tracing_endpoint,
            collector=args.collector,
        )
        if args.phase_command == "phase":
            INIT.run(data, only=args.phase)
        else:
            INIT.run(data, skip=[s for s in args.skip_phases.split(",") if s])
    elif args.command == "join":
        node_name = (args.node_name or socket.gethostname()).lower()
        node_ip = node_address(args.node_ip)
        plane = None
        if args.control_plane:
            plane = InitData(
                layout=layout,
                node_name=node_name,
                advertise_address=args.apiserver_advertise_address or node_ip,
                image=args.image,
                dry_run=args.dry_run,
                control_plane_endpoint=args.endpoint.removeprefix("https://"),
                certificate_key=args.certificate_key,
                tracing_endpoint=args.tracing_endpoint,
            )
        elif args.certificate_key:
            raise PhaseError("--certificate-key is for a control-plane join: add --control-plane")
        JOIN.run(
            JoinData(
                layout=layout,
                endpoint=args.endpoint,
                token=args.token,
                ca_cert_hashes=tuple(args.discovery_token_ca_cert_hash),
                node_name=node_name,
                node_ip=node_ip,
                dry_run=args.dry_run,
                control_plane=plane,
                tracing_endpoint=args.tracing_endpoint,
            )
        )
    elif args.command == "reset":
        reset(layout, dry_run=args.dry_run)
    elif args.command == "version":
        # The apiserver's module is slow to import: only this subcommand needs it.
        from controlplane.apiserver.apiserver import KUBERNETES_VERSION

        print(f"labadm version: {KUBERNETES_VERSION['gitVersion']}")
    else:
        token_command(layout, args)


def token_command(layout: Layout, args: argparse.Namespace) -> None:
    client = admin_client(layout)
    if args.token_command == "create":
        token = tokens.create(
            client, token=args.token or None, ttl=args.ttl, description=args.description
        )
        if args.print_join_command:
            server = client.config.server
            print(join_command(server, token, layout.pki / "ca.crt"))
        else:
            print(token)
    elif args.token_command == "list":
        print(f"{'TOKEN':<24} {'EXPIRES':<22} DESCRIPTION")
        for secret in tokens.listed(client):
            data = {k: tokens.decode(v) for k, v in (secret.get("data") or {}).items()}
            token = f"{data.get('token-id', '')}.{data.get('token-secret', '')}"
            expires = data.get("expiration", "<forever>")
            print(f"{token:<24} {expires:<22} {data.get('description', '')}")
    else:
        for token in args.tokens:
            print(f"bootstrap token {tokens.delete(client, token)!r} deleted")


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        run(args)
    except (PhaseError, tokens.TokenError, pki.PKIFileError, KubeconfigError) as exc:
        sys.exit(f"error: {exc}")
    except (StatusError, ServerUnreachable) as exc:
        sys.exit(f"error: the apiserver: {exc}")
