"""Node containers for tests: a session's lab of real nodes, each with its own dockerd.

`node_cluster` brings up two nodes of the node image (built first if absent or stale,
through lab.images) on an internal network of its own, with busybox and pause loaded
into each, under a run-specific prefix (`kl-<worktree>-<random>`), and removes every
container, volume and network it made when the session ends, also after a failure.
Under CI=true a missing Docker engine fails the tests instead of skipping them.

`node_api` is a control plane on the host that the nodes reach (see `NodeAPI`): the test
apiservers listen on loopback only, so a relay on the lab network's gateway forwards to
it, and nodes name it `kubernetes`, a name in its serving certificate.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest

from controlplane.localplane import LocalControlPlane
from kubelab.client import RestClient, load_kubeconfig, write_kubeconfig
from lab.images import BUSYBOX_IMAGE, PAUSE_IMAGE, Builder
from lab.nodes import Node, NodeCluster
from lab.relay import Relay

NODE_COUNT = 2


def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as err:
        message = f"these tests need a Docker engine: {err}"
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


@pytest.fixture(scope="session")
def node_cluster(image_builder: Builder) -> Iterator[NodeCluster]:
    image_builder.ensure(["busybox", "pause", "node"])
    cluster = NodeCluster(prefix=run_prefix(), client=image_builder.client)
    try:
        cluster.start(NODE_COUNT)
        for image in (BUSYBOX_IMAGE, PAUSE_IMAGE):
            cluster.load_image(image)
        yield cluster
    finally:
        cluster.remove()


@dataclass
class NodeAPI:
    """A control plane on the host that the nodes reach: `kubernetes:<port>` in a node
    is the relay on the lab network's gateway (lab.relay), forwarding to the apiserver."""

    plane: LocalControlPlane
    relay: Relay
    client: RestClient

    @property
    def node_server(self) -> str:
        return f"https://kubernetes:{self.relay.port}"

    def kubeconfig_for_nodes(self) -> bytes:
        """The admin kubeconfig with the server as nodes reach it."""
        config = load_kubeconfig(self.plane.kubeconfig)
        assert config.ca_data and config.client_cert_data and config.client_key_data
        with tempfile.TemporaryDirectory() as tmp:
            path = write_kubeconfig(
                Path(tmp) / "node.conf",
                cluster_name="kubelab",
                server=self.node_server,
                ca_data=config.ca_data,
                user_name="kubernetes-admin",
                client_cert_data=config.client_cert_data,
                client_key_data=config.client_key_data,
            )
            return path.read_bytes()

    def install(self, node: Node, path: str) -> None:
        """Point `node` at the apiserver: /etc/hosts and a kubeconfig at `path`."""
        assert self.relay.host
        entry = f"{self.relay.host} kubernetes"
        node.sh(f"grep -qx '{entry}' /etc/hosts || echo '{entry}' >> /etc/hosts")
        node.write_file(path, self.kubeconfig_for_nodes())


@pytest.fixture(scope="session")
def node_api(
    node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodeAPI]:
    """A 1-member store and an apiserver (no controller-manager) the nodes can reach."""
    assert node_cluster.addressing is not None
    plane = LocalControlPlane(
        tmp_path_factory.mktemp("node-plane"), store_members=1, controller_manager=False
    )
    relay = Relay(node_cluster.addressing.gateway, ("127.0.0.1", plane.port))
    try:
        plane.start(timeout=90)
        relay.start()
        with RestClient(load_kubeconfig(plane.kubeconfig)) as client:
            yield NodeAPI(plane, relay, client)
    finally:
        relay.stop()
        plane.stop()
