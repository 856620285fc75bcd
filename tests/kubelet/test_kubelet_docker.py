"""The kubelet on a real Docker Engine, driven through the in-process apiserver
(`cluster`, on `lab.testenv`) and kubectl: an OOMKilled pod, a graceful deletion, and a
kubelet restart that adopts its containers.

This runs on the machine's own engine, with `network_mode=none` sandboxes and
run-specific names and images (tests/kubelet/docker_fixture.py): nothing touches the
host's network. The live-data path (logs, exec, attach, top, port-forward through the
apiserver) is tested where users meet it, with the kubelet in node containers:
tests/node/test_live_data.py.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import HostMachine
from agents.kubelet.runtime import State
from agents.kubelet.runtime.docker import DockerRuntime
from kubelab import pki
from tests.kubelet.docker_fixture import DockerImages, docker_images
from tests.kubelet.kubelet_fixture import Cluster, fast_config, node_client, until

__all__ = ["docker_images"]


def _start(cluster: Cluster, node: str, images: DockerImages, tmp: Path) -> Kubelet:
    ca = pki.load_pair(cluster.pki_dir, "ca")
    serving = pki.issue(ca, node, server=True, ip_addresses=["127.0.0.1"])
    crt, key = pki.write_pair(serving, tmp, f"kubelet-{uuid.uuid4().hex[:4]}")
    context = pki.server_ssl_context(cluster.ca_file, crt, key, require_client_cert=False)
    runtime = DockerRuntime(
        node, pause_image=images.pause, network="none", name_prefix=images.prefix
    )
    config = fast_config(node, tmp / "root", address="127.0.0.1")
    client = node_client(cluster, node)
    kubelet = Kubelet(config, client, runtime, HostMachine(tmp), serving=context)
    kubelet.start()
    return kubelet


@pytest.fixture
def node() -> str:
    return f"dkr-{uuid.uuid4().hex[:6]}"


@contextlib.contextmanager
def _running(cluster: Cluster, node: str, images: DockerImages, tmp: Path) -> Iterator[Kubelet]:
    k = _start(cluster, node, images, tmp)
    try:
        yield k
    finally:
        k.stop()
        images.cleanup_containers()
        cluster.delete_node(node)


@pytest.fixture
def kubelet(
    cluster: Cluster, node: str, docker_images: DockerImages, tmp_path: Path
) -> Iterator[Kubelet]:
    with _running(cluster, node, docker_images, tmp_path) as k:
        yield k


def _pod(
    cluster: Cluster, ns: str, node: str, name: str, image: str, command: list[str], **spec: Any
) -> None:
    container = {"name": "app", "image": image, "command": command, **spec.pop("container", {})}
    cluster.create_pod(ns, node, name, containers=[container], **spec)


def test_a_pod_over_its_memory_limit_is_oomkilled(
    cluster: Cluster, namespace: str, kubelet: Kubelet, docker_images: DockerImages
) -> None:
    _pod(
        cluster,
        namespace,
        kubelet.name,
        "hog",
        docker_images.busybox,
        ["tail", "/dev/zero"],
        restartPolicy="Never",
        container={"resources": {"limits": {"memory": "16Mi"}}},
    )
    until(lambda: cluster.status(namespace, "hog").get("phase") == "Failed", "Failed")
    term = cluster.status(namespace, "hog")["containerStatuses"][0]["state"]["terminated"]
    assert (term["reason"], term["exitCode"]) == ("OOMKilled", 137)


def test_deleting_a_pod_stops_its_containers_within_the_grace_period(
    cluster: Cluster, namespace: str, kubelet: Kubelet, docker_images: DockerImages
) -> None:
    # PID 1 ignores SIGTERM here: only the SIGKILL at the end of the grace period stops it.
    _pod(
        cluster,
        namespace,
        kubelet.name,
        "stubborn",
        docker_images.busybox,
        ["sh", "-c", "while :; do sleep 1; done"],
        terminationGracePeriodSeconds=3,
    )
    until(lambda: cluster.status(namespace, "stubborn").get("phase") == "Running", "Running")
    began = time.monotonic()
    cluster.kubectl("delete", "pod", "stubborn", "-n", namespace, "--wait=true", timeout=30)
    took = time.monotonic() - began
    assert 2.5 <= took <= 15, took
    running = [c for c in kubelet.runtime.list_containers() if c.state == State.RUNNING]
    assert running == []


def test_a_restarted_kubelet_loses_and_duplicates_nothing(
    cluster: Cluster,
    namespace: str,
    node: str,
    docker_images: DockerImages,
    tmp_path: Path,
) -> None:
    first = _start(cluster, node, docker_images, tmp_path)
    try:
        _pod(cluster, namespace, node, "keep", docker_images.busybox, ["sleep", "3600"])
        until(lambda: cluster.status(namespace, "keep").get("phase") == "Running", "Running")
        before = {c.id for c in first.runtime.list_containers()}
        first.stop()
        second = _start(cluster, node, docker_images, tmp_path)
        try:
            time.sleep(3)  # a few relists and syncs
            after = {c.id for c in second.runtime.list_containers()}
            assert after == before
            status = cluster.status(namespace, "keep")
            assert status["phase"] == "Running"
            assert status["containerStatuses"][0]["restartCount"] == 0
        finally:
            second.stop()
    finally:
        first.stop()
        docker_images.cleanup_containers()
        cluster.delete_node(node)
