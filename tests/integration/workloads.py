"""Helpers of the workload controllers' tests: there is no scheduler and no kubelet in
them, so the tests play both (`bind`, `set_ready`) through the real apiserver."""

from __future__ import annotations

import datetime
from typing import Any

from tests.integration.controlplane_fixture import Lab


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pods(lab: Lab, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    """The pods of `namespace` (matching the label `selector`), not being deleted."""
    params = {"labelSelector": selector} if selector else {}
    r = lab.api("GET", f"/api/v1/namespaces/{namespace}/pods", params=params)
    assert r.status_code == 200, r.text
    return [p for p in r.json()["items"] if not p["metadata"].get("deletionTimestamp")]


def bind(lab: Lab, namespace: str, name: str, node: str) -> None:
    """What the scheduler does: bind the pod to `node`."""
    r = lab.api(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
        json={
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )
    assert r.status_code == 201, r.text


def set_ready(lab: Lab, namespace: str, name: str, ready: bool = True) -> bool:
    """What the kubelet does: report the pod Running and Ready (or not ready). False if
    the pod is gone or changed under us."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    r = lab.api("GET", path)
    if r.status_code != 200:
        return False
    pod = r.json()
    status = "True" if ready else "False"
    pod["status"] = {
        **pod.get("status", {}),
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
            {"type": "Ready", "status": status, "lastTransitionTime": now()},
            {"type": "ContainersReady", "status": status, "lastTransitionTime": now()},
        ],
    }
    return lab.api("PUT", path + "/status", json=pod).status_code == 200


def delete_pod_now(lab: Lab, namespace: str, name: str) -> None:
    """Delete a pod at once (grace 0), as a kubelet would confirm it."""
    lab.api(
        "DELETE",
        f"/api/v1/namespaces/{namespace}/pods/{name}",
        json={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
    )


def get(lab: Lab, path: str) -> dict[str, Any]:
    r = lab.api("GET", path)
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found
