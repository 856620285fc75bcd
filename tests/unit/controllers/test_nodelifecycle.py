"""Node lifecycle's pure parts as tables: the taints a node's Ready condition calls for
(others kept, existing ones untouched) and its conditions once its kubelet is quiet."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.controllers.nodelifecycle import reconcile_taints, unknown_conditions

NOW = "2026-01-01T12:00:00Z"
U_NS = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}
U_NE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "old"}
NR_NS = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
NR_NE = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": NOW}
OTHER = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("current", "ready", "expected"),
    [
        ([], "True", None),
        ([OTHER], None, None),  # never posted: left alone
        ([], "Unknown", [U_NS, {**U_NE, "timeAdded": NOW}]),
        ([OTHER], "False", [OTHER, NR_NS, NR_NE]),
        ([U_NS, U_NE], "Unknown", None),  # kept as they are (timeAdded too)
        ([OTHER, U_NS, U_NE], "True", [OTHER]),
        ([U_NS, U_NE], "False", [NR_NS, NR_NE]),
    ],
)
def test_reconcile_taints(
    current: list[dict[str, Any]], ready: str | None, expected: list[dict[str, Any]] | None
) -> None:
    assert reconcile_taints(current, ready, NOW) == expected


def test_conditions_become_unknown_and_the_missing_ones_never_updated() -> None:
    node = {
        "metadata": {"name": "n", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": "2026-01-01T11:59:00Z",
                    "lastTransitionTime": "2026-01-01T10:00:00Z",
                },
                {"type": "NetworkUnavailable", "status": "False"},
            ]
        },
    }
    conditions = {c["type"]: c for c in unknown_conditions(node, NOW)}
    assert conditions["Ready"] == {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": "2026-01-01T11:59:00Z",
        "lastTransitionTime": NOW,
    }
    assert conditions["MemoryPressure"]["reason"] == "NodeStatusNeverUpdated"
    assert conditions["MemoryPressure"]["message"] == "Kubelet never posted node status."
    assert conditions["NetworkUnavailable"] == {"type": "NetworkUnavailable", "status": "False"}
    assert node["status"]["conditions"][0]["status"] != "Unknown", "the input is not changed"
