"""The metrics pipeline and the HorizontalPodAutoscaler on the Docker lab with the real
kubectl: a CPU-burning Deployment is scaled up on the figures the apiserver scraped from
the kubelets, `kubectl get hpa` shows its utilization, and once it idles it is scaled
back down (a `behavior` without a scale-down window, so the test need not wait the
default 300 s)."""

from __future__ import annotations

import json

from lab.cluster import Lab
from tests.e2e.test_seeds import kubectl
from tests.waiting import until

MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: cpu-burner}
spec:
  replicas: 1
  selector: {matchLabels: {app: cpu-burner}}
  template:
    metadata: {labels: {app: cpu-burner}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: burn
        image: busybox
        command: [sh, -c, "while true; do :; done"]
        resources: {requests: {cpu: 100m}, limits: {cpu: 200m}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: cpu-burner}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: cpu-burner}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
"""

IDLE = [
    {
        "op": "replace",
        "path": "/spec/template/spec/containers/0/command",
        "value": ["sleep", "3600"],
    }
]


def _replicas() -> int:
    return int(
        json.loads(kubectl("get", "deployment", "cpu-burner", "-o", "json"))["spec"]["replicas"]
    )


def test_a_busy_deployment_is_scaled_up_then_down(lab: Lab) -> None:
    kubectl("apply", "-f", "-", stdin=MANIFEST)
    try:
        # Figures come within a scrape (15 s) of the pod's start, a CPU rate a scrape
        # later, the HPA's decision within its sync period (15 s).
        until(lambda: _replicas() > 1, "the HPA scaling the busy Deployment up", timeout=180)
        shown = kubectl("get", "hpa", "cpu-burner")
        assert "cpu: " in shown and "%/50%" in shown, shown
        assert "SuccessfulRescale" in kubectl("describe", "hpa", "cpu-burner")
        kubectl("patch", "deployment", "cpu-burner", "--type=json", "-p", json.dumps(IDLE))
        until(lambda: _replicas() == 1, "the HPA scaling the idle Deployment down", timeout=180)
        assert "All metrics below target" in kubectl("describe", "hpa", "cpu-burner")
    finally:
        kubectl("delete", "-f", "-", "--wait=false", stdin=MANIFEST, check=False)
