"""Taints and tolerations as Kubernetes matches them, and when a pod must leave a node
with NoExecute taints, as tables."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kubelab.api.taints import eviction_time, tolerates, untolerated

UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
GPU = {"key": "gpu", "value": "a100", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"operator": "Exists"}, GPU, True),
        ({"operator": "Exists", "effect": "NoExecute"}, GPU, False),
        ({"key": "gpu", "operator": "Exists"}, GPU, True),
        ({"key": "gpu", "value": "a100"}, GPU, True),
        ({"key": "gpu", "operator": "Equal", "value": "v100"}, GPU, False),
        ({"key": "gpu", "value": "a100", "effect": "NoSchedule"}, GPU, True),
        ({"key": "tpu", "operator": "Exists"}, GPU, False),
        ({"key": "", "operator": "Equal"}, GPU, False),
        ({"key": "node.kubernetes.io/unreachable", "operator": "Exists"}, UNREACHABLE, True),
    ],
)
def test_tolerates(toleration: dict[str, Any], taint: dict[str, Any], expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_untolerated() -> None:
    assert untolerated([GPU, UNREACHABLE], [{"key": "gpu", "operator": "Exists"}]) == [UNREACHABLE]


NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
ADDED = {**UNREACHABLE, "timeAdded": "2026-01-01T11:59:00Z"}


def tol(seconds: int | None, key: str = "node.kubernetes.io/unreachable") -> dict[str, Any]:
    t: dict[str, Any] = {"key": key, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        t["tolerationSeconds"] = seconds
    return t


@pytest.mark.parametrize(
    ("taints", "tolerations", "expected"),
    [
        ([ADDED], [], NOW),  # not tolerated: now
        ([ADDED], [tol(None)], None),  # tolerated for ever
        ([ADDED], [tol(300)], NOW + datetime.timedelta(seconds=240)),  # from timeAdded
        ([ADDED], [tol(300), tol(30)], NOW - datetime.timedelta(seconds=30)),  # the shortest
        ([ADDED], [tol(None), tol(120)], NOW + datetime.timedelta(seconds=60)),
        ([UNREACHABLE], [tol(10)], NOW + datetime.timedelta(seconds=10)),  # no timeAdded
        ([ADDED, {"key": "x", "effect": "NoExecute"}], [tol(300)], NOW),  # one untolerated
        ([GPU], [], None),  # NoSchedule never evicts
        ([ADDED], [tol(-5)], NOW - datetime.timedelta(seconds=60)),
    ],
)
def test_eviction_time(
    taints: list[dict[str, Any]],
    tolerations: list[dict[str, Any]],
    expected: datetime.datetime | None,
) -> None:
    assert eviction_time(taints, tolerations, NOW) == expected
