"""The pod network across nodes: with the network agent running in each node, a pod on
one node reaches a pod on another by its IP, and the receiver sees the sender's own pod
IP (no NAT on the way); the agent's routes follow the Nodes in the API."""

from __future__ import annotations

import ipaddress

from lab.images import BUSYBOX_IMAGE
from lab.nodes import Node, NodeCluster
from lab.relay import NodeAPI
from tests.node.conftest import (
    NODES,
    POD_NETWORK,
    caller,
    echo_server,
    routes,
)
from tests.waiting import until


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
