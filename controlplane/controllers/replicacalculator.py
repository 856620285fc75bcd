"""The arithmetic of the HorizontalPodAutoscaler, as kube-controller-manager's podautoscaler
package does it: how many replicas one resource metric asks for (the replica
calculator), and how a proposal is held back (stabilization windows) and limited
(min/max replicas, scale rates, `behavior` policies) before it is applied.

Pure functions of their inputs (the pods, their figures, the HPA's spec, the recent
recommendations and scale events), so that every rule can be checked without a cluster;
podautoscaler.py feeds them from the caches and the metrics API.

The replica calculator (Kubernetes' GetResourceReplicas / GetRawResourceReplicas):

* pods being deleted or Failed are ignored; Pending pods count as not ready;
* for cpu, a pod is also set aside as not ready while it is young (started less than
  5 min ago) and not Ready or its figures predate its last readiness change, and when it
  has never been Ready since 30 s after its start;
* the usage ratio over the ready pods with figures decides; within the tolerance (0.1)
  of 1 nothing changes;
* pods without figures count, on a scale down, as using 100% of their request (or the
  target, when it is above 100%) and, on a scale up, as using nothing; not-ready pods
  count as using nothing on a scale up. If these assumptions turn the direction round,
  or bring the ratio within the tolerance, the replicas stay as they are.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field
from typing import Any

from kubelab.api import podutil
from kubelab.api.quantity import parse_quantity
from kubelab.api.taints import parse_time

Object = dict[str, Any]

TOLERANCE = 0.1
"""--horizontal-pod-autoscaler-tolerance: ratios this close to 1 change nothing."""
CPU_INITIALIZATION_PERIOD = datetime.timedelta(minutes=5)
INITIAL_READINESS_DELAY = datetime.timedelta(seconds=30)
DOWNSCALE_STABILIZATION = 300.0
"""--horizontal-pod-autoscaler-downscale-stabilization (seconds), for HPAs without a
`behavior` and for a `behavior` whose scaleDown leaves the window out."""
SCALE_UP_FACTOR = 2.0
SCALE_UP_MINIMUM = 4.0
"""Without a `behavior`, one step grows the replicas to at most max(2x, 4)."""


class MetricError(Exception):
    """A metric gave no replica count (no pods, no figures, a missing request)."""


@dataclass(frozen=True)
class PodFigures:
    """A pod's usage of one resource, summed over its containers, in milli-units
    (millicores, or thousandths of a byte), and when and over what window it was taken."""

    milli: int
    timestamp: datetime.datetime
    window: datetime.timedelta


@dataclass(frozen=True)
class Proposal:
    """What one metric asks for: the replicas, and the current value for the status
    (`utilization` is None for an AverageValue target)."""

    replicas: int
    utilization: int | None
    average_milli: int


def _time(text: Any) -> datetime.datetime | None:
    return parse_time(str(text)) if text else None


def group_pods(
    pods: list[Object],
    figures: dict[str, PodFigures],
    resource: str,
    now: datetime.datetime,
) -> tuple[int, set[str], set[str], set[str]]:
    """The count of ready pods with figures, and the names of the not-ready, the missing
    (no figures) and the ignored pods (module docstring)."""
    ready, unready, missing, ignored = 0, set(), set(), set()
    for pod in pods:
        name = pod["metadata"]["name"]
        status = pod.get("status") or {}
        if pod["metadata"].get("deletionTimestamp") or status.get("phase") == "Failed":
            ignored.add(name)
            continue
        if status.get("phase") == "Pending":
            unready.add(name)
            continue
        metric = figures.get(name)
        if metric is None:
            missing.add(name)
            continue
        if resource == "cpu":
            condition = podutil.condition(pod, "Ready")
            started = _time(status.get("startTime"))
            if condition is None or started is None:
                unready.add(name)
                continue
            changed = _time(condition.get("lastTransitionTime")) or started
            if started + CPU_INITIALIZATION_PERIOD > now:
                young_unready = condition.get("status") == "False"
                if young_unready or metric.timestamp < changed + metric.window:
                    unready.add(name)
                    continue
            elif condition.get("status") == "False" and started + INITIAL_READINESS_DELAY > changed:
                unready.add(name)  # never Ready yet
                continue
        ready += 1
    return ready, unready, missing, ignored


def pod_requests(pods: list[Object], resource: str) -> dict[str, int]:
    """Each pod's request of `resource` in milli-units; every container must have one."""
    requests = {}
    for pod in pods:
        total = 0
        for container in (pod.get("spec") or {}).get("containers") or []:
            request = ((container.get("resources") or {}).get("requests") or {}).get(resource)
            if request is None:
                raise MetricError(
                    f"missing request for {resource} in container {container.get('name')} "
                    f"of Pod {pod['metadata']['name']}"
                )
            total += math.ceil(parse_quantity(request).value * 1000)
        requests[pod["metadata"]["name"]] = total
    return requests


def _utilization(usage: dict[str, int], requests: dict[str, int]) -> tuple[int, int]:
    """(utilization in % of the request, average usage in milli-units) of the pods in
    `usage` (Kubernetes' GetResourceUtilizationRatio)."""
    used = sum(usage.values())
    requested = sum(requests[name] for name in usage if name in requests)
    if requested == 0:
        raise MetricError("no metrics returned matched known pods")
    return used * 100 // requested, used // len(usage)


def resource_replicas(
    current: int,
    pods: list[Object],
    figures: dict[str, PodFigures],
    resource: str,
    target: Object,
    now: datetime.datetime,
) -> Proposal:
    """The replicas a Resource metric with `target` (Utilization or AverageValue) asks for."""
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    ready, unready, missing, ignored = group_pods(pods, figures, resource, now)
    named = {p["metadata"]["name"] for p in pods}
    usage = {n: f.milli for n, f in figures.items() if n in named and n not in unready | ignored}
    if not usage:
        raise MetricError("did not receive metrics for targeted pods (pods might be unready)")
    if target.get("type") == "AverageValue":
        goal = math.ceil(parse_quantity(target["averageValue"]).value * 1000)
        requests = {}

        def ratio_of(values: dict[str, int]) -> float:
            return sum(values.values()) / len(values) / goal

        fallback = goal
    else:
        goal = int(target.get("averageUtilization") or 0)
        requests = pod_requests(pods, resource)

        def ratio_of(values: dict[str, int]) -> float:
            return _utilization(values, requests)[0] / goal

        fallback = -1  # from the request, below
    ratio = ratio_of(usage)
    utilization, average = (
        _utilization(usage, requests) if requests else (None, sum(usage.values()) // len(usage))
    )
    scale_up_with_unready = bool(unready) and ratio > 1.0
    if not scale_up_with_unready and not missing:
        if abs(1.0 - ratio) <= TOLERANCE:
            return Proposal(current, utilization, average)
        return Proposal(math.ceil(ratio * ready), utilization, average)
    for name in missing:
        if ratio < 1.0:
            usage[name] = fallback if fallback >= 0 else requests[name] * max(100, goal) // 100
        elif ratio > 1.0:
            usage[name] = 0
    if scale_up_with_unready:
        for name in unready:
            usage[name] = 0
    new_ratio = ratio_of(usage)
    if abs(1.0 - new_ratio) <= TOLERANCE or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return Proposal(current, utilization, average)
    replicas = math.ceil(new_ratio * len(usage))
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return Proposal(current, utilization, average)
    return Proposal(replicas, utilization, average)


# -- normalization ---------------------------------------------------------------------


@dataclass
class History:
    """What one HPA's past syncs leave for the next: its recommendations (time, replicas)
    and, with a `behavior`, its scale events (time, change in replicas)."""

    recommendations: list[tuple[float, int]] = field(default_factory=list)
    scale_ups: list[tuple[float, int]] = field(default_factory=list)
    scale_downs: list[tuple[float, int]] = field(default_factory=list)

    def record_scale(self, behavior: Object | None, before: int, after: int, now: float) -> None:
        """Note a rescale, for the policies' periods (kept only with a `behavior`)."""
        if not behavior:
            return
        longest = max(
            (
                int(p.get("periodSeconds") or 0)
                for d in ("scaleUp", "scaleDown")
                for p in (behavior.get(d) or {}).get("policies") or []
            ),
            default=0,
        )
        for events in (self.scale_ups, self.scale_downs):
            events[:] = [(t, c) for t, c in events if now - t <= longest]
        if after > before:
            self.scale_ups.append((now, after - before))
        elif after < before:
            self.scale_downs.append((now, before - after))


@dataclass(frozen=True)
class Normalized:
    """The replicas to apply, and the AbleToScale and ScalingLimited conditions' words
    (reason, message) on the way there."""

    replicas: int
    able_reason: str
    able_message: str
    limited: bool
    limited_reason: str
    limited_message: str


READY_FOR_NEW_SCALE = ("ReadyForNewScale", "recommended size matches current size")
DOWN_STABILIZED = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent "
    "recommendation",
)
UP_STABILIZED = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
)
WITHIN_RANGE = ("DesiredWithinRange", "the desired count is within the acceptable range")
TOO_FEW = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")
TOO_MANY = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
UP_LIMIT = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
)
DOWN_LIMIT = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
)


def _keep(history: History, window: float, now: float, desired: int) -> None:
    """Store this sync's recommendation, dropping those older than `window`."""
    history.recommendations[:] = [(t, r) for t, r in history.recommendations if now - t <= window]
    history.recommendations.append((now, desired))


def normalize(spec: Object, history: History, current: int, desired: int, now: float) -> Normalized:
    """Stabilize and limit `desired` (module docstring); records this recommendation."""
    low, high = int(spec.get("minReplicas") or 1), int(spec["maxReplicas"])
    behavior = spec.get("behavior")
    if behavior:
        return _with_behavior(behavior, history, current, desired, low, high, now)
    # No behavior: the highest recommendation of the downscale window, then min/max and
    # the max(2x, 4) step.
    window = DOWNSCALE_STABILIZATION
    recent = [r for t, r in history.recommendations if now - t <= window]
    stabilized = max([desired, *recent])
    _keep(history, window, now, desired)
    able = READY_FOR_NEW_SCALE if stabilized == desired else DOWN_STABILIZED
    step = int(max(SCALE_UP_FACTOR * current, SCALE_UP_MINIMUM))
    ceiling, limit = (step, UP_LIMIT) if high > step else (high, TOO_MANY)
    if stabilized < low:
        replicas, words = low, TOO_FEW
    elif stabilized > ceiling:
        replicas, words = ceiling, limit
    else:
        replicas, words = stabilized, WITHIN_RANGE
    return Normalized(replicas, *able, replicas != stabilized, *words)


def _with_behavior(
    behavior: Object,
    history: History,
    current: int,
    desired: int,
    low: int,
    high: int,
    now: float,
) -> Normalized:
    up = behavior.get("scaleUp") or {}
    down = behavior.get("scaleDown") or {}
    up_window = float(up.get("stabilizationWindowSeconds") or 0)
    down_window = down.get("stabilizationWindowSeconds")
    down_window = DOWNSCALE_STABILIZATION if down_window is None else float(down_window)
    # Scale up to the lowest recommendation of the up window, down to the highest of the
    # down window: a short peak or dip within a window changes nothing.
    up_to = min([desired, *(r for t, r in history.recommendations if now - t < up_window)])
    down_to = max([desired, *(r for t, r in history.recommendations if now - t < down_window)])
    stabilized = min(max(current, up_to), down_to)
    _keep(history, max(up_window, down_window), now, desired)
    if stabilized == desired:
        able = READY_FOR_NEW_SCALE
    else:
        able = UP_STABILIZED if stabilized < desired else DOWN_STABILIZED
    replicas, words = stabilized, WITHIN_RANGE
    if stabilized > current:
        ceiling = max(current, _scale_limit(current, history, up, now, growing=True))
        allowed, limit = (ceiling, UP_LIMIT) if high > ceiling else (high, TOO_MANY)
        if stabilized > allowed:
            replicas, words = allowed, limit
    elif stabilized < current:
        floor = min(current, _scale_limit(current, history, down, now, growing=False))
        allowed, limit = (floor, DOWN_LIMIT) if low < floor else (low, TOO_FEW)
        if stabilized < allowed:
            replicas, words = allowed, limit
    return Normalized(replicas, *able, replicas != stabilized, *words)


def _changed_within(events: list[tuple[float, int]], period: float, now: float) -> int:
    return sum(change for t, change in events if now - t <= period)


def _scale_limit(current: int, history: History, rules: Object, now: float, growing: bool) -> int:
    """The most replicas the scaleUp policies allow now (`growing`), or the fewest the scaleDown
    policies allow (Kubernetes' calculateScaleUpLimitWithScalingRules and
    calculateScaleDownLimitWithBehaviors): each policy counts from the replicas at the
    start of its period; selectPolicy Max takes the most permissive, Min the least."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    proposals = []
    for policy in rules.get("policies") or []:
        period = float(policy.get("periodSeconds") or 0)
        start = (
            current
            - _changed_within(history.scale_ups, period, now)
            + _changed_within(history.scale_downs, period, now)
        )
        value = int(policy.get("value") or 0)
        if policy.get("type") == "Pods":
            proposals.append(start + value if growing else start - value)
        elif growing:
            proposals.append(math.ceil(start * (1 + value / 100)))
        else:
            proposals.append(int(start * (1 - value / 100)))
    if not proposals:
        return current
    most_permissive = max(proposals) if growing else min(proposals)
    least_permissive = min(proposals) if growing else max(proposals)
    return most_permissive if select == "Max" else least_permissive
