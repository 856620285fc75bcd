"""Node containers on this machine's engine: their own dockerd runs containers, and
cgroups nest so that limits on a node's containers hold (docs/nodes.md)."""

from __future__ import annotations

import re
from pathlib import Path

import docker
import pytest

from lab.images import BUSYBOX_IMAGE, NODE_IMAGE, Builder
from lab.nodes import NodeCluster
from tests.waiting import until


def test_a_nodes_dockerd_runs_busybox(node_cluster: NodeCluster) -> None:
    for node in node_cluster.nodes:
        out = node.exec("docker", "run", "--rm", BUSYBOX_IMAGE, "echo", "hello from a pod")
        assert out.stdout.decode().strip() == "hello from a pod"


def test_a_nodes_dockerd_runs_on_the_nodes_containerd_service(node_cluster: NodeCluster) -> None:
    """dockerd uses the containerd runit runs (as Debian's docker.service does), not a
    child of its own: its containers are that containerd's tasks, and that containerd has
    the node's settings (the garbage collector's fixed check: docs/nodes.md)."""
    node = node_cluster.nodes[0]
    assert node.sh("sv status containerd").startswith("run:")
    ctr = "ctr --address /run/containerd/containerd.sock"
    cid = node.sh(f"docker run -d {BUSYBOX_IMAGE} sleep 60").strip()
    try:
        assert cid in node.sh(f"{ctr} --namespace moby tasks ls -q").split()
    finally:
        node.sh(f"docker rm -f {cid}")
    gc = node.sh(f"{ctr} plugins ls --detailed id==scheduler")
    assert re.search(r"PauseThreshold\s+0\n", gc), gc


def test_nodes_have_their_fixed_addresses_and_reach_each_others_sshd(
    node_cluster: NodeCluster,
) -> None:
    first, second = node_cluster.nodes[:2]
    assert node_cluster.addressing is not None
    for node in (first, second):
        assert f"inet {node.ip}/16" in node.sh("ip -4 -o addr show eth0")
    # Each node's sshd answers the other node (runit runs it; the lab drives nodes by SSH).
    banner = first.exec(
        "python3",
        "-c",
        f"import socket; print(socket.create_connection(('{second.ip}', 22), 5).recv(64))",
    )
    assert b"SSH-2.0-OpenSSH" in banner.stdout


def test_a_memory_limit_inside_a_node_oom_kills_its_container(node_cluster: NodeCluster) -> None:
    node = node_cluster.nodes[0]
    name = "memory-hog"
    # 40 MB in a shell variable under a 16 MiB limit: the kernel's OOM killer ends it.
    node.exec(
        "docker", "run", "-d", "--name", name, "-m", "16m", "--memory-swap", "16m",
        BUSYBOX_IMAGE, "sh", "-c", "x=$(head -c 40000000 /dev/zero | tr '\\0' a); echo no",
    )  # fmt: skip
    try:
        node.exec("docker", "wait", name, timeout=60)
        # dockerd records the OOM event apart from the exit: a loaded node may show the
        # exit first.
        until(
            lambda: (
                node.sh(f"docker inspect -f '{{{{.State.OOMKilled}}}}' {name}").strip() == "true"
            ),
            f"{name} recorded as OOM-killed",
            timeout=20,
        )
    finally:
        node.exec("docker", "rm", "-f", name, check=False)


def test_a_nodes_containers_nest_under_the_nodes_cgroup(node_cluster: NodeCluster) -> None:
    node = node_cluster.nodes[0]
    inner = (
        node.exec("docker", "run", "-d", "--rm", "-m", "32m", BUSYBOX_IMAGE, "sleep", "60")
        .stdout.decode()
        .strip()
    )
    try:
        # The host's view: the inner container's memory cgroup below the node's own.
        node_cgroup = Path("/sys/fs/cgroup/memory/docker") / str(node.container.id)
        limit = node_cgroup / "docker" / inner / "memory.limit_in_bytes"
        assert limit.read_text().strip() == str(32 * 1024 * 1024)
    finally:
        node.exec("docker", "rm", "-f", inner, check=False)


def test_a_node_without_the_capabilities_says_which_cgroups_it_cannot_fix(
    image_builder: Builder, node_cluster: NodeCluster
) -> None:
    client: docker.DockerClient = image_builder.client
    container = client.containers.run(
        NODE_IMAGE,
        name=f"{node_cluster.prefix}-nocaps",
        detach=True,
        cgroupns="private",
        labels=node_cluster.labels("test"),
        network_disabled=True,
    )
    try:
        result = container.wait(timeout=30)
        log = container.logs().decode()
    finally:
        container.remove(force=True)
    assert result["StatusCode"] == 1
    assert "could not be made writable" in log
    assert "/sys/fs/cgroup/memory" in log


@pytest.mark.parametrize("image", [BUSYBOX_IMAGE])
def test_load_image_puts_an_image_into_every_node(node_cluster: NodeCluster, image: str) -> None:
    for node in node_cluster.nodes:
        assert node.exec("docker", "image", "inspect", image, check=False).returncode == 0


def test_a_nodes_dockerd_takes_the_registry_mirrors_it_is_given(
    node_cluster: NodeCluster,
) -> None:
    mirror = "http://10.244.255.2:5000"
    node = node_cluster.add_node("mirrored", registry_mirrors=(mirror,))
    try:
        node.wait_ready()
        mirrors = node.exec("docker", "info", "-f", "{{json .RegistryConfig.Mirrors}}")
        assert mirrors.stdout.decode().strip() == f'["{mirror}/"]'
    finally:
        node_cluster.remove_node(node)
