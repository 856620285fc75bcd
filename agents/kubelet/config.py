"""The kubelet's configuration, from kube-kubelet's own flag names (`--kubeconfig`,
`--node-ip`, `--hostname-override`, `--pod-manifest-path`, `--max-pods`, `--cluster-dns`,
`--cluster-domain`, ...), so that what labadm writes reads like a kubeadm node's kubelet
flags.
"""

from __future__ import annotations

import argparse
import socket
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from kubelab import tracing
from kubelab.api.quantity import parse_quantity


@dataclass(frozen=True)
class Reserved:
    """Resources held back from pods (`--kube-reserved` plus `--system-reserved`, and the
    hard eviction threshold for memory), as milli-CPU and bytes."""

    cpu_milli: int = 0
    memory: int = 0


@dataclass(frozen=True)
class Threshold:
    """One `<signal><<quantity or percentage>` of `--eviction-hard`: met when what is
    available falls below it."""

    quantity: int = 0
    fraction: float = 0.0

    def of(self, capacity: int) -> int:
        """The threshold in bytes, for a resource of `capacity` bytes."""
        return self.quantity or int(capacity * self.fraction)


EVICTION_SIGNALS = ("memory.available", "nodefs.available")
EVICTION_HARD = {
    "memory.available": Threshold(quantity=100 * 1024 * 1024),
    "nodefs.available": Threshold(fraction=0.10),
}
"""The kubelet's default hard thresholds (memory.available<100Mi, nodefs.available<10%)."""


@dataclass(frozen=True)
class KubeletConfig:
    node_name: str
    node_ip: str = ""
    kubeconfig: Path | None = None
    bootstrap_kubeconfig: Path | None = None
    """Credentials to ask for a client certificate with, when `kubeconfig` has none yet
    (TLS bootstrap, agents.kubelet.certificates)."""
    cert_dir: Path | None = None
    """Where the client certificates go (default `<root_dir>/pki`)."""
    rotate_certificates: bool = False
    """Renew the client certificate before it expires."""
    root_dir: Path = Path("/var/lib/kubelet")
    pod_manifest_path: Path | None = None
    max_pods: int = 110
    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = "cluster.local"
    resolv_conf: Path | None = Path("/etc/resolv.conf")
    """The node's resolv.conf: pods with dnsPolicy Default get it, ClusterFirst ones its
    search path after the cluster's (`--resolv-conf`; "" for none)."""
    port: int = 10250
    address: str = "0.0.0.0"
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    client_ca_file: Path | None = None
    node_labels: dict[str, str] = field(default_factory=dict)
    register_with_taints: tuple[dict[str, str], ...] = ()
    reserved: Reserved = Reserved()
    eviction_hard: dict[str, Threshold] = field(default_factory=lambda: dict(EVICTION_HARD))
    """`--eviction-hard`: below these, the node is under pressure and pods are evicted."""
    eviction_monitoring_interval: float = 10.0
    """How often the eviction thresholds are checked (one eviction at most each time)."""
    node_status_update_frequency: float = 10.0
    node_status_report_frequency: float = 300.0
    """A status that has not changed is still posted this often (Kubernetes' 5 min: the
    Lease, renewed every 10 s, is what says the node is alive; each post wakes every
    Node watcher in the cluster)."""
    node_lease_duration_seconds: int = 40
    sync_frequency: float = 60.0
    """Every pod is synced at least this often (`--sync-frequency`, default 1m)."""
    relist_period: float = 10.0
    """The PLEG's periodic relist. Kubernetes' generic PLEG relists every second because
    it hears no events; this one hears the engine's state changes as they happen and
    relists at each, so the period is only the net under a lost event (Kubernetes'
    evented PLEG: 300 s). At 1 s, the relists (two lists and a re-opened event stream
    a second) were most of an idle node's kubelet and dockerd CPU."""
    crash_loop_backoff: float = 10.0
    crash_loop_backoff_cap: float = 300.0
    image_pull_backoff: float = 10.0
    pod_infra_container_image: str = "registry.k8s.io/pause:3.9"
    pod_network: str = "none"
    """The Docker network of the node's pods ("none", "host", or a bridge network created
    in the node's podCIDR)."""
    cgroup_root: str = "kubepods"
    """The parent of the pods' cgroups (by QoS class: kubepods/burstable/pod<uid>)."""
    workers: int = 4
    """Threads syncing pods (each pod is synced by one at a time). Also the most pod
    starts the engine gets at once: on two cores, 16 made it thrash and fall behind a
    steady 5 pods/s where 4 kept up best (docs/benchmarks.md)."""


def _reserved(text: str) -> Reserved:
    """`cpu=100m,memory=256Mi` as a Reserved."""
    cpu = memory = 0
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        try:
            q = parse_quantity(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{item!r}: {exc}") from None
        if key == "cpu":
            cpu = int(q.value * 1000)
        elif key == "memory":
            memory = int(q.value)
        else:
            raise argparse.ArgumentTypeError(f"{item!r}: only cpu and memory can be reserved")
    return Reserved(cpu, memory)


def _eviction(text: str) -> dict[str, Threshold]:
    """`memory.available<100Mi,nodefs.available<10%` as thresholds by signal (the
    signals not named keep no threshold, as with kube-kubelet's flag)."""
    out = {}
    for item in filter(None, text.split(",")):
        signal, sep, value = item.partition("<")
        if not sep or signal not in EVICTION_SIGNALS:
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected <signal><<quantity or percentage>, signal one of "
                f"{', '.join(EVICTION_SIGNALS)}"
            )
        try:
            if value.endswith("%"):
                out[signal] = Threshold(fraction=float(value[:-1]) / 100)
            else:
                out[signal] = Threshold(quantity=int(parse_quantity(value).value))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{item!r}: {exc}") from None
    return out


def _labels(text: str) -> dict[str, str]:
    out = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"label {item!r} must be key=value")
        out[key] = value
    return out


def _taints(text: str) -> tuple[dict[str, str], ...]:
    out = []
    for item in filter(None, text.split(",")):
        kv, sep, effect = item.rpartition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"taint {item!r} must be key[=value]:Effect")
        key, _, value = kv.partition("=")
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        out.append(taint)
    return tuple(out)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelet", description="kubelab's kubelet: runs the pods bound to this node"
    )
    p.add_argument("--kubeconfig", type=Path, required=True, help="credentials of this node")
    p.add_argument(
        "--bootstrap-kubeconfig",
        type=Path,
        help="credentials (a bootstrap token) to get a client certificate with, when "
        "--kubeconfig does not exist yet; the kubelet then writes --kubeconfig",
    )
    p.add_argument("--cert-dir", type=Path, help="client certificates (default <root-dir>/pki)")
    p.add_argument(
        "--rotate-certificates",
        action="store_true",
        help="renew the client certificate (a new CSR) before it expires",
    )
    p.add_argument("--hostname-override", default="", help="the Node's name (default: hostname)")
    p.add_argument("--node-ip", default="", help="the Node's InternalIP")
    p.add_argument("--root-dir", type=Path, default=Path("/var/lib/kubelet"))
    p.add_argument("--pod-manifest-path", type=Path, help="folder of static pod manifests")
    p.add_argument("--max-pods", type=int, default=110)
    p.add_argument("--cluster-dns", default="", help="comma-separated DNS server IPs for pods")
    p.add_argument("--cluster-domain", default="cluster.local")
    p.add_argument(
        "--resolv-conf",
        default="/etc/resolv.conf",
        help='the node\'s resolv.conf, for dnsPolicy Default pods ("" for none)',
    )
    p.add_argument("--port", type=int, default=10250)
    p.add_argument("--address", default="0.0.0.0")
    p.add_argument("--tls-cert-file", type=Path)
    p.add_argument("--tls-private-key-file", type=Path)
    p.add_argument("--client-ca-file", type=Path)
    p.add_argument("--node-labels", type=_labels, default={})
    p.add_argument("--register-with-taints", type=_taints, default=())
    p.add_argument("--kube-reserved", type=_reserved, default=Reserved())
    p.add_argument("--system-reserved", type=_reserved, default=Reserved())
    p.add_argument(
        "--eviction-hard",
        type=_eviction,
        default=dict(EVICTION_HARD),
        help="e.g. memory.available<100Mi,nodefs.available<10%%: pods are evicted below these",
    )
    p.add_argument("--node-status-update-frequency", type=float, default=10.0)
    p.add_argument("--sync-frequency", type=float, default=60.0)
    p.add_argument("--pod-infra-container-image", default="registry.k8s.io/pause:3.9")
    p.add_argument(
        "--pod-network",
        default="kubepods",
        help="Docker network for pods, created in the node's podCIDR (or none, host)",
    )
    p.add_argument("--container-runtime-endpoint", default="", help="Docker Engine URL")
    p.add_argument("-v", "--v", type=int, default=2, help="log verbosity (0-4)")
    tracing.add_flags(p)
    return p


def from_args(args: argparse.Namespace) -> KubeletConfig:
    reserved = Reserved(
        args.kube_reserved.cpu_milli + args.system_reserved.cpu_milli,
        args.kube_reserved.memory + args.system_reserved.memory,
    )
    return KubeletConfig(
        node_name=(args.hostname_override or socket.gethostname()).lower(),
        node_ip=args.node_ip,
        kubeconfig=args.kubeconfig,
        bootstrap_kubeconfig=args.bootstrap_kubeconfig,
        cert_dir=args.cert_dir,
        rotate_certificates=args.rotate_certificates,
        root_dir=args.root_dir,
        pod_manifest_path=args.pod_manifest_path,
        max_pods=args.max_pods,
        cluster_dns=tuple(filter(None, args.cluster_dns.split(","))),
        cluster_domain=args.cluster_domain,
        resolv_conf=Path(args.resolv_conf) if args.resolv_conf else None,
        port=args.port,
        address=args.address,
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        client_ca_file=args.client_ca_file,
        node_labels=args.node_labels,
        register_with_taints=args.register_with_taints,
        reserved=reserved,
        eviction_hard=args.eviction_hard,
        node_status_update_frequency=args.node_status_update_frequency,
        sync_frequency=args.sync_frequency,
        pod_infra_container_image=args.pod_infra_container_image,
        pod_network=args.pod_network,
    )


def milli_cpu(value: object) -> int:
    """A CPU quantity ("500m", "2", 1) as milli-CPU."""
    return int(Fraction(parse_quantity(str(value)).value) * 1000)


def byte_count(value: object) -> int:
    return int(parse_quantity(str(value)).value)
