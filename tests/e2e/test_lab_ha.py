"""The HA control plane end to end, on the session's lab (three control-plane nodes
behind haproxy, after test_lab.py): every control-plane node is a voting store member,
and `labadm reset` of a control-plane node removes its member, after which it joins
again (fresh certificate key and token). The store leader's node is killed last of the
session, in test_store_leader_killed.py."""

from __future__ import annotations

from kubelab.storeclient import StoreClient
from lab.cluster import Lab
from lab.nodes import Node
from tests.e2e.conftest import voters
from tests.e2e.test_lab import kubectl
from tests.waiting import until

PYTHON = "/opt/kubelab/venv/bin/python"


def test_every_control_plane_node_is_a_voting_store_member(lab: Lab, members: StoreClient) -> None:
    assert voters(members) == {n.name for n in lab.control_plane_nodes}
    assert lab.endpoint.split(":")[0] != lab.control_plane_nodes[0].ip  # the balancer
    assert f"server: https://{lab.endpoint}" in lab.kubeconfig.read_text()


def delete_node(lab: Lab, name: str) -> None:
    """`kubectl delete node`, as after kubeadm reset, retried: right after a
    control-plane node's reset the balancer may still send it to that node's apiserver."""
    until(
        lambda: kubectl(lab, "delete", "node", name, check=False).strip(),
        f"Node {name} deleted through the load balancer",
        timeout=30,
    )


def labadm(node: Node, *args: str) -> str:
    return node.exec(PYTHON, "-m", "lab.labadm", *args, timeout=300).stdout.decode()


def test_reset_control_plane_node_leaves_the_store_and_joins_again(
    lab: Lab, members: StoreClient
) -> None:
    cp1, cp3 = lab.control_plane_nodes[0], lab.control_plane_nodes[-1]
    out = labadm(cp3, "reset", "-f")
    assert "Removing the store member" in out
    assert voters(members) == {n.name for n in lab.control_plane_nodes[:-1]}
    delete_node(lab, cp3.name)

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
