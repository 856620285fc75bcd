"""The seeds' Service flow on real nodes: nginx pods on two nodes answer through a
ClusterIP Service by DNS name from a pod, with cluster DNS itself behind the `kube-dns`
Service at a fixed ClusterIP, kube-proxy on every node and the pod network between."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubelab.api.errors import StatusError
from kubelab.client import resource_for
from lab.images import BUSYBOX_IMAGE, NGINX_IMAGE, Builder
from lab.nodes import Node, NodeCluster
from lab.relay import NodeAPI
from tests.node.conftest import POD_NETWORK, nat
from tests.waiting import until

SERVICES = resource_for("v1", "Service")
SLICES = resource_for("discovery.k8s.io/v1", "EndpointSlice")
NAMESPACES = resource_for("v1", "Namespace")
DNS_IP = "10.96.0.10"


def ensure_namespace(api: NodeAPI, name: str) -> None:
    try:
        api.client.create(NAMESPACES, {"metadata": {"name": name}})
    except StatusError as err:
        if err.code != 409:
            raise


def service_with_endpoints(
    api: NodeAPI,
    namespace: str,
    name: str,
    ports: list[tuple[str, str, int]],
    addresses: list[str],
    cluster_ip: str | None = None,
) -> None:
    """A Service and the EndpointSlice the EndpointSlice controller would write."""
    spec: dict[str, object] = {
        "ports": [{"name": n, "protocol": proto, "port": port} for n, proto, port in ports]
    }
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    api.client.create(SERVICES, {"metadata": {"name": name}, "spec": spec}, namespace)
    api.client.create(
        SLICES,
        {
            "metadata": {"name": f"{name}-1", "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "ports": [{"name": n, "protocol": proto, "port": port} for n, proto, port in ports],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in addresses],
        },
        namespace,
    )


@pytest.fixture(scope="module")
def cluster_dns(node_api: NodeAPI, proxies: list[Node]) -> Iterator[str]:
    """Cluster DNS on the second node's port 53, behind kube-system/kube-dns."""
    dns_node = proxies[1]
    node_api.install(dns_node, "/etc/kubelab/dns.conf")
    dns_node.exec("sv", "up", "kubelab-dns")
    ensure_namespace(node_api, "kube-system")
    service_with_endpoints(
        node_api,
        "kube-system",
        "kube-dns",
        [("dns", "UDP", 53), ("dns-tcp", "TCP", 53)],
        [dns_node.ip],
        cluster_ip=DNS_IP,
    )
    try:
        yield DNS_IP
    finally:
        node_api.client.delete(SERVICES, "kube-dns", "kube-system")
        node_api.client.delete(SLICES, "kube-dns-1", "kube-system")
        dns_node.exec("sv", "down", "kubelab-dns", check=False)


def nginx_pod(node: Node) -> tuple[str, str]:
    """An nginx pod on `node`: its container id and pod IP."""
    run = ["docker", "run", "-d", "--network", POD_NETWORK, NGINX_IMAGE]
    container = node.exec(*run).stdout.decode().strip()
    template = f'{{{{(index .NetworkSettings.Networks "{POD_NETWORK}").IPAddress}}}}'
    return container, node.sh(f"docker inspect -f '{template}' {container}").strip()


def test_nginx_on_two_nodes_answers_through_a_service_by_dns_name(
    image_builder: Builder,
    node_cluster: NodeCluster,
    node_api: NodeAPI,
    proxies: list[Node],
    cluster_dns: str,
    namespace: str,
) -> None:
    image_builder.ensure(["nginx"])
    node_cluster.load_image(NGINX_IMAGE, proxies)
    pods = [nginx_pod(node) for node in proxies]
    service_with_endpoints(
        node_api, namespace, "nginx", [("http", "TCP", 80)], [ip for _, ip in pods]
    )
    first = proxies[0]
    until(lambda: f"{namespace}/nginx:http" in nat(first), "kube-proxy's rules for nginx")

    # A pod's resolv.conf as the kubelet writes it: cluster DNS and the search path.
    search = [f"--dns-search={d}" for d in (f"{namespace}.svc.cluster.local", "svc.cluster.local")]
    fetch = "timeout 5 wget -q -O - http://nginx/ | grep -q 'Welcome to nginx' && echo ok"
    script = (
        f"nslookup nginx.{namespace}.svc.cluster.local"
        " | tail -n +3 | grep Address | cut -d' ' -f2; "
        f"for i in $(seq 20); do {fetch}; done"
    )
    out = first.exec(
        "docker", "run", "--rm", "--network", POD_NETWORK, f"--dns={cluster_dns}", *search,
        BUSYBOX_IMAGE, "sh", "-c", script,
    ).stdout.decode().split()  # fmt: skip
    cluster_ip = node_api.client.get(SERVICES, "nginx", namespace)["spec"]["clusterIP"]
    assert out == [cluster_ip] + ["ok"] * 20
    # Random balancing: both nginx pods served some of the 20 requests.
    for node, (container, _) in zip(proxies, pods, strict=True):
        log = node.exec("docker", "logs", container).stdout.decode()
        assert "GET / HTTP/1.1" in log, f"the nginx pod on {node.name} got no request"
