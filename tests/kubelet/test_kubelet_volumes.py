"""The kubelet mounting claims, against the real apiserver with the in-memory runtime:
claim -> bound PersistentVolume -> a directory of the node, bind-mounted into the
containers (made first for a `DirectoryOrCreate` hostPath, as the local-path
provisioner's volumes are), read-only when the pod's volume says so; a claim that is not
bound yet is a FailedMount that clears once it is."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.kubelet.kubelet import Kubelet
from agents.kubelet.runtime import Mount
from agents.kubelet.runtime.memory import MemoryRuntime
from kubelab.client import resource_for
from tests.kubelet.kubelet_fixture import Cluster, fast_config, start_kubelet, until

CLAIMS = resource_for("v1", "PersistentVolumeClaim")
VOLUMES = resource_for("v1", "PersistentVolume")


@pytest.fixture
def kubelet(cluster: Cluster, tmp_path: Path) -> Iterator[Kubelet]:
    node = f"vol-{uuid.uuid4().hex[:6]}"
    k = start_kubelet(cluster, fast_config(node, tmp_path / "kubelet"), MemoryRuntime(node))
    yield k
    k.stop()
    cluster.delete_node(node)


def make_claim(cluster: Cluster, namespace: str, name: str) -> None:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    body = {"metadata": {"name": name}, "spec": {**spec, "storageClassName": ""}}
    cluster.admin.create(CLAIMS, body, namespace)


def bind(cluster: Cluster, namespace: str, claim: str, directory: Path) -> str:
    """What the persistent-volume controller does (not running here): a hostPath volume
    bound to the claim."""
    volume = f"pv-{uuid.uuid4().hex[:8]}"
    made = cluster.admin.get(CLAIMS, claim, namespace)
    spec = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "",
        "hostPath": {"path": str(directory), "type": "DirectoryOrCreate"},
        "claimRef": {"namespace": namespace, "name": claim, "uid": made["metadata"]["uid"]},
    }
    cluster.admin.create(VOLUMES, {"metadata": {"name": volume}, "spec": spec})
    made["spec"]["volumeName"] = volume
    made = cluster.admin.update(CLAIMS, made)
    made["status"] = {"phase": "Bound"}
    cluster.admin.update_status(CLAIMS, made)
    return volume


def mounts(kubelet: Kubelet, container: str) -> list[Mount]:
    runtime = kubelet.runtime
    assert isinstance(runtime, MemoryRuntime)
    found = [c for c in runtime._containers.values() if c.config.name == container]
    return list(found[-1].config.mounts) if found else []


def run_pod(cluster: Cluster, namespace: str, node: str, name: str, **source: Any) -> None:
    volumes = [{"name": "data", "persistentVolumeClaim": source}]
    container = {
        "name": name,
        "image": "busybox:1.36",
        "command": ["sleep", "3600"],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    cluster.create_pod(namespace, node, name, containers=[container], volumes=volumes)


def test_a_bound_claim_is_its_volumes_directory_in_the_container(
    cluster: Cluster, namespace: str, kubelet: Kubelet, tmp_path: Path
) -> None:
    make_claim(cluster, namespace, "data")
    run_pod(cluster, namespace, kubelet.name, "writer", claimName="data")
    until(lambda: "FailedMount" in cluster.reasons(namespace, "writer"), "FailedMount")
    events = cluster.admin.list(resource_for("v1", "Event"), namespace)["items"]
    assert any("PVC is not bound" in e["message"] for e in events)

    directory = tmp_path / "local-path" / "pvc-data"
    bind(cluster, namespace, "data", directory)
    until(lambda: cluster.status(namespace, "writer").get("phase") == "Running", "Running")
    assert directory.is_dir()
    assert Mount(str(directory), "/data", False) in mounts(kubelet, "writer")

    run_pod(cluster, namespace, kubelet.name, "reader", claimName="data", readOnly=True)
    until(lambda: cluster.status(namespace, "reader").get("phase") == "Running", "Running")
    assert Mount(str(directory), "/data", True) in mounts(kubelet, "reader")
