"""The scheduler's VolumeBinding against the real apiserver, with the persistent-volume
controller and the local-path provisioner running beside it: a pod whose claim waits for
its first consumer gets a node, the claim that node (selected-node) and a volume there;
a pod whose claim's hand-made volume lives on one node goes to that node; a pod that no
node can serve says why."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.controllers.localpath import PROVISIONER, LocalPathProvisioner
from controlplane.controllers.persistentvolume import PersistentVolumeController
from controlplane.scheduler import config as scheduler_config
from controlplane.scheduler.metrics import Metrics
from controlplane.scheduler.scheduler import Scheduler
from kubelab.api import claims as c
from kubelab.client import RestClient, resource_for
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import Cluster, Harness, cluster, new_object

__all__ = ["cluster"]  # the fixture, shared with the controllers' tests

CLAIMS = resource_for("v1", "PersistentVolumeClaim")
VOLUMES = resource_for("v1", "PersistentVolume")
CLASSES = resource_for("storage.k8s.io/v1", "StorageClass")
NODES = resource_for("v1", "Node")
PODS = resource_for("v1", "Pod")
EVENTS = resource_for("v1", "Event")

Object = dict[str, Any]


@pytest.fixture
def storage(cluster: Cluster) -> Iterator[Cluster]:
    """Three schedulable nodes, the class `standard`, and the scheduler with the
    persistent-volume controller and the provisioner running."""
    for name in ("n1", "n2", "n3"):
        add_node(cluster, name)
    cluster.create(
        CLASSES,
        {
            "apiVersion": CLASSES.api_version,
            "kind": CLASSES.kind,
            "metadata": {"name": "standard", "annotations": {c.DEFAULT_CLASS: "true"}},
            "provisioner": PROVISIONER,
            "volumeBindingMode": c.WAIT_FOR_FIRST_CONSUMER,
        },
    )
    harness = Harness(cluster)
    controllers = PersistentVolumeController(harness.ctx), LocalPathProvisioner(harness.ctx)
    for controller in controllers:
        harness.run(controller)
    stop = threading.Event()
    client = RestClient(cluster.env.client_config("system:kube-scheduler", ()), qps=None)
    scheduler = Scheduler(client, scheduler_config.load(None), Metrics())
    thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield cluster
    finally:
        stop.set()
        thread.join(30)
        client.close()
        harness.close()


def add_node(cluster: Cluster, name: str) -> None:
    cluster.create(NODES, {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    amounts = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    status = {"capacity": amounts, "allocatable": amounts}
    cluster.admin.patch(NODES, name, {"status": status}, subresource="status")


def claim(cluster: Cluster, name: str, **spec: Any) -> Object:
    body = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": "standard",
    }
    return new_object(cluster, CLAIMS, name, spec={**body, **spec})


def pod_with(cluster: Cluster, name: str, claim_name: str) -> Object:
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return new_object(cluster, PODS, name, spec={"volumes": volumes})


def node_of(cluster: Cluster, name: str) -> str:
    return str(cluster.get(PODS, "ns", name)["spec"].get("nodeName") or "")


def test_a_waiting_claim_is_provisioned_where_its_first_pod_goes_and_keeps_it_there(
    storage: Cluster,
) -> None:
    claim(storage, "data")
    pod_with(storage, "first", "data")
    eventually(lambda: node_of(storage, "first"))
    node = node_of(storage, "first")
    bound = storage.get(CLAIMS, "ns", "data")
    assert bound["status"]["phase"] == "Bound"
    assert bound["metadata"]["annotations"][c.SELECTED_NODE] == node
    volume = storage.get(VOLUMES, "", bound["spec"]["volumeName"])
    term = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"][0]["values"] == [node]

    # The replacement pod goes where the data is, whichever node would score best.
    storage.confirm(PODS, "ns", "first")
    for n in range(3):
        pod_with(storage, f"again-{n}", "data")
    for n in range(3):
        eventually(lambda n=n: node_of(storage, f"again-{n}"))  # type: ignore[misc]
        assert node_of(storage, f"again-{n}") == node


def volume_on(cluster: Cluster, name: str, node: str, class_name: str) -> None:
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                  "values": [node]}]}  # fmt: skip
    new_object(
        cluster,
        VOLUMES,
        name,
        spec={
            "capacity": {"storage": "5Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class_name,
            "local": {"path": f"/mnt/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    )


def test_a_waiting_claim_binds_a_local_volume_where_the_pod_can_go(storage: Cluster) -> None:
    """Kubernetes' local volumes: a class without a provisioner that waits for the
    first consumer; the scheduler picks the node that has a volume, then binds it."""
    body = {
        "apiVersion": CLASSES.api_version,
        "kind": CLASSES.kind,
        "metadata": {"name": "local-storage"},
        "provisioner": c.NO_PROVISIONER,
        "volumeBindingMode": c.WAIT_FOR_FIRST_CONSUMER,
    }
    storage.create(CLASSES, body)
    volume_on(storage, "disk-n3", "n3", "local-storage")
    claim(storage, "local", storageClassName="local-storage")
    pod_with(storage, "user", "local")
    eventually(lambda: node_of(storage, "user"))
    assert node_of(storage, "user") == "n3"
    bound = storage.get(CLAIMS, "ns", "local")
    assert (bound["spec"]["volumeName"], bound["status"]["phase"]) == ("disk-n3", "Bound")

    # Its one volume taken, the class has nothing for a second claim anywhere.
    claim(storage, "more", storageClassName="local-storage")
    pod_with(storage, "second", "more")
    eventually(lambda: "find available persistent volumes" in failed_scheduling(storage, "second"))


def failed_scheduling(cluster: Cluster, pod: str) -> str:
    events = cluster.admin.list(EVENTS, "ns")["items"]
    return " ".join(
        e["message"]
        for e in events
        if e["involvedObject"]["name"] == pod and e["reason"] == "FailedScheduling"
    )


def test_a_hand_made_volume_on_one_node_takes_the_pod_there(storage: Cluster) -> None:
    volume_on(storage, "local-n2", "n2", "")
    # No class: the controller binds the claim at once; the pod waits for that (unbound
    # immediate claim), then follows the volume.
    claim(storage, "static", storageClassName="")
    pod_with(storage, "user", "static")
    eventually(lambda: node_of(storage, "user"))
    assert node_of(storage, "user") == "n2"
    assert storage.get(CLAIMS, "ns", "static")["spec"]["volumeName"] == "local-n2"


def test_a_pod_no_node_can_serve_says_why(storage: Cluster) -> None:
    claim(storage, "nowhere", storageClassName="")
    pod_with(storage, "stuck", "nowhere")
    pod_with(storage, "orphan", "missing")

    eventually(
        lambda: (
            "pod has unbound immediate PersistentVolumeClaims"
            in failed_scheduling(storage, "stuck")
        )
    )
    eventually(
        lambda: 'persistentvolumeclaim "missing" not found' in failed_scheduling(storage, "orphan")
    )
    assert not node_of(storage, "stuck")


def test_a_claim_the_provisioner_refuses_sends_its_pod_back_with_the_reason(
    storage: Cluster,
) -> None:
    claim(storage, "shared", accessModes=["ReadWriteMany"])
    pod_with(storage, "user", "shared")

    def claim_says() -> str:
        events = storage.admin.list(EVENTS, "ns")["items"]
        return " ".join(e["message"] for e in events if e["involvedObject"]["name"] == "shared")

    eventually(lambda: "NodePath only supports ReadWriteOnce" in claim_says())
    eventually(lambda: "selectedNode annotation reset" in failed_scheduling(storage, "user"))
    assert not node_of(storage, "user")
