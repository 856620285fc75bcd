"""The pod network across nodes: with the network agent running in each node, a pod on
one node reaches a pod on another by its IP, and the receiver sees the sender's own pod
IP (no NAT on the way); the agent's routes follow the Nodes in the API."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Iterator
from functools import partial

import pytest

from kubelab.client import resource_for
from lab.images import BUSYBOX_IMAGE
from lab.nodes import Node, NodeCluster
from tests.node.conftest import NodeAPI

NODES = resource_for("v1", "Node")
POD_NETWORK = "kubelab-pods"
KUBECONFIG = "/etc/kubelab/network.conf"
# busybox's httpd answers a CGI request with the address the request came from.
ECHO_ADDRESS = (
    "mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\n"
    "echo $REMOTE_ADDR\\n' > /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && "
    "exec httpd -f -p 8080 -h /www"
)


def until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def register(api: NodeAPI, cluster: NodeCluster, node: Node) -> None:
    """The Node as the kubelet registers it, with the podCIDR node IPAM would give it."""
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name},
        "spec": {"podCIDR": cluster.pod_cidr(node), "podCIDRs": [cluster.pod_cidr(node)]},
    }
    created = api.client.create(NODES, body)
    created["status"] = {"addresses": [{"type": "InternalIP", "address": node.ip}]}
    api.client.update_status(NODES, created)


def pod_network(cluster: NodeCluster, node: Node) -> None:
    """The pods' bridge as the kubelet makes it: the node's podCIDR, no masquerade."""
    cidr = ipaddress.ip_network(cluster.pod_cidr(node))
    node.exec(
        "docker", "network", "create", "--subnet", str(cidr),
        "--gateway", str(cidr.network_address + 1),
        "-o", "com.docker.network.bridge.name=cbr0",
        "-o", "com.docker.network.bridge.enable_ip_masquerade=false", POD_NETWORK,
    )  # fmt: skip


def routes(node: Node) -> str:
    return node.sh("ip route show proto 201")


def has_route(node: Node, cidr: str) -> bool:
    return cidr in routes(node)


@pytest.fixture(scope="module")
def pod_network_up(node_cluster: NodeCluster, node_api: NodeAPI) -> Iterator[list[Node]]:
    nodes = node_cluster.nodes[:2]
    for node in nodes:
        register(node_api, node_cluster, node)
        node_api.install(node, KUBECONFIG)
        pod_network(node_cluster, node)
        node.exec("sv", "up", "kubelab-network")
    try:
        for node, other in ((nodes[0], nodes[1]), (nodes[1], nodes[0])):
            until(partial(has_route, node, node_cluster.pod_cidr(other)), f"{node.name}'s routes")
        yield nodes
    finally:
        for node in nodes:
            node.exec("sv", "down", "kubelab-network", check=False)
            node.exec("sh", "-c", "docker rm -f $(docker ps -aq)", check=False)
            node.exec("docker", "network", "rm", POD_NETWORK, check=False)
            node_api.client.delete(NODES, node.name)


def echo_server(node: Node) -> str:
    """A pod on `node` answering with its caller's address; its pod IP."""
    run = ["docker", "run", "-d", "--network", POD_NETWORK, BUSYBOX_IMAGE, "sh", "-c"]
    server = node.exec(*run, ECHO_ADDRESS).stdout.decode().strip()
    template = f'{{{{(index .NetworkSettings.Networks "{POD_NETWORK}").IPAddress}}}}'
    return node.sh(f"docker inspect -f '{template}' {server}").strip()


def caller(remote_addr: str) -> str:
    """httpd's REMOTE_ADDR ("[::ffff:10.244.0.2]" on its dual-stack socket) as IPv4."""
    address = ipaddress.ip_address(remote_addr.strip().strip("[]"))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return str(address.ipv4_mapped)
    return str(address)


def test_pods_on_two_nodes_reach_each_other_without_nat(
    node_cluster: NodeCluster, pod_network_up: list[Node]
) -> None:
    first, second = pod_network_up
    server_ip = echo_server(second)
    # The client pod prints its own address, then what the server saw.
    script = f"hostname -i; timeout 5 wget -q -O - http://{server_ip}:8080/cgi-bin/ip"
    out = (
        first.exec(
            "docker", "run", "--rm", "--network", POD_NETWORK, BUSYBOX_IMAGE, "sh", "-c", script
        )
        .stdout.decode()
        .split()
    )
    client_ip, seen_by_server = out
    assert ipaddress.ip_address(client_ip) in ipaddress.ip_network(node_cluster.pod_cidr(first))
    assert caller(seen_by_server) == client_ip


def test_a_node_reaches_a_pod_on_another_node(pod_network_up: list[Node]) -> None:
    first, second = pod_network_up
    url = f"http://{echo_server(second)}:8080/cgi-bin/ip"
    fetch = f"import urllib.request as u; print(u.urlopen('{url}', timeout=5).read().decode())"
    assert caller(first.exec("python3", "-c", fetch).stdout.decode()) == first.ip


def test_a_deleted_nodes_route_goes(
    node_cluster: NodeCluster, node_api: NodeAPI, pod_network_up: list[Node]
) -> None:
    first, second = pod_network_up
    assert node_cluster.addressing is not None
    ghost_cidr = str(list(node_cluster.addressing.subnet.subnets(new_prefix=24))[200])
    ghost = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "ghost"},
        "spec": {"podCIDR": ghost_cidr},
    }
    created = node_api.client.create(NODES, ghost)
    created["status"] = {"addresses": [{"type": "InternalIP", "address": second.ip}]}
    node_api.client.update_status(NODES, created)
    until(lambda: ghost_cidr in routes(first), "the ghost node's route")
    node_api.client.delete(NODES, "ghost")
    until(lambda: ghost_cidr not in routes(first), "the ghost node's route to go")
