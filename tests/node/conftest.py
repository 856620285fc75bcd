"""Node containers for tests: a session's lab of real nodes, each with its own dockerd.

`node_cluster` brings up two nodes of the node image (built first if absent or stale,
through lab.images) on an internal network of its own, with busybox and pause loaded
into each, under a run-specific prefix (`kl-<worktree>-<random>`), and removes every
container, volume and network it made when the session ends, also after a failure.
Under CI=true a missing Docker engine fails the tests instead of skipping them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from lab.images import BUSYBOX_IMAGE, PAUSE_IMAGE, Builder
from lab.nodes import NodeCluster

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
