"""What objects count against a ResourceQuota, shared by the apiserver's ResourceQuota
admission (which charges a create to the quota) and the controller-manager's
resourcequota-controller (which recounts what a namespace uses).

A quota's `hard` names what it limits: object counts (`count/pods`, `count/<resource>.
<group>` such as `count/deployments.apps`, and for the core kinds of `CORE_COUNTED`
their plain name, `pods: 10`), and for pods the sum of their containers' requests and
limits (`requests.cpu`, `limits.memory`, and `cpu`/`memory` meaning the requests).
Pods that have finished (Succeeded or Failed) no longer count, as in Kubernetes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from kubelab.api.quantity import Quantity, parse_quantity
from kubelab.api.resources import Resource

CORE_COUNTED = (
    "pods",
    "services",
    "configmaps",
    "secrets",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "resourcequotas",
)
"""Core kinds a quota can also count by their plain name (``pods: 10``)."""

Usage = dict[str, Fraction]


def quantity(value: Any) -> Fraction:
    """A quantity's exact value; a malformed one (validation reports it) counts as 0."""
    try:
        return parse_quantity(value).value
    except ValueError:
        return Fraction(0)


def fmt(value: Fraction) -> str:
    """A value as a quota's status writes it ("2", "500m", "1Gi")."""
    return str(Quantity(value))


def count_key(r: Resource) -> str:
    """`count/pods` for core resources, `count/deployments.apps` for the others."""
    return f"count/{r.plural}.{r.group}" if r.group else f"count/{r.plural}"


def counts(r: Resource, obj: Mapping[str, Any]) -> bool:
    """Whether `obj` counts against quotas at all (a finished pod does not)."""
    if r.plural == "pods" and not r.group:
        return (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    return True


def usage(r: Resource, obj: Mapping[str, Any]) -> Usage:
    """What one object counts against a quota."""
    out = {count_key(r): Fraction(1)}
    if r.plural in CORE_COUNTED and not r.group:
        out[r.plural] = Fraction(1)
    if r.plural == "pods" and not r.group:
        for c in (obj.get("spec") or {}).get("containers") or []:
            res = c.get("resources") or {}
            for field in ("requests", "limits"):
                for name, value in (res.get(field) or {}).items():
                    key = f"{field}.{name}"
                    out[key] = out.get(key, Fraction(0)) + quantity(value)
                    if field == "requests":
                        out[name] = out.get(name, Fraction(0)) + quantity(value)
    return out


def total(r: Resource, objects: Iterable[Mapping[str, Any]]) -> Usage:
    """What the counted `objects` of `r` use together."""
    out: Usage = {}
    for obj in objects:
        if counts(r, obj):
            for k, v in usage(r, obj).items():
                out[k] = out.get(k, Fraction(0)) + v
    return out


def resource_of_key(key: str) -> tuple[str, str] | None:
    """(group, plural) of the objects a `hard` key counts; None for the compute keys
    (requests.*, limits.*, cpu, memory), which are the pods'."""
    if key.startswith("count/"):
        plural, _, group = key[len("count/") :].partition(".")
        return group, plural
    if key in CORE_COUNTED:
        return "", key
    return None
