"""Nodes and pods for the scheduler's tests, as the apiserver would hold them."""

from __future__ import annotations

import itertools
from typing import Any

_uids = itertools.count(1)


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
    images: list[tuple[str, int]] | None = None,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "images": [{"names": [n], "sizeBytes": size} for n, size in images or []],
        },
    }


def pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    *,
    namespace: str = "default",
    node_name: str = "",
    labels: dict[str, str] | None = None,
    priority: int = 0,
    **spec: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: dict[str, Any] = {"name": "c", "image": spec.pop("image", "nginx:1.21")}
    if requests:
        container["resources"] = {"requests": requests}
    if "ports" in spec:
        container["ports"] = spec.pop("ports")
    body: dict[str, Any] = {"containers": [container], "priority": priority, **spec}
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{next(_uids)}",
            "labels": labels or {},
        },
        "spec": body,
        "status": {},
    }
