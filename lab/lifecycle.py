"""A running lab's life after `labctl up`: stop and start, nodes added and removed,
images loaded, the kubeconfig's path, a shell on a node.

Each command first attaches to the lab from its `state.json` (prefix, nodes, roles,
addresses) and the Docker objects labelled with its prefix, so a new `labctl` process
works on the lab that an earlier one made.

* `stop` / `start` (`labctl stop|start`): every container of the lab stopped, then
  started again, as a restart of the Docker Engine does to them (the containers have
  `--restart unless-stopped`, so an engine restart starts them by itself). What makes
  the same cluster come back without a rebuild: each node and the registry keep their
  fixed address on the lab's network (the store's peer URLs, the apiserver's
  certificate and the kubeconfigs name them); the certificates, kubeconfigs, manifests,
  the kubelet's state and the store's data stay in the container (its layer survives
  a stop) and the inner dockerd's images and containers on the node's named volume;
  labadm enabled the node's services in runit (their `down` files removed), so runit
  starts the kubelet, the network agent and kube-proxy again; the kubelet starts the
  static control plane from its manifests and the pods' containers again.
* `nodes add`: a new worker container (`worker<k>`, the next free name), pause loaded,
  SSH opened to it (the inventory and SSH config rewritten), a join command made on the
  first control-plane node (`labadm token create --print-join-command`) and run on the
  new node, then Ready awaited.
* `nodes remove <name>`: the worker drained with evictions (the real `kubectl drain`,
  which honours PodDisruptionBudgets), `labadm reset` on it, its Node deleted, its
  container and volume removed.
* `load-image <image>` (kind's `load docker-image`): a docker.io name goes to the lab's
  registry, where every node's dockerd pulls it through its mirror; another registry's
  name is loaded into every node's dockerd.
* `ssh <node> [command]`: OpenSSH with the SSH config `up` wrote (the cluster's key, the
  pinned host keys), in place of labctl's process.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker.errors
from docker.models.containers import Container

from kubelab.client import StatusError
from lab.cluster import LABADM, NODES, Lab, LabError, step
from lab.images import PAUSE_IMAGE
from lab.nodes import LAB_LABEL, Addressing, Node, NodeCluster
from lab.registry import Registry, mirror_path

STOP_TIMEOUT = 10
"""Seconds a container has to stop before it is killed (Docker's default)."""


def attach(lab: Lab) -> None:
    """Fill `lab` in from its state.json and its Docker objects."""
    state_file = lab.directory / "state.json"
    if not state_file.exists():
        raise LabError(f"no lab {lab.config.name!r} (no {state_file}): `labctl up` makes one")
    state = json.loads(state_file.read_text())
    lab.prefix = state["prefix"]
    lab.endpoint = state.get("endpoint", "")
    lab.collector = state.get("collector", "")
    client = lab.builder.client
    cluster = NodeCluster(lab.prefix, client=client)
    try:
        network = client.networks.get(cluster.network_name)
        containers = {n["container"]: client.containers.get(n["container"]) for n in state["nodes"]}
    except docker.errors.NotFound as exc:
        raise LabError(
            f"the lab {lab.config.name!r} is incomplete ({exc.explanation}): `labctl down` "
            "removes what is left, `labctl up` makes it again"
        ) from None
    addressing = Addressing(ipaddress.IPv4Network(network.attrs["IPAM"]["Config"][0]["Subnet"]))
    cluster.addressing = addressing
    first = int(addressing.node_range.network_address) + 10
    for entry in state["nodes"]:
        container = containers[entry["container"]]
        index = int(ipaddress.IPv4Address(entry["ip"])) - first
        cluster.nodes.append(Node(entry["name"], entry["ip"], index, container, entry["container"]))
        lab.roles[entry["name"]] = entry["role"]
    cluster.image = containers[state["nodes"][0]["container"]].attrs["Config"]["Image"]
    lab.nodes = cluster
    lab.registry = Registry(lab.prefix, addressing, client)


def _containers(lab: Lab) -> list[Container]:
    """The lab's containers: the registry first, then the nodes in state.json's order."""
    assert lab.nodes is not None and lab.registry is not None
    client = lab.builder.client
    found = client.containers.list(all=True, filters={"label": f"{LAB_LABEL}={lab.prefix}"})
    order = [lab.registry.container_name, *(n.container_name for n in lab.nodes.nodes)]
    return sorted(found, key=lambda c: order.index(c.name) if c.name in order else len(order))


def stop(lab: Lab) -> None:
    attach(lab)
    containers = _containers(lab)
    title = f"Stopping the lab {lab.config.name!r} ({len(containers)} containers)"
    with step(title), ThreadPoolExecutor(max_workers=len(containers)) as pool:
        list(pool.map(lambda c: c.stop(timeout=STOP_TIMEOUT), containers))
    print(f"Stopped. `labctl start --name {lab.config.name}` brings it back.")


def start(lab: Lab) -> None:
    attach(lab)
    assert lab.nodes is not None and lab.registry is not None
    started = time.monotonic()
    with step(f"Starting the lab {lab.config.name!r}"):
        for container in _containers(lab):
            container.start()
        for node in lab.nodes.nodes:
            node.wait_ready(120)
            node.container.reload()
            address = node.container.attrs["NetworkSettings"]["Networks"][lab.nodes.network_name][
                "IPAddress"
            ]
            if address != node.ip:
                raise LabError(f"node {node.name} came back at {address}, not {node.ip}")
        lab.registry.wait_ready()
    lab._timed("ready", "Waiting for every node to be Ready", lab._wait_ready)
    lab.timings["total"] = time.monotonic() - started
    lab.summary()


COLLECTOR_HINT = (
    "Is the lab running? `labctl status` shows it, `labctl start` starts a stopped lab, "
    "`labctl up` makes one"
)
"""What `labctl trace` says when the lab's collector does not answer."""


def collector(lab: Lab) -> str:
    """The lab's trace collector's URL, from its state.json."""
    state_file = lab.directory / "state.json"
    if not state_file.exists():
        raise LabError(
            f"no lab {lab.config.name!r} (no {state_file}): `labctl up` makes one, with its "
            "trace collector; or name a collector with --collector URL"
        )
    url: str = json.loads(state_file.read_text()).get("collector", "")
    if not url:
        raise LabError(
            f"the lab {lab.config.name!r} runs without tracing (`tracing: false` in its "
            "cluster config): `labctl down`, then `labctl up` without it; or name a "
            "collector with --collector URL"
        )
    return url


def add_worker(lab: Lab) -> Node:
    attach(lab)
    assert lab.nodes is not None
    taken = {n.name for n in lab.nodes.nodes}
    name = next(f"worker{k}" for k in range(1, 1000) if f"worker{k}" not in taken)
    with step(f"Adding the worker {name}"):
        node = lab.add_node(name, "worker")
        node.wait_ready(120)
        lab.nodes.load_image(PAUSE_IMAGE, [node])
        lab.open_ssh([node])  # its key and host key; the inventory names it
        control_plane = _control_plane(lab)
        out = lab.ssh().run(control_plane, [*LABADM, "token", "create", "--print-join-command"])
        join = next((ln.split()[1:] for ln in out.splitlines() if ln.startswith("labadm join")), [])
        if not join:
            raise LabError(f"labadm token create on {control_plane.name} printed no join command")
        lab.join_node(node, join)
    lab._timed("ready", "Waiting for every node to be Ready", lab._wait_ready)
    return node


def _control_plane(lab: Lab) -> Node:
    assert lab.nodes is not None
    return next(n for n in lab.nodes.nodes if lab.roles[n.name] == "control-plane")


def kubectl_path() -> str:
    """The real kubectl: the venv's (beside this Python), else the PATH's."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        raise LabError("kubectl not found: `make venv` puts it in .venv/bin")
    return found


def remove_worker(lab: Lab, name: str) -> None:
    attach(lab)
    assert lab.nodes is not None
    node = next((n for n in lab.nodes.nodes if n.name == name), None)
    if node is None:
        raise LabError(f"no node {name!r} in the lab; its nodes: {', '.join(lab.roles)}")
    if lab.roles[name] != "worker":
        raise LabError(f"{name} is a {lab.roles[name]} node: only workers are removed this way")
    with step(f"Draining {name} (evictions)"):
        drain = subprocess.run(
            [
                kubectl_path(), "--kubeconfig", str(lab.kubeconfig), "drain", name,
                "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=180s",
            ],
            capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
        if drain.returncode != 0:
            raise LabError(f"kubectl drain {name} failed: {drain.stderr.strip()}")
    with step(f"labadm reset on {name}, its Node deleted, its container removed"):
        lab.ssh().run(node, [*LABADM, "reset", "-f"])
        try:
            lab.client().delete(NODES, name)
        except StatusError as exc:
            if exc.code != 404:
                raise
        lab.nodes.remove_node(node)
        del lab.roles[name]
        lab._save_state()


def load_image(lab: Lab, image: str) -> None:
    attach(lab)
    assert lab.nodes is not None and lab.registry is not None
    try:
        lab.builder.client.images.get(image)
    except docker.errors.ImageNotFound:
        raise LabError(
            f"no image {image!r} in this machine's Docker Engine (docker images)"
        ) from None
    if mirror_path(image) is None:
        with step(f"Loading {image} into every node (not a docker.io name: no mirror)"):
            lab.nodes.load_image(image)
        return
    lab.registry.wait_ready()
    with step(f"Pushing {image} to the lab's registry ({lab.registry.url})"):
        if not lab.registry.push(image):
            print(f"   the registry holds this {image} already", flush=True)
    print(f"Pods pull {image} through every node's registry mirror.")


def print_kubeconfig(lab: Lab) -> None:
    attach(lab)
    print(lab.kubeconfig.resolve())


def ssh(lab: Lab, node: str, command: list[str]) -> None:
    """OpenSSH to `node` with the lab's SSH config, replacing this process (exec), so
    that the terminal, signals and the exit status are ssh's."""
    if not lab.ssh_config.exists():
        raise LabError(f"no lab in {lab.directory} (no {lab.ssh_config}); `labctl up` makes one")
    os.execvp("ssh", ["ssh", "-F", str(lab.ssh_config), node, *command])
