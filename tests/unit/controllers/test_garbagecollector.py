"""The garbage collector: its decisions (`plan`), how it checks an owner (by uid, and
"absent" only on the apiserver's word), and the background, foreground and orphan
flows, run with real informers against the real apiserver in-process."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from controlplane.controllers.garbagecollector import (
    Delete,
    DropReferences,
    GarbageCollector,
    Identity,
    Keep,
    OwnerState,
    monitored_resources,
    plan,
)
from controlplane.controllers.garbagecollector import log as gc_log
from kubelab.client import resource_for
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import Cluster, Harness, new_object, owner_ref

DEPLOYMENTS = resource_for("apps/v1", "Deployment")
REPLICASETS = resource_for("apps/v1", "ReplicaSet")
PODS = resource_for("v1", "Pod")
CONFIGMAPS = resource_for("v1", "ConfigMap")
NODES = resource_for("v1", "Node")

SOLID, DANGLING, WAITING = OwnerState.SOLID, OwnerState.DANGLING, OwnerState.WAITING


def dependent(*owner_uids: str, finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": u, "uid": u} for u in owner_uids]
    return {"metadata": {"name": "d", "ownerReferences": refs, "finalizers": list(finalizers)}}


# -- plan --------------------------------------------------------------------------------


def test_an_object_without_owners_is_never_collected() -> None:
    assert plan({"metadata": {"name": "d"}}, {}, has_dependents=True) == Keep()


def test_one_solid_owner_keeps_a_dependent_and_stale_references_are_dropped() -> None:
    assert plan(dependent("a"), {"a": SOLID}, False) == Keep()
    assert plan(dependent("a", "b", "c"), {"a": SOLID, "b": DANGLING, "c": WAITING}, False) == (
        DropReferences(("b", "c"))
    )


def test_a_dependent_whose_owners_are_all_gone_is_deleted_with_its_own_policy() -> None:
    gone = {"a": DANGLING, "b": DANGLING}
    decided = plan(dependent("a", "b"), gone, has_dependents=True)
    assert isinstance(decided, Delete) and decided.policy == "Background"
    assert "owners are gone" in decided.reason
    orphaning = plan(dependent("a", finalizers=("orphan",)), {"a": DANGLING}, True)
    assert isinstance(orphaning, Delete) and orphaning.policy == "Orphan"
    foreground = plan(dependent("a", finalizers=("foregroundDeletion",)), {"a": DANGLING}, True)
    assert isinstance(foreground, Delete) and foreground.policy == "Foreground"


def test_a_dependent_of_a_foreground_deletion_goes_in_the_foreground_if_it_owns_things() -> None:
    with_dependents = plan(dependent("a"), {"a": WAITING}, has_dependents=True)
    assert isinstance(with_dependents, Delete) and with_dependents.policy == "Foreground"
    leaf = plan(dependent("a"), {"a": WAITING}, has_dependents=False)
    assert isinstance(leaf, Delete) and leaf.policy == "Background"


def test_events_are_not_monitored_and_every_owner_kind_of_the_brief_is() -> None:
    monitored = {r.group_resource for r in monitored_resources()}
    assert "events" not in monitored and "events.events.k8s.io" not in monitored
    assert {
        "pods",
        "replicasets.apps",
        "deployments.apps",
        "daemonsets.apps",
        "statefulsets.apps",
        "controllerrevisions.apps",
        "jobs.batch",
        "cronjobs.batch",
        "services",
        "endpoints",
        "endpointslices.discovery.k8s.io",
        "configmaps",
        "secrets",
        "leases.coordination.k8s.io",
        "persistentvolumeclaims",
        "nodes",
        "namespaces",
    } <= monitored


# -- checking owners ---------------------------------------------------------------------


def test_an_owner_the_cache_lacks_is_asked_of_the_apiserver(
    cluster: Cluster, harness: Harness
) -> None:
    gc = GarbageCollector(harness.ctx)  # its caches stay empty: informers never started
    owner = new_object(cluster, DEPLOYMENTS, "web")
    child = Identity("replicasets.apps", "ns", "web-1", "uid-of-child")
    assert gc.owner_state(child, owner_ref(owner)) is SOLID, "a lagging cache is no proof"
    other_uid = {**owner_ref(owner), "uid": "an-older-web"}
    assert gc.owner_state(child, other_uid) is DANGLING, "same name, another uid: another owner"
    missing = {**owner_ref(owner), "name": "nothing"}
    assert gc.owner_state(child, missing) is DANGLING
    assert len(cluster.calls("GET", "/deployments/")) == 3


def test_references_that_cannot_be_checked_keep_the_dependent(harness: Harness) -> None:
    gc = GarbageCollector(harness.ctx)
    namespaced_child = Identity("configmaps", "ns", "c", "u1")
    unknown = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "u"}
    assert gc.owner_state(namespaced_child, unknown) is SOLID
    cluster_scoped_child = Identity("nodes", "", "n1", "u2")
    namespaced_owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u"}
    assert gc.owner_state(cluster_scoped_child, namespaced_owner) is SOLID


# -- flows -------------------------------------------------------------------------------


def observe(gc: GarbageCollector, owner: dict[str, Any], dependents: int) -> None:
    """Wait until the collector's caches hold `owner`'s dependents. Deleting the owner
    sooner is a race that Kubernetes' collector loses too: an owner whose dependents it
    has not seen yet has none to wait for (they are collected afterwards, as orphans)."""
    meta = owner["metadata"]
    resource = resource_for(owner["apiVersion"], owner["kind"])
    identity = Identity(
        resource.group_resource, meta.get("namespace", ""), meta["name"], meta["uid"]
    )
    eventually(lambda: len(list(gc.dependents(identity))) == dependents)


def _tree(cluster: Cluster, bound: bool = False) -> tuple[dict[str, Any], ...]:
    """A Deployment owning a ReplicaSet owning a Pod (bound to a node if `bound`)."""
    deploy = new_object(cluster, DEPLOYMENTS, "web")
    rs = new_object(cluster, REPLICASETS, "web-1", owners=[owner_ref(deploy)])
    spec = {"nodeName": "node-1"} if bound else {}
    pod = new_object(cluster, PODS, "web-1-a", owners=[owner_ref(rs)], spec=spec)
    return deploy, rs, pod


def test_background_deletion_collects_the_tree_level_by_level(
    cluster: Cluster, harness: Harness
) -> None:
    harness.run(GarbageCollector(harness.ctx))
    _tree(cluster)
    cluster.delete(DEPLOYMENTS, "ns", "web")
    eventually(lambda: not cluster.exists(REPLICASETS, "ns", "web-1"))
    eventually(lambda: not cluster.exists(PODS, "ns", "web-1-a"))
    # A lagging cache may make the collector delete an object twice (a harmless 404).
    deletes = cluster.calls("DELETE")
    assert {d.path.rsplit("/", 1)[-1] for d in deletes} == {"web-1", "web-1-a"}
    assert {d.body["propagationPolicy"] for d in deletes} == {"Background"}
    assert all(d.body["preconditions"]["uid"] for d in deletes), "never a same-named newcomer"


def test_a_dependent_of_a_same_named_predecessor_is_garbage(
    cluster: Cluster, harness: Harness
) -> None:
    old = new_object(cluster, DEPLOYMENTS, "web")
    cluster.confirm(DEPLOYMENTS, "ns", "web")
    new = new_object(cluster, DEPLOYMENTS, "web")
    new_object(cluster, REPLICASETS, "old-rs", owners=[owner_ref(old)])
    new_object(cluster, REPLICASETS, "new-rs", owners=[owner_ref(new)])
    harness.run(GarbageCollector(harness.ctx))
    eventually(lambda: not cluster.exists(REPLICASETS, "ns", "old-rs"))
    assert cluster.exists(REPLICASETS, "ns", "new-rs")


def test_a_dependent_with_another_owner_only_loses_the_reference(
    cluster: Cluster, harness: Harness
) -> None:
    harness.run(GarbageCollector(harness.ctx))
    a, b = new_object(cluster, CONFIGMAPS, "a"), new_object(cluster, CONFIGMAPS, "b")
    shared = [owner_ref(a), owner_ref(b, controller=False)]
    new_object(cluster, CONFIGMAPS, "shared", owners=shared)
    cluster.delete(CONFIGMAPS, "ns", "a")

    def only_b_left() -> bool:
        refs = cluster.get(CONFIGMAPS, "ns", "shared")["metadata"].get("ownerReferences")
        return [r["name"] for r in refs] == ["b"]

    eventually(only_b_left)


def test_foreground_deletion_removes_the_owner_last(cluster: Cluster, harness: Harness) -> None:
    gc = GarbageCollector(harness.ctx)
    harness.run(gc)
    deploy, rs, _ = _tree(cluster, bound=True)
    observe(gc, deploy, 1)
    observe(gc, rs, 1)
    cluster.delete(DEPLOYMENTS, "ns", "web", {"propagationPolicy": "Foreground"})
    # The ReplicaSet goes in the foreground too; its bound pod lingers in its grace
    # period, and holds both owners.
    eventually(
        lambda: bool(cluster.get(PODS, "ns", "web-1-a")["metadata"].get("deletionTimestamp"))
    )
    rs = cluster.get(REPLICASETS, "ns", "web-1")
    assert rs["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert cluster.get(DEPLOYMENTS, "ns", "web")["metadata"]["finalizers"] == ["foregroundDeletion"]

    cluster.confirm(PODS, "ns", "web-1-a")  # the kubelet has stopped the pod
    eventually(lambda: not cluster.exists(REPLICASETS, "ns", "web-1"))
    eventually(lambda: not cluster.exists(DEPLOYMENTS, "ns", "web"))


def test_foreground_deletion_waits_only_for_blocking_dependents(
    cluster: Cluster, harness: Harness
) -> None:
    gc = GarbageCollector(harness.ctx)
    harness.run(gc)
    rs = new_object(cluster, REPLICASETS, "web-1")
    bound = {"nodeName": "node-1"}
    new_object(cluster, PODS, "blocking", owners=[owner_ref(rs, block=True)], spec=bound)
    new_object(cluster, PODS, "loose", owners=[owner_ref(rs, block=False)], spec=bound)
    observe(gc, rs, 2)
    cluster.delete(REPLICASETS, "ns", "web-1", {"propagationPolicy": "Foreground"})

    def both_pods_deleted() -> bool:
        pods = [cluster.get(PODS, "ns", n) for n in ("blocking", "loose")]
        return all(p["metadata"].get("deletionTimestamp") for p in pods)

    eventually(both_pods_deleted)
    assert cluster.exists(REPLICASETS, "ns", "web-1"), "held by the blocking pod"
    cluster.confirm(PODS, "ns", "blocking")
    eventually(lambda: not cluster.exists(REPLICASETS, "ns", "web-1"))
    assert cluster.exists(PODS, "ns", "loose"), "still in its grace period, holding nobody"


def test_an_ownership_cycle_in_foreground_deletion_is_reported_once_per_owner(
    cluster: Cluster, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=gc_log.name)
    gc = GarbageCollector(harness.ctx)
    harness.run(gc)
    a = new_object(cluster, CONFIGMAPS, "a")
    b = new_object(cluster, CONFIGMAPS, "b", owners=[owner_ref(a, block=True)])
    a = cluster.get(CONFIGMAPS, "ns", "a")
    a["metadata"]["ownerReferences"] = [owner_ref(b, block=True)]
    cluster.update(CONFIGMAPS, a)
    observe(gc, a, 1)
    observe(gc, b, 1)
    cluster.delete(CONFIGMAPS, "ns", "a", {"propagationPolicy": "Foreground"})

    def reports(name: str) -> int:
        return sum(
            f"configmaps ns/{name}: foreground deletion cannot finish" in r.getMessage()
            for r in caplog.records
        )

    # a waits for b, which the collector deletes in the foreground (it owns a): b waits
    # for a. Both are stuck, and each says so.
    eventually(lambda: reports("a") >= 1 and reports("b") >= 1)
    gc.attempt_to_delete_item(Identity("configmaps", "ns", "a", a["metadata"]["uid"]))
    assert reports("a") == 1 and reports("b") == 1, "once per owner"
    assert cluster.exists(CONFIGMAPS, "ns", "a") and cluster.exists(CONFIGMAPS, "ns", "b")
    message = next(r.getMessage() for r in caplog.records if "ns/a:" in r.getMessage())
    assert "ConfigMap b" in message and "blockOwnerDeletion" in message


def test_orphan_deletion_leaves_the_dependents_unowned(cluster: Cluster, harness: Harness) -> None:
    gc = GarbageCollector(harness.ctx)
    harness.run(gc)
    deploy, _, _ = _tree(cluster)
    observe(gc, deploy, 1)
    cluster.delete(DEPLOYMENTS, "ns", "web", {"propagationPolicy": "Orphan"})
    eventually(lambda: not cluster.exists(DEPLOYMENTS, "ns", "web"))
    rs = cluster.get(REPLICASETS, "ns", "web-1")
    assert "ownerReferences" not in rs["metadata"]
    assert not rs["metadata"].get("deletionTimestamp")
    pod = cluster.get(PODS, "ns", "web-1-a")
    assert [r["name"] for r in pod["metadata"]["ownerReferences"]] == ["web-1"]


def test_a_namespaced_owner_does_not_own_objects_of_other_namespaces(
    cluster: Cluster, harness: Harness
) -> None:
    gc = GarbageCollector(harness.ctx)
    harness.run(gc)
    owner = new_object(cluster, CONFIGMAPS, "owner", "a")
    new_object(cluster, CONFIGMAPS, "here", "a", owners=[owner_ref(owner)])
    elsewhere = new_object(cluster, CONFIGMAPS, "elsewhere", "b", owners=[owner_ref(owner)])
    observe(gc, owner, 1)
    # In namespace b the reference names a configmap "owner" of b, which does not exist.
    eventually(lambda: not cluster.exists(CONFIGMAPS, "b", elsewhere["metadata"]["name"]))
    assert cluster.exists(CONFIGMAPS, "a", "here")


def test_a_cluster_scoped_owner_owns_dependents_in_any_namespace(
    cluster: Cluster, harness: Harness
) -> None:
    harness.run(GarbageCollector(harness.ctx))
    node = new_object(cluster, NODES, "node-1")
    new_object(cluster, CONFIGMAPS, "lease-a", "a", owners=[owner_ref(node)])
    new_object(cluster, CONFIGMAPS, "lease-b", "b", owners=[owner_ref(node)])
    cluster.delete(NODES, "", "node-1")
    eventually(lambda: not cluster.exists(CONFIGMAPS, "a", "lease-a"))
    eventually(lambda: not cluster.exists(CONFIGMAPS, "b", "lease-b"))
