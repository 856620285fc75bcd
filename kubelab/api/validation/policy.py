"""Namespace resource policy: LimitRanges (per-pod and per-container bounds and
defaults) and ResourceQuotas (namespace totals).

The admission steps that apply them compare quantities, so every amount must parse, and
a LimitRange's numbers must be consistent (min <= default request <= default <= max),
or every pod in the namespace would be rejected for reasons the user cannot see.
"""

from __future__ import annotations

from typing import Any

from kubelab.api.errors import duplicate, forbidden, invalid, required
from kubelab.api.quantity import Quantity
from kubelab.api.validation.compute import (
    container_resource_name,
    overcommit_allowed,
    quota_resource_name,
    resource_amount,
    resource_name,
)
from kubelab.api.validation.fields import (
    IMMUTABLE,
    Errors,
    Path,
    dicts,
    items,
    label_key,
    mapping,
    quantity,
    text,
)

SPEC = Path("spec")
LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")
QUOTA_SCOPES = (
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
)
_BOUNDS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")


def validate_limit_range(obj: dict[str, Any]) -> Errors:
    errors: Errors = []
    seen: set[str] = set()
    for i, limit in enumerate(dicts(mapping(obj.get("spec")).get("limits"))):
        at = SPEC.child("limits").item(i)
        kind = text(limit.get("type"))
        errors += label_key(kind, at.child("type"))
        if "/" not in kind and kind not in LIMIT_TYPES:
            errors.append(
                invalid(at.child("type"), kind, "must be a standard limit type or fully qualified")
            )
        if kind in seen:
            errors.append(duplicate(at.child("type"), kind))
        seen.add(kind)
        errors += _limit_item(limit, kind, at)
    return errors


def _limit_item(limit: dict[str, Any], kind: str, path: Path) -> Errors:
    errors: Errors = []
    name_check = container_resource_name if kind in ("Pod", "Container") else resource_name
    bounds: dict[str, dict[str, Quantity]] = {}
    for bound in _BOUNDS:
        if kind == "Pod" and bound in ("default", "defaultRequest") and mapping(limit.get(bound)):
            errors.append(forbidden(path.child(bound), "may not be specified when `type` is 'Pod'"))
            continue
        parsed = bounds.setdefault(bound, {})
        for name, amount in mapping(limit.get(bound)).items():
            at = path.child(bound).key(name)
            errors += name_check(name, at)
            value = quantity(amount, at, errors)
            if value is not None:
                parsed[name] = value
    if kind == "PersistentVolumeClaim" and not {"storage"} & (
        set(bounds["min"]) | set(bounds["max"])
    ):
        detail = "either minimum or maximum storage value is required, but neither was provided"
        errors.append(required(path.child("limits"), detail))
    for name in sorted(set().union(*bounds.values())):
        errors += _consistent(name, {bound: bounds[bound].get(name) for bound in _BOUNDS}, path)
    return errors


def _consistent(name: str, q: dict[str, Quantity | None], path: Path) -> Errors:
    """min <= defaultRequest <= default <= max, and a ratio of at least 1."""
    low, high, default, request, ratio = (
        q["min"],
        q["max"],
        q["default"],
        q["defaultRequest"],
        q["maxLimitRequestRatio"],
    )
    errors: Errors = []
    if low is not None and high is not None and low > high:
        errors.append(
            invalid(
                path.child("min").key(name),
                str(low),
                f"min value {low} is greater than max value {high}",
            )
        )
    if request is not None and low is not None and low > request:
        detail = f"min value {low} is greater than default request value {request}"
        errors.append(invalid(path.child("defaultRequest").key(name), str(request), detail))
    if request is not None and high is not None and request > high:
        detail = f"default request value {request} is greater than max value {high}"
        errors.append(invalid(path.child("defaultRequest").key(name), str(request), detail))
    if request is not None and default is not None and request > default:
        detail = f"default request value {request} is greater than default limit value {default}"
        errors.append(invalid(path.child("defaultRequest").key(name), str(request), detail))
    if default is not None and low is not None and low > default:
        detail = f"min value {low} is greater than default value {default}"
        errors.append(invalid(path.child("default").key(name), str(low), detail))
    if default is not None and high is not None and default > high:
        detail = f"default value {default} is greater than max value {high}"
        errors.append(invalid(path.child("default").key(name), str(high), detail))
    if ratio is not None and ratio.value < 1:
        errors.append(
            invalid(
                path.child("maxLimitRequestRatio").key(name),
                str(ratio),
                f"ratio {ratio} is less than 1",
            )
        )
    if (
        not overcommit_allowed(name)
        and default is not None
        and request is not None
        and default != request
    ):
        detail = f"default value {default} must equal to defaultRequest value {request} in {name}"
        errors.append(invalid(path.child("defaultRequest").key(name), str(request), detail))
    return errors


def validate_resource_quota(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors: Errors = []
    for name, amount in mapping(spec.get("hard")).items():
        at = SPEC.child("hard").key(name)
        errors += quota_resource_name(name, at) + resource_amount(name, amount, at)
    for field in ("hard", "used"):
        for name, amount in mapping(mapping(obj.get("status")).get(field)).items():
            at = Path("status").child(field).key(name)
            errors += quota_resource_name(name, at) + resource_amount(name, amount, at)
    scopes = items(spec.get("scopes"))
    for scope in scopes:
        if scope not in QUOTA_SCOPES:
            errors.append(invalid(SPEC.child("scopes"), scopes, "unsupported scope"))
    for pair in (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")):
        if set(pair) <= set(scopes):
            errors.append(invalid(SPEC.child("scopes"), scopes, "conflicting scopes"))
    return errors


def validate_resource_quota_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    new_scopes = items(mapping(new.get("spec")).get("scopes"))
    if set(new_scopes) != set(items(mapping(old.get("spec")).get("scopes"))):
        return [invalid(SPEC.child("scopes"), new_scopes, IMMUTABLE)]
    return []
