"""A pod's QoS class as the apiserver writes it into a new pod's status and the kubelet
places its cgroup by it (`kubelab.api.podutil.qos_class`)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelab.api.podutil import qos_class


def _pod(*resources: dict[str, Any], init: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]
    }
    if init is not None:
        spec["initContainers"] = [{"name": "init", "resources": init}]
    return {"spec": spec}


EQUAL = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (_pod({}), "BestEffort"),
        (_pod(EQUAL), "Guaranteed"),
        (_pod({"limits": {"cpu": "1", "memory": "1Gi"}}), "Guaranteed"),  # requests default
        (
            _pod({"requests": {"cpu": "1000m"}, "limits": {"cpu": "1", "memory": "1Gi"}}),
            "Guaranteed",
        ),
        (_pod({"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi"}}), "Burstable"),
        (_pod({"limits": {"cpu": "1"}}), "Burstable"),  # no memory limit
        (_pod(EQUAL, {}), "Burstable"),  # a second container without any
        (_pod(EQUAL, init={"requests": {"cpu": "1"}}), "Burstable"),  # init containers count
    ],
)
def test_qos_class(pod: dict[str, Any], expected: str) -> None:
    assert qos_class(pod) == expected
