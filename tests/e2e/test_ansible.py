"""ansible/ against the session's Docker lab, through the inventory `labctl up` wrote:
a worker reset by reset.yml is joined again by site.yml, and a second run of site.yml
changes nothing (the playbooks are idempotent)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lab.cluster import NODES, Lab
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


def test_site_joins_a_reset_worker_and_a_second_run_changes_nothing(lab: Lab) -> None:
    worker = lab.worker_nodes[0]  # the session lab's second node is a control-plane one
    reset = playbook(lab, "reset.yml", "--limit", worker.name)
    assert reset[worker.name]["changed"] == 1
    assert worker.sh("ls /etc/kubelab").strip() == ""

    first = playbook(lab, "site.yml")
    assert first[worker.name]["changed"] >= 1  # the join (and the source shipped)
    assert "kubelet.conf" in worker.sh("ls /etc/kubelab")
    until(lambda: ready(lab, worker.name), f"{worker.name} Ready after the playbook's join", 120)

    second = playbook(lab, "site.yml")
    assert {host: s["changed"] for host, s in second.items()} == dict.fromkeys(second, 0)
    assert {host: s["failures"] for host, s in second.items()} == dict.fromkeys(second, 0)
