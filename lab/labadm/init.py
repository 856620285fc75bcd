"""`labadm init`: the first control-plane node, in kubeadm's phases (seeds: cluster
bring-up with kubeadm).

Certificates and kubeconfigs are written under /etc/kubelab; the store member, the
apiserver, the controller-manager and the scheduler become static pods the node's
kubelet starts from /etc/kubelab/manifests (their image is the node image itself, which
has kubelab installed). Once the apiserver answers, the node is marked as control plane,
a bootstrap token and the public `cluster-info` ConfigMap let workers join, and the join
command is printed. The store's client port serves TLS and requires a client
certificate (`--client-cert-auth`): the apiserver reaches it with its own store-client
certificate, as kubeadm sets etcd up.
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import requests
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from agents.proxy.announce import EXCLUDE_LABEL as EXCLUDE_FROM_LB_LABEL
from kubelab import pki
from kubelab.client import RestClient, StatusError, load_config, resource_for
from lab.labadm import certs_upload, dns, ingress, storage, tokens
from lab.labadm.layout import (
    API_PORT,
    CLUSTER_DNS,
    COLLECTOR_PORT,
    CONTROL_PLANE_LABEL,
    CONTROLLER_MANAGER_PORT,
    KUBELET_PORT,
    NODE_IMAGE_PYTHON,
    SCHEDULER_PORT,
    SERVICE_CIDR,
    STORE_CLIENT_PORT,
    STORE_PEER_PORT,
    Layout,
    tracing_flags,
    write_kubeconfig,
)
from lab.labadm.workflow import Phase, PhaseError, Workflow, check, say

NODES = resource_for("v1", "Node")
CLUSTER_ROLE_BINDINGS = resource_for("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
CLUSTER_ADMINS = "kubeadm:cluster-admins"


@dataclass
class InitData:
    """What every phase of `labadm init` shares."""

    layout: Layout
    node_name: str
    advertise_address: str
    image: str
    pod_subnet: str = "10.244.0.0/16"
    service_cidr: str = SERVICE_CIDR
    load_balancer_ip_range: str = ""
    """The controller-manager's `--load-balancer-ip-range` (controllers.servicelb);
    empty: LoadBalancer Services stay pending."""
    dry_run: bool = False
    token: str = ""
    wait_timeout: float = 300.0
    control_plane_endpoint: str = ""
    """host:port every node and admin reaches the apiservers at (a load balancer in
    front of them, kubeadm's --control-plane-endpoint); this node's address if empty."""
    upload_certs: bool = False
    certificate_key: str = ""
    store_initial_cluster: str = ""
    """The store members to start with (name=peer URL, comma-separated): this node
    alone on init; every member, this one added as a learner, on a control-plane join."""
    store_peers: tuple[str, ...] = ()
    """The other members' client URLs: the apiserver reaches them after its own."""
    tracing_endpoint: str = ""
    """The lab's trace collector (an OTLP/HTTP base URL) that the store member, the
    kubelet, the controller-manager, the scheduler, kube-proxy and cluster DNS send spans
    to (`--tracing-endpoint`); empty, the default: the flag is left out and they do not
    trace."""
    collector: bool = False
    """Run the lab's trace collector on this node (a static pod, `--collector`); the
    components then send their spans to it unless `tracing_endpoint` names another."""
    _client: RestClient | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.collector and not self.tracing_endpoint:
            self.tracing_endpoint = f"http://{self.advertise_address}:{COLLECTOR_PORT}"

    @property
    def local_server(self) -> str:
        """This node's own apiserver."""
        return f"https://{self.advertise_address}:{API_PORT}"

    @property
    def server(self) -> str:
        """The control-plane endpoint: the address kubeconfigs and cluster-info name."""
        if self.control_plane_endpoint:
            return f"https://{self.control_plane_endpoint}"
        return self.local_server

    def client(self) -> RestClient:
        """admin.conf's identity, through this node's own apiserver (a load balancer in
        front may not have marked it up yet)."""
        if self._client is None:
            self._client = self.local_client("admin")
        return self._client

    def local_client(self, kubeconfig: str) -> RestClient:
        config = load_config(self.layout.kubeconfig(kubeconfig))
        return RestClient(replace(config, server=self.local_server), qps=None)


# -- preflight ---------------------------------------------------------------------------

REQUIRED_COMMANDS = ("docker", "sv", "iptables")
SERVICE_DIR = Path("/etc/service")
"""runit's services on a node (the node image's, `images/node/services`)."""
PORTS = (API_PORT, STORE_CLIENT_PORT, STORE_PEER_PORT, CONTROLLER_MANAGER_PORT, SCHEDULER_PORT)


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def preflight(data: InitData) -> None:
    """Every check, then one error listing all that failed (kubeadm's `[ERROR ...]`)."""
    failed: list[str] = []
    manifests = sorted(data.layout.manifests.glob("*.yaml"))
    if manifests or data.layout.kubeconfig("admin").exists():
        failed.append(
            f"this node is already initialized ({data.layout.kubeconfig('admin')} or "
            f"{data.layout.manifests}/*.yaml exist): run `labadm reset` first"
        )
    if not data.dry_run:
        ports = (*PORTS, COLLECTOR_PORT) if data.collector else PORTS
        failed += [f"port {p} is in use" for p in ports if port_in_use(p)]
        failed += [
            f"command {c!r} not found on the PATH" for c in REQUIRED_COMMANDS if not shutil.which(c)
        ]
    check(failed, "init")


# -- certs -------------------------------------------------------------------------------


def _cert_phase(
    name: str,
    help: str,
    directory: Callable[[Layout], Path],
    make: Callable[[InitData], pki.CertKey],
) -> Phase[InitData]:
    def run(data: InitData) -> None:
        where = directory(data.layout)
        if (where / f"{name.rpartition('/')[2]}.crt").exists():
            say("certs", f'Using existing "{name}" certificate and key')
            return
        say("certs", f'Generating "{name}" certificate and key')
        pki.write_pair(make(data), where, name.rpartition("/")[2])

    return Phase(name.replace("/", "-"), help, run)


def _ca(layout_dir: Callable[[Layout], Path], name: str) -> Callable[[InitData], pki.CertKey]:
    return lambda data: pki.load_pair(layout_dir(data.layout), name)


def _pki(layout: Layout) -> Path:
    return layout.pki


def _store_pki(layout: Layout) -> Path:
    return layout.store_pki


def _apiserver(data: InitData) -> pki.CertKey:
    endpoint = data.control_plane_endpoint.rpartition(":")[0] or data.control_plane_endpoint
    extra = [endpoint] if endpoint else []
    ips = [e for e in extra if _is_ip(e)]
    return pki.issue(
        _ca(_pki, "ca")(data),
        "kube-apiserver",
        server=True,
        dns_names=[
            data.node_name,
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            *(e for e in extra if not _is_ip(e)),
        ],
        ip_addresses=[data.advertise_address, "127.0.0.1", "10.96.0.1", *ips],
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _store_server(data: InitData) -> pki.CertKey:
    return pki.issue(
        _ca(_store_pki, "ca")(data),
        data.node_name,
        server=True,
        client=True,
        dns_names=[data.node_name, "localhost"],
        ip_addresses=[data.advertise_address, "127.0.0.1"],
    )


def sa_keys(data: InitData) -> None:
    if (data.layout.pki / "sa.key").exists():
        say("certs", 'Using the existing "sa" key')
        return
    say("certs", 'Generating "sa" key and public key')
    key = ec.generate_private_key(ec.SECP256R1())
    data.layout.pki.mkdir(mode=0o700, parents=True, exist_ok=True)
    pki.write_atomic(
        data.layout.pki / "sa.key",
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        0o600,
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    pki.write_atomic(data.layout.pki / "sa.pub", public, 0o644)


CERTS: Phase[InitData] = Phase(
    "certs",
    "Certificates of the control plane under /etc/kubelab/pki",
    phases=(
        _cert_phase("ca", "The cluster CA", _pki, lambda d: pki.new_ca("kubernetes")),
        _cert_phase("apiserver", "The apiserver's serving certificate", _pki, _apiserver),
        _cert_phase(
            "apiserver-kubelet-client",
            "The apiserver's client certificate for kubelets",
            _pki,
            lambda d: pki.issue(
                _ca(_pki, "ca")(d),
                "kube-apiserver-kubelet-client",
                organizations=[CLUSTER_ADMINS],
                client=True,
            ),
        ),
        _cert_phase(
            "front-proxy-ca",
            "The CA of the aggregation layer's front proxy",
            _pki,
            lambda d: pki.new_ca("front-proxy-ca"),
        ),
        _cert_phase(
            "front-proxy-client",
            "The front proxy's client certificate",
            _pki,
            lambda d: pki.issue(_ca(_pki, "front-proxy-ca")(d), "front-proxy-client", client=True),
        ),
        _cert_phase("store/ca", "The store's CA", _store_pki, lambda d: pki.new_ca("store-ca")),
        _cert_phase(
            "store/server", "The store member's client-port certificate", _store_pki, _store_server
        ),
        _cert_phase("store/peer", "The store member's peer certificate", _store_pki, _store_server),
        _cert_phase(
            "store/healthcheck-client",
            "A client certificate for checking the store's health",
            _store_pki,
            lambda d: pki.issue(
                _ca(_store_pki, "ca")(d), "kube-store-healthcheck-client", client=True
            ),
        ),
        _cert_phase(
            "apiserver-store-client",
            "The apiserver's client certificate for the store",
            _pki,
            lambda d: pki.issue(
                _ca(_store_pki, "ca")(d),
                "kube-apiserver-store-client",
                organizations=["system:masters"],
                client=True,
            ),
        ),
        Phase("sa", "The service-account token signing key pair", sa_keys),
    ),
)


# -- kubeconfigs -------------------------------------------------------------------------

KUBECONFIG_USERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("kubernetes-admin", (CLUSTER_ADMINS,)),
    "super-admin": ("kubernetes-super-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
}


def _kubeconfig_phase(name: str) -> Phase[InitData]:
    def run(data: InitData) -> None:
        path = data.layout.kubeconfig(name)
        if path.exists():
            say("kubeconfig", f'Using existing kubeconfig file: "{path}"')
            return
        user, groups = KUBECONFIG_USERS.get(
            name, (f"system:node:{data.node_name}", ("system:nodes",))
        )
        say("kubeconfig", f'Writing "{name}.conf" kubeconfig file')
        ca = pki.load_pair(data.layout.pki, "ca")
        cert = pki.issue(ca, user, organizations=list(groups), client=True)
        # The controller-manager and the scheduler reach their own node's apiserver;
        # admins and the kubelet the control-plane endpoint, as kubeadm writes them.
        local = name in ("controller-manager", "scheduler")
        server = data.local_server if local else data.server
        write_kubeconfig(
            data.layout, name, server, user, ca.cert_pem(), cert.cert_pem(), cert.key_pem()
        )

    return Phase(name, f"The kubeconfig file for {name}", run)


KUBECONFIGS: Phase[InitData] = Phase(
    "kubeconfig",
    "Kubeconfig files of the control plane and the admin under /etc/kubelab",
    phases=tuple(
        _kubeconfig_phase(n)
        for n in ("admin", "super-admin", "kubelet", "controller-manager", "scheduler")
    ),
)


# -- static pod manifests ----------------------------------------------------------------


def static_pod(
    data: InitData, name: str, module: str, args: list[str], mounts: dict[str, Path]
) -> dict[str, Any]:
    """A control-plane static pod as kubeadm writes them: host network, kube-system, the
    node's files mounted by hostPath at the same paths."""
    on_node = data.layout.on_node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "kube-system",
            "labels": {"component": name, "tier": "control-plane"},
        },
        "spec": {
            "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            "containers": [
                {
                    "name": name,
                    "image": data.image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": [NODE_IMAGE_PYTHON, "-m", module, *args],
                    "volumeMounts": [
                        {"name": volume, "mountPath": on_node(path)}
                        for volume, path in mounts.items()
                    ],
                }
            ],
            "volumes": [
                {
                    "name": volume,
                    "hostPath": {"path": on_node(path), "type": "DirectoryOrCreate"},
                }
                for volume, path in mounts.items()
            ],
        },
    }


def store_pod(data: InitData) -> dict[str, Any]:
    s = data.layout.on_node(data.layout.store_pki)
    ip = data.advertise_address
    own = f"{data.node_name}=https://{ip}:{STORE_PEER_PORT}"
    return static_pod(
        data,
        "kubelab-store",
        "controlplane.store.server",
        [
            f"--name={data.node_name}",
            f"--data-dir={data.layout.on_node(data.layout.store_data)}",
            f"--listen-client-urls=https://127.0.0.1:{STORE_CLIENT_PORT},https://{ip}:{STORE_CLIENT_PORT}",
            f"--advertise-client-urls=https://{ip}:{STORE_CLIENT_PORT}",
            f"--listen-peer-urls=https://{ip}:{STORE_PEER_PORT}",
            f"--initial-cluster={data.store_initial_cluster or own}",
            f"--initial-cluster-state={'existing' if data.store_initial_cluster else 'new'}",
            f"--cert-file={s}/server.crt",
            f"--key-file={s}/server.key",
            f"--trusted-ca-file={s}/ca.crt",
            "--client-cert-auth",
            f"--peer-cert-file={s}/peer.crt",
            f"--peer-key-file={s}/peer.key",
            f"--peer-trusted-ca-file={s}/ca.crt",
            *tracing_flags(data.tracing_endpoint),
        ],
        {"store-certs": data.layout.store_pki, "store-data": data.layout.store_data},
    )


def apiserver_pod(data: InitData) -> dict[str, Any]:
    p = data.layout.on_node(data.layout.pki)
    return static_pod(
        data,
        "kube-apiserver",
        "controlplane.apiserver.server",
        [
            f"--advertise-address={data.advertise_address}",
            f"--secure-port={API_PORT}",
            "--etcd-servers="
            + ",".join((f"https://127.0.0.1:{STORE_CLIENT_PORT}", *data.store_peers)),
            f"--etcd-cafile={p}/store/ca.crt",
            f"--etcd-certfile={p}/apiserver-store-client.crt",
            f"--etcd-keyfile={p}/apiserver-store-client.key",
            f"--tls-cert-file={p}/apiserver.crt",
            f"--tls-private-key-file={p}/apiserver.key",
            f"--client-ca-file={p}/ca.crt",
            f"--service-account-key-file={p}/sa.pub",
            f"--service-account-signing-key-file={p}/sa.key",
            f"--service-cluster-ip-range={data.service_cidr}",
            f"--kubelet-client-certificate={p}/apiserver-kubelet-client.crt",
            f"--kubelet-client-key={p}/apiserver-kubelet-client.key",
            *tracing_flags(data.tracing_endpoint),
        ],
        {"k8s-certs": data.layout.pki},
    )


def component_kubeconfig_flags(data: InitData, name: str) -> list[str]:
    """The controller-manager's or scheduler's credentials, as kubeadm passes them: its
    kubeconfig for its work and for delegating /metrics' authentication and
    authorization to the apiserver (`kubelab.serving`), the cluster CA for client
    certificates."""
    conf = data.layout.on_node(data.layout.kubeconfig(name))
    return [
        f"--kubeconfig={conf}",
        f"--authentication-kubeconfig={conf}",
        f"--authorization-kubeconfig={conf}",
        f"--client-ca-file={data.layout.on_node(data.layout.pki)}/ca.crt",
    ]


def controller_manager_pod(data: InitData) -> dict[str, Any]:
    p = data.layout.on_node(data.layout.pki)
    return static_pod(
        data,
        "kube-controller-manager",
        "controlplane.controllers.manager",
        [
            *component_kubeconfig_flags(data, "controller-manager"),
            f"--root-ca-file={p}/ca.crt",
            "--leader-elect=true",
            "--allocate-node-cidrs=true",
            f"--cluster-cidr={data.pod_subnet}",
            f"--cluster-signing-cert-file={p}/ca.crt",
            f"--cluster-signing-key-file={p}/ca.key",
            *(
                [f"--load-balancer-ip-range={data.load_balancer_ip_range}"]
                if data.load_balancer_ip_range
                else []
            ),
            *tracing_flags(data.tracing_endpoint),
        ],
        {"k8s-certs": data.layout.pki, "kubeconfig": data.layout.etc},
    )


def scheduler_pod(data: InitData) -> dict[str, Any]:
    return static_pod(
        data,
        "kube-scheduler",
        "controlplane.scheduler",
        [
            *component_kubeconfig_flags(data, "scheduler"),
            "--leader-elect=true",
            "--bind-address=127.0.0.1",
            f"--secure-port={SCHEDULER_PORT}",
            f"--cert-dir={data.layout.on_node(data.layout.pki)}/scheduler-serving",
            *tracing_flags(data.tracing_endpoint),
        ],
        {"kubeconfig": data.layout.etc},
    )


COLLECTOR_MAX_TRACES = 10_000
COLLECTOR_MAX_BYTES = 200 * 1024 * 1024
"""The collector's bound (issue 23: the last 10,000 traces or 200 MB of spans)."""


def collector_pod(data: InitData) -> dict[str, Any]:
    """The lab's trace collector (`controlplane.collector`): on the host network, so that
    every node's components reach it at this node's address, its traces on the node's
    disk so that they outlive a restart of the pod."""
    return static_pod(
        data,
        "kubelab-collector",
        "controlplane.collector",
        [
            f"--port={COLLECTOR_PORT}",
            f"--data-dir={data.layout.on_node(data.layout.collector_data)}",
            f"--max-traces={COLLECTOR_MAX_TRACES}",
            f"--max-bytes={COLLECTOR_MAX_BYTES}",
        ],
        {"collector-data": data.layout.collector_data},
    )


def collector_manifest(data: InitData) -> None:
    if not data.collector:
        say("collector", "Skipping phase. Please see --collector")
        return
    _write_manifest(data, "collector", "kubelab-collector", collector_pod)


def _write_manifest(
    data: InitData, phase: str, name: str, make: Callable[[InitData], dict[str, Any]]
) -> None:
    path = data.layout.manifests / f"{name}.yaml"
    say(phase, f'Creating static Pod manifest for "{name}"')
    data.layout.manifests.mkdir(parents=True, exist_ok=True)
    pki.write_atomic(path, yaml.safe_dump(make(data), sort_keys=False).encode(), 0o600)


def _manifest_phase(
    phase: str, name: str, make: Callable[[InitData], dict[str, Any]]
) -> Phase[InitData]:
    return Phase(
        name.removeprefix("kube-"),
        f"The static pod manifest of {name}",
        lambda data: _write_manifest(data, phase, name, make),
    )


STORE: Phase[InitData] = Phase(
    "store",
    "The store member's static pod manifest (kubeadm's etcd phase)",
    phases=(_manifest_phase("store", "kubelab-store", store_pod),),
)
CONTROL_PLANE: Phase[InitData] = Phase(
    "control-plane",
    "Static pod manifests of the apiserver, controller-manager and scheduler",
    phases=(
        _manifest_phase("control-plane", "kube-apiserver", apiserver_pod),
        _manifest_phase("control-plane", "kube-controller-manager", controller_manager_pod),
        _manifest_phase("control-plane", "kube-scheduler", scheduler_pod),
    ),
)


# -- the kubelet -------------------------------------------------------------------------


def kubelet_serving_pair(layout: Layout, node_name: str, node_ip: str) -> None:
    """The kubelet's HTTPS pair: signed by the cluster CA where its key is at hand (a
    control-plane node), else self-signed, as a kubelet without one makes it."""
    directory = layout.kubelet_dir / "pki"
    if (directory / "kubelet.crt").exists():
        return
    try:
        ca = pki.load_pair(layout.pki, "ca")
    except pki.PKIFileError:
        ca = pki.new_ca(f"{node_name}-ca")
    pair = pki.issue(ca, node_name, server=True, dns_names=[node_name], ip_addresses=[node_ip])
    pki.write_pair(pair, directory, "kubelet")


def kubelet_flags(
    layout: Layout, node_name: str, node_ip: str, *, manifests: bool, tracing_endpoint: str = ""
) -> str:
    kubelet_pki = layout.on_node(layout.kubelet_dir / "pki")
    flags = [
        f"--hostname-override={node_name}",
        f"--node-ip={node_ip}",
        f"--tls-cert-file={kubelet_pki}/kubelet.crt",
        f"--tls-private-key-file={kubelet_pki}/kubelet.key",
        f"--client-ca-file={layout.on_node(layout.pki)}/ca.crt",
        f"--cluster-dns={CLUSTER_DNS}",
        f"--port={KUBELET_PORT}",
        *tracing_flags(tracing_endpoint),
    ]
    if manifests:
        flags.append(f"--pod-manifest-path={layout.on_node(layout.manifests)}")
    return f'ARGS="{" ".join(flags)}"\n'


def start_kubelet(
    layout: Layout,
    node_name: str,
    node_ip: str,
    *,
    dry_run: bool,
    manifests: bool,
    tracing_endpoint: str = "",
) -> None:
    """Write the kubelet's flags and serving pair, then `sv up kubelet` (runit)."""
    kubelet_serving_pair(layout, node_name, node_ip)
    say("kubelet-start", f'Writing kubelet flags to file "{layout.kubelet_flags}"')
    layout.kubelet_flags.parent.mkdir(parents=True, exist_ok=True)
    flags = kubelet_flags(
        layout, node_name, node_ip, manifests=manifests, tracing_endpoint=tracing_endpoint
    )
    pki.write_atomic(layout.kubelet_flags, flags.encode(), 0o644)
    sv_up("kubelet", "kubelet-start", dry_run=dry_run)


def sv_up(service: str, phase: str, *, dry_run: bool) -> None:
    """Start one of the node image's runit services, and enable it: its `down` file goes,
    so runit starts it again when the node restarts (`labctl stop`/`start`, a restart of
    the Docker Engine); `labadm reset` puts the file back."""
    if dry_run:
        say(phase, f"Would start {service} (sv up {service})")
        return
    say(phase, f"Starting {service}")
    (SERVICE_DIR / service / "down").unlink(missing_ok=True)
    done = subprocess.run(["sv", "up", service], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PhaseError(f"`sv up {service}` failed: {done.stderr.strip() or done.stdout.strip()}")


def start_network_agent(layout: Layout, *, dry_run: bool) -> None:
    """The pod network agent (routes to the other nodes' podCIDRs), with the node's own
    credentials: it reads Nodes, which a node may. (A DaemonSet with its own
    ServiceAccount is kubeadm's way for add-ons; the node image's service serves here.)"""
    conf = layout.kubeconfig("network")
    say("addons", f'Writing "{conf.name}" for the pod network agent')
    if dry_run and not layout.kubeconfig("kubelet").exists():
        return
    pki.write_atomic(conf, layout.kubeconfig("kubelet").read_bytes(), 0o600)
    sv_up("kubelab-network", "addons", dry_run=dry_run)


def start_kube_proxy(
    layout: Layout, cluster_cidr: str, *, dry_run: bool, tracing_endpoint: str = ""
) -> None:
    """kube-proxy (iptables mode), with the node's credentials as the network agent: a
    node may read Services and EndpointSlices."""
    conf = layout.kubeconfig("proxy")
    say("addons", f'Writing "{conf.name}" and the flags of kube-proxy')
    defaults = layout.root / "etc/default/kubelab-proxy"
    defaults.parent.mkdir(parents=True, exist_ok=True)
    flags = " ".join(["--cluster-cidr", cluster_cidr, *tracing_flags(tracing_endpoint)])
    pki.write_atomic(defaults, f'ARGS="{flags}"\n'.encode(), 0o644)
    if dry_run and not layout.kubeconfig("kubelet").exists():
        return
    pki.write_atomic(conf, layout.kubeconfig("kubelet").read_bytes(), 0o600)
    sv_up("kubelab-proxy", "addons", dry_run=dry_run)


def addons(
    start_network: Callable[[Any], None], start_proxy: Callable[[Any], None], *more: Phase[Any]
) -> Phase[Any]:
    """The node agents, as init and join both install them, and the cluster's own
    add-ons (`more`: init's cluster DNS, default StorageClass and ingress-nginx)."""
    return Phase(
        "addons",
        "The node agents and the cluster's add-ons",
        phases=(
            Phase("network", "The pod network agent", start_network),
            Phase("kube-proxy", "kube-proxy", start_proxy),
            *more,
        ),
    )


def upload_config(data: InitData) -> None:
    say("upload-config", f'Storing the configuration in ConfigMap "{tokens.CLUSTER_CONFIG}"')
    if data.dry_run:
        return
    settings = {
        "controlPlaneEndpoint": data.server.removeprefix("https://"),
        "podSubnet": data.pod_subnet,
        "serviceSubnet": data.service_cidr,
        "loadBalancerIPRange": data.load_balancer_ip_range,
    }
    if data.tracing_endpoint:  # joining nodes trace to the same place
        settings["tracingEndpoint"] = data.tracing_endpoint
    tokens.upload_cluster_config(data.client(), settings)


def upload_certs(data: InitData) -> None:
    if not data.upload_certs:
        say("upload-certs", "Skipping phase. Please see --upload-certs")
        return
    data.certificate_key = data.certificate_key or certs_upload.new_key()
    say(
        "upload-certs",
        f'Storing the certificates in Secret "{certs_upload.SECRET_NAME}" in '
        'the "kube-system" Namespace',
    )
    if data.dry_run:
        return
    certs_upload.upload(data.client(), data.layout.pki, data.certificate_key)
    say("upload-certs", f"Using certificate key:\n{data.certificate_key}")


def kubelet_start(data: InitData) -> None:
    start_kubelet(
        data.layout,
        data.node_name,
        data.advertise_address,
        dry_run=data.dry_run,
        manifests=True,
        tracing_endpoint=data.tracing_endpoint,
    )


# -- waiting, marking, tokens ------------------------------------------------------------


def wait_control_plane(data: InitData) -> None:
    if data.dry_run:
        say("wait-control-plane", "Would wait for the apiserver's /readyz")
        return
    say(
        "wait-control-plane",
        f"Waiting for the kubelet to boot up the control plane as static Pods from "
        f'"{data.layout.manifests}" (up to {data.wait_timeout:.0f}s)',
    )
    started = time.monotonic()
    session = requests.Session()
    session.trust_env = False
    session.verify = str(data.layout.pki / "ca.crt")
    while time.monotonic() - started < data.wait_timeout:
        try:
            if session.get(f"{data.local_server}/readyz", timeout=3).status_code == 200:
                say(
                    "wait-control-plane",
                    f"The apiserver is ready after {time.monotonic() - started:.1f} seconds",
                )
                return
        except requests.RequestException:
            pass
        time.sleep(1.0)
    raise PhaseError(
        f"the apiserver at {data.local_server} was not ready within {data.wait_timeout:.0f}s: see "
        "/var/log/kubelet.log and `docker ps -a` / `docker logs` on this node"
    )


def cluster_admins(data: InitData) -> None:
    """Bind kubeadm:cluster-admins (admin.conf's group) to cluster-admin, through
    super-admin.conf (system:masters), as kubeadm does."""
    if data.dry_run:
        say("upload-rbac", f'Would bind the group "{CLUSTER_ADMINS}" to cluster-admin')
        return
    su = data.local_client("super-admin")
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": CLUSTER_ADMINS},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": CLUSTER_ADMINS}
        ],
    }
    tokens.create_or_keep(su, CLUSTER_ROLE_BINDINGS, binding)
    say("upload-rbac", f'Bound the group "{CLUSTER_ADMINS}" to cluster-admin')


def mark_control_plane(data: InitData) -> None:
    """kubeadm's labels (the role, and no LoadBalancer addresses held here while a
    worker can: `agents.proxy.announce`) and taint."""
    taint = f"{CONTROL_PLANE_LABEL}:NoSchedule"
    say(
        "mark-control-plane",
        f"Marking the node {data.node_name} as control-plane by adding the labels: "
        f"[{CONTROL_PLANE_LABEL} {EXCLUDE_FROM_LB_LABEL}]",
    )
    say("mark-control-plane", f"Marking the node {data.node_name} with the taint [{taint}]")
    if data.dry_run:
        return
    client = data.client()
    deadline = time.monotonic() + data.wait_timeout
    while True:
        try:
            node = client.get(NODES, data.node_name)
            break
        except StatusError as exc:
            if exc.code != 404 or time.monotonic() > deadline:
                raise PhaseError(
                    f"Node {data.node_name} did not register: see /var/log/kubelet.log"
                ) from exc
            time.sleep(1.0)
    taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != CONTROL_PLANE_LABEL]
    taints.append({"key": CONTROL_PLANE_LABEL, "effect": "NoSchedule"})
    client.patch(
        NODES,
        data.node_name,
        {
            "metadata": {"labels": {CONTROL_PLANE_LABEL: "", EXCLUDE_FROM_LB_LABEL: ""}},
            "spec": {"taints": taints},
        },
    )


def bootstrap_token(data: InitData) -> None:
    if data.dry_run:
        say("bootstrap-token", "Would create a bootstrap token and the cluster-info ConfigMap")
        return
    client = data.client()
    data.token = tokens.create(client, token=data.token or None)
    say("bootstrap-token", f"Using token: {data.token}")
    tokens.allow_node_bootstrap(client)
    say(
        "bootstrap-token",
        "Configured RBAC rules so that Node Bootstrap tokens can post CSRs "
        "and have them approved automatically",
    )
    ca = pki.load_cert(data.layout.pki / "ca.crt")
    tokens.publish_cluster_info(client, data.server, ca)
    say("bootstrap-token", 'Creating the "cluster-info" ConfigMap in the "kube-public" namespace')


def join_command(server: str, token: str, ca: Path) -> str:
    digest = pki.ca_cert_hash(pki.load_cert(ca))
    endpoint = server.removeprefix("https://")
    return f"labadm join {endpoint} --token {token} --discovery-token-ca-cert-hash {digest}"


def show_join_command(data: InitData) -> None:
    admin = data.layout.kubeconfig("admin")
    print(
        "\nYour kubelab control-plane has initialized successfully!\n\n"
        "To start using your cluster, you need to run the following as a regular user:\n\n"
        "  mkdir -p $HOME/.kube\n"
        f"  sudo cp -i {admin} $HOME/.kube/config\n"
        "  sudo chown $(id -u):$(id -g) $HOME/.kube/config\n\n"
        "Alternatively, if you are the root user, you can run:\n\n"
        f"  export KUBECONFIG={admin}\n"
    )
    if data.dry_run:
        return
    command = join_command(data.server, data.token, data.layout.pki / "ca.crt")
    if data.certificate_key:
        print(
            "You can now join any number of control-plane nodes by running the following "
            f"on each as root:\n\n{command} --control-plane --certificate-key "
            f"{data.certificate_key}\n\nPlease note that the certificate-key gives access to "
            "cluster sensitive data, keep it secret!\nAs a safeguard, uploaded-certs will be "
            'deleted in two hours; if necessary, you can use\n"labadm init phase '
            'upload-certs --upload-certs" to reload certs afterward.\n'
        )
    print(
        "Then you can join any number of worker nodes by running the following on each "
        f"as root:\n\n{command}"
    )


INIT = Workflow[InitData](
    (
        Phase("preflight", "Checks before changing anything", preflight),
        CERTS,
        KUBECONFIGS,
        STORE,
        Phase("collector", "The trace collector's static pod (--collector)", collector_manifest),
        CONTROL_PLANE,
        Phase("kubelet-start", "Writes the kubelet's flags and starts it", kubelet_start),
        Phase("wait-control-plane", "Waits for the apiserver", wait_control_plane),
        Phase("upload-rbac", "Binds admin.conf's group to cluster-admin", cluster_admins),
        Phase("upload-config", "The cluster's settings for joining nodes", upload_config),
        Phase("upload-certs", "The shared certs, encrypted, for control-plane joins", upload_certs),
        Phase("mark-control-plane", "Labels and taints the node", mark_control_plane),
        Phase("bootstrap-token", "A bootstrap token and cluster-info", bootstrap_token),
        addons(
            lambda d: start_network_agent(d.layout, dry_run=d.dry_run),
            lambda d: start_kube_proxy(
                d.layout, d.pod_subnet, dry_run=d.dry_run, tracing_endpoint=d.tracing_endpoint
            ),
            Phase(
                "dns",
                "Cluster DNS: a Deployment behind kube-system/kube-dns",
                lambda d: dns.deploy(
                    None if d.dry_run else d.client(), d.image, d.tracing_endpoint
                ),
            ),
            Phase(
                "storage",
                "The default StorageClass (local-path volumes)",
                lambda d: storage.deploy(None if d.dry_run else d.client()),
            ),
            Phase(
                "ingress",
                "ingress-nginx: the default IngressClass and its controller behind a LoadBalancer",
                lambda d: ingress.deploy(
                    None if d.dry_run else d.client(), d.image, d.tracing_endpoint
                ),
            ),
        ),
        Phase("show-join-command", "Prints how to use the cluster and join it", show_join_command),
    )
)
