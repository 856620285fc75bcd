"""SSH to the lab's nodes: how every action reaches a node, container, VM or real host.

The seeds bring a cluster up by logging into machines and running kubeadm; the lab does
the same. Each cluster has its own ed25519 key pair (made here, kept in the lab's
folder, never shared between labs) and a `known_hosts` file that pins each node's host
key: a connection to a host whose key is not pinned, or differs, is refused
(paramiko's `RejectPolicy`), never trusted on first use.

A Docker node gets both before SSH can work, through `docker exec` (the one channel the
lab trusts before sshd is up): the cluster's public key goes into root's
`authorized_keys`, and the host key sshd made at the node's first start is read and
pinned. A VM or a real host brings its own: an inventory names it, the key is
installed there by whoever made it (Vagrant, cloud-init, a user), and its host key is
pinned from the inventory's `known_hosts`.

`SSHShell` runs commands over fabric's connections (paramiko underneath), one open
connection per node reused for every later command (about 0.05 s a command once
open), and a step on several nodes at once over a `ThreadingGroup`.
"""

from __future__ import annotations

import io
import logging
import shlex
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fabric import Connection, ThreadingGroup  # type: ignore[import-untyped]
from fabric.exceptions import GroupException  # type: ignore[import-untyped]
from invoke.exceptions import CommandTimedOut

log = logging.getLogger("lab.ssh")

SSH_PORT = 22
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"


class SSHError(RuntimeError):
    """A command over SSH failed, or a node could not be reached; the message says which."""


class Machine(Protocol):
    """What SSH needs of a node: its name (the inventory's) and the address to dial."""

    @property
    def name(self) -> str: ...

    @property
    def ip(self) -> str: ...


@dataclass(frozen=True)
class ClusterKeys:
    """A cluster's SSH material in `directory`: its key pair and the pinned host keys."""

    directory: Path

    @property
    def private_key(self) -> Path:
        return self.directory / "id_ed25519"

    @property
    def public_key(self) -> Path:
        return self.directory / "id_ed25519.pub"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "known_hosts"

    def ensure(self) -> ClusterKeys:
        """Make the key pair once (the private key 0600); later calls keep it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        if not self.private_key.exists():
            key = Ed25519PrivateKey.generate()
            private = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption(),
            )
            public = key.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            )
            self.private_key.touch(mode=0o600)
            self.private_key.write_bytes(private)
            self.public_key.write_text(f"{public.decode()} kubelab-{self.directory.parent.name}\n")
            self.known_hosts.touch(mode=0o600)
            log.info("ssh: made the cluster's key pair in %s", self.directory)
        return self

    def authorized_key(self) -> str:
        """The line for a node's `authorized_keys`."""
        return self.public_key.read_text().strip()

    def pin(self, names: Iterable[str], host_key: str) -> None:
        """Pin `host_key` ("ssh-ed25519 AAAA...") for every name a node is dialled by,
        replacing what was pinned for those names before (a node made anew)."""
        names = list(names)
        kind, blob, *_ = host_key.split()
        kept = [
            line
            for line in self.known_hosts.read_text().splitlines()
            if line and not set(line.split()[0].split(",")) & set(names)
        ]
        kept.append(f"{','.join(names)} {kind} {blob}")
        self.known_hosts.write_text("\n".join(kept) + "\n")


def authorize_docker_node(node: DockerNode, keys: ClusterKeys, timeout: float = 60) -> None:
    """Before SSH can work: install the cluster's key in the node and pin its host key.

    Through `docker exec`, the one channel trusted before sshd is up. Waits until sshd
    made its host keys and listens (the node's runit starts it with dockerd)."""
    node.write_file("/root/.ssh/authorized_keys", (keys.authorized_key() + "\n").encode())
    node.exec("chmod", "700", "/root/.ssh")
    deadline = time.monotonic() + timeout
    script = f"test -s {HOST_KEY} && grep -qi ':0016 .* 0A ' /proc/net/tcp && cat {HOST_KEY}"
    while True:
        host_key = node.sh(script, check=False).strip()
        if host_key:
            break
        if time.monotonic() > deadline:
            raise SSHError(
                f"sshd in node {node.name} has no host key or does not listen on port "
                f"{SSH_PORT} after {timeout:.0f}s: see /var/log/sshd.log in the node"
            )
        time.sleep(0.2)
    keys.pin([node.name, node.ip], host_key)


class DockerNode(Machine, Protocol):
    """A node the lab can also reach through `docker exec` (lab.nodes.Node)."""

    def write_file(self, path: str, data: bytes, mode: int = 0o600) -> None: ...

    def exec(self, *argv: str) -> object: ...

    def sh(self, script: str, *, check: bool = True, timeout: float = 120) -> str: ...


@dataclass
class SSHShell:
    """Commands on nodes over SSH, as root, with the cluster's key and pinned host keys.

    Implements `lab.cluster.NodeShell`. Connections open on first use and stay open."""

    keys: ClusterKeys
    user: str = "root"
    port: int = SSH_PORT
    connect_timeout: float = 15
    _connections: dict[str, Connection] = field(default_factory=dict)

    def connection(self, node: Machine) -> Connection:
        if node.ip not in self._connections:
            conn = Connection(
                node.ip,
                user=self.user,
                port=self.port,
                connect_timeout=int(self.connect_timeout),
                connect_kwargs={
                    "key_filename": str(self.keys.private_key),
                    "look_for_keys": False,
                    "allow_agent": False,
                },
            )
            # fabric trusts any host key on first use (AutoAddPolicy); the lab pins them.
            conn.client.load_host_keys(str(self.keys.known_hosts))
            conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
            self._connections[node.ip] = conn
        return self._connections[node.ip]

    def run(self, node: Machine, argv: Sequence[str], *, timeout: float = 600) -> str:
        """Run `argv` on `node`; its stdout, or SSHError with its output on failure."""
        command = shlex.join(argv)
        try:
            result = self.connection(node).run(
                command, hide=True, warn=True, timeout=timeout, in_stream=False
            )
        except CommandTimedOut:
            raise SSHError(f"`{command}` on node {node.name} took over {timeout:.0f}s") from None
        except (paramiko.SSHException, OSError) as exc:
            raise self._unreachable(node, exc) from None
        if result.exited != 0:
            raise SSHError(
                f"`{command}` failed on node {node.name} (exit {result.exited}):\n"
                f"{result.stdout}{result.stderr}"
            )
        return str(result.stdout)

    def run_many(
        self, nodes: Sequence[Machine], argv: Sequence[str], *, timeout: float = 600
    ) -> dict[str, str]:
        """The same command on several nodes at once (fabric's ThreadingGroup); each
        node's stdout by name. Every node's failure is in the one error raised."""
        command = shlex.join(argv)
        by_conn = {id(self.connection(n)): n for n in nodes}
        group = ThreadingGroup.from_connections([self.connection(n) for n in nodes])
        try:
            results = group.run(command, hide=True, warn=True, timeout=timeout, in_stream=False)
        except GroupException as exc:
            results = exc.result
        failures, out = [], {}
        for conn, result in results.items():
            node = by_conn[id(conn)]
            if isinstance(result, BaseException):
                failures.append(f"{node.name}: {result}")
            elif result.exited != 0:
                failures.append(
                    f"{node.name} (exit {result.exited}):\n{result.stdout}{result.stderr}"
                )
            else:
                out[node.name] = str(result.stdout)
        if failures:
            raise SSHError(f"`{command}` failed on " + "\n".join(failures))
        return out

    def put(self, node: Machine, data: bytes, path: str, mode: int = 0o600) -> None:
        """Write a file on the node over SFTP."""
        self.connection(node).put(io.BytesIO(data), path)
        self.connection(node).sftp().chmod(path, mode)

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def _unreachable(self, node: Machine, exc: BaseException) -> SSHError:
        if isinstance(exc, paramiko.BadHostKeyException | paramiko.SSHException) and (
            "not found in known_hosts" in str(exc) or isinstance(exc, paramiko.BadHostKeyException)
        ):
            return SSHError(
                f"node {node.name} ({node.ip}) offered a host key that is not the one pinned in "
                f"{self.keys.known_hosts}: {exc}. If the node was made anew, `labctl up` pins "
                "its new key; otherwise something else answers at that address"
            )
        return SSHError(
            f"cannot reach node {node.name} over SSH at {self.user}@{node.ip}:{self.port}: {exc}"
        )
