"""The HorizontalPodAutoscaler controller (kube-controller-manager's
horizontal-pod-autoscaler-controller): scales a Deployment, ReplicaSet or StatefulSet
(anything with a scale subresource) so that its pods' cpu or memory usage meets the
HPA's targets.

Every `--horizontal-pod-autoscaler-sync-period` (15 s), and at once when an HPA's spec
changes, each HPA is reconciled:

1. the target's scale subresource gives its replicas and its pods' selector (failing:
   AbleToScale False FailedGetScale);
2. below minReplicas or above maxReplicas, the replicas are set to the bound; with 0
   replicas (and minReplicas above 0) autoscaling is off (ScalingActive False
   ScalingDisabled);
3. otherwise each Resource metric proposes replicas from the pods' figures in
   metrics.k8s.io (replicacalculator.py: Utilization of the pods' requests or an
   AverageValue, the 0.1 tolerance, missing figures and pods not ready as Kubernetes
   counts them); the highest proposal wins (ScalingActive True ValidMetricFound). If
   every metric failed, or some failed and the others would scale down, nothing changes
   (ScalingActive False, Events FailedGetResourceMetric and FailedComputeMetricsReplicas);
4. the proposal is stabilized and limited (replicacalculator.normalize: the 300 s
   downscale window, `behavior`'s windows and policies, min/max; AbleToScale's and
   ScalingLimited's reasons tell which rule held it);
5. a changed count is written to the scale subresource, with the Event SuccessfulRescale
   ("New size: 3; reason: cpu resource utilization (percentage of request) above target")
   and lastScaleTime; the status (currentReplicas, desiredReplicas, currentMetrics,
   conditions) is written when it changed.

The figures come through `MetricsSource`: `MetricsAPI` asks the apiserver's metrics.k8s.io
(the figures its scraper keeps, controlplane/apiserver/metricscache.py); tests give their
own. Recommendations and scale events live in this process only, as in Kubernetes: a new
leader starts with empty windows.
"""

from __future__ import annotations

import copy
import datetime
import logging
import threading
from fractions import Fraction
from typing import Any, Protocol

from kubelab.api.errors import StatusError
from kubelab.api.quantity import Quantity, parse_quantity
from kubelab.api.resources import Resource
from kubelab.api.selectors import parse_label_selector
from kubelab.api.taints import parse_time
from kubelab.client import (
    NAMESPACE_INDEX,
    REAL_CLOCK,
    Clock,
    DeletedFinalStateUnknown,
    Object,
    RestClient,
    WorkQueue,
    namespace_index,
    object_key,
    resource_for,
    rfc3339,
)
from kubelab.client.record import NORMAL, WARNING, EventRecorder
from kubelab.flags import duration

from . import replicacalculator as calc
from .base import ControllerContext, SyncResult, Workers, add_index, controller_logger

NAME = "horizontal-pod-autoscaler-controller"

HPAS = resource_for("autoscaling/v2", "HorizontalPodAutoscaler")
PODS = resource_for("v1", "Pod")
SYNC_PERIOD = 15.0
"""--horizontal-pod-autoscaler-sync-period (seconds)."""

log = controller_logger(NAME)


class MetricsSource(Protocol):
    """Where the pods' figures come from: `resource`'s usage of the pods that
    `selector` selects in `namespace`, by pod name."""

    def pod_figures(
        self, namespace: str, selector: str, resource: str
    ) -> dict[str, calc.PodFigures]: ...


class MetricsAPI:
    """The pods' figures from metrics.k8s.io (as the HPA controller's resource metrics
    client asks them)."""

    def __init__(self, client: RestClient) -> None:
        self._client = client

    def pod_figures(
        self, namespace: str, selector: str, resource: str
    ) -> dict[str, calc.PodFigures]:
        try:
            answer = self._client.request(
                "GET",
                f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods",
                params={"labelSelector": selector},
            )
        except StatusError as exc:
            raise calc.MetricError(
                f"unable to get metrics for resource {resource}: unable to fetch metrics "
                f"from resource metrics API: {exc}"
            ) from None
        figures = {}
        for item in answer.get("items") or []:
            containers = item.get("containers") or []
            if not containers:
                continue
            total = sum(
                parse_quantity((c.get("usage") or {}).get(resource, "0")).value for c in containers
            )
            figures[item["metadata"]["name"]] = calc.PodFigures(
                milli=int(total * 1000),
                timestamp=_time(item.get("timestamp")),
                window=datetime.timedelta(
                    seconds=duration(item["window"]) if item.get("window") else 0
                ),
            )
        if not figures:
            raise calc.MetricError(
                f"unable to get metrics for resource {resource}: no metrics returned from "
                "resource metrics API"
            )
        return figures


def _time(text: Any) -> datetime.datetime:
    return parse_time(str(text)) if text else datetime.datetime.now(datetime.UTC)


def _milli_quantity(milli: int) -> str:
    return str(Quantity(Fraction(milli, 1000)))


def _metric_name(resource: str, target: Object) -> str:
    """How Events and conditions name a resource metric."""
    if target.get("type") == "AverageValue":
        return f"{resource} resource"
    return f"{resource} resource utilization (percentage of request)"


def _set_condition(
    conditions: list[Object], kind: str, status: str, reason: str, message: str, now: str
) -> None:
    """Set a condition in place, keeping its transition time when its status holds."""
    for condition in conditions:
        if condition.get("type") == kind:
            if condition.get("status") != status:
                condition["lastTransitionTime"] = now
            condition.update(status=status, reason=reason, message=message)
            return
    conditions.append(
        {
            "type": kind,
            "status": status,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }
    )


class _Failed(Exception):
    """A reconcile that ends early: the Event's reason and the message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class HorizontalPodAutoscalerController:
    """The controller of the module docstring, keyed by HPA "namespace/name"."""

    name = NAME

    def __init__(
        self,
        ctx: ControllerContext,
        clock: Clock = REAL_CLOCK,
        metrics: MetricsSource | None = None,
    ) -> None:
        self._tracer = ctx.tracer
        self._clock = clock
        self._client: RestClient = ctx.client_for(NAME)
        self._events = EventRecorder(self._client, "horizontal-pod-autoscaler", clock=clock)
        self._metrics: MetricsSource = metrics or MetricsAPI(self._client)
        self._period: float = getattr(
            ctx.args, "horizontal_pod_autoscaler_sync_period", SYNC_PERIOD
        )
        self._history: dict[str, calc.History] = {}
        self._lock = threading.Lock()
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._hpas = ctx.informers.informer(HPAS)
        self._pods = ctx.informers.informer(PODS)
        add_index(self._pods, NAMESPACE_INDEX, namespace_index)
        self._hpas.add_event_handler(
            on_add=self._added, on_update=self._updated, on_delete=self._deleted
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._hpas).run(
                workers, stop
            )

    def _added(self, hpa: Object) -> None:
        self.queue.add(object_key(hpa))

    def _updated(self, old: Object, new: Object) -> None:
        # Only a new spec is news: the status is this controller's own write, and the
        # figures move on the sync period, not on updates.
        if old["metadata"].get("generation") != new["metadata"].get("generation"):
            self.queue.add(object_key(new))

    def _deleted(self, hpa: Object | DeletedFinalStateUnknown) -> None:
        last = hpa.obj if isinstance(hpa, DeletedFinalStateUnknown) else hpa
        with self._lock:
            self._history.pop(object_key(last), None)

    def _history_of(self, key: str) -> calc.History:
        with self._lock:
            return self._history.setdefault(key, calc.History())

    def sync(self, key: str) -> SyncResult:
        cached = self._hpas.indexer.get(key)
        if cached is None:
            return None
        hpa = copy.deepcopy(cached)
        hpa.setdefault("apiVersion", HPAS.api_version)
        hpa.setdefault("kind", HPAS.kind)
        status = copy.deepcopy(hpa.get("status") or {})
        conditions: list[Object] = status.get("conditions") or []
        try:
            self._reconcile(key, hpa, status, conditions)
        except _Failed as failed:
            self._events.event(hpa, WARNING, failed.reason, str(failed))
            log.info("hpa %s (uid %s): %s", key, hpa["metadata"].get("uid"), failed)
        status["conditions"] = conditions
        self._write_status(hpa, status)
        return self._period

    def _reconcile(self, key: str, hpa: Object, status: Object, conditions: list[Object]) -> None:
        now = self._clock.utcnow()
        stamp = rfc3339(now)
        spec = hpa["spec"]
        namespace = hpa["metadata"]["namespace"]
        status["observedGeneration"] = hpa["metadata"].get("generation")
        ref = spec.get("scaleTargetRef") or {}
        try:
            target = resource_for(ref.get("apiVersion", ""), ref.get("kind", ""))
            scale = self._client.request("GET", target.path(namespace, ref["name"]) + "/scale")
        except (StatusError, KeyError, ValueError) as exc:
            message = f"the HPA controller was unable to get the target's current scale: {exc}"
            _set_condition(conditions, "AbleToScale", "False", "FailedGetScale", message, stamp)
            raise _Failed("FailedGetScale", str(exc)) from None
        _set_condition(
            conditions,
            "AbleToScale",
            "True",
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
            stamp,
        )
        current = int((scale.get("spec") or {}).get("replicas") or 0)
        status["currentReplicas"] = int((scale.get("status") or {}).get("replicas") or 0)
        low, high = int(spec.get("minReplicas") or 1), int(spec["maxReplicas"])
        reason = ""
        if current == 0 and low != 0:
            desired = 0
            _set_condition(
                conditions,
                "ScalingActive",
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
                stamp,
            )
        elif current > high:
            desired, reason = high, "Current number of replicas above Spec.MaxReplicas"
        elif current < low:
            desired, reason = low, "Current number of replicas below Spec.MinReplicas"
        else:
            proposed, metric, statuses = self._replicas_for_metrics(
                hpa, scale, current, conditions, stamp, now
            )
            status["currentMetrics"] = statuses or None
            if proposed > current:
                reason = f"{metric} above target"
            elif proposed < current:
                reason = "All metrics below target"
            normalized = calc.normalize(
                spec, self._history_of(key), current, proposed, self._clock.now()
            )
            desired = normalized.replicas
            _set_condition(
                conditions,
                "AbleToScale",
                "True",
                normalized.able_reason,
                normalized.able_message,
                stamp,
            )
            _set_condition(
                conditions,
                "ScalingLimited",
                "True" if normalized.limited else "False",
                normalized.limited_reason,
                normalized.limited_message,
                stamp,
            )
        status["desiredReplicas"] = desired
        if desired == current:
            return
        self._rescale(key, hpa, target, scale, desired, reason, conditions, stamp)
        self._history_of(key).record_scale(
            spec.get("behavior"), current, desired, self._clock.now()
        )
        status["lastScaleTime"] = stamp

    def _replicas_for_metrics(
        self,
        hpa: Object,
        scale: Object,
        current: int,
        conditions: list[Object],
        stamp: str,
        now: datetime.datetime,
    ) -> tuple[int, str, list[Object]]:
        """The highest proposal of the HPA's metrics, the metric that made it, and the
        metrics' statuses (Kubernetes' computeReplicasForMetrics)."""
        namespace = hpa["metadata"]["namespace"]
        selector_text = str((scale.get("status") or {}).get("selector") or "")
        if not selector_text:
            message = "the HPA target's scale is missing a selector"
            _set_condition(conditions, "ScalingActive", "False", "InvalidSelector", message, stamp)
            raise _Failed("SelectorRequired", message)
        try:
            selector = parse_label_selector(selector_text)
        except StatusError as exc:
            message = f"couldn't convert selector into a corresponding internal selector: {exc}"
            _set_condition(conditions, "ScalingActive", "False", "InvalidSelector", message, stamp)
            raise _Failed("InvalidSelector", message) from None
        pods = [
            p
            for p in self._pods.indexer.by_index(NAMESPACE_INDEX, namespace)
            if selector.matches(p["metadata"].get("labels") or {})
        ]
        metrics = hpa["spec"].get("metrics") or []
        best, best_name, statuses, errors = 0, "", [], []
        for metric in metrics:
            try:
                proposal, name, metric_status = self._resource_metric(
                    metric, namespace, selector_text, current, pods, now
                )
            except calc.MetricError as exc:
                errors.append(str(exc))
                reason = (
                    "FailedGetResourceMetric"
                    if metric.get("type") == "Resource"
                    else "InvalidMetricSourceType"
                )
                self._events.event(hpa, WARNING, reason, str(exc))
                _set_condition(
                    conditions,
                    "ScalingActive",
                    "False",
                    reason,
                    f"the HPA was unable to compute the replica count: {exc}",
                    stamp,
                )
                continue
            statuses.append(metric_status)
            if proposal > best or not best_name:
                best, best_name = proposal, name
        if errors and (len(errors) == len(metrics) or best < current):
            raise _Failed(
                "FailedComputeMetricsReplicas",
                f"invalid metrics ({len(errors)} invalid out of {len(metrics)}), first error "
                f"is: {errors[0]}",
            )
        if not metrics:
            raise _Failed("FailedComputeMetricsReplicas", "the HPA has no metrics")
        _set_condition(
            conditions,
            "ScalingActive",
            "True",
            "ValidMetricFound",
            f"the HPA was able to successfully calculate a replica count from {best_name}",
            stamp,
        )
        return best, best_name, statuses

    def _resource_metric(
        self,
        metric: Object,
        namespace: str,
        selector: str,
        current: int,
        pods: list[Object],
        now: datetime.datetime,
    ) -> tuple[int, str, Object]:
        if metric.get("type") != "Resource":
            raise calc.MetricError(
                f"unsupported metric source type {metric.get('type')!r}: kubelab's "
                "metrics.k8s.io serves Resource metrics (cpu, memory) only"
            )
        source = metric.get("resource") or {}
        resource, target = str(source.get("name")), source.get("target") or {}
        try:
            figures = self._metrics.pod_figures(namespace, selector, resource)
            proposal = calc.resource_replicas(current, pods, figures, resource, target, now)
        except calc.MetricError as exc:
            what = "utilization" if target.get("type") == "Utilization" else "usage"
            raise calc.MetricError(
                f"failed to get {resource} resource metric value: failed to get {resource} "
                f"{what}: {exc}"
            ) from None
        current_value: Object = {"averageValue": _milli_quantity(proposal.average_milli)}
        if proposal.utilization is not None:
            current_value["averageUtilization"] = proposal.utilization
        metric_status = {
            "type": "Resource",
            "resource": {"name": resource, "current": current_value},
        }
        return proposal.replicas, _metric_name(resource, target), metric_status

    def _rescale(
        self,
        key: str,
        hpa: Object,
        target: Resource,
        scale: Object,
        desired: int,
        reason: str,
        conditions: list[Object],
        stamp: str,
    ) -> None:
        ref = hpa["spec"]["scaleTargetRef"]
        namespace = hpa["metadata"]["namespace"]
        before = int(scale["spec"].get("replicas") or 0)
        scale = copy.deepcopy(scale)
        scale["spec"]["replicas"] = desired
        try:
            self._client.request("PUT", target.path(namespace, ref["name"]) + "/scale", body=scale)
        except StatusError as exc:
            message = f"the HPA controller was unable to update the target scale: {exc}"
            _set_condition(conditions, "AbleToScale", "False", "FailedUpdateScale", message, stamp)
            raise _Failed(
                "FailedRescale", f"New size: {desired}; reason: {reason}; error: {exc}"
            ) from None
        _set_condition(
            conditions,
            "AbleToScale",
            "True",
            "SucceededRescale",
            f"the HPA controller was able to update the target scale to {desired}",
            stamp,
        )
        self._events.event(
            hpa, NORMAL, "SuccessfulRescale", f"New size: {desired}; reason: {reason}"
        )
        log.info(
            "hpa %s (uid %s, resourceVersion %s): scaled %s %s from %d to %d replicas: %s",
            key,
            hpa["metadata"].get("uid"),
            hpa["metadata"].get("resourceVersion"),
            ref.get("kind"),
            ref.get("name"),
            before,
            desired,
            reason,
        )

    def _write_status(self, hpa: Object, status: Object) -> None:
        status = {k: v for k, v in status.items() if v is not None}
        if status == (hpa.get("status") or {}):
            return
        updated = copy.deepcopy(hpa)
        updated["status"] = status
        self._client.update_status(HPAS, updated)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "hpa %s/%s (uid %s): status %s",
                hpa["metadata"]["namespace"],
                hpa["metadata"]["name"],
                hpa["metadata"].get("uid"),
                status,
            )
