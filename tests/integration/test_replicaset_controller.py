"""The ReplicaSet controller against the real apiserver (in-process, with the controllers:
`workloads.WorkloadLab`), driven by the real kubectl; the tests play scheduler and
kubelet. The seeds' example: delete a pod, a replacement appears."""

from __future__ import annotations

import json

from tests.integration.workloads import (
    WorkloadLab,
    delete_pod_now,
    get,
    lab,
    namespace,
    pods,
    set_ready,
)

__all__ = ["lab", "namespace"]  # pytest fixtures used below


def replica_set(name: str, replicas: int, **spec: object) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name, "tier": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.21"}]},
                },
                **spec,
            },
        }
    )


def test_a_deleted_pod_is_replaced(lab: WorkloadLab, namespace: str) -> None:
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=replica_set("web", 3))
    lab.until(lambda: len(pods(lab, namespace, "app=web")) == 3, "3 pods")
    first = pods(lab, namespace, "app=web")
    for pod in first:
        ref = pod["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("ReplicaSet", "web", True)
        assert pod["metadata"]["name"].startswith("web-")
    victim = first[0]["metadata"]["name"]
    lab.kubectl("delete", "pod", victim, "-n", namespace, "--wait=false")
    lab.until(
        lambda: (
            {p["metadata"]["name"] for p in pods(lab, namespace, "app=web")}
            - {p["metadata"]["name"] for p in first}
            != set()
            and len(pods(lab, namespace, "app=web")) == 3
        ),
        "a replacement pod",
    )
    # Never more than asked for: expectations hold back a second create.
    assert len(pods(lab, namespace, "app=web")) == 3

    def creates() -> int:
        events = lab.kubectl_json("get", "events", "-n", namespace)["items"]
        return [e["reason"] for e in events if e["involvedObject"]["name"] == "web"].count(
            "SuccessfulCreate"
        )

    lab.until(lambda: creates() == 4, "4 SuccessfulCreate events")


def test_status_counts_ready_and_available_pods(lab: WorkloadLab, namespace: str) -> None:
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=replica_set("web", 2))
    lab.until(lambda: len(pods(lab, namespace, "app=web")) == 2, "2 pods")
    for pod in pods(lab, namespace, "app=web"):
        assert set_ready(lab, namespace, pod["metadata"]["name"])
    path = f"/apis/apps/v1/namespaces/{namespace}/replicasets/web"
    lab.until(lambda: get(lab, path).get("status", {}).get("availableReplicas") == 2, "2 available")
    status = get(lab, path)["status"]
    assert status["replicas"] == status["fullyLabeledReplicas"] == status["readyReplicas"] == 2
    assert status["observedGeneration"] == 1


def test_scale_down_deletes_not_ready_pods_first(lab: WorkloadLab, namespace: str) -> None:
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=replica_set("web", 3))
    lab.until(lambda: len(pods(lab, namespace, "app=web")) == 3, "3 pods")
    names = sorted(p["metadata"]["name"] for p in pods(lab, namespace, "app=web"))
    for name in names[1:]:
        assert set_ready(lab, namespace, name)
    lab.kubectl("scale", "replicaset", "web", "--replicas=2", "-n", namespace)
    lab.until(lambda: len(pods(lab, namespace, "app=web")) == 2, "2 pods")
    assert sorted(p["metadata"]["name"] for p in pods(lab, namespace, "app=web")) == names[1:]


def test_orphans_are_adopted_and_mismatching_pods_released(
    lab: WorkloadLab, namespace: str
) -> None:
    orphan = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "orphan", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.21"}]},
    }
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(orphan))
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=replica_set("web", 2))
    lab.until(lambda: len(pods(lab, namespace, "app=web")) == 2, "2 pods")
    adopted = get(lab, f"/api/v1/namespaces/{namespace}/pods/orphan")
    assert adopted["metadata"]["ownerReferences"][0]["name"] == "web"
    # Relabelled, it leaves the ReplicaSet, which makes another one.
    lab.kubectl("label", "pod", "orphan", "app=other", "--overwrite", "-n", namespace)
    lab.until(lambda: len(pods(lab, namespace, "app=web")) == 2, "a replacement")
    lab.until(
        lambda: (
            not get(lab, f"/api/v1/namespaces/{namespace}/pods/orphan")["metadata"].get(
                "ownerReferences"
            )
        ),
        "the released pod to lose its owner reference",
    )
    delete_pod_now(lab, namespace, "orphan")


def test_replication_controllers_work_alike(lab: WorkloadLab, namespace: str) -> None:
    rc = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "old"},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "old"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.21"}]},
            },
        },
    }
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(rc))
    lab.until(lambda: len(pods(lab, namespace, "app=old")) == 2, "2 pods")
    lab.kubectl("scale", "rc", "old", "--replicas=0", "-n", namespace)
    lab.until(lambda: not pods(lab, namespace, "app=old"), "no pods")


def test_a_refused_create_is_reported_and_retried(lab: WorkloadLab, namespace: str) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "pods"},
        "spec": {"hard": {"pods": "1"}},
    }
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(quota))
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=replica_set("web", 3))
    path = f"/apis/apps/v1/namespaces/{namespace}/replicasets/web"

    def failure() -> dict[str, str]:
        conditions = get(lab, path).get("status", {}).get("conditions", [])
        return next((c for c in conditions if c["type"] == "ReplicaFailure"), {})

    lab.until(lambda: failure().get("reason") == "FailedCreate", "the ReplicaFailure condition")
    assert "exceeded quota" in failure()["message"]
    assert len(pods(lab, namespace, "app=web")) == 1
    events = lab.kubectl_json("get", "events", "-n", namespace)["items"]
    assert any(e["reason"] == "FailedCreate" for e in events)
    # Once the quota allows it, the retries (no event brings the ReplicaSet back) succeed.
    quota["spec"] = {"hard": {"pods": "10"}}
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(quota))
    lab.until(lambda: len(pods(lab, namespace, "app=web")) == 3, "3 pods", timeout=60)
    lab.until(lambda: not failure(), "the condition to go")


def test_pods_count_as_available_after_min_ready_seconds(lab: WorkloadLab, namespace: str) -> None:
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=replica_set("web", 2, minReadySeconds=3))
    lab.until(lambda: len(pods(lab, namespace, "app=web")) == 2, "2 pods")
    for pod in pods(lab, namespace, "app=web"):
        assert set_ready(lab, namespace, pod["metadata"]["name"])
    path = f"/apis/apps/v1/namespaces/{namespace}/replicasets/web"
    lab.until(lambda: get(lab, path).get("status", {}).get("readyReplicas") == 2, "2 ready")
    assert get(lab, path)["status"]["availableReplicas"] == 0
    # No event comes when the time is up: the controller looks again by itself.
    lab.until(
        lambda: get(lab, path)["status"].get("availableReplicas") == 2, "2 available", timeout=10
    )
