"""Compute resources: which resource names are legal where, and requests versus limits.

Containers, LimitRanges and ResourceQuotas all name resources ("cpu", "memory",
"requests.storage", "count/deployments.apps", "example.com/gpu") and give amounts. The
name rules differ by place (a quota may count "pods", a container may not request them),
so each place asks this module with its own set of standard names.
"""

from __future__ import annotations

from typing import Any

from kubelab.api.errors import invalid, required
from kubelab.api.validation.fields import Errors, Path, label_key, mapping, resource_quantity

CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
STANDARD_RESOURCES = CONTAINER_RESOURCES | {
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
}
QUOTA_RESOURCES = STANDARD_RESOURCES - {"storage"}
# Object counts are whole numbers: a quota of "1.5" pods means nothing.
INTEGER_RESOURCES = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_native(name: str) -> bool:
    """Unprefixed names and kubernetes.io/ names belong to Kubernetes itself."""
    return "/" not in name or name.startswith("kubernetes.io/")


def overcommit_allowed(name: str) -> bool:
    """Extended resources (GPUs...) and huge pages cannot be overcommitted."""
    return is_native(name) and not is_hugepages(name)


def is_integer_resource(name: str) -> bool:
    return name in INTEGER_RESOURCES or name.startswith("count/") or not is_native(name)


def resource_name(name: str, path: Path) -> Errors:
    """validateResourceName: a qualified name, and a standard one unless prefixed."""
    errors = label_key(name, path)
    if errors:
        return errors
    standard = name in STANDARD_RESOURCES or is_hugepages(name)
    standard = standard or name.startswith("requests.hugepages-")
    if "/" not in name and not standard:
        errors.append(invalid(path, name, "must be a standard resource type or fully qualified"))
    return errors


def container_resource_name(name: str, path: Path) -> Errors:
    errors = resource_name(name, path)
    if "/" not in name and name not in CONTAINER_RESOURCES and not is_hugepages(name):
        errors.append(invalid(path, name, "must be a standard resource for containers"))
    return errors


def quota_resource_name(name: str, path: Path) -> Errors:
    errors = resource_name(name, path)
    if "/" not in name and name not in QUOTA_RESOURCES and not is_hugepages(name):
        errors.append(invalid(path, name, "must be a standard resource for quota"))
    return errors


def resource_amount(name: str, value: Any, path: Path) -> Errors:
    """ValidateResourceQuantityValue: well formed, not negative, whole for counts."""
    errors: Errors = []
    amount = resource_quantity(value, path, errors)
    if amount is not None and is_integer_resource(name) and not amount.is_integer():
        errors.append(invalid(path, str(amount), "must be an integer"))
    return errors


def resource_requirements(value: Any, path: Path) -> Errors:
    """A container's resources: valid names and amounts, and every request within its
    limit (equal to it for resources that cannot be overcommitted)."""
    resources = mapping(value)
    limits, requests = mapping(resources.get("limits")), mapping(resources.get("requests"))
    limits_path, requests_path = path.child("limits"), path.child("requests")
    errors: Errors = []
    parsed_limits = {}
    for name, amount in limits.items():
        at = limits_path.key(name)
        errors += container_resource_name(name, at)
        parsed = resource_quantity(amount, at, errors)
        if parsed is not None:
            parsed_limits[name] = parsed
    for name, amount in requests.items():
        at = requests_path.key(name)
        errors += container_resource_name(name, at)
        request = resource_quantity(amount, at, errors)
        if request is None:
            continue
        limit = parsed_limits.get(name)
        if limit is None:
            if name not in limits and not overcommit_allowed(name):
                detail = "Limit must be set for non overcommitable resources"
                errors.append(required(limits_path, detail))
        elif not overcommit_allowed(name) and request != limit:
            detail = f"must be equal to {name} limit of {limit}"
            errors.append(invalid(requests_path, str(request), detail))
        elif request > limit:
            detail = f"must be less than or equal to {name} limit of {limit}"
            errors.append(invalid(requests_path, str(request), detail))
    return errors
