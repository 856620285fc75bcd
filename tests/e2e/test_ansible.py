"""ansible/ against the e2e tests' Docker lab, through the inventory `labctl up` wrote:
a worker and a control-plane node reset by reset.yml are joined again by site.yml (the
control-plane node as a voting store member, through a fresh certificate key), and a
second run of site.yml changes nothing (the playbooks are idempotent)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kubelab.storeclient import StoreClient
from lab.cluster import NODES, Lab
from tests.e2e.conftest import voters
from tests.e2e.test_lab_ha import delete_node
from tests.waiting import until

ANSIBLE = Path(__file__).resolve().parents[2] / "ansible"


def playbook(lab: Lab, name: str, *args: str) -> dict[str, dict[str, int]]:
    """Run a playbook on the lab's inventory; its per-host stats (ok, changed, ...)."""
    if shutil.which("ansible-playbook") is None:
        message = "ansible-playbook is missing: make installs Debian's ansible"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
    }
    done = subprocess.run(
        ["ansible-playbook", "-i", str(lab.inventory), str(ANSIBLE / name), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    stats: dict[str, dict[str, int]] = json.loads(done.stdout)["stats"]
    return stats


def ready(lab: Lab, name: str) -> bool:
    node = lab.client().get(NODES, name)
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def test_site_joins_a_reset_worker_and_control_plane_node_and_a_second_run_changes_nothing(
    lab: Lab, members: StoreClient
) -> None:
    worker = lab.worker_nodes[0]
    control_plane = lab.control_plane_nodes[-1]
    reset = playbook(lab, "reset.yml", "--limit", f"{worker.name},{control_plane.name}")
    for node in (worker, control_plane):
        assert reset[node.name]["changed"] == 1
        assert node.sh("ls /etc/kubelab").strip() == ""
    assert voters(members) == {n.name for n in lab.control_plane_nodes[:-1]}
    delete_node(lab, control_plane.name)

    first = playbook(lab, "site.yml")
    for node in (worker, control_plane):
        assert first[node.name]["changed"] >= 1  # the join (and the source shipped)
        assert "kubelet.conf" in node.sh("ls /etc/kubelab")
        until(lambda n=node: ready(lab, n.name), f"{node.name} Ready after the join", 120)
    assert voters(members) == {n.name for n in lab.control_plane_nodes}

    second = playbook(lab, "site.yml")
    assert {host: s["changed"] for host, s in second.items()} == dict.fromkeys(second, 0)
    assert {host: s["failures"] for host, s in second.items()} == dict.fromkeys(second, 0)
