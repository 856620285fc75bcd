"""PodGC against the real apiserver: a deleted node's pods are marked Failed with the
DisruptionTarget condition and force-deleted after the quarantine (and their namespace can
then go); unscheduled terminating pods and terminating pods of out-of-service nodes are
deleted; terminated pods beyond the threshold go, evicted ones and the oldest first."""

from __future__ import annotations

import argparse
import time
from typing import Any

from controlplane.controllers.namespace import NamespaceController
from controlplane.controllers.podgc import (
    PodGCController,
    excess_terminated,
)
from kubelab.client import resource_for
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import Cluster, Harness, new_object

NAMESPACES = resource_for("v1", "Namespace")
NODES = resource_for("v1", "Node")
PODS = resource_for("v1", "Pod")


def node(cluster: Cluster, name: str, *, ready: str = "True", taints: Any = ()) -> None:
    new_object(
        cluster,
        NODES,
        name,
        spec={"taints": list(taints)},
        status={"conditions": [{"type": "Ready", "status": ready}]},
    )


def pod(cluster: Cluster, name: str, node_name: str = "", ns: str = "ns", **meta: Any) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    cluster.create(PODS, body, ns)


def running(
    cluster: Cluster, name: str, ns: str = "ns", phase: str = "Running", **status: Any
) -> None:
    current = cluster.get(PODS, ns, name)
    current["status"] = {**current.get("status", {}), "phase": phase, **status}
    cluster.admin.update_status(PODS, current)


def start(harness: Harness, **args: Any) -> PodGCController:
    harness.ctx.args = argparse.Namespace(**args)
    controller = PodGCController(harness.ctx)
    harness.run(controller)
    return controller


def gone(cluster: Cluster, name: str, ns: str = "ns") -> bool:
    return not cluster.exists(PODS, ns, name)


def test_a_deleted_nodes_pods_are_failed_and_force_deleted_after_the_quarantine(
    cluster: Cluster, harness: Harness
) -> None:
    node(cluster, "lost")
    node(cluster, "kept")
    pod(cluster, "orphan", "lost")
    pod(cluster, "stuck", "lost")
    pod(cluster, "fine", "kept")
    running(cluster, "orphan")
    cluster.delete(PODS, "ns", "stuck")  # Terminating: its kubelet never confirms
    assert cluster.get(PODS, "ns", "stuck")["metadata"]["deletionTimestamp"]
    start(harness, pod_gc_quarantine=1.0)
    cluster.delete(NODES, "", "lost")

    eventually(lambda: gone(cluster, "orphan") and gone(cluster, "stuck"), timeout=15)
    assert cluster.exists(PODS, "ns", "fine")
    marked = [r.body for r in cluster.calls("PUT", "/api/v1/namespaces/ns/pods/orphan/status")]
    assert marked, "the pod was marked before its deletion"
    status = marked[0]["status"]
    assert status["phase"] == "Failed"
    target = next(c for c in status["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"], target["message"]) == (
        "True",
        "DeletionByPodGC",
        "PodGC: node no longer exists",
    )
    deletes = [r.body for r in cluster.calls("DELETE", "/api/v1/namespaces/ns/pods/orphan")]
    assert deletes[0]["gracePeriodSeconds"] == 0
    assert deletes[0]["preconditions"]["uid"]


def test_a_missing_node_is_quarantined_before_its_pods_go(
    cluster: Cluster, harness: Harness
) -> None:
    pod(cluster, "early", "not-yet-registered")
    start(harness, pod_gc_quarantine=1.0)
    # Its node registers within the quarantine: nothing happens to the pod.
    node(cluster, "not-yet-registered")
    time.sleep(2.0)  # the quarantine and a pass
    assert cluster.exists(PODS, "ns", "early")
    assert not cluster.calls("DELETE")


def test_pods_bound_to_a_deleted_node_no_longer_keep_their_namespace_terminating(
    cluster: Cluster, harness: Harness
) -> None:
    node(cluster, "lost")
    pod(cluster, "web", "lost", ns="app")
    cluster.delete(NODES, "", "lost")
    harness.ctx.args = argparse.Namespace(pod_gc_quarantine=0.5)
    podgc = PodGCController(harness.ctx)
    harness.run(NamespaceController(harness.ctx))
    harness.run(podgc)
    cluster.delete(NAMESPACES, "", "app")
    eventually(lambda: not cluster.exists(NAMESPACES, "", "app"), timeout=30)


def test_unscheduled_terminating_pods_are_deleted(cluster: Cluster, harness: Harness) -> None:
    pod(cluster, "held", finalizers=["example.com/hold"])
    pod(cluster, "pending")
    cluster.delete(PODS, "ns", "held")
    start(harness)
    eventually(lambda: cluster.get(PODS, "ns", "held")["status"]["phase"] == "Failed")
    eventually(lambda: bool(cluster.calls("DELETE", "/api/v1/namespaces/ns/pods/held")))
    # Once its finalizer goes, so does the pod; the unterminated one stays.
    held = cluster.get(PODS, "ns", "held")
    held["metadata"]["finalizers"] = []
    cluster.update(PODS, held)
    eventually(lambda: gone(cluster, "held"))
    assert cluster.exists(PODS, "ns", "pending")
    assert len(cluster.calls("DELETE", "/api/v1/namespaces/ns/pods/held")) == 1, "no loop"


def test_terminating_pods_of_an_out_of_service_node_are_deleted(
    cluster: Cluster, harness: Harness
) -> None:
    taint = {
        "key": "node.kubernetes.io/out-of-service",
        "value": "nodeshutdown",
        "effect": "NoExecute",
    }
    node(cluster, "down", ready="False", taints=[taint])
    node(cluster, "up", taints=[taint])  # Ready: the taint alone is not enough
    pod(cluster, "a", "down")
    pod(cluster, "b", "down")
    pod(cluster, "c", "up")
    cluster.delete(PODS, "ns", "a")
    cluster.delete(PODS, "ns", "c")
    start(harness)
    eventually(lambda: gone(cluster, "a"))
    assert cluster.exists(PODS, "ns", "b"), "not terminating: left alone"
    assert cluster.exists(PODS, "ns", "c")


def test_terminated_pods_beyond_the_threshold_go_evicted_and_oldest_first(
    cluster: Cluster, harness: Harness
) -> None:
    node(cluster, "n")
    for name in ("p1", "p2", "p3", "p4", "p5"):
        pod(cluster, name, "n")
    running(cluster, "p1", phase="Succeeded")
    running(cluster, "p2", phase="Failed")
    running(cluster, "p3", phase="Succeeded")
    running(cluster, "p4", phase="Failed", reason="Evicted")
    running(cluster, "p5")  # still running: never counted
    start(harness, terminated_pod_gc_threshold=2)
    eventually(lambda: gone(cluster, "p4") and gone(cluster, "p1"))
    assert all(cluster.exists(PODS, "ns", n) for n in ("p2", "p3", "p5"))


def _terminated(name: str, created: str, reason: str = "") -> dict[str, Any]:
    status = {"phase": "Failed", "reason": reason} if reason else {"phase": "Succeeded"}
    return {"metadata": {"name": name, "creationTimestamp": created}, "status": status}


def test_the_order_of_terminated_pods() -> None:
    pods = [
        _terminated("b", "2026-01-01T00:00:01Z"),
        _terminated("a", "2026-01-01T00:00:01Z"),
        _terminated("old", "2026-01-01T00:00:00Z"),
        _terminated("evicted", "2026-01-01T00:00:05Z", "Evicted"),
        {"metadata": {"name": "live", "creationTimestamp": "2025"}, "status": {"phase": "Running"}},
    ]
    assert [p["metadata"]["name"] for p in excess_terminated(pods, 1)] == [
        "evicted",
        "old",
        "a",
    ]
    assert excess_terminated(pods, 0) == []  # off
    assert excess_terminated(pods, 4) == []
