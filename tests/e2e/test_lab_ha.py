"""The HA control plane end to end, on the session's lab (three control-plane nodes
behind haproxy, after test_lab.py): every control-plane node is a voting store member;
`labadm reset` of a control-plane node removes its member and it joins again (fresh
certificate key and token); and, last of all because it kills a node, the node holding
the store's leadership is killed and the cluster stays writable through the load
balancer within seconds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelab.storeclient import StoreClient, StoreError
from lab.cluster import Lab
from lab.nodes import Node
from tests.e2e.test_lab import kubectl
from tests.waiting import until

# The session's lab comes up in the first test's setup: 4 to 5 minutes on the loaded
# machine (three control-plane nodes get the node image), past pytest's default limit.
pytestmark = pytest.mark.timeout(900)
PYTHON = "/opt/kubelab/venv/bin/python"


@pytest.fixture(scope="module")
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
    with store(store_files, lab.control_plane_nodes) as client:
        yield client


def voters(client: StoreClient) -> set[str]:
    return {m.name for m in client.member_list().members if not m.is_learner}


def test_every_control_plane_node_is_a_voting_store_member(lab: Lab, members: StoreClient) -> None:
    assert voters(members) == {n.name for n in lab.control_plane_nodes}
    assert lab.endpoint.split(":")[0] != lab.control_plane_nodes[0].ip  # the balancer
    assert f"server: https://{lab.endpoint}" in lab.kubeconfig.read_text()


def labadm(node: Node, *args: str) -> str:
    return node.exec(PYTHON, "-m", "lab.labadm", *args, timeout=300).stdout.decode()


def test_reset_control_plane_node_leaves_the_store_and_joins_again(
    lab: Lab, members: StoreClient
) -> None:
    cp1, cp3 = lab.control_plane_nodes[0], lab.control_plane_nodes[-1]
    out = labadm(cp3, "reset", "-f")
    assert "Removing the store member" in out
    assert voters(members) == {n.name for n in lab.control_plane_nodes[:-1]}
    until(
        lambda: kubectl(lab, "delete", "node", cp3.name, check=False).strip(),
        f"Node {cp3.name} deleted through the load balancer",
        timeout=30,
    )

    # kubeadm's way to join one more control-plane node later: new key, new token.
    uploaded = labadm(cp1, "init", "phase", "upload-certs", "--upload-certs")
    key = uploaded.strip().splitlines()[-1]
    join = labadm(cp1, "token", "create", "--print-join-command").split()
    labadm(
        cp3, *join[1:], "--control-plane", "--certificate-key", key,
        f"--node-name={cp3.name}", f"--node-ip={cp3.ip}",
        f"--image={lab.builder.tags('node')[0]}",
    )  # fmt: skip
    assert voters(members) == {n.name for n in lab.control_plane_nodes}
    until(
        lambda: f"kube-apiserver-{cp3.name}" in kubectl(lab, "get", "pods", "-n", "kube-system"),
        f"{cp3.name}'s apiserver mirror pod",
        timeout=120,
    )


def test_killing_the_store_leader_keeps_the_cluster_writable(lab: Lab, store_files: Path) -> None:
    """Last: the session's lab keeps a dead node after it."""
    nodes = lab.control_plane_nodes
    leader = None
    for node in nodes:
        with store(store_files, [node]) as one:
            if one.status().is_leader:
                leader = node
    assert leader is not None, "no store member says it leads"
    leader.container.kill()
    killed = time.monotonic()

    def written() -> bool:
        done = kubectl(lab, "create", "configmap", f"after-{leader.name}", check=False)
        return "created" in done

    until(written, "a write through the load balancer after the leader's node died", timeout=60)
    print(f"\nwritable again {time.monotonic() - killed:.1f}s after killing {leader.name}")
    survivors = [n for n in nodes if n is not leader]
    with store(store_files, survivors) as client:
        until(lambda: _has_leader(client, survivors), "a new store leader", timeout=30)
    assert "after-" in kubectl(lab, "get", "configmaps")


def _has_leader(client: StoreClient, nodes: list[Node]) -> bool:
    try:
        return client.status().leader != 0
    except StoreError:
        return False
