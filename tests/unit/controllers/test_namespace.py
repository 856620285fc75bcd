"""The namespace controller: a Terminating namespace is emptied and then finalized; it
waits for what lingers (a pod in its grace period, an object with finalizers) and says
so in its conditions; a failure is reported and retried."""

from __future__ import annotations

import time
from collections.abc import Callable

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
from kubelab.api.errors import StatusError
from kubelab.client import FakeClock, resource_for
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import Cluster, Harness, new_object

NAMESPACES = resource_for("v1", "Namespace")
PODS = resource_for("v1", "Pod")
CONFIGMAPS = resource_for("v1", "ConfigMap")
SECRETS = resource_for("v1", "Secret")


def conditions(cluster: Cluster, name: str) -> dict[str, dict[str, str]]:
    ns = cluster.get(NAMESPACES, "", name)
    return {c["type"]: c for c in (ns.get("status") or {}).get("conditions") or []}


def terminating(
    cluster: Cluster, harness: Harness, more: Callable[[], object] = lambda: None
) -> NamespaceController:
    """A namespace "gone" with content (and what `more` adds to it: nothing can be
    created in a namespace once it is being deleted), being deleted; the controller's
    caches synced (its sync is called by the tests, no workers run)."""
    new_object(cluster, NAMESPACES, "gone", spec={"finalizers": ["kubernetes"]})
    new_object(cluster, NAMESPACES, "kept", spec={"finalizers": ["kubernetes"]})
    for ns in ("gone", "kept"):
        new_object(cluster, CONFIGMAPS, "settings", ns)
        new_object(cluster, PODS, "unscheduled", ns)
    more()
    ctrl = NamespaceController(harness.ctx)
    harness.sync_caches()
    cluster.delete(NAMESPACES, "", "gone")
    cache = harness.informers.informer(NAMESPACES).indexer
    eventually(lambda: bool((cache.get("gone") or {})["metadata"].get("deletionTimestamp")))
    return ctrl


@pytest.fixture
def controller(cluster: Cluster, harness: Harness) -> NamespaceController:
    return terminating(cluster, harness)


def test_the_content_is_every_namespaced_stored_resource() -> None:
    content = {r.group_resource for r in content_resources()}
    assert {"pods", "configmaps", "secrets", "events", "deployments.apps"} <= content
    assert {"leases.coordination.k8s.io", "rolebindings.rbac.authorization.k8s.io"} <= content
    assert not {"namespaces", "nodes", "persistentvolumes"} & content
    assert "pods.metrics.k8s.io" not in content  # served, never stored
    assert "events.events.k8s.io" not in content  # the core events, seen another way


def test_a_terminating_namespace_is_emptied_then_finalized(
    cluster: Cluster, controller: NamespaceController
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
    cluster: Cluster, controller: NamespaceController
) -> None:
    assert controller.sync("kept") is None
    assert controller.sync("never-existed") is None
    assert not cluster.calls("DELETE")


def test_a_namespace_waits_for_a_pod_in_its_grace_period(
    cluster: Cluster, harness: Harness
) -> None:
    bound = {"nodeName": "node-1", "terminationGracePeriodSeconds": 30}
    controller = terminating(
        cluster, harness, lambda: new_object(cluster, PODS, "running", "gone", spec=bound)
    )

    assert controller.sync("gone") == 16.0, "half the grace period, plus a second"
    assert cluster.get(PODS, "gone", "running")["metadata"]["deletionTimestamp"]
    remaining = conditions(cluster, "gone")[CONTENT_REMAINING]
    assert (remaining["status"], remaining["reason"]) == ("True", "SomeResourcesRemain")
    assert "1 pods" in remaining["message"]
    assert conditions(cluster, "gone")[CONTENT_FAILURE]["status"] == "False"

    cluster.confirm(PODS, "gone", "running")  # its kubelet has stopped it
    assert controller.sync("gone") is None
    assert not cluster.exists(NAMESPACES, "", "gone")


def test_objects_held_by_finalizers_keep_the_namespace(cluster: Cluster, harness: Harness) -> None:
    def hold() -> None:
        held = new_object(cluster, SECRETS, "held", "gone")
        held["metadata"]["finalizers"] = ["example.com/hold"]
        cluster.update(SECRETS, held)

    controller = terminating(cluster, harness, hold)

    assert controller.sync("gone") == 15.0, "finalizers take long: Kubernetes' estimate"
    finalizers = conditions(cluster, "gone")[FINALIZERS_REMAINING]
    assert finalizers["status"] == "True"
    assert finalizers["message"] == "Objects still held by finalizers: example.com/hold (1)"
    deletes_before = len(cluster.calls("DELETE"))
    assert controller.sync("gone") == 15.0
    assert len(cluster.calls("DELETE")) == deletes_before, "marked objects are not re-deleted"

    released = cluster.get(SECRETS, "gone", "held")
    released["metadata"]["finalizers"] = []
    cluster.update(SECRETS, released)
    assert controller.sync("gone") is None
    assert not cluster.exists(NAMESPACES, "", "gone")


def test_a_failed_delete_is_reported_and_retried(
    cluster: Cluster, controller: NamespaceController
) -> None:
    cluster.faults.status(
        StatusError(500, "InternalError", "injected 500"),
        method="DELETE",
        path="/namespaces/gone/configmaps",
    )
    with pytest.raises(SyncError, match="configmaps: injected 500"):
        controller.sync("gone")
    failure = conditions(cluster, "gone")[CONTENT_FAILURE]
    assert (failure["status"], failure["reason"]) == ("True", "ContentDeletionFailed")
    assert cluster.exists(NAMESPACES, "", "gone")
    assert controller.sync("gone") is None
    assert not cluster.exists(NAMESPACES, "", "gone")


def test_the_controller_finalizes_on_its_own(cluster: Cluster, harness: Harness) -> None:
    harness.run(NamespaceController(harness.ctx))
    new_object(cluster, NAMESPACES, "short-lived", spec={"finalizers": ["kubernetes"]})
    new_object(cluster, CONFIGMAPS, "settings", "short-lived")
    cluster.delete(NAMESPACES, "", "short-lived")
    eventually(lambda: not cluster.exists(NAMESPACES, "", "short-lived"))
    assert not cluster.exists(CONFIGMAPS, "short-lived", "settings")


def test_a_namespace_is_looked_at_again_when_due_not_when_its_status_changes(
    cluster: Cluster, harness: Harness
) -> None:
    clock = FakeClock()
    harness.run(NamespaceController(harness.ctx, clock=clock))
    new_object(cluster, NAMESPACES, "held", spec={"finalizers": ["kubernetes"]})
    secret = new_object(cluster, SECRETS, "held", "held")
    secret["metadata"]["finalizers"] = ["example.com/hold"]
    cluster.update(SECRETS, secret)
    cluster.delete(NAMESPACES, "", "held")

    def passes() -> int:
        """Each look at the namespace lists its (absent) config maps once."""
        return len(cluster.calls("GET", "/namespaces/held/configmaps"))

    eventually(
        lambda: conditions(cluster, "held").get(FINALIZERS_REMAINING, {}).get("status") == "True"
    )
    time.sleep(0.3)  # the status write comes back as an update of the namespace
    assert passes() == 1, "its own status write does not queue the namespace again"
    clock.step(14.5)
    time.sleep(0.3)
    assert passes() == 1, "held by a finalizer: not looked at again within 15 s"
    clock.step(0.5)
    eventually(lambda: passes() == 2)

    secret = cluster.get(SECRETS, "held", "held")
    secret["metadata"]["finalizers"] = []
    cluster.update(SECRETS, secret)

    def gone_after_another_period() -> bool:
        """The second look plans the third as it ends, which on a loaded machine may be
        after any given moment here: time moves on a period at a time until a look has
        found the namespace empty (the period itself is checked above)."""
        clock.step(15)
        return not cluster.exists(NAMESPACES, "", "held")

    eventually(gone_after_another_period)


def test_rechecks_have_a_floor() -> None:
    unscheduled = Leftovers()
    unscheduled.add(PODS, [{"metadata": {"name": "p"}}])
    assert unscheduled.recheck_after() == 5.0
    held = Leftovers()
    held.add(SECRETS, [{"metadata": {"name": "s", "finalizers": ["example.com/hold"]}}])
    assert held.recheck_after() == 15.0
    held.add(PODS, [{"metadata": {"name": "p", "deletionGracePeriodSeconds": 60}}])
    assert held.recheck_after() == 31.0


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
