"""The Docker lab: the `Lab` model behind `labctl up|down|status` (seeds: bringing a
cluster up with kubeadm on machines, here node containers), as kind creates clusters.

A small YAML file describes the cluster, like kind's:

    kind: Cluster
    name: kubelab
    nodes:
      - role: control-plane
      - role: worker
      - role: worker
    networking:                          # optional
      loadBalancerPool: 10.250.254.0/24  # LoadBalancer Services' addresses (a CIDR or
                                         # first-last); default: the lab network's
                                         # 10.N.254.0/24, N chosen at `up`
    tracing: false          # default true: the trace collector and every component's spans

`up` is a list of actions, each printed as it starts and with its time when done:
build the images (through `lab.images`, skipped when current), start the lab's
registry mirror (`lab.registry`) and the node containers on the lab's internal network
(`lab.nodes`), push the images pods pull to the registry (the node image too: the
control plane's static pods run it) and load pause into the nodes, run `labadm init` on
the first control-plane node, `labadm join` on the workers (in parallel), fetch the
admin kubeconfig and wait until every node is Ready. A summary of nodes, roles,
addresses and the kubeconfig's path ends it, and the lab's context is merged into the
user's kubeconfig (`lab.kubeconfigs`). A running lab's other commands (stop, start,
nodes add|remove, load-image, kubeconfig, ssh) are `lab.lifecycle`'s, built on this
module; the command line is `lab.labctl`'s, over both.

Commands reach the nodes through `NodeShell`, one small interface, implemented over SSH
(`lab.ssh.SSHShell`: fabric/paramiko, a key pair made per cluster, host keys pinned), so
that VMs and real hosts given an inventory take the same path as node containers.
`docker exec` is used only before sshd answers: to install the cluster's key and read
the node's host key (`lab.ssh.authorize_docker_node`). The lab writes an Ansible
inventory and an SSH config beside the kubeconfig (`lab.inventory`) whenever its nodes
change; `labctl ssh <node> [command]` runs OpenSSH with that config.

The lab's files are in `.lab/<name>/` (admin.conf, state.json, ssh/ with the keys,
ssh_config, inventory.ini);
containers, volumes and the network carry the label `org.kubelab.lab=<prefix>`, by
which `down` removes them.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import yaml

from controlplane.controllers.servicelb import AddressRange
from kubelab.client import (
    KubeconfigError,
    RestClient,
    ServerUnreachable,
    StatusError,
    load_config,
    resource_for,
)
from lab import haproxy, kubeconfigs
from lab.images import BUSYBOX_IMAGE, NGINX_IMAGE, PAUSE_IMAGE, Builder
from lab.inventory import InventoryHost, write_files
from lab.labadm.layout import API_PORT, COLLECTOR_PORT
from lab.nodes import LAB_LABEL, SUBNET_CANDIDATES, Addressing, Node, NodeCluster
from lab.registry import Registry
from lab.ssh import ClusterKeys, Machine, SSHShell, authorize_docker_node

NODES = resource_for("v1", "Node")
ROLES = ("control-plane", "worker")
LABADM = ("/opt/kubelab/venv/bin/python", "-m", "lab.labadm")
DEFAULT_CONFIG = {
    "kind": "Cluster",
    "name": "kubelab",
    "nodes": [{"role": "control-plane"}] * 3 + [{"role": "worker"}] * 2,
}
IMAGES = ["busybox", "pause", "nginx", "node", "registry"]
HA_IMAGES = ["haproxy"]
"""Built only for a lab of more than one control-plane node (the load balancer)."""
MIRRORED = (BUSYBOX_IMAGE, NGINX_IMAGE)
"""Pushed to the lab's registry with the node image (pods pull them through the mirror);
the pause image is not a docker.io name, so it is loaded into the nodes."""


class LabError(RuntimeError):
    """The lab could not be brought up or down; the message says what to do."""


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    roles: tuple[str, ...]
    load_balancer_pool: str = ""
    """`networking.loadBalancerPool`; empty: the default of the lab's network."""
    tracing: bool = True
    """The trace collector on the first control-plane node (`labadm init --collector`),
    every component sending it spans (`labctl trace`); `tracing: false` turns it off."""

    @classmethod
    def parse(cls, doc: object, source: str = "the cluster config") -> ClusterConfig:
        if not isinstance(doc, dict) or doc.get("kind", "Cluster") != "Cluster":
            raise LabError(f"{source}: expected a mapping with kind: Cluster")
        name = str(doc.get("name", "kubelab"))
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
            raise LabError(f"{source}: name {name!r} must be lowercase letters, digits and '-'")
        nodes = doc.get("nodes") or DEFAULT_CONFIG["nodes"]
        roles = tuple(str(n.get("role", "worker")) for n in nodes if isinstance(n, dict))
        if len(roles) != len(nodes) or any(r not in ROLES for r in roles):
            raise LabError(f"{source}: each node needs a role of {', '.join(ROLES)}")
        if roles[:1] != ("control-plane",):
            raise LabError(
                f"{source}: the first node must be a control-plane node (labadm init runs "
                "there); list the control-plane nodes first"
            )
        if roles.count("control-plane") % 2 == 0:
            print(
                f"warning: {source}: {roles.count('control-plane')} control-plane nodes: an "
                "even number tolerates no more failures than one fewer (the store's quorum)",
                file=sys.stderr,
            )
        networking = doc.get("networking") or {}
        if not isinstance(networking, dict):
            raise LabError(f"{source}: networking must be a mapping")
        pool = str(networking.get("loadBalancerPool") or "")
        if pool:
            _lab_subnet(pool, source)
        tracing = doc.get("tracing", True)
        if not isinstance(tracing, bool):
            raise LabError(f"{source}: tracing must be true or false, not {tracing!r}")
        return cls(name, roles, pool, tracing)

    @property
    def subnets(self) -> tuple[str, ...]:
        """Where the lab's network may go: the subnet of a configured pool, else any
        free one."""
        if self.load_balancer_pool:
            return (_lab_subnet(self.load_balancer_pool, "the cluster config"),)
        return SUBNET_CANDIDATES

    def pool(self, addressing: Addressing) -> str:
        """The LoadBalancer addresses of a lab on `addressing`."""
        return self.load_balancer_pool or str(addressing.load_balancer_range)

    @property
    def control_planes(self) -> int:
        return self.roles.count("control-plane")

    @classmethod
    def load(cls, path: Path | None) -> ClusterConfig:
        if path is None:
            return cls.parse(DEFAULT_CONFIG)
        try:
            return cls.parse(yaml.safe_load(path.read_text()), str(path))
        except (OSError, yaml.YAMLError) as exc:
            raise LabError(f"cannot read the cluster config {path}: {exc}") from None


def _lab_subnet(pool: str, source: str) -> str:
    """The lab network a `loadBalancerPool` needs (the host reaches the pool's
    addresses over it); a LabError saying what to choose if it fits none."""
    try:
        addresses = AddressRange.parse(pool)
    except ValueError as exc:
        raise LabError(f"{source}: networking.loadBalancerPool: {exc}") from None
    subnet = ipaddress.IPv4Network(f"{addresses.first}/16", strict=False)
    nodes = Addressing(subnet).node_range
    if str(subnet) not in SUBNET_CANDIDATES or addresses.last not in subnet:
        raise LabError(
            f"{source}: networking.loadBalancerPool {pool} must lie in one of the lab "
            f"networks {SUBNET_CANDIDATES[0]} ... {SUBNET_CANDIDATES[-1]}, e.g. "
            f"10.250.254.0/24"
        )
    if addresses.last >= nodes.network_address:
        raise LabError(
            f"{source}: networking.loadBalancerPool {pool} overlaps {nodes}, where Docker "
            f"gives the nodes their addresses: choose addresses below {nodes.network_address}"
        )
    return str(subnet)


class NodeShell(Protocol):
    """How the lab runs a command on a node (or the same one on several at once)."""

    def run(self, node: Machine, argv: Sequence[str], *, timeout: float = 600) -> str: ...

    def run_many(
        self, nodes: Sequence[Machine], argv: Sequence[str], *, timeout: float = 600
    ) -> dict[str, str]: ...

    def close(self) -> None: ...


@contextmanager
def step(title: str) -> Iterator[None]:
    """A progress line, and its time (or its failure) when done."""
    print(f" • {title} ...", flush=True)
    started = time.monotonic()
    try:
        yield
    except BaseException:
        print(f" ✗ {title} (failed after {time.monotonic() - started:.1f}s)", flush=True)
        raise
    print(f" ✓ {title} ({time.monotonic() - started:.1f}s)", flush=True)


@dataclass
class Lab:
    """One Docker lab: its config, prefix, node containers and files."""

    config: ClusterConfig
    directory: Path
    prefix: str = ""
    shell: NodeShell | None = None
    """Over SSH (`lab.ssh.SSHShell`), made on first use from the lab's keys."""
    builder: Builder = field(default_factory=Builder)
    nodes: NodeCluster | None = None
    timings: dict[str, float] = field(default_factory=dict)
    join_command: list[str] = field(default_factory=list)
    """What `labadm init` printed for workers to run (`join <endpoint> --token ...`)."""
    control_plane_join: list[str] = field(default_factory=list)
    """... and for control-plane nodes (`... --control-plane --certificate-key ...`)."""
    endpoint: str = ""
    """The apiservers' address (host:port): the load balancer's with more than one
    control-plane node, else the first node's."""
    registry: Registry | None = None
    collector: str = ""
    """The trace collector's URL (`labctl trace` reads it from state.json); empty
    without tracing."""
    roles: dict[str, str] = field(default_factory=dict)
    """Each node's role by its name."""
    _pushing: Future[None] | None = None
    _pulling: dict[str, Future[object]] = field(default_factory=dict)
    """The node image's pull into each joining control-plane node, by node name."""

    def __post_init__(self) -> None:
        self.prefix = self.prefix or f"kubelab-{self.config.name}"

    @property
    def control_plane_nodes(self) -> list[Node]:
        assert self.nodes is not None
        return [n for n in self.nodes.nodes if self.roles[n.name] == "control-plane"]

    @property
    def worker_nodes(self) -> list[Node]:
        assert self.nodes is not None
        return [n for n in self.nodes.nodes if self.roles[n.name] == "worker"]

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "admin.conf"

    @property
    def keys(self) -> ClusterKeys:
        """The cluster's SSH key pair and pinned host keys (`ssh/` in the lab's folder)."""
        return ClusterKeys(self.directory / "ssh")

    @property
    def ssh_config(self) -> Path:
        return self.directory / "ssh_config"

    @property
    def inventory(self) -> Path:
        return self.directory / "inventory.ini"

    def ssh(self) -> NodeShell:
        """The shell to the nodes: SSH with the lab's keys (made by `open_ssh`)."""
        if self.shell is None:
            if not self.keys.private_key.exists():
                raise LabError(f"no SSH keys in {self.keys.directory}: `labctl up` makes them")
            self.shell = SSHShell(self.keys)
        return self.shell

    def open_ssh(self, nodes: list[Node]) -> None:
        """Install the cluster's key in `nodes` and pin their host keys (docker exec:
        sshd is just up), write the inventory and the SSH config, and check that each
        node answers over SSH."""
        keys = self.keys.ensure()
        for node in nodes:
            authorize_docker_node(node, keys)
        self._save_state()
        self.ssh().run_many(nodes, ["true"], timeout=60)

    def _timed(self, key: str, title: str, action: Callable[[], None]) -> None:
        started = time.monotonic()
        with step(title):
            action()
        self.timings[key] = time.monotonic() - started

    def up(self) -> None:
        client = self.builder.client
        if client.containers.list(all=True, filters={"label": f"{LAB_LABEL}={self.prefix}"}):
            raise LabError(
                f"a lab named {self.config.name!r} exists already (containers labelled "
                f"{LAB_LABEL}={self.prefix}): `labctl down` removes it"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        ha = self.config.control_planes > 1
        images = IMAGES + (HA_IMAGES if ha else [])
        self._timed("images", "Ensuring node images", lambda: self.builder.ensure(images))
        image = self.builder.tags("node")[0]
        cluster = self.nodes = NodeCluster(self.prefix, client=client, image=image)
        names = self._names()
        self._timed(
            "nodes", f"Starting the registry and {len(names)} nodes", lambda: self._start(names)
        )
        control_planes = self.control_plane_nodes
        self.endpoint = f"{control_planes[0].ip}:{API_PORT}"
        if self.config.tracing:
            self.collector = f"http://{control_planes[0].ip}:{COLLECTOR_PORT}"
        if ha:
            self._timed(
                "lb", "Starting the load balancer (haproxy)", lambda: self._start_lb(control_planes)
            )
        self._save_state()
        self._timed("ssh", "Opening SSH to the nodes", lambda: self.open_ssh(cluster.nodes))
        self._timed("load", "Filling the registry, loading pause into the nodes", self._fill)
        self._timed(
            "init",
            f"Running labadm init on {control_planes[0].name}",
            lambda: self._init(control_planes[0], image),
        )
        if len(cluster.nodes) > 1:
            self._timed(
                "join",
                f"Joining {len(cluster.nodes) - 1} nodes",
                lambda: self._join(control_planes[1:], self.worker_nodes),
            )
        self._timed("ready", "Waiting for every node to be Ready", self._wait_ready)
        self.timings["total"] = time.monotonic() - started
        self.summary()

    def _names(self) -> list[str]:
        counts: dict[str, int] = {}
        names = []
        for role in self.config.roles:
            counts[role] = counts.get(role, 0) + 1
            names.append(f"{'cp' if role == 'control-plane' else 'worker'}{counts[role]}")
        return names

    def _start(self, names: list[str]) -> None:
        assert self.nodes is not None
        registry = self.registry = Registry(
            self.prefix, self.nodes.create_network(self.config.subnets), self.builder.client
        )
        registry.start(self.nodes.network_name)
        print(f"   registry at {registry.ip}", flush=True)
        # The pushes (the node image's takes the longest) overlap the nodes' start.
        self._pushing = ThreadPoolExecutor(max_workers=1).submit(self._push)
        for name, role in zip(names, self.config.roles, strict=True):
            self.add_node(name, role)
        for node in self.nodes.nodes:
            node.wait_ready(120)

    def add_node(self, name: str, role: str) -> Node:
        """A node container with the lab's registry as its dockerd's mirror."""
        assert self.nodes is not None and self.registry is not None
        node = self.nodes.add_node(name, registry_mirrors=(self.registry.url,))
        self.roles[name] = role
        print(f"   {name} ({role}) at {node.ip}", flush=True)
        return node

    def _push(self) -> None:
        """The images pods pull go to the registry (the node image too: the control
        plane's static pods and the DNS add-on run it). A pull through the mirror is
        faster than `docker load` (docs/benchmarks.md)."""
        assert self.registry is not None
        self.registry.wait_ready()
        for image in (*MIRRORED, self.builder.tags("node")[0]):
            started = time.monotonic()
            if self.registry.push(image):
                print(f"   pushed {image} ({time.monotonic() - started:.1f}s)", flush=True)

    def _fill(self) -> None:
        """Pause loaded into the nodes (not a docker.io name, so not mirrored), and the
        registry's pushes awaited. Then the control-plane nodes after the first pull the
        node image, which their static pods run, one after another: the pulls (most of a
        control-plane join's time) overlap `labadm init` on the first node, which pulls
        its own. (All at once they slowed `init` as much and saved no more.)"""
        assert self.nodes is not None and self._pushing is not None
        self.nodes.load_image(PAUSE_IMAGE)
        self._pushing.result()
        joining = self.control_plane_nodes[1:]
        if joining:
            pulls = ThreadPoolExecutor(max_workers=1)
            image = self.builder.tags("node")[0]
            for node in joining:
                self._pulling[node.name] = pulls.submit(
                    node.exec, "docker", "pull", "-q", image, timeout=600
                )
            pulls.shutdown(wait=False)

    def _start_lb(self, control_planes: list[Node]) -> None:
        assert self.nodes is not None and self.nodes.addressing is not None
        haproxy.start(
            self.builder.client,
            self.prefix,
            self.nodes.network_name,
            self.nodes.addressing,
            self.builder.tags("haproxy")[0],
            [(n.name, n.ip) for n in control_planes],
        )
        self.endpoint = f"{haproxy.address(self.nodes.addressing)}:{API_PORT}"
        print(f"   load balancer at {self.endpoint}", flush=True)

    def _init(self, node: Node, image: str) -> None:
        """`labadm init` on the first node (with the load balancer as the control-plane
        endpoint and the certs uploaded in an HA lab); keeps the join commands it
        printed and fetches the admin kubeconfig."""
        assert self.nodes is not None and self.nodes.addressing is not None
        argv = [
            *LABADM, "init", f"--apiserver-advertise-address={node.ip}",
            f"--node-name={node.name}", f"--image={image}",
            f"--pod-network-cidr={self.nodes.addressing.subnet}",
            f"--load-balancer-ip-range={self.config.pool(self.nodes.addressing)}",
        ]  # fmt: skip
        if self.config.control_planes > 1:
            argv += [f"--control-plane-endpoint={self.endpoint}", "--upload-certs"]
        if self.collector:  # the joining nodes find it in the cluster's kubelab-config
            argv.append("--collector")
        out = self.ssh().run(node, argv)
        for line in out.splitlines():
            if line.startswith("labadm join ") and "--control-plane" in line:
                self.control_plane_join = line.split()[1:]
            elif line.startswith("labadm join "):
                self.join_command = line.split()[1:]
        if not self.join_command or (
            self.config.control_planes > 1 and not self.control_plane_join
        ):
            raise LabError(f"labadm init on {node.name} printed no join command:\n{out}")
        kubeconfig = self.ssh().run(node, ["cat", "/etc/kubelab/admin.conf"])
        self.kubeconfig.write_text(kubeconfig)
        self.kubeconfig.chmod(0o600)

    def join_node(self, node: Node, join: list[str], extra: tuple[str, ...] = ()) -> None:
        """`labadm join` on one node, timed."""
        started = time.monotonic()
        argv = [*LABADM, *join, f"--node-name={node.name}", f"--node-ip={node.ip}", *extra]
        self.ssh().run(node, argv)
        self.timings[f"join {node.name}"] = time.monotonic() - started
        print(f"   {node.name} joined in {time.monotonic() - started:.1f}s", flush=True)

    def _join(self, control_planes: list[Node], workers: list[Node]) -> None:
        """Control-plane nodes one after another (each store member is promoted before
        the next is added); beside them the workers, all at once over one SSH
        ThreadingGroup (each takes its node name from its hostname and its address from
        what the name resolves to, the lab network's in a node container)."""
        image = f"--image={self.builder.tags('node')[0]}"

        def control_plane_joins() -> None:
            for node in control_planes:
                pulling = self._pulling.pop(node.name, None)
                if pulling is not None:
                    pulling.result()  # a failed pull says why here, before the join
                self.join_node(node, self.control_plane_join, (image,))

        def worker_joins() -> None:
            started = time.monotonic()
            self.ssh().run_many(workers, [*LABADM, *self.join_command])
            print(f"   {len(workers)} workers joined in {time.monotonic() - started:.1f}s")

        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(control_plane_joins)]
            if workers:
                futures.append(pool.submit(worker_joins))
            for future in futures:
                future.result()

    def client(self) -> RestClient:
        return RestClient(load_config(self.kubeconfig), qps=None)

    def _wait_ready(self, timeout: float = 240) -> None:
        assert self.nodes is not None
        client = self.client()
        wanted = {n.name for n in self.nodes.nodes}
        deadline = time.monotonic() + timeout
        ready: set[str] = set()
        while time.monotonic() < deadline:
            try:
                items = client.list(NODES)["items"]
            except (ServerUnreachable, StatusError):
                items = []  # the apiserver is still starting (`labctl start`)
            ready = {
                n["metadata"]["name"]
                for n in items
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in (n.get("status") or {}).get("conditions") or []
                )
            }
            if wanted <= ready:
                return
            time.sleep(1.0)
        raise LabError(
            f"nodes not Ready after {timeout:.0f}s: {', '.join(sorted(wanted - ready))}; "
            "see /var/log/kubelet.log in them (docker exec <container> tail /var/log/kubelet.log)"
        )

    def summary(self) -> None:
        assert self.nodes is not None
        print(f"\nCluster {self.config.name!r} is up ({self.timings['total']:.0f}s):")
        for node in self.nodes.nodes:
            role = self.roles[node.name]
            print(f"  {node.name:<10} {role:<14} {node.ip:<15} container {node.container_name}")
        if self.registry is not None:
            print(f"  {'registry':<10} {'mirror':<14} {self.registry.ip:<15} {self.registry.url}")
        if self.nodes.addressing is not None:
            pool = self.config.pool(self.nodes.addressing)
            print(f"  LoadBalancer Services' addresses: {pool}")
        server = f"https://{self.endpoint or f'{self.nodes.nodes[0].ip}:{API_PORT}'}"
        merged = kubeconfigs.merge(self.kubeconfig, self.config.name)
        context = kubeconfigs.context_name(self.config.name)
        print(f"\napiserver: {server}\nkubeconfig: {self.kubeconfig.resolve()}")
        if self.collector:
            print(f"trace collector: {self.collector} (labctl trace deployment/NAME)")
        print(f"context {context!r} merged into {merged} and made current:\n")
        print("  .venv/bin/kubectl get nodes")
        print("Remove it: make down (labctl down)")

    def _save_state(self) -> None:
        assert self.nodes is not None
        state = {
            "prefix": self.prefix,
            "endpoint": self.endpoint,
            "collector": self.collector,
            "nodes": [
                {
                    "name": n.name,
                    "role": self.roles[n.name],
                    "ip": n.ip,
                    "container": n.container_name,
                }
                for n in self.nodes.nodes
            ],
        }
        (self.directory / "state.json").write_text(json.dumps(state, indent=2))
        if self.keys.private_key.exists() and self.nodes.addressing is not None:
            hosts = [InventoryHost(n.name, n.ip, self.roles[n.name]) for n in self.nodes.nodes]
            variables = {
                "kubelab_pod_network_cidr": str(self.nodes.addressing.subnet),
                "kubelab_node_image": self.nodes.image,
                "kubelab_kubeconfig": str(self.kubeconfig.resolve()),
                "kubelab_control_plane_endpoint": self.endpoint,
            }
            write_files(self.directory, hosts, self.keys, variables)

    def down(self) -> None:
        state = self.directory / "state.json"
        if state.exists():  # the prefix the lab was made with (`up --prefix`)
            self.prefix = json.loads(state.read_text())["prefix"]
        with step(f"Removing the lab {self.config.name!r} ({self.prefix})"):
            NodeCluster(self.prefix, client=self.builder.client).remove()
        if kubeconfigs.unmerge(self.config.name):
            print(
                f"   context {kubeconfigs.context_name(self.config.name)!r} removed from "
                f"{kubeconfigs.user_kubeconfig()}",
                flush=True,
            )
        if self.shell is not None:
            self.shell.close()
        for path in (self.kubeconfig, self.directory / "state.json"):
            path.unlink(missing_ok=True)
        for path in (self.ssh_config, self.inventory):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.keys.directory, ignore_errors=True)

    def status(self) -> None:
        state_file = self.directory / "state.json"
        if not state_file.exists():
            print(f"no lab {self.config.name!r} (no {state_file}); `labctl up` makes one")
            return
        state = json.loads(state_file.read_text())
        containers = {
            c.name: c.status
            for c in self.builder.client.containers.list(
                all=True, filters={"label": f"{LAB_LABEL}={state['prefix']}"}
            )
        }
        nodes: dict[str, str] = {}
        try:
            for n in self.client().list(NODES)["items"]:
                conditions = (n.get("status") or {}).get("conditions") or []
                ok = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
                nodes[n["metadata"]["name"]] = "Ready" if ok else "NotReady"
        except (StatusError, ServerUnreachable, KubeconfigError) as exc:
            print(f"(the apiserver did not answer: {exc})")
        print(f"{'NODE':<10} {'ROLE':<14} {'IP':<15} {'CONTAINER':<10} STATUS")
        for n in state["nodes"]:
            container = containers.get(n["container"], "missing")
            print(
                f"{n['name']:<10} {n['role']:<14} {n['ip']:<15} {container:<10} "
                f"{nodes.get(n['name'], 'unregistered')}"
            )
        print(f"kubeconfig: {self.kubeconfig.resolve()}")
        collector = state.get("collector", "")
        print(f"trace collector: {collector or 'none (tracing: false in the cluster config)'}")
