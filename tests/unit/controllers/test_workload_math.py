"""The pure parts of the workload controllers, as tables: int-or-percent rounding, the
surge and unavailability fenceposts, the rolling update's arithmetic, proportional
scaling, the pod-template hash, revisions, the ranking of pods to delete, slow-start
bursts and expectations."""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest

from controlplane.controllers import daemonset, statefulset
from controlplane.controllers import deploymentutil as du
from controlplane.controllers import podcontrol as pc
from kubelab.client import FakeClock

NOW = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        ("25%", 4, True, 1),
        ("25%", 10, True, 3),
        ("25%", 10, False, 2),
        ("30%", 1, True, 1),
        ("30%", 1, False, 0),
        ("100%", 7, False, 7),
        ("0%", 7, True, 0),
        (2, 10, True, 2),
        (0, 10, False, 0),
        (None, 10, True, 0),
    ],
)
def test_percentages_round_as_kubernetes_does(
    value: int | str | None, total: int, round_up: bool, expected: int
) -> None:
    assert pc.scaled_value(value, total, round_up) == expected


@pytest.mark.parametrize("value", ["abc", "5", "%", "1.5%"])
def test_an_int_or_string_that_is_neither_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="percentage"):
        pc.scaled_value(value, 10, True)


@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "expected"),
    [
        ("25%", "25%", 10, (3, 2)),
        ("25%", "25%", 4, (1, 1)),
        ("25%", "25%", 1, (1, 0)),
        (0, 0, 5, (0, 1)),  # both 0 cannot progress: one may be unavailable
        ("0%", "0%", 5, (0, 1)),
        (1, "50%", 3, (1, 1)),
    ],
)
def test_fenceposts(
    surge: int | str, unavailable: int | str, desired: int, expected: tuple[int, int]
) -> None:
    assert du.fenceposts(surge, unavailable, desired) == expected


def deployment(
    replicas: int,
    surge: int | str = "25%",
    unavailable: int | str = "25%",
    recreate: bool = False,
    **status: Any,
) -> dict[str, Any]:
    strategy: dict[str, Any] = (
        {"type": "Recreate"}
        if recreate
        else {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
        }
    )
    return {
        "metadata": {"name": "web", "generation": 1},
        "spec": {"replicas": replicas, "strategy": strategy},
        "status": status,
    }


def replica_set(
    name: str,
    replicas: int,
    *,
    available: int = 0,
    actual: int | None = None,
    created: str = "2024-05-01T10:00:00Z",
    max_replicas: int | None = None,
) -> dict[str, Any]:
    annotations = {du.MAX_REPLICAS: str(max_replicas)} if max_replicas is not None else {}
    return {
        "metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
        "spec": {"replicas": replicas},
        "status": {
            "replicas": replicas if actual is None else actual,
            "availableReplicas": available,
        },
    }


@pytest.mark.parametrize(
    ("d", "old", "new", "expected"),
    [
        # 10 replicas, surge 3: the new one may grow to 3 beside 10 old ones.
        (deployment(10), 10, 0, 3),
        (deployment(10), 10, 3, 3),  # at replicas + surge already
        (deployment(10), 8, 3, 5),  # two old ones went: two more new ones
        (deployment(10), 0, 9, 10),  # never above the Deployment's replicas
        (deployment(10, recreate=True), 10, 0, 10),  # Recreate: all at once
        (deployment(4, surge=0, unavailable=1), 4, 0, 0),
    ],
)
def test_how_far_the_new_replica_set_may_grow(
    d: dict[str, Any], old: int, new: int, expected: int
) -> None:
    new_rs = replica_set("new", new)
    assert du.new_rs_replicas(d, [replica_set("old", old), new_rs], new_rs) == expected


def test_old_pods_still_reported_count_against_the_surge() -> None:
    # The old ReplicaSet was scaled down to 8, but its controller still reports 10 pods:
    # the new one must wait (the departure from Kubernetes in `new_rs_replicas`).
    new_rs = replica_set("new", 3)
    old_rs = replica_set("old", 8, actual=10)
    assert du.new_rs_replicas(deployment(10), [old_rs, new_rs], new_rs) == 3


@pytest.mark.parametrize(
    ("d", "old", "new", "new_available", "expected"),
    [
        # 10 wanted, at least 8 available: of 13 pods, the 3 new ones may never become
        # available, so 2 old ones may go.
        (deployment(10), 10, 3, 0, 2),
        (deployment(10), 10, 3, 3, 5),
        (deployment(10), 10, 3, 2, 4),
        (deployment(4, surge=0, unavailable=1), 4, 0, 0, 1),
    ],
)
def test_how_many_old_pods_may_go(
    d: dict[str, Any], old: int, new: int, new_available: int, expected: int
) -> None:
    new_rs = replica_set("new", new, available=new_available)
    old_rs = replica_set("old", old, available=old)
    assert du.max_old_scale_down(d, [old_rs, new_rs], new_rs) == expected


def test_scaling_mid_rollout_shares_the_change_in_proportion() -> None:
    # Kubernetes' documented example: 10 replicas, maxSurge 3, rolled out halfway (8
    # old, 5 new), scaled to 15: 18 allowed, 5 to add, 3 to the old and 2 to the new.
    old_rs = replica_set("old", 8, created="2024-05-01T10:00:00Z", max_replicas=13)
    new_rs = replica_set("new", 5, created="2024-05-01T11:00:00Z", max_replicas=13)
    d = deployment(15, surge=3, unavailable=2)
    assert du.proportional_sizes(d, [old_rs, new_rs]) == {"old": 11, "new": 7}


def test_scaling_to_zero_mid_rollout_empties_every_replica_set() -> None:
    old_rs = replica_set("old", 8, max_replicas=13)
    new_rs = replica_set("new", 5, created="2024-05-01T11:00:00Z", max_replicas=13)
    assert du.proportional_sizes(deployment(0), [old_rs, new_rs]) == {"old": 0, "new": 0}


TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "web", "image": "nginx:1.21"}]},
}


def test_the_template_hash_is_stable_and_safe() -> None:
    first = du.template_hash(TEMPLATE)
    assert first == du.template_hash({"spec": TEMPLATE["spec"], "metadata": TEMPLATE["metadata"]})
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    other = {**TEMPLATE, "spec": {"containers": [{"name": "web", "image": "nginx:1.22"}]}}
    assert du.template_hash(other) != first
    assert du.template_hash(TEMPLATE, 1) != du.template_hash(TEMPLATE, 2) != first


def test_templates_compare_without_the_hash_label() -> None:
    labelled = {
        **TEMPLATE,
        "metadata": {"labels": {"app": "web", du.POD_TEMPLATE_HASH: "abc"}},
    }
    assert du.same_template(labelled, TEMPLATE)
    assert not du.same_template(labelled, {**TEMPLATE, "metadata": {"labels": {"app": "x"}}})


@pytest.mark.parametrize(
    ("old_revision", "history", "new_revision", "expected_revision", "expected_history"),
    [
        (0, None, 1, "1", None),  # a new ReplicaSet
        (3, None, 3, "3", None),  # still the newest: unchanged
        (1, None, 3, "3", "1"),  # rolled back to: its old number moves to the history
        (1, "2", 5, "5", "2,1"),
    ],
)
def test_revisions_of_the_new_replica_set(
    old_revision: int,
    history: str | None,
    new_revision: int,
    expected_revision: str,
    expected_history: str | None,
) -> None:
    rs = replica_set("web-1", 1)
    if old_revision:
        rs["metadata"]["annotations"][du.REVISION] = str(old_revision)
    if history:
        rs["metadata"]["annotations"][du.REVISION_HISTORY] = history
    d = deployment(3)
    d["metadata"]["annotations"] = {
        "kubernetes.io/change-cause": "why",
        du.LAST_APPLIED: "{}",
        du.REVISION: "9",
    }
    annotations = du.new_rs_annotations(d, rs, new_revision, exists=bool(old_revision))
    assert annotations[du.REVISION] == expected_revision
    assert annotations.get(du.REVISION_HISTORY) == expected_history
    assert annotations["kubernetes.io/change-cause"] == "why"
    assert du.LAST_APPLIED not in annotations
    sized = (annotations.get(du.DESIRED_REPLICAS), annotations.get(du.MAX_REPLICAS))
    # Only a ReplicaSet yet to be created is sized here (scaling sizes the others).
    assert sized == ((None, None) if old_revision else ("3", "4"))


def test_the_progress_deadline() -> None:
    d = deployment(1)
    d["spec"]["progressDeadlineSeconds"] = 60
    status: dict[str, Any] = {}
    du.set_condition(status, du.PROGRESSING, "True", du.RS_UPDATED, "moving", NOW)
    assert du.seconds_to_deadline(d, status, NOW + datetime.timedelta(seconds=20)) == 40
    assert not du.timed_out(d, status, NOW + datetime.timedelta(seconds=60))
    assert du.timed_out(d, status, NOW + datetime.timedelta(seconds=61))
    # Progress moves the clock of the deadline, not the transition time.
    later = NOW + datetime.timedelta(seconds=30)
    du.set_condition(status, du.PROGRESSING, "True", du.RS_UPDATED, "moving", later, touch=True)
    (cond,) = status["conditions"]
    assert cond["lastTransitionTime"] == "2024-05-01T12:00:00Z"
    assert cond["lastUpdateTime"] == "2024-05-01T12:00:30Z"
    assert not du.timed_out(d, status, NOW + datetime.timedelta(seconds=61))


def pod(
    name: str,
    *,
    node: str = "n1",
    phase: str = "Running",
    ready: bool = True,
    ready_since: str = "2024-05-01T10:00:00Z",
    restarts: int = 0,
    created: str = "2024-05-01T09:00:00Z",
    cost: int | None = None,
) -> dict[str, Any]:
    annotations = {pc.DELETION_COST_ANNOTATION: str(cost)} if cost is not None else {}
    return {
        "metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
        "spec": {"nodeName": node} if node else {},
        "status": {
            "phase": phase,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": ready_since,
                }
            ],
            "containerStatuses": [{"restartCount": restarts}],
        },
    }


def test_the_pods_deleted_first() -> None:
    pods = [
        pod("old-ready"),
        pod("newer", created="2024-05-01T09:30:00Z"),
        pod("restarted", restarts=3),
        pod("ready-recently", ready_since="2024-05-01T11:00:00Z"),
        pod("expensive", ready_since="2024-05-01T11:00:00Z", cost=100),
        pod("cheap", cost=-5),
        pod("not-ready", ready=False),
        pod("unknown", phase="Unknown"),
        pod("pending", phase="Pending", ready=False),
        pod("unscheduled", node="", phase="Pending", ready=False),
    ]
    order = [p["metadata"]["name"] for p in pc.pods_to_delete(pods, len(pods))]
    assert order == [
        "unscheduled",
        "pending",
        "unknown",
        "not-ready",
        "cheap",
        "ready-recently",
        "restarted",
        "newer",
        "old-ready",
        "expensive",
    ]
    assert [p["metadata"]["name"] for p in pc.pods_to_delete(pods, 2)] == order[:2]


def test_slow_start_batches_double_and_stop_at_the_first_failure() -> None:
    lock = threading.Lock()
    calls: list[int] = []

    def create(i: int) -> None:
        with lock:
            calls.append(i)
        if i == 4:
            raise RuntimeError("quota exceeded")

    result = pc.slow_start_batch(20, create)
    # Batches of 1, 2 and 4 were tried; the failure in the third stopped the rest.
    assert (result.tried, result.succeeded) == (7, 6)
    assert str(result.error) == "quota exceeded"
    assert sorted(calls) == list(range(7))
    ok = pc.slow_start_batch(10, lambda i: None)
    assert (ok.tried, ok.succeeded, ok.error) == (10, 10, None)


def test_expectations_hold_back_a_sync_until_observed_or_expired() -> None:
    clock = FakeClock()
    expectations = pc.Expectations(clock)
    assert expectations.satisfied("ns/web")
    expectations.expect_creations("ns/web", 2)
    assert not expectations.satisfied("ns/web")
    expectations.creation_observed("ns/web")
    assert not expectations.satisfied("ns/web")
    expectations.creation_observed("ns/web")
    assert expectations.satisfied("ns/web")

    expectations.expect_deletions("ns/web", ["ns/a", "ns/b"])
    expectations.deletion_observed("ns/web", "ns/a")
    expectations.deletion_observed("ns/web", "ns/a")  # marked, then deleted: once
    assert not expectations.satisfied("ns/web")
    clock.step(pc.EXPECTATIONS_TTL + 1)
    assert expectations.satisfied("ns/web")  # an event lost for good wedges nothing


def node(name: str, labels: dict[str, str] | None = None, *taints: dict[str, str]) -> Any:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": list(taints)}}


DAEMON_TEMPLATE: dict[str, Any] = {"spec": {"containers": [{"name": "c", "image": "x"}]}}


@pytest.mark.parametrize(
    ("template_spec", "the_node", "run", "keep"),
    [
        ({}, node("n"), True, True),
        ({"nodeSelector": {"disk": "ssd"}}, node("n"), False, False),
        ({"nodeSelector": {"disk": "ssd"}}, node("n", {"disk": "ssd"}), True, True),
        # An untolerated NoSchedule taint: no new pod, but a running one stays.
        ({}, node("n", None, {"key": "k", "effect": "NoSchedule"}), False, True),
        # An untolerated NoExecute taint: not even a running one stays.
        ({}, node("n", None, {"key": "k", "effect": "NoExecute"}), False, False),
        (
            {"tolerations": [{"key": "k", "operator": "Exists"}]},
            node("n", None, {"key": "k", "effect": "NoExecute"}),
            True,
            True,
        ),
        # The default DaemonSet tolerations: cordoned, not ready, under pressure.
        (
            {},
            node(
                "n",
                None,
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
                {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"},
            ),
            True,
            True,
        ),
        # Only a host-network daemon tolerates a node without a pod network.
        (
            {},
            node(
                "n", None, {"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}
            ),
            False,
            True,
        ),
        (
            {"hostNetwork": True},
            node(
                "n", None, {"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}
            ),
            True,
            True,
        ),
        ({"nodeName": "other"}, node("n"), False, False),
    ],
)
def test_which_nodes_run_a_daemon(
    template_spec: dict[str, Any], the_node: Any, run: bool, keep: bool
) -> None:
    template = {"spec": {**DAEMON_TEMPLATE["spec"], **template_spec}}
    assert daemonset.placement(template, the_node) == daemonset.Placement(run, keep)


def test_a_daemon_pod_is_pinned_to_its_node_by_affinity() -> None:
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "a", "operator": "Exists"}]}
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [],
            }
        }
    }
    daemonset.pin_to_node(spec, "n7")
    pod = {"spec": spec}
    assert daemonset.target_node(pod) == "n7"
    assert spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == []
    assert daemonset.target_node({"spec": {**spec, "nodeName": "n8"}}) == "n8"


@pytest.mark.parametrize(
    ("value", "desired", "expected"),
    [(1, 10, 1), ("10%", 10, 1), ("25%", 10, 3), ("0%", 10, 1), (0, 10, 1), ("100%", 3, 3)],
)
def test_daemon_set_max_unavailable_rounds_up(
    value: int | str, desired: int, expected: int
) -> None:
    ds = {"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": value}}}}
    assert daemonset.max_unavailable(ds, desired) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("web-0", 0),
        ("web-12", 12),
        ("web-x", None),
        ("webby-1", None),
        ("web", None),
        ("a-web-1", None),
    ],
)
def test_stateful_set_ordinals(name: str, expected: int | None) -> None:
    assert statefulset.ordinal("web", {"metadata": {"name": name}}) == expected
