"""The lab's SSH material and the files it writes for Ansible and OpenSSH (lab.ssh,
lab.inventory): keys made once and private, host keys pinned per name, an inventory
grouped by role, an SSH config that pins keys and shares connections."""

from __future__ import annotations

import configparser
import stat
from pathlib import Path

import paramiko

from lab.inventory import InventoryHost, control_path, write_files
from lab.ssh import ClusterKeys

HOSTS = [
    InventoryHost("cp1", "10.244.255.10", "control-plane"),
    InventoryHost("worker1", "10.244.255.11", "worker"),
    InventoryHost("worker2", "10.244.255.12", "worker"),
]


def test_the_key_pair_is_made_once_and_private(tmp_path: Path) -> None:
    keys = ClusterKeys(tmp_path / "lab" / "ssh").ensure()
    first = keys.private_key.read_bytes()
    assert stat.S_IMODE(keys.private_key.stat().st_mode) == 0o600
    assert stat.S_IMODE(keys.directory.stat().st_mode) == 0o700
    # paramiko reads what cryptography wrote, and the public half matches it.
    key = paramiko.Ed25519Key.from_private_key_file(str(keys.private_key))
    assert keys.authorized_key().split()[:2] == ["ssh-ed25519", key.get_base64()]
    assert keys.ensure().private_key.read_bytes() == first


def test_pinning_a_node_again_replaces_its_old_key(tmp_path: Path) -> None:
    keys = ClusterKeys(tmp_path / "ssh").ensure()
    keys.pin(["cp1", "10.244.255.10"], "ssh-ed25519 AAAAold root@cp1")
    keys.pin(["worker1", "10.244.255.11"], "ssh-ed25519 AAAAworker root@worker1")
    keys.pin(["cp1", "10.244.255.10"], "ssh-ed25519 AAAAnew root@cp1")
    lines = keys.known_hosts.read_text().splitlines()
    assert lines == [
        "worker1,10.244.255.11 ssh-ed25519 AAAAworker",
        "cp1,10.244.255.10 ssh-ed25519 AAAAnew",
    ]


def test_the_inventory_groups_nodes_by_role_and_dials_through_the_ssh_config(
    tmp_path: Path,
) -> None:
    keys = ClusterKeys(tmp_path / "ssh").ensure()
    config, inventory = write_files(tmp_path, HOSTS, keys, {"kubelab_node_image": "img:1"})
    parsed = configparser.ConfigParser(allow_no_value=True, delimiters=(" ",))
    parsed.read_string(inventory.read_text())
    assert list(parsed["control_plane"]) == ["cp1"]
    assert list(parsed["workers"]) == ["worker1", "worker2"]
    assert parsed["control_plane"]["cp1"] == "ansible_host=10.244.255.10 node_ip=10.244.255.10"
    assert list(parsed["kubelab:children"]) == ["control_plane", "workers"]
    assert f"ansible_ssh_common_args='-F {config.resolve()}'" in inventory.read_text()
    assert "kubelab_node_image=img:1" in inventory.read_text()


def test_the_ssh_config_pins_host_keys_and_shares_connections(tmp_path: Path) -> None:
    keys = ClusterKeys(tmp_path / "ssh").ensure()
    config, _ = write_files(tmp_path, HOSTS, keys, {})
    parsed = paramiko.SSHConfig.from_path(str(config))
    for name in ("worker1", "10.244.255.11"):
        entry = parsed.lookup(name)
        assert entry["hostname"] == "10.244.255.11"
        assert entry["user"] == "root"
        assert entry["identityfile"] == [str(keys.private_key.resolve())]
        assert entry["userknownhostsfile"] == str(keys.known_hosts.resolve())
        assert entry["stricthostkeychecking"] == "yes"
        assert entry["controlmaster"] == "auto"
        assert entry["controlpath"].startswith(control_path(keys.directory)[:-2])
    # A Unix socket path holds 108 bytes; %C expands to 40 hex digits.
    assert len(control_path(tmp_path / ("deep" * 40))) - 2 + 40 < 108
