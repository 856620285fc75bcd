"""kube-proxy in nodes: a Service's rules appear on every node and carry traffic (a
ClusterIP from a pod on another node, a NodePort from the host), and once the Service
is deleted no rule of it is left; `--cleanup` removes every chain of kube-proxy."""

from __future__ import annotations

import re
import urllib.request
from typing import Any

from agents.proxy.rules import chain_name
from kubelab.client import resource_for
from lab.images import BUSYBOX_IMAGE
from lab.nodes import Node
from lab.relay import NodeAPI
from tests.node.conftest import POD_NETWORK, caller, echo_server, nat
from tests.waiting import until

SERVICES = resource_for("v1", "Service")
SLICES = resource_for("discovery.k8s.io/v1", "EndpointSlice")


def echo_service(api: NodeAPI, namespace: str, backend_ip: str) -> dict[str, Any]:
    """A NodePort Service in front of one echo pod, with the EndpointSlice the
    EndpointSlice controller would write for it."""
    svc = api.client.create(
        SERVICES,
        {
            "metadata": {"name": "echo"},
            "spec": {
                "type": "NodePort",
                "selector": {"app": "echo"},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
            },
        },
        namespace,
    )
    api.client.create(
        SLICES,
        {
            "metadata": {
                "name": "echo-1",
                "labels": {"kubernetes.io/service-name": "echo"},
            },
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [backend_ip], "conditions": {"ready": True}}],
        },
        namespace,
    )
    return svc


def test_a_services_rules_carry_traffic_and_are_gone_after_it_is_deleted(
    node_api: NodeAPI, namespace: str, proxies: list[Node]
) -> None:
    first, second = proxies
    backend = echo_server(second, name="echo-backend")
    svc = echo_service(node_api, namespace, backend)
    cluster_ip = svc["spec"]["clusterIP"]
    node_port = svc["spec"]["ports"][0]["nodePort"]
    svc_chain = chain_name("KUBE-SVC-", f"{namespace}/echo:http", "TCP")
    for node in proxies:
        until(lambda n=node: svc_chain in nat(n), f"{svc_chain} on {node.name}")  # type: ignore[misc]

    # A pod on the other node reaches the backend through the ClusterIP, unmasqueraded.
    script = f"hostname -i; timeout 5 wget -q -O - http://{cluster_ip}/cgi-bin/ip"
    client_ip, seen = (
        first.exec(
            "docker", "run", "--rm", "--network", POD_NETWORK, BUSYBOX_IMAGE, "sh", "-c", script
        )
        .stdout.decode()
        .split()
    )
    assert caller(seen) == client_ip
    # Hairpin: the backend reaches itself through its own Service, once the network
    # agent has put its bridge port in hairpin mode (within a second).
    hairpin = ["docker", "exec", "echo-backend", "timeout", "3", "wget", "-q", "-O", "-"]
    until(
        lambda: second.exec(*hairpin, f"http://{cluster_ip}/cgi-bin/ip", check=False).stdout,
        "the backend to reach itself through its Service",
        timeout=40,
    )
    # The host reaches it through either node's NodePort.
    for node in proxies:
        with urllib.request.urlopen(f"http://{node.ip}:{node_port}/cgi-bin/ip", timeout=5) as r:
            assert r.status == 200

    # echo's endpoint chains (other tests' Services of the shared apiserver keep theirs)
    endpoint_chains = {
        node.name: set(re.findall(rf"-A (KUBE-SEP-\w+) .*{namespace}/echo:", nat(node)))
        for node in proxies
    }
    assert all(endpoint_chains.values()), endpoint_chains
    node_api.client.delete(SERVICES, "echo", namespace)
    node_api.client.delete(SLICES, "echo-1", namespace)
    for node in proxies:
        # One iptables-restore commits the filter table and the nat table one after the
        # other: wait until neither names the Service.
        until(
            lambda n=node: f"{namespace}/echo" not in nat(n) + n.sh("iptables-save -t filter"),  # type: ignore[misc]
            f"echo's rules gone on {node.name}",
        )
        assert svc_chain not in nat(node)
        assert not [c for c in endpoint_chains[node.name] if c in nat(node)]


def test_cleanup_removes_every_chain_of_kube_proxy(proxies: list[Node]) -> None:
    node = proxies[0]
    node.exec("sv", "down", "kubelab-proxy")
    try:
        node.exec("python", "-m", "agents.proxy", "--cleanup")
        saved = node.sh("iptables-save")
        assert "KUBE-" not in saved
        assert "DOCKER" in saved  # dockerd's chains are not ours to touch
    finally:
        node.exec("sv", "up", "kubelab-proxy")
