"""A disruption budget's status as a table (expected, desired and current healthy pods,
disruptions allowed), and the eviction's take of a disruption (429 when none is left or
the status is behind)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from controlplane.apiserver.eviction import admit_eviction, budgets_of, take_disruption
from controlplane.controllers.disruption import budget_status, scaled_value
from kubelab.api.errors import StatusError

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


def pod(name: str, ready: bool = True, deleting: bool = False, phase: str = "Running") -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    return {
        "metadata": meta,
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def budget(status: dict[str, Any] | None = None, generation: int = 1, **spec: Any) -> Any:
    return {
        "metadata": {"name": "web", "namespace": "ns", "generation": generation},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
        "status": status or {},
    }


@pytest.mark.parametrize(("value", "total", "scaled"), [(2, 10, 2), ("50%", 5, 3), ("10%", 3, 1)])
def test_scaled_value(value: Any, total: int, scaled: int) -> None:
    assert scaled_value(value, total) == scaled


THREE = [pod("a"), pod("b"), pod("c")]


@pytest.mark.parametrize(
    ("spec", "pods", "from_controllers", "expected", "desired", "healthy", "allowed"),
    [
        ({"minAvailable": 2}, THREE, 0, 3, 2, 3, 1),
        ({"minAvailable": 3}, THREE, 0, 3, 3, 3, 0),
        ({"minAvailable": "50%"}, THREE, 4, 4, 2, 3, 1),
        ({"maxUnavailable": 1}, THREE, 3, 3, 2, 3, 1),
        ({"maxUnavailable": "34%"}, THREE, 3, 3, 1, 3, 2),
        ({"maxUnavailable": 1}, [pod("a"), pod("b", ready=False), pod("c")], 3, 3, 2, 2, 0),
        ({"maxUnavailable": 1}, [pod("a"), pod("b", deleting=True), pod("c")], 3, 3, 2, 2, 0),
        ({"maxUnavailable": 1}, THREE, None, 3, 3, 3, 0),  # a pod without a controller
    ],
)
def test_budget_status(
    spec: dict[str, Any],
    pods: list[Any],
    from_controllers: int | None,
    expected: int,
    desired: int,
    healthy: int,
    allowed: int,
) -> None:
    status = budget_status(budget(**spec), pods, from_controllers, NOW)
    assert (
        status["expectedPods"],
        status["desiredHealthy"],
        status["currentHealthy"],
        status["disruptionsAllowed"],
    ) == (expected, desired, healthy, allowed)
    assert status["conditions"][0]["status"] == ("True" if allowed else "False")


def test_disrupted_pods_are_not_healthy_until_they_go_or_time_out() -> None:
    recent = {
        "a": "2026-01-01T11:59:30Z",
        "b": "2026-01-01T11:50:00Z",
        "gone": "2026-01-01T11:59:50Z",
    }
    status = budget_status(budget({"disruptedPods": recent}, minAvailable=1), THREE, 0, NOW)
    assert status["disruptedPods"] == {"a": "2026-01-01T11:59:30Z"}
    assert status["currentHealthy"] == 2


def test_taking_a_disruption() -> None:
    b = budget({"observedGeneration": 1, "disruptionsAllowed": 1}, minAvailable=2)
    taken = take_disruption("a", "2026-01-01T12:00:00Z")(b)
    assert taken is not None
    assert taken["status"]["disruptionsAllowed"] == 0
    assert taken["status"]["disruptedPods"] == {"a": "2026-01-01T12:00:00Z"}
    with pytest.raises(StatusError) as none_left:
        take_disruption("b", "2026-01-01T12:00:00Z")(taken)
    assert none_left.value.code == 429
    assert none_left.value.message == (
        "Cannot evict pod as it would violate the pod's disruption budget."
    )
    behind = budget({"observedGeneration": 1, "disruptionsAllowed": 5}, generation=2)
    with pytest.raises(StatusError, match="disruption budget"):
        take_disruption("a", "now")(behind)


def test_which_evictions_ignore_budgets() -> None:
    def never(*_: Any) -> Any:
        raise AssertionError("the budget was charged")

    blocked = budget(
        {
            "observedGeneration": 1,
            "disruptionsAllowed": 0,
            "currentHealthy": 3,
            "desiredHealthy": 3,
        },
        minAvailable=3,
    )
    for free in (pod("a", phase="Succeeded"), pod("a", phase="Pending"), pod("a", deleting=True)):
        admit_eviction(free, [blocked], never)
    # Not ready, and the budget has its healthy pods: it may go without a charge.
    admit_eviction(pod("a", ready=False), [blocked], never)
    with pytest.raises(StatusError) as two:
        admit_eviction(pod("a"), [blocked, budget()], never)
    assert two.value.code == 500
    assert budgets_of(pod("a"), [budget(), {"metadata": {"name": "x"}, "spec": {}}]) == [budget()]


def test_a_dry_run_eviction_decides_without_writing() -> None:
    def never(*_: Any) -> Any:
        raise AssertionError("a dry run wrote the budget")

    allowing = budget({"observedGeneration": 1, "disruptionsAllowed": 1}, minAvailable=2)
    admit_eviction(pod("a"), [allowing], never, dry_run=True)
    assert allowing["status"]["disruptionsAllowed"] == 1
    blocked = budget({"observedGeneration": 1, "disruptionsAllowed": 0}, minAvailable=3)
    with pytest.raises(StatusError) as refused:
        admit_eviction(pod("a"), [blocked], never, dry_run=True)
    assert refused.value.code == 429
