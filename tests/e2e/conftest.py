"""One Docker lab for the e2e tests: `labctl up` of the default HA topology, three
control-plane nodes behind the load balancer and two workers (with the lab's registry
mirror), under a run-specific prefix
(`kl-<worktree>-<random>`), removed after the last e2e test even after a failure. Its
fixtures are the package's, not the session's: a session's would keep the idle lab's
CPU load under the rest of the suite until the session ends. Under CI=true a missing
Docker engine fails instead of skipping.

HOME and KUBECONFIG point into the session's temporary folder while the lab lives:
`labctl up` merges its context into the user's kubeconfig as kind does, and a test run
must never write the machine's real ~/.kube.

They run after the rest of the suite (`pytest_collection_modifyitems`), their files in
name order, and the tests that stop nodes run last:
test_lab (labadm, the pod network), test_lab_ha (store members, a control-plane node
reset and joined again), test_seeds (the seeds' flows with the real kubectl), test_stop
(a stopped worker, nodes added and removed, the whole lab stopped and started),
test_store_leader_killed (the node holding the store's leadership killed: the lab keeps
a dead node after it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelab.storeclient import StoreClient
from lab.cluster import HA_IMAGES, IMAGES, ClusterConfig, Lab
from lab.images import Builder
from lab.nodes import Node
from tests.node.conftest import docker_client, docker_client_or_none, run_prefix

HERE = Path(__file__).parent
LAB_TIMEOUT = 600
"""Seconds for one e2e test with its setup: the first one brings the lab up (about 80 s
after the images here, several minutes when the shared machine is loaded)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The e2e tests get the lab's timeout and run after the rest of the suite: the
    in-process tests (controllers on `lab.testenv`) time what runs in this process, and
    after the e2e tests one of them, a Job's three completions, missed its 30 s in three
    of four full runs and passed every time without them before it."""
    e2e: list[pytest.Item] = []
    others: list[pytest.Item] = []
    for item in items:
        (e2e if Path(item.path).is_relative_to(HERE) else others).append(item)
    for item in e2e:
        item.add_marker(pytest.mark.timeout(LAB_TIMEOUT))
    items[:] = others + e2e


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the lab's images before any test runs (a node layer rebuild took 250 s on
    the loaded machine): not against the first test's timeout."""
    if any(Path(item.path).is_relative_to(HERE) for item in session.items):
        client = docker_client_or_none()
        if client is not None:
            Builder(client=client).ensure(IMAGES + HA_IMAGES)


@pytest.fixture(scope="package")
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


@pytest.fixture(scope="package")
def lab(tmp_path_factory: pytest.TempPathFactory, user_home: Path) -> Iterator[Lab]:
    config = ClusterConfig.parse(
        {"name": "e2e", "nodes": [{"role": "control-plane"}] * 3 + [{"role": "worker"}] * 2}
    )
    directory: Path = tmp_path_factory.mktemp("lab")
    the_lab = Lab(config, directory, prefix=run_prefix(), builder=Builder(client=docker_client()))
    try:
        the_lab.up()
        yield the_lab
    finally:
        the_lab.down()


@pytest.fixture(scope="package")
def store_files(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store's CA and the apiserver's store-client pair, copied from cp1."""
    where = tmp_path_factory.mktemp("store-pki")
    cp1 = lab.control_plane_nodes[0]
    for name in ("store/ca.crt", "apiserver-store-client.crt", "apiserver-store-client.key"):
        (where / Path(name).name).write_bytes(cp1.exec("cat", f"/etc/kubelab/pki/{name}").stdout)
    return where


def store(files: Path, nodes: list[Node]) -> StoreClient:
    return StoreClient(
        [f"https://{n.ip}:2379" for n in nodes],
        ca_file=files / "ca.crt",
        cert_file=files / "apiserver-store-client.crt",
        key_file=files / "apiserver-store-client.key",
    )


@pytest.fixture
def members(lab: Lab, store_files: Path) -> Iterator[StoreClient]:
    """A store client of the lab's control-plane nodes' members."""
    with store(store_files, lab.control_plane_nodes) as client:
        yield client


def voters(client: StoreClient) -> set[str]:
    """The names of the store's voting members."""
    return {m.name for m in client.member_list().members if not m.is_learner}
