"""autoscaling/v2 HorizontalPodAutoscalers (v1 objects are validated in their stored v2
form, after conversion, as Kubernetes validates the internal form).

The autoscaler acts on what it reads: bounds that cross (min above max), a metric with
no source, or a utilization target of zero would make it scale wildly or not at all.
"""

from __future__ import annotations

from typing import Any

from kubelab.api.errors import forbidden, invalid, not_supported, required
from kubelab.api.validation.fields import (
    Errors,
    Path,
    dicts,
    integer,
    label_selector,
    mapping,
    quantity,
    text,
)
from kubelab.api.validation.meta import name_is_path_segment

SPEC = Path("spec")
METRIC_TYPES = ["ContainerResource", "External", "Object", "Pods", "Resource"]
TARGET_TYPES = ["AverageValue", "Utilization", "Value"]
POLICY_TYPES = ["Percent", "Pods"]
SELECT_POLICIES = ["Disabled", "Max", "Min"]
_SOURCES = {
    "Object": "object",
    "Pods": "pods",
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "External": "external",
}
_MAX_WINDOW = 3600


def validate_horizontal_pod_autoscaler(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors = _cross_version_reference(
        mapping(spec.get("scaleTargetRef")), SPEC.child("scaleTargetRef")
    )
    low = integer(spec, "minReplicas", SPEC.child("minReplicas"), errors)
    high = integer(spec, "maxReplicas", SPEC.child("maxReplicas"), errors)
    if low is not None and low < 1:
        errors.append(invalid(SPEC.child("minReplicas"), low, "must be greater than or equal to 1"))
    if high is None:
        errors.append(required(SPEC.child("maxReplicas")))
    elif high < 1:
        errors.append(invalid(SPEC.child("maxReplicas"), high, "must be greater than 0"))
    elif low is not None and high < low:
        errors.append(
            invalid(
                SPEC.child("maxReplicas"), high, "must be greater than or equal to `minReplicas`"
            )
        )
    for i, metric in enumerate(dicts(spec.get("metrics"))):
        errors += _metric(metric, SPEC.child("metrics").item(i))
    behavior = mapping(spec.get("behavior"))
    for direction in ("scaleUp", "scaleDown"):
        if direction in behavior:
            errors += _rules(mapping(behavior[direction]), SPEC.child("behavior", direction))
    return errors


def _cross_version_reference(ref: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    if not text(ref.get("kind")):
        errors.append(required(path.child("kind")))
    name = text(ref.get("name"))
    if not name:
        errors.append(required(path.child("name")))
    else:
        errors += [invalid(path.child("name"), name, m) for m in name_is_path_segment(name, False)]
    return errors


def _metric(metric: dict[str, Any], path: Path) -> Errors:
    kind = metric.get("type")
    if kind not in METRIC_TYPES:
        if kind is None:
            return [required(path.child("type"), "must specify a metric source type")]
        return [not_supported(path.child("type"), kind, METRIC_TYPES)]
    errors: Errors = []
    for other, key in _SOURCES.items():
        if other != kind and key in metric:
            errors.append(forbidden(path.child(key), "must populate the given metric source only"))
    key = _SOURCES[str(kind)]
    if key not in metric:
        errors.append(
            required(path.child(key), "must populate information for the given metric source")
        )
        return errors
    source = mapping(metric[key])
    at = path.child(key)
    if kind in ("Resource", "ContainerResource") and not text(source.get("name")):
        errors.append(required(at.child("name"), "must specify a resource name"))
    if kind == "ContainerResource" and not text(source.get("container")):
        errors.append(required(at.child("container"), "must specify a container"))
    if kind in ("Object", "Pods", "External"):
        metric_id = mapping(source.get("metric"))
        if not text(metric_id.get("name")):
            errors.append(required(at.child("metric", "name"), "must specify a metric name"))
        if "selector" in metric_id:
            errors += label_selector(metric_id.get("selector"), at.child("metric", "selector"))
    if kind == "Object":
        errors += _cross_version_reference(
            mapping(source.get("describedObject")), at.child("describedObject")
        )
    errors += _target(mapping(source.get("target")), at.child("target"))
    return errors


def _target(target: dict[str, Any], path: Path) -> Errors:
    kind = target.get("type")
    if kind is None:
        return [required(path.child("type"), "must specify a metric target type")]
    if kind not in TARGET_TYPES:
        return [not_supported(path.child("type"), kind, TARGET_TYPES)]
    errors: Errors = []
    key = {"Utilization": "averageUtilization", "Value": "value", "AverageValue": "averageValue"}[
        str(kind)
    ]
    if key not in target:
        errors.append(required(path.child(key), f"must set {key} when the target type is {kind}"))
    utilization = integer(target, "averageUtilization", path.child("averageUtilization"), errors)
    if utilization is not None and utilization <= 0:
        errors.append(
            invalid(path.child("averageUtilization"), utilization, "must be greater than 0")
        )
    for amount_key in ("value", "averageValue"):
        if amount_key in target:
            amount = quantity(target[amount_key], path.child(amount_key), errors)
            if amount is not None and amount.value <= 0:
                errors.append(
                    invalid(path.child(amount_key), target[amount_key], "must be positive")
                )
    return errors


def _rules(rules: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    window = integer(
        rules, "stabilizationWindowSeconds", path.child("stabilizationWindowSeconds"), errors
    )
    if window is not None and not 0 <= window <= _MAX_WINDOW:
        errors.append(
            invalid(
                path.child("stabilizationWindowSeconds"),
                window,
                f"must be less than or equal to {_MAX_WINDOW} and not negative",
            )
        )
    select = rules.get("selectPolicy")
    if select is not None and select not in SELECT_POLICIES:
        errors.append(not_supported(path.child("selectPolicy"), select, SELECT_POLICIES))
    for i, policy in enumerate(dicts(rules.get("policies"))):
        at = path.child("policies").item(i)
        if policy.get("type") not in POLICY_TYPES:
            errors.append(not_supported(at.child("type"), policy.get("type"), POLICY_TYPES))
        for key in ("value", "periodSeconds"):
            value = integer(policy, key, at.child(key), errors)
            if value is None or value <= 0:
                errors.append(invalid(at.child(key), value, "must be greater than zero"))
    return errors
