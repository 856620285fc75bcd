"""The HorizontalPodAutoscaler controller against the real apiserver, with the pods'
figures given by a stand-in for metrics.k8s.io: scaling a Deployment up through its scale
subresource (Event, status, conditions, `kubectl get hpa`'s TARGETS), min/max bounds, the
downscale stabilization window, and missing figures reported as Kubernetes reports them.
The replica calculator's and the behaviors' arithmetic is checked on its own below."""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest

from controlplane.controllers import replicacalculator as calc
from controlplane.controllers.podautoscaler import HorizontalPodAutoscalerController
from kubelab.client import resource_for
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import Cluster, Harness, new_object

DEPLOYMENTS = resource_for("apps/v1", "Deployment")
HPAS = resource_for("autoscaling/v2", "HorizontalPodAutoscaler")
PODS = resource_for("v1", "Pod")
EVENTS = resource_for("v1", "Event")

CPU_UTILIZATION = "cpu resource utilization (percentage of request)"
NOW = datetime.datetime.now(datetime.UTC)
LONG_AGO = NOW - datetime.timedelta(minutes=10)


class Figures:
    """The stand-in metrics source: millicores by pod name, changed by the test."""

    def __init__(self) -> None:
        self.milli: dict[str, int] = {}
        self.lock = threading.Lock()

    def pod_figures(
        self, namespace: str, selector: str, resource: str
    ) -> dict[str, calc.PodFigures]:
        with self.lock:
            if not self.milli:
                raise calc.MetricError(
                    f"unable to get metrics for resource {resource}: no metrics returned "
                    "from resource metrics API"
                )
            return {
                name: calc.PodFigures(m, datetime.datetime.now(datetime.UTC), _WINDOW)
                for name, m in self.milli.items()
            }


_WINDOW = datetime.timedelta(seconds=10)


def pod_object(name: str, request: str = "100m", **status: Any) -> dict[str, Any]:
    """A running, long-Ready pod of the Deployment "web" (unless `status` says else)."""
    stamp = LONG_AGO.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
        "spec": {
            "containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": request}}}
            ]
        },
        "status": {
            "phase": "Running",
            "startTime": stamp,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": stamp}],
            **status,
        },
    }


def running_pod(cluster: Cluster, name: str) -> None:
    body = pod_object(name)
    status = body.pop("status")
    created = cluster.create(PODS, {"apiVersion": "v1", "kind": "Pod", **body}, "ns")
    created["status"] = status
    cluster.admin.update_status(PODS, created)


def deployment(cluster: Cluster, replicas: int) -> None:
    new_object(cluster, DEPLOYMENTS, "web", spec={"replicas": replicas})


def hpa(cluster: Cluster, low: int = 1, high: int = 5, **spec: Any) -> None:
    body = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": low,
            "maxReplicas": high,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 50},
                    },
                }
            ],
            **spec,
        },
    }
    cluster.create(HPAS, body, "ns")


def start(harness: Harness, figures: Figures) -> HorizontalPodAutoscalerController:
    controller = HorizontalPodAutoscalerController(harness.ctx, metrics=figures)
    harness.run(controller)
    return controller


def replicas(cluster: Cluster) -> int:
    return int(cluster.get(DEPLOYMENTS, "ns", "web")["spec"]["replicas"])


def conditions(cluster: Cluster) -> dict[str, tuple[str, str]]:
    status = cluster.get(HPAS, "ns", "web").get("status") or {}
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or []}


def events(cluster: Cluster) -> list[tuple[str, str]]:
    items = cluster.admin.list(EVENTS, "ns")["items"]
    return [(e["reason"], e["message"]) for e in items]


def test_a_busy_deployment_is_scaled_up_through_its_scale_subresource(
    cluster: Cluster, harness: Harness
) -> None:
    deployment(cluster, 1)
    running_pod(cluster, "web-a")
    figures = Figures()
    figures.milli = {"web-a": 90}  # 90% of the 100m request, against a 50% target
    hpa(cluster)
    start(harness, figures)
    eventually(lambda: replicas(cluster) == 2)
    eventually(
        lambda: (
            ("SuccessfulRescale", f"New size: 2; reason: {CPU_UTILIZATION} above target")
            in events(cluster)
        )
    )
    status = cluster.get(HPAS, "ns", "web")["status"]
    assert status["desiredReplicas"] == 2 and status["lastScaleTime"]
    assert status["currentMetrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "current": {"averageUtilization": 90, "averageValue": "90m"},
            },
        }
    ]
    assert conditions(cluster) == {
        "AbleToScale": ("True", "SucceededRescale"),
        "ScalingActive": ("True", "ValidMetricFound"),
        "ScalingLimited": ("False", "DesiredWithinRange"),
    }
    table = cluster.admin.request(
        "GET",
        "/apis/autoscaling/v2/namespaces/ns/horizontalpodautoscalers",
        accept="application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    row = table["rows"][0]["cells"]
    assert "cpu: 90%/50%" in row


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet"])
def test_replicas_outside_the_bounds_are_brought_within(
    cluster: Cluster, harness: Harness, kind: str
) -> None:
    """Through the scale subresource of each kind of target."""
    resource = resource_for("apps/v1", kind)
    spec: dict[str, Any] = {"replicas": 7}
    if kind == "StatefulSet":
        labels = {"app": "web"}
        spec |= {
            "selector": {"matchLabels": labels},
            "serviceName": "web",
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        }
    new_object(cluster, resource, "web", spec=spec)
    hpa(
        cluster,
        low=2,
        high=4,
        scaleTargetRef={"apiVersion": "apps/v1", "kind": kind, "name": "web"},
    )
    start(harness, Figures())
    eventually(lambda: cluster.get(resource, "ns", "web")["spec"]["replicas"] == 4)
    eventually(
        lambda: (
            (
                "SuccessfulRescale",
                "New size: 4; reason: Current number of replicas above Spec.MaxReplicas",
            )
            in events(cluster)
        )
    )


def test_missing_figures_are_reported_and_change_nothing(
    cluster: Cluster, harness: Harness
) -> None:
    deployment(cluster, 1)
    running_pod(cluster, "web-a")
    hpa(cluster)
    start(harness, Figures())
    eventually(
        lambda: conditions(cluster).get("ScalingActive") == ("False", "FailedGetResourceMetric")
    )
    eventually(
        lambda: (
            {"FailedGetResourceMetric", "FailedComputeMetricsReplicas"}
            <= {reason for reason, _ in events(cluster)}
        )
    )
    assert replicas(cluster) == 1


# -- the arithmetic ------------------------------------------------------------------


def _figures(**milli: int) -> dict[str, calc.PodFigures]:
    return {n: calc.PodFigures(m, NOW, _WINDOW) for n, m in milli.items()}


UTILIZATION_50 = {"type": "Utilization", "averageUtilization": 50}


@pytest.mark.parametrize(
    ("pods", "figures", "expected"),
    [
        # 100% of the request against 50%: twice the pods.
        ([pod_object("a"), pod_object("b")], _figures(a=100, b=100), 4),
        # 54% is within the 0.1 tolerance of 50%: no change.
        ([pod_object("a"), pod_object("b")], _figures(a=54, b=54), 2),
        # 10%: down to ceil(0.2 * 2) = 1.
        ([pod_object("a"), pod_object("b")], _figures(a=10, b=10), 1),
        # Scaling down with a pod missing figures: it counts as using 100%, so the ratio
        # (10 + 100) / 200 = 55% is within the tolerance.
        ([pod_object("a"), pod_object("b")], _figures(a=10), 2),
        # Scaling up with a pod that is not ready: it counts as using nothing.
        ([pod_object("a"), pod_object("b", phase="Pending")], _figures(a=200), 4),
    ],
)
def test_the_replica_calculator(pods: list[Any], figures: Any, expected: int) -> None:
    proposal = calc.resource_replicas(2, pods, figures, "cpu", UTILIZATION_50, NOW)
    assert proposal.replicas == expected


def test_an_average_value_target() -> None:
    pods = [pod_object("a"), pod_object("b")]
    target = {"type": "AverageValue", "averageValue": "100m"}
    proposal = calc.resource_replicas(2, pods, _figures(a=300, b=300), "cpu", target, NOW)
    assert (proposal.replicas, proposal.utilization, proposal.average_milli) == (6, None, 300)


def test_a_missing_request_is_an_error() -> None:
    pod = pod_object("a")
    del pod["spec"]["containers"][0]["resources"]
    with pytest.raises(calc.MetricError, match="missing request for cpu in container c of Pod a"):
        calc.resource_replicas(1, [pod], _figures(a=10), "cpu", UTILIZATION_50, NOW)


def test_without_behavior_scale_down_waits_for_the_300s_window() -> None:
    spec = {"minReplicas": 1, "maxReplicas": 10}
    history = calc.History()
    assert calc.normalize(spec, history, 5, 5, now=0.0).replicas == 5
    held = calc.normalize(spec, history, 5, 2, now=100.0)
    assert (held.replicas, held.able_reason) == (5, "ScaleDownStabilized")
    assert calc.normalize(spec, history, 5, 2, now=401.0).replicas == 2
    # A step up is at most max(2x, 4).
    limited = calc.normalize(spec, calc.History(), 1, 9, now=0.0)
    assert (limited.replicas, limited.limited, limited.limited_reason) == (4, True, "ScaleUpLimit")


def test_behavior_policies_limit_the_rate() -> None:
    behavior = {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Min",
            "policies": [
                {"type": "Percent", "value": 50, "periodSeconds": 60},
                {"type": "Pods", "value": 1, "periodSeconds": 60},
            ],
        },
    }
    spec = {"minReplicas": 1, "maxReplicas": 10, "behavior": behavior}
    history = calc.History()
    up = calc.normalize(spec, history, 2, 8, now=0.0)
    assert (up.replicas, up.limited_reason) == (3, "ScaleUpLimit")
    history.record_scale(behavior, 2, 3, now=0.0)
    # Within the period the one pod the policy allows is spent.
    assert calc.normalize(spec, history, 3, 8, now=30.0).replicas == 3
    assert calc.normalize(spec, history, 3, 8, now=61.0).replicas == 4
    # Down: Min selects the policy that removes fewest (1 pod, not 50%).
    down = calc.normalize(spec, calc.History(), 8, 1, now=0.0)
    assert (down.replicas, down.limited_reason) == (7, "ScaleDownLimit")
    disabled = {**behavior, "scaleDown": {"selectPolicy": "Disabled", "policies": []}}
    held = calc.normalize({**spec, "behavior": disabled}, calc.History(), 8, 1, now=0.0)
    assert held.replicas == 8
