"""`vagrant up` (the docker provider, Debian's vagrant) gives a working cluster: the
Vagrantfile's machines on a lab network of this run's own, provisioned, initialized and
joined by ansible/site.yml, every Node Ready through the real kubectl, and the
testinfra suite passing on each; `vagrant destroy -f` removes it all.

Skipped only where vagrant is not installed (the Makefile installs it, and under CI a
missing vagrant fails)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.images import Builder
from lab.inventory import control_path
from lab.nodes import NodeCluster
from tests.e2e.test_lab import KUBECTL
from tests.node.conftest import docker_client, run_prefix
from tests.waiting import until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def vagrant_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    if shutil.which("vagrant") is None or shutil.which("ansible-playbook") is None:
        message = "vagrant or ansible is missing: make installs Debian's (apt-get)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    builder = Builder(client=docker_client())
    builder.ensure(["busybox", "pause", "node"])
    prefix = run_prefix()
    # The network the Vagrantfile attaches its machines to, on a subnet free now (the
    # Vagrantfile makes it only where it is missing): named and planned as lab.nodes does.
    network = NodeCluster(prefix, client=builder.client)
    addressing = network.create_network()
    state = tmp_path_factory.mktemp("vagrant")
    env = {
        **os.environ,
        "KUBELAB_VAGRANT_PREFIX": prefix,
        "KUBELAB_SUBNET": str(addressing.subnet),
        "KUBELAB_NODE_IMAGE": builder.tags("node")[0],
        "VAGRANT_DOTFILE_PATH": str(state / "dot"),
        "VAGRANT_HOME": str(state / "home"),
        "VAGRANT_DEFAULT_PROVIDER": "docker",
        "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg"),
    }
    try:
        yield env
    finally:
        vagrant(env, "destroy", "-f", check=False)
        network.remove()  # whatever destroy left (a volume, the network)


def vagrant(env: dict[str, str], *args: str, check: bool = True) -> str:
    done = subprocess.run(
        ["vagrant", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=1500, check=False,
    )  # fmt: skip
    assert not check or done.returncode == 0, f"vagrant {' '.join(args)}:\n{done.stdout[-6000:]}"
    return done.stdout


def test_vagrant_up_gives_a_working_cluster(vagrant_env: dict[str, str]) -> None:
    vagrant(vagrant_env, "up")
    kubeconfig = Path(vagrant_env["VAGRANT_DOTFILE_PATH"]) / "kubelab" / "admin.conf"

    def ready() -> dict[str, bool]:
        listed = subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "json"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return {
            n["metadata"]["name"]: any(
                c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]
            )
            for n in json.loads(listed.stdout)["items"]
        }

    until(
        lambda: ready() == {"cp1": True, "worker1": True, "worker2": True},
        "the Vagrant machines' Nodes Ready",
        timeout=180,
    )

    # The testinfra suite over Vagrant's own inventory and SSH settings.
    dot = Path(vagrant_env["VAGRANT_DOTFILE_PATH"])
    inventory = dot / "provisioners" / "ansible" / "inventory" / "vagrant_ansible_inventory"
    ssh_config = dot / "kubelab" / "ssh_config"
    # Vagrant's SSH settings, with one connection per machine for all the checks.
    ssh_config.write_text(
        vagrant(vagrant_env, "ssh-config")
        + f"Host *\n  ControlMaster auto\n  ControlPath {control_path(dot)}\n  ControlPersist 60s\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(ROOT / "tests" / "infra"), "--inventory", str(inventory),
         "--ssh-config", str(ssh_config), "--kubeconfig", str(kubeconfig)],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:]

    # A second provisioning run changes nothing.
    again = vagrant(vagrant_env, "provision")
    assert "changed=0" in again and "changed=1" not in again, again[-3000:]
