"""What every node of a kubelab cluster must be, checked over SSH with testinfra: its
services, its listening ports, its certificates and kubeconfigs, its static pods (on
control-plane nodes only), kube-proxy's chains, its Node Ready in the API, and its
authenticated ports refusing a caller that has no client certificate."""

from __future__ import annotations

import pytest

from kubelab.client import RestClient, load_config, resource_for
from tests.infra.conftest import Cluster, Node

NODES = resource_for("v1", "Node")
CONTROL_PLANE_PORTS = {
    6443: "kube-apiserver",
    2379: "the store's client port",
    2380: "the store's peer port",
    10250: "the kubelet",
    10257: "kube-controller-manager",
    10259: "kube-scheduler",
}
STATIC_PODS = ("kubelab-store", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
PKI = "/etc/kubelab/pki"
# A TLS client with no certificate of its own, run on the node with the system's Python:
# prints the HTTP status, or the handshake's failure.
NO_CLIENT_CERT = """
import http.client, ssl, sys
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
conn = http.client.HTTPSConnection(sys.argv[1], int(sys.argv[2]), context=ctx, timeout=10)
try:
    conn.request("GET", sys.argv[3]); print(conn.getresponse().status)
except (ssl.SSLError, ConnectionError) as exc:
    print("refused:", type(exc).__name__, exc)
"""


def test_services_run(node: Node) -> None:
    """The container engine (containerd and dockerd) and sshd (processes whichever
    supervisor runs them), the kubelet under runit (labadm starts it with `sv up`)."""
    for name in ("containerd", "dockerd", "sshd"):
        assert node.host.process.filter(comm=name), f"{name} is not running on {node.name}"
    status = node.host.run("sv status kubelet")
    assert status.stdout.startswith("run:"), f"kubelet on {node.name}: {status.stdout}"


def listening_ports(node: Node) -> set[int]:
    """The TCP ports the node listens on, on any address (testinfra's `socket("tcp://N")`
    wants both IPv4's and IPv6's wildcard)."""
    sockets = node.host.socket.get_listening_sockets()
    return {int(s.rsplit(":", 1)[1]) for s in sockets if s.startswith("tcp://")}


def test_control_plane_ports_listen(control_plane: Node) -> None:
    ports = listening_ports(control_plane)
    for port, what in CONTROL_PLANE_PORTS.items():
        assert port in ports, f"{what} does not listen on {control_plane.name}:{port}"


def test_worker_ports(worker: Node) -> None:
    """A worker runs the kubelet and no control-plane component."""
    ports = listening_ports(worker)
    assert 10250 in ports, f"the kubelet does not listen on {worker.name}:10250"
    for port in (6443, 2379, 2380, 10257, 10259):
        assert port not in ports, (
            f"{CONTROL_PLANE_PORTS[port]} listens on worker {worker.name}:{port}"
        )


def _private_files(node: Node) -> list[str]:
    found = node.host.run("find /etc/kubelab -name '*.key' -o -name '*.conf' -o -name '*.pem'")
    return str(found.stdout).split()


def test_certificates_and_kubeconfigs_with_private_keys_0600(node: Node) -> None:
    host = node.host
    assert host.file(f"{PKI}/ca.crt").is_file
    assert host.file("/etc/kubelab/kubelet.conf").is_file
    private = _private_files(node)
    assert "/etc/kubelab/kubelet.conf" in private
    for path in private:
        assert host.file(path).mode == 0o600, f"{path} on {node.name} is not 0600"
        assert host.file(path).user == "root"


def test_control_plane_certificates(control_plane: Node) -> None:
    host = control_plane.host
    for pair in ("ca", "apiserver", "apiserver-kubelet-client", "apiserver-store-client",
                 "front-proxy-ca", "front-proxy-client"):  # fmt: skip
        assert host.file(f"{PKI}/{pair}.crt").is_file, f"{pair}.crt on {control_plane.name}"
        assert host.file(f"{PKI}/{pair}.key").mode == 0o600
    assert host.file(f"{PKI}/sa.key").mode == 0o600
    for name in ("admin", "controller-manager", "scheduler"):
        assert host.file(f"/etc/kubelab/{name}.conf").mode == 0o600
    # As kubeadm's, super-admin.conf is written by `init` alone, not by a control-plane join.
    super_admin = host.file("/etc/kubelab/super-admin.conf")
    assert not super_admin.exists or super_admin.mode == 0o600


def test_static_pod_manifests_on_control_plane_nodes(control_plane: Node) -> None:
    for pod in STATIC_PODS:
        assert control_plane.host.file(f"/etc/kubelab/manifests/{pod}.yaml").is_file


def test_no_static_pod_manifests_on_workers(worker: Node) -> None:
    listed = worker.host.run("ls /etc/kubelab/manifests 2>/dev/null").stdout.split()
    assert listed == [], f"static pods on worker {worker.name}: {listed}"


def test_control_plane_containers_run(control_plane: Node) -> None:
    names = control_plane.host.check_output("docker ps --format '{{.Names}}'").split()
    for pod in STATIC_PODS:
        assert any(n.startswith(f"k8s_{pod}_{pod}-{control_plane.name}_") for n in names), (
            f"no running {pod} container on {control_plane.name}: {names}"
        )


def test_kube_proxy_chains_present(node: Node) -> None:
    for chain in ("KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING"):
        assert node.host.run(f"iptables -t nat -S {chain}").rc == 0, (
            f"kube-proxy's {chain} chain is missing on {node.name}"
        )


def test_node_is_ready_in_the_api(node: Node, cluster: Cluster) -> None:
    if cluster.kubeconfig is None:
        pytest.skip("no admin kubeconfig (--kubeconfig or kubelab_kubeconfig)")
    client = RestClient(load_config(cluster.kubeconfig), qps=None)
    obj = client.get(NODES, node.name)
    conditions = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
    assert conditions.get("Ready") == "True", f"{node.name}: {conditions}"


def _without_client_cert(node: Node, address: str, port: int, path: str) -> str:
    script = NO_CLIENT_CERT.strip().replace("'", "'\\''")
    return str(node.host.check_output(f"python3 -c '{script}' {address} {port} {path}"))


def test_kubelet_refuses_a_caller_without_a_client_certificate(node: Node) -> None:
    answer = _without_client_cert(node, node.entry.ip, 10250, "/pods")
    assert answer in ("401", "403") or answer.startswith("refused:"), (
        f"the kubelet on {node.name} answered {answer} to an anonymous /pods"
    )


def test_store_client_port_refuses_a_caller_without_a_client_certificate(
    control_plane: Node,
) -> None:
    answer = _without_client_cert(control_plane, "127.0.0.1", 2379, "/version")
    assert answer.startswith("refused:"), (
        f"the store on {control_plane.name} answered {answer} without a client certificate"
    )
