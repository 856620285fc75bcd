"""Conversions between API versions that share one stored object.

Events
------
Kubernetes stores one Event per key and serves it as ``v1`` Event (core, the one
``kubectl get events`` and ``kubectl describe`` read) and as ``events.k8s.io/v1`` Event
(the newer shape recorders write and ``kubectl events`` reads). The two differ in field
names only:

    core/v1                 events.k8s.io/v1
    involvedObject          regarding
    message                 note
    source                  deprecatedSource
    firstTimestamp          deprecatedFirstTimestamp
    lastTimestamp           deprecatedLastTimestamp
    count                   deprecatedCount
    reportingComponent      reportingController

Everything else (metadata, reason, type, action, related, eventTime, series,
reportingInstance) keeps its name. The store holds the core form.

HorizontalPodAutoscalers
------------------------
The store holds ``autoscaling/v2``; ``autoscaling/v1`` (what ``kubectl autoscale``
writes) knows one metric, the target CPU utilization. As in Kubernetes, what v1 cannot
express survives a v1 round trip in annotations holding the v2 JSON: the other metrics
(``autoscaling.alpha.kubernetes.io/metrics``), the scaling behavior
(``autoscaling.alpha.kubernetes.io/behavior``), the status conditions
(``autoscaling.alpha.kubernetes.io/conditions``) and current metrics
(``autoscaling.alpha.kubernetes.io/current-metrics``); converting back to v2 restores them
and drops the annotations.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

Object = dict[str, Any]
Convert = Callable[[Object], Object]

_RENAMES = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
)


def _renamed(obj: Object, pairs: tuple[tuple[str, str], ...]) -> Object:
    mapping = dict(pairs)
    return {mapping.get(k, k): v for k, v in obj.items()}


def core_event_to_events_v1(event: Object) -> Object:
    out = _renamed(event, _RENAMES)
    out["apiVersion"], out["kind"] = "events.k8s.io/v1", "Event"
    return out


def events_v1_to_core_event(event: Object) -> Object:
    out = _renamed(event, tuple((new, old) for old, new in _RENAMES))
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


_HPA_METRICS = "autoscaling.alpha.kubernetes.io/metrics"
_HPA_BEHAVIOR = "autoscaling.alpha.kubernetes.io/behavior"
_HPA_CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"
_HPA_CURRENT = "autoscaling.alpha.kubernetes.io/current-metrics"


def _is_cpu_utilization(metric: Any, target_key: str) -> bool:
    if not isinstance(metric, dict) or metric.get("type") != "Resource":
        return False
    source = metric.get("resource")
    if not isinstance(source, dict) or source.get("name") != "cpu":
        return False
    target = source.get(target_key)
    return isinstance(target, dict) and "averageUtilization" in target


def _stash(annotations: Object, key: str, value: Any) -> None:
    if value:
        annotations[key] = json.dumps(value, separators=(",", ":"))


def _unstash(annotations: Object, key: str) -> Any:
    raw = annotations.pop(key, None)
    if not isinstance(raw, str):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None  # a user's malformed annotation is dropped, as Kubernetes drops it


def hpa_v2_to_v1(hpa: Object) -> Object:
    out = copy.deepcopy(hpa)
    out["apiVersion"], out["kind"] = "autoscaling/v1", "HorizontalPodAutoscaler"
    meta = out.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    spec: Object = out["spec"] if isinstance(out.get("spec"), dict) else {}
    metrics = spec.pop("metrics", None) or []
    cpu = [m for m in metrics if _is_cpu_utilization(m, "target")]
    if cpu:
        spec["targetCPUUtilizationPercentage"] = cpu[0]["resource"]["target"]["averageUtilization"]
    _stash(annotations, _HPA_METRICS, [m for m in metrics if m not in cpu[:1]])
    _stash(annotations, _HPA_BEHAVIOR, spec.pop("behavior", None))
    status = out.get("status")
    if isinstance(status, dict):
        current = status.pop("currentMetrics", None) or []
        used = [m for m in current if _is_cpu_utilization(m, "current")]
        if used:
            utilization = used[0]["resource"]["current"]["averageUtilization"]
            status["currentCPUUtilizationPercentage"] = utilization
        _stash(annotations, _HPA_CURRENT, [m for m in current if m not in used[:1]])
        _stash(annotations, _HPA_CONDITIONS, status.pop("conditions", None))
    if annotations:
        meta["annotations"] = annotations
    return out


def _cpu_metric(utilization: Any, target_key: str) -> Object:
    return {
        "type": "Resource",
        "resource": {
            "name": "cpu",
            target_key: {"type": "Utilization", "averageUtilization": utilization}
            if target_key == "target"
            else {"averageUtilization": utilization},
        },
    }


def hpa_v1_to_v2(hpa: Object) -> Object:
    out = copy.deepcopy(hpa)
    out["apiVersion"], out["kind"] = "autoscaling/v2", "HorizontalPodAutoscaler"
    meta = out.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {}) if isinstance(meta, dict) else {}
    spec = out.get("spec")
    if isinstance(spec, dict):
        metrics: list[Any] = []
        if "targetCPUUtilizationPercentage" in spec:
            metrics.append(_cpu_metric(spec.pop("targetCPUUtilizationPercentage"), "target"))
        metrics += _unstash(annotations, _HPA_METRICS) or []
        if metrics:
            spec["metrics"] = metrics
        behavior = _unstash(annotations, _HPA_BEHAVIOR)
        if behavior:
            spec["behavior"] = behavior
    status = out.get("status")
    if isinstance(status, dict):
        current: list[Any] = []
        if "currentCPUUtilizationPercentage" in status:
            utilization = status.pop("currentCPUUtilizationPercentage")
            current.append(_cpu_metric(utilization, "current"))
        current += _unstash(annotations, _HPA_CURRENT) or []
        if current:
            status["currentMetrics"] = current
        conditions = _unstash(annotations, _HPA_CONDITIONS)
        if conditions:
            status["conditions"] = conditions
    else:
        for key in (_HPA_CURRENT, _HPA_CONDITIONS):
            annotations.pop(key, None)
    if isinstance(meta, dict):
        if annotations:
            meta["annotations"] = annotations
        else:
            meta.pop("annotations", None)
    return out


# A served form -> (stored form to served form, served form to stored form), by the
# served apiVersion and kind.
VIEWS: dict[tuple[str, str], tuple[Convert, Convert]] = {
    ("events.k8s.io/v1", "Event"): (core_event_to_events_v1, events_v1_to_core_event),
    ("autoscaling/v1", "HorizontalPodAutoscaler"): (hpa_v2_to_v1, hpa_v1_to_v2),
}
