"""Node containers: the machines of the Docker lab, each with its own dockerd inside.

A node is a container of the node image (`lab.images`) started with the recipe measured
on this machine's engine (docs/nodes.md): a private cgroup namespace, every capability
but CAP_SYS_RESOURCE (which the engine cannot grant, so --privileged fails), no seccomp
or AppArmor profile, tmpfs /run and /tmp, its own volume for /var/lib/docker (the inner
dockerd's overlay2 needs a real filesystem, not the container's own overlay), and IP
forwarding on. Its entrypoint makes the cgroup hierarchies writable and hands over to
runit, which runs dockerd and sshd (and the kubelet, once it is installed as a service).

Nodes sit on an `--internal` network of their own: the host reaches each node at a fixed
address, and nothing can send a packet beyond this machine. The network's subnet also
holds every node's pod CIDR (Docker drops forwarded packets of an internal network
whose source or destination lies outside its subnet), so the nodes take the top /24
(`--ip-range`) and node k's pods get the k-th /24 from the bottom.

`load_image` puts a host image into nodes' engines, as `kind load docker-image` does.
Every object a cluster makes carries the label `org.kubelab.lab=<prefix>`, and
`NodeCluster.remove` deletes by that label, so a half-made cluster is removed as well.
"""

from __future__ import annotations

import ipaddress
import logging
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types
from docker.models.containers import Container

from lab.images import NODE_IMAGE

log = logging.getLogger("lab.nodes")

LAB_LABEL = "org.kubelab.lab"
ROLE_LABEL = "org.kubelab.role"
# A pull of docker.io/... would wait on lookups Docker's embedded DNS cannot answer on an
# internal network; mapped to the node itself, it fails at once or goes to the mirror.
DOCKER_IO_NAMES = ("docker.io", "index.docker.io", "registry-1.docker.io", "auth.docker.io")
# A node's named volumes (`<container>-<suffix>`): the inner dockerd's data (overlay2
# cannot sit on the container's own overlay), and the cluster's state labadm writes
# (certificates, kubeconfigs and manifests; the kubelet's state; the store's data), so
# that it outlives the container's layer.
NODE_VOLUMES = {
    "docker": "/var/lib/docker",
    "etc": "/etc/kubelab",
    "kubelet": "/var/lib/kubelet",
    "store": "/var/lib/kubelab-store",
}
# Started again by an engine restart unless stopped on purpose (`labctl stop`); the
# docker stubs know only "always" and "on-failure".
UNLESS_STOPPED: Any = {"Name": "unless-stopped"}
# Where a subnet is taken: another lab (another test run) may hold 10.244.0.0/16.
SUBNET_CANDIDATES = tuple(f"10.{second}.0.0/16" for second in range(244, 256))


class NodeError(RuntimeError):
    """A node could not be started or did not become ready; the message says why."""


@dataclass(frozen=True)
class Addressing:
    """The lab network's plan: nodes at the top /24, node k's pods at the k-th /24."""

    subnet: ipaddress.IPv4Network

    @property
    def node_range(self) -> ipaddress.IPv4Network:
        return list(self.subnet.subnets(new_prefix=24))[-1]

    @property
    def gateway(self) -> str:
        """The host's address on the network (the bridge): where nodes reach the host."""
        return str(self.node_range.broadcast_address - 1)

    @property
    def load_balancer_range(self) -> ipaddress.IPv4Network:
        """The default pool of LoadBalancer Services' addresses: the /24 below the
        nodes'. Docker's IPAM hands out only the nodes' /24, and node IPAM leaves the
        pool out of the pod ranges."""
        return list(self.subnet.subnets(new_prefix=24))[-2]

    def node_ip(self, index: int) -> str:
        if not 0 <= index < 200:
            raise ValueError(f"node index {index} out of range 0..199")
        return str(self.node_range.network_address + 10 + index)

    def pod_cidr(self, index: int) -> str:
        return str(list(self.subnet.subnets(new_prefix=24))[index])


@dataclass
class Node:
    """One node container and its address on the lab network."""

    name: str
    ip: str
    index: int
    container: Container
    container_name: str

    def exec(
        self, *argv: str, check: bool = True, input: bytes | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a command in the node (docker exec); `check` raises NodeError on failure.

        The docker CLI rather than the SDK's exec_run: it feeds stdin and bounds the time,
        which exec_run does not."""
        done = subprocess.run(
            ["docker", "exec", "-i", self.container_name, *argv],
            input=input,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise NodeError(
                f"`{' '.join(argv)}` in node {self.name} exited {done.returncode}: "
                f"{done.stderr.decode(errors='replace').strip()}"
            )
        return done

    def sh(self, script: str, *, check: bool = True, timeout: float = 120) -> str:
        """A shell script in the node; its stdout as text."""
        return self.exec("sh", "-c", script, check=check, timeout=timeout).stdout.decode()

    def write_file(self, path: str, data: bytes, mode: int = 0o600) -> None:
        """Write a file in the node (its folder made), readable by root only by default."""
        self.exec(
            "sh", "-c", f'mkdir -p "$(dirname {path})" && cat > {path} && chmod {mode:o} {path}',
            input=data,
        )  # fmt: skip

    def wait_ready(self, timeout: float = 60) -> None:
        """Until the node's dockerd answers; the node's logs are in the error if it never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.container.reload()
            if self.container.status != "running":
                break
            try:
                if self.exec("docker", "version", check=False, timeout=10).returncode == 0:
                    return
            except subprocess.TimeoutExpired:
                continue  # a busy engine: docker exec itself can take that long
            time.sleep(0.2)
        self.container.reload()
        tail = self.container.logs(tail=30).decode(errors="replace")
        dockerd = self.exec("tail", "-n", "20", "/var/log/dockerd.log", check=False)
        raise NodeError(
            f"node {self.name} is not ready after {timeout:.0f} s (container "
            f"{self.container.status}); its log:\n{tail}\ndockerd's log:\n"
            f"{dockerd.stdout.decode(errors='replace')}"
        )


@dataclass
class NodeCluster:
    """The node containers of one lab: their network, volumes and containers."""

    prefix: str
    client: docker.DockerClient = field(default_factory=docker.from_env)
    image: str = NODE_IMAGE
    nodes: list[Node] = field(default_factory=list)
    addressing: Addressing | None = None

    @property
    def network_name(self) -> str:
        return f"{self.prefix}-net"

    def labels(self, role: str) -> dict[str, str]:
        return {LAB_LABEL: self.prefix, ROLE_LABEL: role}

    def create_network(self, subnets: tuple[str, ...] = SUBNET_CANDIDATES) -> Addressing:
        """The lab's internal network, on the first of `subnets` no other network holds."""
        for candidate in subnets:
            addressing = Addressing(ipaddress.IPv4Network(candidate))
            ipam = docker.types.IPAMConfig(
                pool_configs=[
                    docker.types.IPAMPool(
                        subnet=candidate,
                        iprange=str(addressing.node_range),
                        gateway=addressing.gateway,
                    )
                ]
            )
            try:
                self.client.networks.create(
                    self.network_name,
                    driver="bridge",
                    internal=True,
                    ipam=ipam,
                    labels=self.labels("network"),
                )
            except docker.errors.APIError as err:
                if "overlap" in str(err).lower():
                    continue
                raise
            self.addressing = addressing
            log.info("lab %s: network %s on %s", self.prefix, self.network_name, candidate)
            return addressing
        raise NodeError(
            f"no free subnet for the lab network among {', '.join(subnets)}: remove "
            "unused Docker networks (docker network ls) or pass a free subnet"
        )

    def add_node(
        self, name: str, *, memory: str | None = None, registry_mirrors: tuple[str, ...] = ()
    ) -> Node:
        """Start one node container with the measured recipe (its dockerd may still start).
        `registry_mirrors` ("http://10.244.255.2:5000") go into its dockerd's daemon.json."""
        if self.addressing is None:
            self.create_network()
        assert self.addressing is not None
        index = max((n.index for n in self.nodes), default=-1) + 1
        ip = self.addressing.node_ip(index)
        container_name = f"{self.prefix}-{name}"
        volumes = {
            self.client.volumes.create(
                f"{container_name}-{suffix}", labels=self.labels(f"{suffix}-volume")
            ).name: {"bind": path, "mode": "rw"}
            for suffix, path in NODE_VOLUMES.items()
        }
        endpoint = self.client.api.create_endpoint_config(ipv4_address=ip)
        container = self.client.containers.run(
            self.image,
            name=container_name,
            hostname=name,
            detach=True,
            labels={**self.labels("node"), "org.kubelab.node": name},
            # Never --privileged (the engine refuses it) and never the host's cgroup tree.
            cgroupns="private",
            cap_add=["ALL"],
            cap_drop=["SYS_RESOURCE"],
            security_opt=["seccomp=unconfined", "apparmor=unconfined"],
            tmpfs={"/run": "rw,nosuid,nodev,exec", "/tmp": "rw,nosuid,nodev,exec"},
            volumes=volumes,
            sysctls={"net.ipv4.ip_forward": "1"},
            extra_hosts={host: "127.0.0.1" for host in DOCKER_IO_NAMES},
            network=self.network_name,
            networking_config={self.network_name: endpoint},
            mem_limit=memory,
            # An engine restart starts the nodes again (labctl stop leaves them stopped).
            restart_policy=UNLESS_STOPPED,
            environment={"KUBELAB_REGISTRY_MIRRORS": ",".join(registry_mirrors)},
        )
        node = Node(
            name=name, ip=ip, index=index, container=container, container_name=container_name
        )
        self.nodes.append(node)
        log.info("lab %s: node %s at %s (%s)", self.prefix, name, ip, container.short_id)
        return node

    def remove_node(self, node: Node) -> None:
        """Remove one node's container and its volumes."""
        node.container.remove(force=True, v=True)
        for suffix in NODE_VOLUMES:
            self.client.volumes.get(f"{node.container_name}-{suffix}").remove(force=True)
        self.nodes.remove(node)

    def pod_cidr(self, node: Node) -> str:
        assert self.addressing is not None
        return self.addressing.pod_cidr(node.index)

    def start(self, count: int, *, name: str = "node", timeout: float = 90) -> list[Node]:
        """`count` nodes named <name>1..N, each with its dockerd answering."""
        started = [self.add_node(f"{name}{len(self.nodes) + 1}") for _ in range(count)]
        for node in started:
            node.wait_ready(timeout)
        return started

    def load_image(self, image: str, nodes: list[Node] | None = None) -> None:
        """Put a host image into nodes' dockerd (all by default): docker save | docker load."""
        targets = self.nodes if nodes is None else nodes
        with tempfile.TemporaryDirectory(prefix="kubelab-load-") as tmp:
            archive = Path(tmp) / "image.tar"
            with archive.open("wb") as f:
                # By the name asked for: Image.save(named=True) would keep only its first tag.
                for chunk in self.client.api.get_image(image):
                    f.write(chunk)
            for node in targets:
                with archive.open("rb") as f:
                    done = subprocess.run(
                        ["docker", "exec", "-i", node.container_name, "docker", "load", "-q"],
                        stdin=f,
                        capture_output=True,
                        timeout=300,
                        check=False,
                    )
                if done.returncode != 0:
                    raise NodeError(
                        f"loading {image} into node {node.name} failed: "
                        f"{done.stderr.decode(errors='replace').strip()}"
                    )
                log.info("lab %s: loaded %s into %s", self.prefix, image, node.name)

    def remove(self) -> None:
        """Remove every container, volume and network labelled with this lab's prefix."""
        selector: dict[str, str | list[str] | bool] = {"label": f"{LAB_LABEL}={self.prefix}"}
        for container in self.client.containers.list(all=True, filters=selector):
            container.remove(force=True, v=True)
        for volume in self.client.volumes.list(filters=selector):
            volume.remove(force=True)
        for network in self.client.networks.list(filters=selector):
            network.remove()
        self.nodes.clear()
        log.info("lab %s: removed", self.prefix)
