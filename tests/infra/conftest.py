"""testinfra checks of node state, over SSH, on every node of a kubelab cluster: the
Docker lab (`make verify`), Vagrant's machines, or hosts of your own.

    pytest tests/infra --inventory .lab/kubelab/inventory.ini [--ssh-config FILE]
                       [--kubeconfig FILE]

The inventory (Ansible INI, groups `control_plane` and `workers`) says which nodes
there are and their roles; the SSH config (by default the one the inventory's
`ansible_ssh_common_args` names, which `labctl up` writes) pins host keys and sets a
ControlPath, so testinfra's ssh backend, which asks for ControlMaster but names no
ControlPath, reuses one connection per node instead of opening one per check. The admin
kubeconfig (default: the inventory's `kubelab_kubeconfig`) answers the API checks.

Without --inventory the checks are skipped: they need a running cluster.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import testinfra  # type: ignore[import-untyped]

from lab.inventory import InventoryHost, read_inventory


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kubelab infra")
    group.addoption("--inventory", help="the cluster's Ansible inventory (INI)")
    group.addoption("--kubeconfig", help="admin kubeconfig (default: kubelab_kubeconfig)")
    # testinfra's plugin has --ssh-config already; it is read from there.


@dataclass(frozen=True)
class Cluster:
    hosts: list[InventoryHost]
    ssh_config: str | None
    kubeconfig: Path | None


def load_cluster(config: pytest.Config) -> Cluster | None:
    inventory = config.getoption("--inventory")
    if not inventory:
        return None
    hosts, variables = read_inventory(Path(inventory))
    ssh_config = config.getoption("--ssh-config")
    if not ssh_config:
        args = shlex.split(variables.get("ansible_ssh_common_args", ""))
        ssh_config = args[args.index("-F") + 1] if "-F" in args else None
    kubeconfig = config.getoption("--kubeconfig") or variables.get("kubelab_kubeconfig")
    return Cluster(hosts, ssh_config, Path(kubeconfig) if kubeconfig else None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each check runs once per node of the role it is for (`node`, `control_plane`,
    `worker` fixtures)."""
    roles = {"node": None, "control_plane": "control-plane", "worker": "worker"}
    for fixture, role in roles.items():
        if fixture in metafunc.fixturenames:
            cluster = load_cluster(metafunc.config)
            hosts = [] if cluster is None else cluster.hosts
            chosen = [h for h in hosts if role is None or h.role == role]
            metafunc.parametrize(fixture, chosen, ids=[h.name for h in chosen], indirect=True)


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Cluster:
    found = load_cluster(request.config)
    if found is None:
        pytest.skip("no --inventory: these checks run against a cluster (make verify)")
    return found


@dataclass(frozen=True)
class Node:
    """One node: its inventory entry and its testinfra host over SSH."""

    entry: InventoryHost
    host: testinfra.host.Host

    @property
    def name(self) -> str:
        return self.entry.name


def _node(request: pytest.FixtureRequest, cluster: Cluster) -> Node:
    entry: InventoryHost = request.param
    host = testinfra.get_host(f"ssh://{entry.name}", ssh_config=cluster.ssh_config)
    return Node(entry, host)


@pytest.fixture
def node(request: pytest.FixtureRequest, cluster: Cluster) -> Node:
    return _node(request, cluster)


@pytest.fixture
def control_plane(request: pytest.FixtureRequest, cluster: Cluster) -> Node:
    return _node(request, cluster)


@pytest.fixture
def worker(request: pytest.FixtureRequest, cluster: Cluster) -> Node:
    return _node(request, cluster)
