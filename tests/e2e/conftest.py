"""One Docker lab per test session: `labctl up` of the HA topology, three control-plane
nodes behind the load balancer and one worker, under a run-specific prefix
(`kl-<worktree>-<random>`), removed at the end even after a failure. Under CI=true a
missing Docker engine fails instead of skipping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.cluster import ClusterConfig, Lab
from lab.images import Builder
from tests.node.conftest import docker_client, run_prefix


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    config = ClusterConfig.parse(
        {"name": "e2e", "nodes": [{"role": "control-plane"}] * 3 + [{"role": "worker"}]}
    )
    directory: Path = tmp_path_factory.mktemp("lab")
    the_lab = Lab(config, directory, prefix=run_prefix(), builder=Builder(client=docker_client()))
    try:
        the_lab.up()
        yield the_lab
    finally:
        the_lab.down()
