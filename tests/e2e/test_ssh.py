"""The lab reaches its nodes over SSH: with the cluster's key and each node's pinned
host key (a key not pinned is refused), one command on several nodes at once, and the
SSH config `labctl up` wrote working with OpenSSH (what `labctl ssh` runs)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lab.cluster import Lab
from lab.ssh import ClusterKeys, SSHError, SSHShell


def test_one_command_on_every_node_at_once(lab: Lab) -> None:
    assert lab.nodes is not None and lab.shell is not None
    out = lab.shell.run_many(lab.nodes.nodes, ["hostname"])
    assert out == {n.name: f"{n.name}\n" for n in lab.nodes.nodes}


def test_a_failing_command_names_the_node_and_its_output(lab: Lab) -> None:
    assert lab.nodes is not None and lab.shell is not None
    worker = lab.worker_nodes[0]
    with pytest.raises(SSHError, match=rf"failed on {worker.name} \(exit 3\):\nboom"):
        lab.shell.run_many([worker], ["sh", "-c", "echo boom; exit 3"])


def test_a_host_key_not_pinned_is_refused(lab: Lab, tmp_path: Path) -> None:
    assert lab.nodes is not None
    keys = ClusterKeys(tmp_path / "ssh").ensure()
    shutil.copy(lab.keys.private_key, keys.private_key)  # the right key, no pinned hosts
    with pytest.raises(SSHError, match="not the one pinned"):
        SSHShell(keys).run(lab.nodes.nodes[0], ["true"])


def test_openssh_with_the_generated_config(lab: Lab) -> None:
    worker = lab.worker_nodes[0]
    for name in (worker.name, worker.ip):
        done = subprocess.run(
            ["ssh", "-F", str(lab.ssh_config), name, "hostname"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (0, f"{worker.name}\n"), done.stderr
