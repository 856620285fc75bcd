"""What a pod's status says, read the way Kubernetes' components read it (its
`podutil`): several components decide on the same facts (is it ready, has it finished,
is it being deleted), and must agree on them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
