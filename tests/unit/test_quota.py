"""What counts against a ResourceQuota, as a table: object counts by their keys, pods'
requests and limits, finished pods not at all."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from kubelab.api.quota import resource_of_key, total, usage
from kubelab.client import resource_for

PODS = resource_for("v1", "Pod")
DEPLOYMENTS = resource_for("apps/v1", "Deployment")


def pod(phase: str = "Running", **requests: str) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": requests, "limits": requests}}]
        },
        "status": {"phase": phase},
    }


def test_a_pod_counts_itself_and_its_requests_and_limits() -> None:
    assert usage(PODS, pod(cpu="250m", memory="64Mi")) == {
        "count/pods": 1,
        "pods": 1,
        "requests.cpu": Fraction(1, 4),
        "cpu": Fraction(1, 4),
        "limits.cpu": Fraction(1, 4),
        "requests.memory": 64 * 2**20,
        "memory": 64 * 2**20,
        "limits.memory": 64 * 2**20,
    }


def test_other_kinds_count_by_group() -> None:
    assert usage(DEPLOYMENTS, {}) == {"count/deployments.apps": 1}


def test_finished_pods_do_not_count() -> None:
    pods = [
        pod(cpu="1"),
        pod("Succeeded", cpu="1"),
        pod("Failed", cpu="1"),
        pod("Pending", cpu="2"),
    ]
    assert total(PODS, pods)["cpu"] == 3
    assert total(PODS, pods)["pods"] == 2


@pytest.mark.parametrize(
    ("key", "resource"),
    [
        ("pods", ("", "pods")),
        ("count/pods", ("", "pods")),
        ("count/deployments.apps", ("apps", "deployments")),
        ("count/widgets.example.com", ("example.com", "widgets")),
        ("requests.cpu", None),
        ("memory", None),
    ],
)
def test_resource_of_key(key: str, resource: tuple[str, str] | None) -> None:
    assert resource_of_key(key) == resource
