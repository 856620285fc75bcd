"""What a pod's status says, read the way Kubernetes' components read it (its
`podutil`): several components decide on the same facts (is it ready, has it finished,
is it being deleted, which QoS class it is in), and must agree on them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubelab.api.quantity import parse_quantity

Obj = Mapping[str, Any]

TERMINAL_PHASES = ("Succeeded", "Failed")


def condition(obj: Obj, kind: str) -> dict[str, Any] | None:
    """The status condition of type `kind` of a pod or node, if it has one."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def pod_ready(pod: Obj) -> bool:
    """Whether the pod's Ready condition is True (its readiness probes pass)."""
    cond = condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def pod_terminal(pod: Obj) -> bool:
    """Whether the pod has finished for good (Succeeded or Failed)."""
    return pod_phase(pod) in TERMINAL_PHASES


def terminating(obj: Obj) -> bool:
    """Whether the object is being deleted (it has a deletionTimestamp)."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def pod_ip(pod: Obj) -> str:
    """The pod's (first) address, "" before it has one."""
    return str((pod.get("status") or {}).get("podIP") or "")


def qos_class(pod: Obj) -> str:
    """The pod's QoS class, which the apiserver writes into its status and by which the
    kubelet places its cgroup: Guaranteed when every container (init containers too)
    has cpu and memory limits and requests equal to them (a missing request defaults
    to the limit), BestEffort when no container has any request or limit, Burstable
    otherwise. Quantities compare by value ("1" is "1000m")."""
    spec = pod.get("spec") or {}
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    any_set, guaranteed = False, True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        if requests or limits:
            any_set = True
        for kind in ("cpu", "memory"):
            if kind not in limits or not _same(requests.get(kind, limits[kind]), limits[kind]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _same(a: Any, b: Any) -> bool:
    """Whether two quantities are equal; malformed ones (validation reports them)
    compare as written."""
    try:
        return parse_quantity(a) == parse_quantity(b)
    except ValueError:
        return str(a) == str(b)
