"""The persistent-volume controller and the local-path provisioner against the real
apiserver: claims bind to the volume that fits (hand-made hostPath volumes too), wait for
their first consumer, get provisioned on the selected node, say why when they cannot;
volumes are Released when their claim goes, then retained, deleted by their
provisioner's helper pod, or Failed."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from controlplane.controllers.localpath import (
    BASE_DIR,
    HELPER_NAMESPACE,
    PROVISIONER,
    LocalPathProvisioner,
    helper_name,
)
from controlplane.controllers.persistentvolume import PersistentVolumeController
from controlplane.controllers.volumeprotection import (
    CLAIM_FINALIZER,
    ClaimProtectionController,
    VolumeProtectionController,
)
from kubelab.api import claims as c
from kubelab.client import resource_for
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import Cluster, Harness, new_object

CLAIMS = resource_for("v1", "PersistentVolumeClaim")
VOLUMES = resource_for("v1", "PersistentVolume")
CLASSES = resource_for("storage.k8s.io/v1", "StorageClass")
NODES = resource_for("v1", "Node")
PODS = resource_for("v1", "Pod")
EVENTS = resource_for("v1", "Event")

Object = dict[str, Any]


def claim(cluster: Cluster, name: str, size: str = "1Gi", **spec: Any) -> Object:
    body = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    return new_object(cluster, CLAIMS, name, spec={**body, **spec})


def host_path_volume(
    cluster: Cluster, name: str, size: str, policy: str = "Retain", **spec: Any
) -> Object:
    body = {
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": policy,
        "hostPath": {"path": f"/mnt/{name}"},
    }
    return new_object(cluster, VOLUMES, name, spec={**body, **spec})


def local_path_class(cluster: Cluster, mode: str = c.WAIT_FOR_FIRST_CONSUMER) -> Object:
    body = {
        "apiVersion": CLASSES.api_version,
        "kind": CLASSES.kind,
        "metadata": {"name": "standard", "annotations": {c.DEFAULT_CLASS: "true"}},
        "provisioner": PROVISIONER,
        "volumeBindingMode": mode,
        "reclaimPolicy": "Delete",
    }
    return cluster.create(CLASSES, body)


def run_storage_controllers(harness: Harness) -> None:
    """The binder, the provisioner and the protection controllers, built before the
    informers they share start."""
    for controller in (
        PersistentVolumeController(harness.ctx),
        LocalPathProvisioner(harness.ctx),
        ClaimProtectionController(harness.ctx),
        VolumeProtectionController(harness.ctx),
    ):
        harness.run(controller)


def phase_of(cluster: Cluster, resource: Any, namespace: str, name: str) -> str:
    if not cluster.exists(resource, namespace, name):
        return "<gone>"
    return str((cluster.get(resource, namespace, name).get("status") or {}).get("phase", ""))


def reasons(cluster: Cluster, name: str, namespace: str = "ns") -> list[str]:
    events = cluster.admin.list(EVENTS, namespace)["items"]
    return [e["reason"] for e in events if e["involvedObject"]["name"] == name]


def messages(cluster: Cluster, name: str, namespace: str = "ns") -> list[str]:
    events = cluster.admin.list(EVENTS, namespace)["items"]
    return [e["message"] for e in events if e["involvedObject"]["name"] == name]


def test_a_claim_binds_the_smallest_hand_made_volume_that_fits(
    cluster: Cluster, harness: Harness
) -> None:
    host_path_volume(cluster, "small", "500Mi", storageClassName="")
    host_path_volume(cluster, "big", "10Gi", storageClassName="")
    host_path_volume(cluster, "fits", "2Gi", storageClassName="")
    claim(cluster, "data", storageClassName="")
    harness.run(PersistentVolumeController(harness.ctx))

    eventually(lambda: phase_of(cluster, CLAIMS, "ns", "data") == "Bound")
    bound = cluster.get(CLAIMS, "ns", "data")
    assert bound["spec"]["volumeName"] == "fits"
    assert bound["status"]["capacity"] == {"storage": "2Gi"}
    assert bound["metadata"]["annotations"][c.BIND_COMPLETED] == "yes"
    volume = cluster.get(VOLUMES, "", "fits")
    assert volume["spec"]["claimRef"]["uid"] == bound["metadata"]["uid"]
    eventually(lambda: phase_of(cluster, VOLUMES, "", "fits") == "Bound")
    eventually(lambda: phase_of(cluster, VOLUMES, "", "small") == "Available")


def test_released_volumes_are_retained_or_fail_to_delete_without_a_provisioner(
    cluster: Cluster, harness: Harness
) -> None:
    host_path_volume(cluster, "kept", "1Gi", storageClassName="", claimRef={
        "namespace": "ns", "name": "a"})  # fmt: skip
    host_path_volume(cluster, "doomed", "1Gi", "Delete", storageClassName="", claimRef={
        "namespace": "ns", "name": "b"})  # fmt: skip
    claim(cluster, "a", storageClassName="")
    claim(cluster, "b", storageClassName="")
    run_storage_controllers(harness)
    eventually(lambda: phase_of(cluster, CLAIMS, "ns", "a") == "Bound")
    eventually(lambda: phase_of(cluster, CLAIMS, "ns", "b") == "Bound")
    assert cluster.get(CLAIMS, "ns", "a")["spec"]["volumeName"] == "kept"

    cluster.delete(CLAIMS, "ns", "a")
    cluster.delete(CLAIMS, "ns", "b")
    eventually(lambda: phase_of(cluster, VOLUMES, "", "kept") == "Released")
    eventually(lambda: phase_of(cluster, VOLUMES, "", "doomed") == "Failed")
    eventually(lambda: "VolumeFailedDelete" in reasons(cluster, "doomed", "default"))
    assert phase_of(cluster, VOLUMES, "", "kept") == "Released"

    # A new claim of the same name is another claim: the released volume stays put.
    claim(cluster, "a", storageClassName="")
    eventually(lambda: "FailedBinding" in reasons(cluster, "a"))
    assert phase_of(cluster, CLAIMS, "ns", "a") == "Pending"


def test_claims_that_cannot_bind_say_why(cluster: Cluster, harness: Harness) -> None:
    claim(cluster, "no-class", storageClassName="")
    claim(cluster, "unknown", storageClassName="gold")
    local_path_class(cluster)
    claim(cluster, "waiting", storageClassName="standard")
    harness.run(PersistentVolumeController(harness.ctx))
    eventually(
        lambda: (
            "no persistent volumes available for this claim and no storage class is set"
            in messages(cluster, "no-class")
        )
    )
    eventually(
        lambda: 'storageclass.storage.k8s.io "gold" not found' in messages(cluster, "unknown")
    )
    eventually(lambda: "WaitForFirstConsumer" in reasons(cluster, "waiting"))
    assert {phase_of(cluster, CLAIMS, "ns", n) for n in ("no-class", "unknown", "waiting")} == {
        "Pending"
    }


def test_a_selected_node_gets_a_local_path_volume_deleted_by_a_helper_pod(
    cluster: Cluster, harness: Harness
) -> None:
    new_object(cluster, NODES, "n1")
    local_path_class(cluster)
    made = claim(cluster, "data", storageClassName="standard")
    run_storage_controllers(harness)
    eventually(lambda: "WaitForFirstConsumer" in reasons(cluster, "data"))

    # What the scheduler does once a pod of the claim has a node.
    patch = {"metadata": {"annotations": {c.SELECTED_NODE: "n1"}}}
    cluster.admin.patch(CLAIMS, "data", patch, "ns")
    eventually(lambda: phase_of(cluster, CLAIMS, "ns", "data") == "Bound")
    name = f"pvc-{made['metadata']['uid']}"
    volume = cluster.get(VOLUMES, "", name)
    assert volume["spec"]["hostPath"] == {
        "path": f"{BASE_DIR}/{name}_ns_data",
        "type": "DirectoryOrCreate",
    }
    term = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"][0]["values"] == ["n1"]
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert volume["metadata"]["annotations"][c.PROVISIONED_BY] == PROVISIONER
    assert "ProvisioningSucceeded" in reasons(cluster, "data")

    cluster.delete(CLAIMS, "ns", "data")
    eventually(lambda: cluster.exists(PODS, HELPER_NAMESPACE, helper_name(name)))
    helper = cluster.get(PODS, HELPER_NAMESPACE, helper_name(name))
    assert helper["spec"]["nodeName"] == "n1"
    assert helper["spec"]["containers"][0]["command"] == ["rm", "-rf", f"/data/{name}_ns_data"]
    assert phase_of(cluster, VOLUMES, "", name) == "Released"

    # The kubelet reports the helper done; the provisioner removes it and the volume.
    helper["status"] = {"phase": "Succeeded"}
    cluster.admin.update_status(PODS, helper)
    eventually(lambda: not cluster.exists(VOLUMES, "", name))

    def helper_deleted() -> bool:  # gone, or going once its (absent) kubelet confirms
        if not cluster.exists(PODS, HELPER_NAMESPACE, helper_name(name)):
            return True
        found = cluster.get(PODS, HELPER_NAMESPACE, helper_name(name))
        return bool(found["metadata"].get("deletionTimestamp"))

    eventually(helper_deleted)


def test_an_immediate_local_path_claim_cannot_be_provisioned(
    cluster: Cluster, harness: Harness
) -> None:
    local_path_class(cluster, "Immediate")
    claim(cluster, "now", storageClassName="standard")
    run_storage_controllers(harness)
    eventually(lambda: "ExternalProvisioning" in reasons(cluster, "now"))
    eventually(
        lambda: any(
            "configuration error, no node was specified" in m for m in messages(cluster, "now")
        )
    )


def test_a_claim_in_use_is_deleted_only_once_its_pod_is_gone(
    cluster: Cluster, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kubelab.controllers")
    host_path_volume(cluster, "used", "1Gi", storageClassName="")
    made = claim(cluster, "data", storageClassName="")
    assert CLAIM_FINALIZER in made["metadata"]["finalizers"]
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    new_object(cluster, PODS, "user", spec={"nodeName": "n1", "volumes": volumes})
    run_storage_controllers(harness)
    eventually(lambda: phase_of(cluster, CLAIMS, "ns", "data") == "Bound")

    cluster.delete(CLAIMS, "ns", "data")
    cluster.delete(VOLUMES, "", "used")  # bound: kept too
    eventually(lambda: "is still used by ns/user" in caplog.text)
    assert cluster.get(CLAIMS, "ns", "data")["metadata"].get("deletionTimestamp")
    assert phase_of(cluster, VOLUMES, "", "used") == "Bound"

    cluster.confirm(PODS, "ns", "user")
    eventually(lambda: not cluster.exists(CLAIMS, "ns", "data"))
    eventually(lambda: not cluster.exists(VOLUMES, "", "used"))
