"""The namespace controller: a Terminating namespace is emptied and then finalized; it
waits for what lingers (a pod in its grace period, an object with finalizers) and says
so in its conditions; a failure is reported and retried."""

from __future__ import annotations

import pytest

from controlplane.controllers.base import SyncError
from controlplane.controllers.namespace import (
    CONTENT_FAILURE,
    CONTENT_REMAINING,
    FINALIZERS_REMAINING,
    Leftovers,
    NamespaceController,
    content_resources,
    namespace_conditions,
)
from kubelab.client import resource_for
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import FakeCluster, Harness, new_object

NAMESPACES = resource_for("v1", "Namespace")
PODS = resource_for("v1", "Pod")
CONFIGMAPS = resource_for("v1", "ConfigMap")
SECRETS = resource_for("v1", "Secret")


def conditions(cluster: FakeCluster, name: str) -> dict[str, dict[str, str]]:
    ns = cluster.get(NAMESPACES, "", name)
    return {c["type"]: c for c in (ns.get("status") or {}).get("conditions") or []}


@pytest.fixture
def controller(cluster: FakeCluster, harness: Harness) -> NamespaceController:
    """A namespace "gone" with content, being deleted; the controller's caches synced
    (its sync is called by the tests, no workers run)."""
    new_object(cluster, NAMESPACES, "gone", spec={"finalizers": ["kubernetes"]})
    new_object(cluster, NAMESPACES, "kept", spec={"finalizers": ["kubernetes"]})
    for ns in ("gone", "kept"):
        new_object(cluster, CONFIGMAPS, "settings", ns)
        new_object(cluster, PODS, "unscheduled", ns)
    ctrl = NamespaceController(harness.ctx)
    harness.sync_caches()
    cluster.delete(NAMESPACES, "", "gone")
    cache = harness.informers.informer(NAMESPACES).indexer
    eventually(lambda: bool((cache.get("gone") or {})["metadata"].get("deletionTimestamp")))
    return ctrl


def test_the_content_is_every_namespaced_stored_resource() -> None:
    content = {r.group_resource for r in content_resources()}
    assert {"pods", "configmaps", "secrets", "events", "deployments.apps"} <= content
    assert {"leases.coordination.k8s.io", "rolebindings.rbac.authorization.k8s.io"} <= content
    assert not {"namespaces", "nodes", "persistentvolumes"} & content
    assert "pods.metrics.k8s.io" not in content  # served, never stored
    assert "events.events.k8s.io" not in content  # the core events, seen another way


def test_a_terminating_namespace_is_emptied_then_finalized(
    cluster: FakeCluster, controller: NamespaceController
) -> None:
    assert controller.sync("gone") is None
    assert not cluster.exists(NAMESPACES, "", "gone")
    assert not cluster.exists(CONFIGMAPS, "gone", "settings")
    assert not cluster.exists(PODS, "gone", "unscheduled")
    deletes = cluster.calls("DELETE")
    assert sorted(d.path for d in deletes) == [
        "/api/v1/namespaces/gone/configmaps",
        "/api/v1/namespaces/gone/pods",
    ], "one deletecollection per resource that has something to delete"
    assert {d.body["propagationPolicy"] for d in deletes} == {"Background"}
    assert cluster.calls("PUT", "/namespaces/gone/finalize")
    assert cluster.exists(CONFIGMAPS, "kept", "settings"), "other namespaces are untouched"


def test_an_active_namespace_is_left_alone(
    cluster: FakeCluster, controller: NamespaceController
) -> None:
    assert controller.sync("kept") is None
    assert controller.sync("never-existed") is None
    assert not cluster.calls("DELETE")


def test_a_namespace_waits_for_a_pod_in_its_grace_period(
    cluster: FakeCluster, controller: NamespaceController
) -> None:
    bound = {"nodeName": "node-1", "terminationGracePeriodSeconds": 30}
    new_object(cluster, PODS, "running", "gone", spec=bound)

    assert controller.sync("gone") == 16.0, "half the grace period, plus a second"
    assert cluster.get(PODS, "gone", "running")["metadata"]["deletionTimestamp"]
    remaining = conditions(cluster, "gone")[CONTENT_REMAINING]
    assert (remaining["status"], remaining["reason"]) == ("True", "SomeResourcesRemain")
    assert "1 pods" in remaining["message"]
    assert conditions(cluster, "gone")[CONTENT_FAILURE]["status"] == "False"

    cluster.confirm(PODS, "gone", "running")  # its kubelet has stopped it
    assert controller.sync("gone") is None
    assert not cluster.exists(NAMESPACES, "", "gone")


def test_objects_held_by_finalizers_keep_the_namespace(
    cluster: FakeCluster, controller: NamespaceController
) -> None:
    held = new_object(cluster, SECRETS, "held", "gone")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    cluster.update(SECRETS, held)

    assert controller.sync("gone") == 1.0
    finalizers = conditions(cluster, "gone")[FINALIZERS_REMAINING]
    assert finalizers["status"] == "True"
    assert finalizers["message"] == "Objects still held by finalizers: example.com/hold (1)"
    deletes_before = len(cluster.calls("DELETE"))
    assert controller.sync("gone") == 1.0
    assert len(cluster.calls("DELETE")) == deletes_before, "marked objects are not re-deleted"

    released = cluster.get(SECRETS, "gone", "held")
    released["metadata"]["finalizers"] = []
    cluster.update(SECRETS, released)
    assert controller.sync("gone") is None
    assert not cluster.exists(NAMESPACES, "", "gone")


def test_a_failed_delete_is_reported_and_retried(
    cluster: FakeCluster, controller: NamespaceController
) -> None:
    cluster.inject(500, method="DELETE", path="/namespaces/gone/configmaps")
    with pytest.raises(SyncError, match="configmaps: injected 500"):
        controller.sync("gone")
    failure = conditions(cluster, "gone")[CONTENT_FAILURE]
    assert (failure["status"], failure["reason"]) == ("True", "ContentDeletionFailed")
    assert cluster.exists(NAMESPACES, "", "gone")
    assert controller.sync("gone") is None
    assert not cluster.exists(NAMESPACES, "", "gone")


def test_the_controller_finalizes_on_its_own(cluster: FakeCluster, harness: Harness) -> None:
    harness.run(NamespaceController(harness.ctx))
    new_object(cluster, NAMESPACES, "short-lived", spec={"finalizers": ["kubernetes"]})
    new_object(cluster, CONFIGMAPS, "settings", "short-lived")
    cluster.delete(NAMESPACES, "", "short-lived")
    eventually(lambda: not cluster.exists(NAMESPACES, "", "short-lived"))
    assert not cluster.exists(CONFIGMAPS, "short-lived", "settings")


def test_conditions_move_their_transition_time_only_with_their_status() -> None:
    foreign = {"type": "Example", "status": "True"}
    waiting = Leftovers()
    waiting.add(PODS, [{"metadata": {"name": "p", "deletionGracePeriodSeconds": 10}}])
    first = namespace_conditions(waiting, [foreign], "t1")
    assert first[0] == foreign
    assert {c["type"]: (c["status"], c["lastTransitionTime"]) for c in first[1:]} == {
        CONTENT_FAILURE: ("False", "t1"),
        CONTENT_REMAINING: ("True", "t1"),
        FINALIZERS_REMAINING: ("False", "t1"),
    }
    done = namespace_conditions(Leftovers(), first, "t2")
    times = {c["type"]: c["lastTransitionTime"] for c in done[1:]}
    assert times[CONTENT_REMAINING] == "t2" and times[CONTENT_FAILURE] == "t1"
    assert waiting.recheck_after() == 6.0
