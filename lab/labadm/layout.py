"""Where labadm puts things on a node, as kubeadm lays out /etc/kubernetes.

    /etc/kubelab/pki/           cluster CA, apiserver, apiserver-kubelet-client,
                                apiserver-store-client, sa.key/sa.pub, front-proxy-ca and
                                front-proxy-client; store/ holds the store's CA and the
                                store member's server, peer and healthcheck-client pairs
    /etc/kubelab/*.conf         admin, super-admin, kubelet, controller-manager, scheduler
    /etc/kubelab/manifests/     static pods the kubelet runs (store, apiserver, ...)
    /etc/default/kubelet        the kubelet's flags (read by its runit service)
    /var/lib/kubelab-store      the store member's data
    /var/lib/kubelab/collector  the trace collector's traces (`labadm init --collector`)
    /var/lib/kubelet            the kubelet's own state (pki/ holds its serving pair)

Every path hangs off `root` ("/" on a node), so that `--dry-run` and tests lay the same
tree out in a temporary folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kubelab.client import RestClient, load_config
from kubelab.client import write_kubeconfig as write_inline_kubeconfig

API_PORT = 6443
STORE_CLIENT_PORT = 2379
STORE_PEER_PORT = 2380
CONTROLLER_MANAGER_PORT = 10257
SCHEDULER_PORT = 10259
KUBELET_PORT = 10250
COLLECTOR_PORT = 4318
"""The trace collector's (OTLP/HTTP's own port)."""
CLUSTER_NAME = "kubelab"
SERVICE_CIDR = "10.96.0.0/12"
CLUSTER_DNS = "10.96.0.10"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
NODE_IMAGE_PYTHON = "/opt/kubelab/venv/bin/python"
"""The node image's Python, with kubelab on its path: the control plane's static pods
run the node image itself."""


@dataclass(frozen=True)
class Layout:
    root: Path = Path("/")

    @property
    def etc(self) -> Path:
        return self.root / "etc/kubelab"

    @property
    def pki(self) -> Path:
        return self.etc / "pki"

    @property
    def store_pki(self) -> Path:
        return self.pki / "store"

    @property
    def manifests(self) -> Path:
        return self.etc / "manifests"

    def kubeconfig(self, name: str) -> Path:
        return self.etc / f"{name}.conf"

    @property
    def kubelet_flags(self) -> Path:
        return self.root / "etc/default/kubelet"

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "var/lib/kubelet"

    @property
    def store_data(self) -> Path:
        return self.root / "var/lib/kubelab-store"

    @property
    def collector_data(self) -> Path:
        return self.root / "var/lib/kubelab/collector"

    def on_node(self, path: Path) -> str:
        """`path` as the node sees it (the manifests name real paths even in a dry run)."""
        return "/" + str(path.relative_to(self.root))


def admin_client(layout: Layout) -> RestClient:
    """The cluster through admin.conf (kubeadm:cluster-admins)."""
    return RestClient(load_config(layout.kubeconfig("admin")), qps=None)


def write_kubeconfig(
    layout: Layout,
    name: str,
    server: str,
    user: str,
    ca_pem: bytes,
    client_cert_pem: bytes,
    client_key_pem: bytes,
) -> Path:
    """A self-contained kubeconfig under /etc/kubelab, readable by root only."""
    path = layout.kubeconfig(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = write_inline_kubeconfig(
        path,
        cluster_name=CLUSTER_NAME,
        server=server,
        ca_data=ca_pem,
        user_name=user,
        client_cert_data=client_cert_pem,
        client_key_data=client_key_pem,
    )
    written.chmod(0o600)
    return written


def tracing_flags(endpoint: str) -> list[str]:
    """A component's `--tracing-endpoint`, when the lab has a collector (`InitData`)."""
    return [f"--tracing-endpoint={endpoint}"] if endpoint else []
