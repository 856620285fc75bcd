"""One Docker lab per test session: `labctl up` of one control-plane node and two
workers (with the lab's registry mirror), under a run-specific prefix
(`kl-<worktree>-<random>`), removed at the end even after a failure. Under CI=true a
missing Docker engine fails instead of skipping.

HOME and KUBECONFIG point into the session's temporary folder while the lab lives:
`labctl up` merges its context into the user's kubeconfig as kind does, and a test run
must never write the machine's real ~/.kube.

The files run in name order, and the tests that stop nodes run last:
test_lab (labadm, the pod network), test_seeds (the seeds' flows with the real kubectl),
test_stop (a stopped worker, nodes added and removed, the whole lab stopped and started).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.cluster import IMAGES, ClusterConfig, Lab
from lab.images import Builder
from tests.node.conftest import docker_client, docker_client_or_none, run_prefix

HERE = Path(__file__).parent
LAB_TIMEOUT = 600
"""Seconds for one e2e test with its setup: the first one brings the lab up (about 80 s
after the images here, several minutes when the shared machine is loaded)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(item.path).is_relative_to(HERE):
            item.add_marker(pytest.mark.timeout(LAB_TIMEOUT))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the lab's images before any test runs (a node layer rebuild took 250 s on
    the loaded machine): not against the first test's timeout."""
    if any(Path(item.path).is_relative_to(HERE) for item in session.items):
        client = docker_client_or_none()
        if client is not None:
            Builder(client=client).ensure(IMAGES)


@pytest.fixture(scope="session")
def user_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """HOME and KUBECONFIG in a temporary folder for the session."""
    home = tmp_path_factory.mktemp("home")
    saved = {key: os.environ.get(key) for key in ("HOME", "KUBECONFIG")}
    os.environ["HOME"] = str(home)
    os.environ["KUBECONFIG"] = str(home / ".kube" / "config")
    try:
        yield home
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory, user_home: Path) -> Iterator[Lab]:
    config = ClusterConfig.parse(
        {
            "name": "e2e",
            "nodes": [{"role": "control-plane"}, {"role": "worker"}, {"role": "worker"}],
        }
    )
    directory: Path = tmp_path_factory.mktemp("lab")
    the_lab = Lab(config, directory, prefix=run_prefix(), builder=Builder(client=docker_client()))
    try:
        the_lab.up()
        yield the_lab
    finally:
        the_lab.down()
