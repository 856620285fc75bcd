"""The Job controller's arithmetic as tables: how many pods should run, when a Job is
complete, the back-off before replacing a failed pod, and what a pod's end counts as."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.controllers.job import complete, pod_failure_backoff, pod_outcome, wanted_active


@pytest.mark.parametrize(
    ("spec", "succeeded", "active", "want"),
    [
        ({"parallelism": 2, "completions": 5}, 0, 0, 2),
        ({"parallelism": 2, "completions": 5}, 4, 1, 1),
        ({"parallelism": 2, "completions": 5}, 5, 0, 0),
        ({"parallelism": 3}, 0, 0, 3),  # a work queue: parallelism until one succeeds
        ({"parallelism": 3}, 1, 2, 2),  # then no new pods
        ({"parallelism": 3, "completions": 5, "suspend": True}, 0, 3, 0),
        ({}, 0, 0, 1),
    ],
)
def test_wanted_active(spec: dict[str, Any], succeeded: int, active: int, want: int) -> None:
    assert wanted_active(spec, succeeded, active) == want


@pytest.mark.parametrize(
    ("spec", "succeeded", "active", "done"),
    [
        ({"completions": 3}, 2, 1, False),
        ({"completions": 3}, 3, 0, True),
        ({}, 1, 1, False),  # a work queue ends when its last pod does
        ({}, 1, 0, True),
        ({}, 0, 0, False),
    ],
)
def test_complete(spec: dict[str, Any], succeeded: int, active: int, done: bool) -> None:
    assert complete(spec, succeeded, active) is done


@pytest.mark.parametrize(
    ("failures", "seconds"), [(0, 0.0), (1, 10.0), (2, 20.0), (3, 40.0), (6, 320.0), (7, 360.0)]
)
def test_pod_failure_backoff(failures: int, seconds: float) -> None:
    assert pod_failure_backoff(failures, 10.0) == seconds


@pytest.mark.parametrize(
    ("phase", "deleting", "outcome"),
    [
        ("Running", False, ""),
        ("Pending", False, ""),
        ("Succeeded", False, "succeeded"),
        ("Succeeded", True, "succeeded"),
        ("Failed", False, "failed"),
        ("Running", True, "failed"),  # deleted before it finished
    ],
)
def test_pod_outcome(phase: str, deleting: bool, outcome: str) -> None:
    meta: dict[str, Any] = {"name": "p"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert pod_outcome({"metadata": meta, "status": {"phase": phase}}) == outcome
