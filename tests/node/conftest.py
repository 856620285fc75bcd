"""Node containers for tests: a session's lab of real nodes, each with its own dockerd.

`node_cluster` brings up two nodes of the node image (built first if absent or stale,
through lab.images) on an internal network of its own, with busybox and pause loaded
into each, under a run-specific prefix (`kl-<worktree>-<random>`), and removes every
container, volume and network it made when the session ends, also after a failure.
Under CI=true a missing Docker engine fails the tests instead of skipping them.

`node_api` is the session's apiserver (`lab.testenv`) as the nodes reach it (see
`NodeAPI`): it listens on loopback only, so a relay on the lab network's gateway
forwards to it, and nodes name it `kubernetes`, a name in its serving certificate.
`pod_network_up` and `proxies` run the network agent and kube-proxy in both nodes.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import docker
import docker.errors
import pytest

from kubelab.client import resource_for
from lab.images import BUSYBOX_IMAGE, PAUSE_IMAGE, Builder
from lab.nodes import Node, NodeCluster
from lab.relay import NodeAPI
from lab.testenv import Environment
from tests.waiting import until

NODE_COUNT = 2
IMAGES = ["busybox", "pause", "nginx", "node"]
NODES = resource_for("v1", "Node")
POD_NETWORK = "kubepods"  # the kubelet's --pod-network default
NETWORK_KUBECONFIG = "/etc/kubelab/network.conf"
PROXY_KUBECONFIG = "/etc/kubelab/proxy.conf"
# busybox's httpd answers a CGI request with the address the request came from.
ECHO_ADDRESS = (
    "mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\n"
    "echo $REMOTE_ADDR\\n' > /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && "
    "exec httpd -f -p 8080 -h /www"
)


def caller(remote_addr: str) -> str:
    """httpd's REMOTE_ADDR ("[::ffff:10.244.0.2]" on its dual-stack socket) as IPv4."""
    address = ipaddress.ip_address(remote_addr.strip().strip("[]"))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return str(address.ipv4_mapped)
    return str(address)


def docker_client_or_none() -> docker.DockerClient | None:
    """A client of the engine, with room for a node rootfs import; None without one."""
    try:
        client = docker.from_env(timeout=900)
        client.ping()
    except docker.errors.DockerException:
        return None
    return client


def docker_client() -> docker.DockerClient:
    client = docker_client_or_none()
    if client is None:
        message = "these tests need a Docker engine (docker.from_env() failed)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return client


def run_prefix() -> str:
    """kl-<worktree>-<random>: whose run made an object, and which run."""
    worktree = Path(__file__).resolve().parents[2].name
    return f"kl-{worktree}-{secrets.token_hex(3)}"


@pytest.fixture(scope="session")
def image_builder() -> Builder:
    return Builder(client=docker_client())


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the images these tests use before any test runs: a cold build of the node's
    base (debootstrap, a few minutes on a loaded machine) must not count against the
    first test's timeout."""
    here = Path(__file__).parent
    if any(Path(item.path).is_relative_to(here) for item in session.items):
        client = docker_client_or_none()
        if client is not None:
            Builder(client=client).ensure(IMAGES)


@pytest.fixture(scope="session")
def node_cluster(image_builder: Builder) -> Iterator[NodeCluster]:
    image_builder.ensure(IMAGES)
    # Exactly this worktree's build: other worktrees on the engine retag :latest.
    cluster = NodeCluster(
        prefix=run_prefix(), client=image_builder.client, image=image_builder.tags("node")[0]
    )
    try:
        cluster.start(NODE_COUNT)
        for image in (BUSYBOX_IMAGE, PAUSE_IMAGE):
            cluster.load_image(image)
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture(scope="session")
def node_api(node_cluster: NodeCluster, apiserver: Environment) -> Iterator[NodeAPI]:
    """The session's apiserver, reachable from the nodes through a relay."""
    assert node_cluster.addressing is not None
    api = NodeAPI.open(apiserver, node_cluster.addressing.gateway)
    try:
        yield api
    finally:
        api.close()


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


@pytest.fixture(scope="session")
def pod_network_up(node_cluster: NodeCluster, node_api: NodeAPI) -> Iterator[list[Node]]:
    nodes = node_cluster.nodes[:2]
    for node in nodes:
        register(node_api, node_cluster, node)
        node_api.install(node, NETWORK_KUBECONFIG)
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


def echo_server(node: Node, name: str = "") -> str:
    """A pod on `node` (container `name` if given) answering with its caller's address;
    its pod IP."""
    named = ["--name", name] if name else []
    run = ["docker", "run", "-d", *named, "--network", POD_NETWORK, BUSYBOX_IMAGE, "sh", "-c"]
    server = node.exec(*run, ECHO_ADDRESS).stdout.decode().strip()
    template = f'{{{{(index .NetworkSettings.Networks "{POD_NETWORK}").IPAddress}}}}'
    return node.sh(f"docker inspect -f '{template}' {server}").strip()


def nat(node: Node) -> str:
    return node.sh("iptables-save -t nat")


@pytest.fixture(scope="session")
def proxies(
    node_cluster: NodeCluster, node_api: NodeAPI, pod_network_up: list[Node]
) -> Iterator[list[Node]]:
    """kube-proxy running on both nodes (the pod network's fixture first)."""
    assert node_cluster.addressing is not None
    for node in pod_network_up:
        node_api.install(node, PROXY_KUBECONFIG)
        args = f'ARGS="--cluster-cidr {node_cluster.addressing.subnet}"\n'
        node.write_file("/etc/default/kubelab-proxy", args.encode(), 0o644)
        node.exec("sv", "up", "kubelab-proxy")
    try:
        for node in pod_network_up:
            until(lambda n=node: ":KUBE-SERVICES" in nat(n), f"kube-proxy on {node.name}")  # type: ignore[misc]
        yield pod_network_up
    finally:
        for node in pod_network_up:
            node.exec("sv", "down", "kubelab-proxy", check=False)
