"""The workload controllers in the real controller-manager process (with the store and
the apiserver as real processes too, `controlplane_fixture`): the seeds' create flow,
`kubectl create deployment` -> Deployment -> ReplicaSet -> pods, and the seeds' "delete a
pod, a replacement appears". The other scenarios run in-process (`workloads.py`)."""

from __future__ import annotations

from tests.integration.controlplane_fixture import Lab, lab, namespace
from tests.integration.workloads import Kubelet, pods

__all__ = ["lab", "namespace"]  # pytest fixtures used below


def test_create_deployment_through_the_controller_manager_process(lab: Lab, namespace: str) -> None:
    lab.kubectl(
        "create", "deployment", "nginx", "--image=nginx:1.21", "--replicas=3", "-n", namespace
    )
    lab.until(lambda: len(pods(lab, namespace, "app=nginx")) == 3, "3 pods")
    (rs,) = lab.kubectl_json("get", "replicasets", "-n", namespace)["items"]
    assert rs["metadata"]["name"].startswith("nginx-")
    victim = pods(lab, namespace, "app=nginx")[0]["metadata"]["name"]
    lab.kubectl("delete", "pod", victim, "-n", namespace)
    lab.until(
        lambda: (
            len(pods(lab, namespace, "app=nginx")) == 3
            and victim not in {p["metadata"]["name"] for p in pods(lab, namespace, "app=nginx")}
        ),
        "a replacement pod",
    )
    with Kubelet(lab, namespace):
        done = lab.kubectl(
            "rollout", "status", "deployment/nginx", "-n", namespace, "--timeout=60s"
        )
    assert "successfully rolled out" in done.stdout


def test_the_controller_manager_serves_health_and_metrics_over_https(lab: Lab) -> None:
    base = f"https://127.0.0.1:{lab.plane.controller_manager_port}"
    # Self-signed: made in --cert-dir, its CA beside it.
    ca = lab.plane.dir / "controller-manager-serving" / "kube-controller-manager-ca.crt"
    with lab.plane.monitoring_session() as http:
        for path in ("/healthz", "/readyz"):
            r = http.get(base + path, verify=str(ca), timeout=10)
            assert (r.status_code, r.text) == (200, "ok"), path
        r = http.get(base + "/readyz?verbose", verify=str(ca), timeout=10)
        assert "[+]shutdown ok" in r.text and "readyz check passed" in r.text
        metrics = http.get(base + "/metrics", verify=str(ca), timeout=10).text
    assert 'leader_election_master_status{name="kube-controller-manager"} 1.0' in metrics
    assert 'workqueue_depth{name="deployment-controller"}' in metrics
