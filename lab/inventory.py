"""What the lab writes for tools beside it: an Ansible inventory and an SSH config.

After `labctl up` a user (or Ansible, or testinfra) reaches every node as the lab does:
`ssh -F .lab/<name>/ssh_config cp1`, `ansible-playbook -i .lab/<name>/inventory.ini
ansible/join.yml`, `pytest tests/infra --hosts=... --ssh-config=...`. Both files name the
cluster's own key and pinned host keys (`lab.ssh.ClusterKeys`), so nothing is trusted
on first use, and the SSH config shares one connection per node between commands
(ControlMaster with a ControlPath: testinfra's ssh backend asks for ControlMaster but
names no ControlPath, and without one every check opens a new connection).

The inventory has Ansible's groups `control_plane` and `workers` (children of
`kubelab`), each host's `node_ip`, and the cluster's settings as group variables
(`kubelab_pod_network_cidr`, `kubelab_node_image`): the playbooks in `ansible/` read
the same names from Vagrant's inventory or a user's own.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lab.ssh import ClusterKeys

GROUPS = {"control-plane": "control_plane", "worker": "workers"}


@dataclass(frozen=True)
class InventoryHost:
    """One node as the inventory names it."""

    name: str
    ip: str
    role: str


def control_path(directory: Path) -> str:
    """A ControlPath short enough for a Unix socket (108 bytes) wherever the lab's
    folder is: under /tmp, named by a hash of the folder, `%C` for the connection."""
    tag = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:10]
    return f"/tmp/kubelab-ssh-{tag}-%C"


def ssh_config(hosts: Sequence[InventoryHost], keys: ClusterKeys, user: str = "root") -> str:
    """An OpenSSH client config: each node by its name or its address."""
    blocks = []
    for host in hosts:
        blocks.append(
            f"Host {host.name} {host.ip}\n"
            f"  HostName {host.ip}\n"
            f"  User {user}\n"
            f"  IdentityFile {keys.private_key.resolve()}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {keys.known_hosts.resolve()}\n"
            "  StrictHostKeyChecking yes\n"
            "  ControlMaster auto\n"
            f"  ControlPath {control_path(keys.directory)}\n"
            "  ControlPersist 60s\n"
            "  LogLevel ERROR\n"
        )
    return "\n".join(blocks)


def ansible_inventory(
    hosts: Sequence[InventoryHost], ssh_config_path: Path, variables: Mapping[str, str]
) -> str:
    """An INI inventory: groups by role, ssh through the generated config."""
    lines = []
    for role, group in GROUPS.items():
        lines.append(f"[{group}]")
        lines += [f"{h.name} ansible_host={h.ip} node_ip={h.ip}" for h in hosts if h.role == role]
        lines.append("")
    lines += ["[kubelab:children]", *GROUPS.values(), "", "[kubelab:vars]"]
    lines += [
        "ansible_user=root",
        "ansible_python_interpreter=/usr/bin/python3",
        f"ansible_ssh_common_args='-F {ssh_config_path.resolve()}'",
        *(f"{k}={v}" for k, v in sorted(variables.items())),
    ]
    return "\n".join(lines) + "\n"


def write_files(
    directory: Path,
    hosts: Sequence[InventoryHost],
    keys: ClusterKeys,
    variables: Mapping[str, str],
) -> tuple[Path, Path]:
    """Write `ssh_config` and `inventory.ini` into the lab's folder; their paths."""
    config = directory / "ssh_config"
    config.write_text(ssh_config(hosts, keys))
    inventory = directory / "inventory.ini"
    inventory.write_text(ansible_inventory(hosts, config, variables))
    return config, inventory


def read_inventory(path: Path) -> tuple[list[InventoryHost], dict[str, str]]:
    """The nodes (by group) and the `[kubelab:vars]` of an INI inventory: this module's,
    Vagrant's generated one, or a user's in the same shape (`ansible/`)."""
    roles = {group: role for role, group in GROUPS.items()}
    fields: dict[str, dict[str, str]] = {}
    members: list[tuple[str, str]] = []
    variables: dict[str, str] = {}
    section = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "kubelab:vars":
            key, _, value = line.partition("=")
            variables[key.strip()] = value.strip().strip("'\"")
        elif section in roles or not section:
            # A host line: its name, then its variables (on any line naming it).
            name, *pairs = shlex.split(line)
            fields.setdefault(name, {}).update(p.partition("=")[::2] for p in pairs if "=" in p)
            if section:
                members.append((name, roles[section]))
    hosts = [
        InventoryHost(
            name, fields[name].get("node_ip") or fields[name].get("ansible_host", name), role
        )
        for name, role in members
    ]
    if not hosts:
        raise ValueError(
            f"{path}: no hosts in groups {', '.join(roles)}; `labctl up` writes such an "
            "inventory (.lab/<name>/inventory.ini), ansible/inventory.example.ini shows one"
        )
    return hosts, variables
