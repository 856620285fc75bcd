"""The Deployment controller against the real apiserver (in-process, with the controllers:
`workloads.WorkloadLab`), driven by the real kubectl: `kubectl create deployment`, `set
image`, `scale` and `rollout status|history|undo|pause|resume|restart`. The tests play
scheduler and kubelet (`Kubelet`); a rolling update is checked against maxSurge and
maxUnavailable on every pod watch event (`PodWatch`)."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.integration.workloads import Kubelet, PodWatch, WorkloadLab, get, lab, namespace, pods

__all__ = ["lab", "namespace"]  # pytest fixtures used below


def replica_sets(lab: WorkloadLab, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = lab.kubectl_json("get", "replicasets", "-n", namespace)["items"]
    return items


def deployment(lab: WorkloadLab, namespace: str, name: str) -> dict[str, Any]:
    return get(lab, f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")


def ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


def rollout_status(lab: WorkloadLab, namespace: str, name: str, timeout: str = "60s") -> str:
    done = lab.kubectl(
        "rollout", "status", f"deployment/{name}", "-n", namespace, f"--timeout={timeout}"
    )
    return done.stdout


def test_create_deployment_makes_a_replica_set_and_its_pods(
    lab: WorkloadLab, namespace: str
) -> None:
    lab.kubectl(
        "create", "deployment", "nginx", "--image=nginx:1.21", "--replicas=3", "-n", namespace
    )
    lab.until(lambda: len(pods(lab, namespace, "app=nginx")) == 3, "3 pods")
    (rs,) = replica_sets(lab, namespace)
    hash_ = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"nginx-{hash_}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "nginx", "pod-template-hash": hash_}
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    ref = rs["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("Deployment", "nginx", True)
    for pod in pods(lab, namespace, "app=nginx"):
        assert pod["metadata"]["labels"]["pod-template-hash"] == hash_
    # The seeds' example: delete a pod, a replacement appears.
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
        assert "successfully rolled out" in rollout_status(lab, namespace, "nginx")
    d = deployment(lab, namespace, "nginx")
    assert d["status"]["availableReplicas"] == 3
    assert d["status"]["observedGeneration"] == d["metadata"]["generation"]
    conditions = {c["type"]: c for c in d["status"]["conditions"]}
    assert conditions["Available"]["status"] == "True"
    assert conditions["Progressing"]["reason"] == "NewReplicaSetAvailable"

    def scaling() -> list[str]:
        events = lab.kubectl_json("get", "events", "-n", namespace)["items"]
        return [e["message"] for e in events if e["reason"] == "ScalingReplicaSet"]

    message = f"Scaled up replica set {rs['metadata']['name']} from 0 to 3"
    lab.until(lambda: message in scaling(), "the ScalingReplicaSet event")


def test_a_slow_rolling_update_stays_within_surge_and_unavailability(
    lab: WorkloadLab, namespace: str
) -> None:
    replicas, surge, unavailable = 4, 1, 1  # the defaults, 25 %, for 4 replicas
    lab.kubectl(
        "create",
        "deployment",
        "web",
        "--image=nginx:1.21",
        f"--replicas={replicas}",
        "-n",
        namespace,
    )
    with Kubelet(lab, namespace):
        rollout_status(lab, namespace, "web")

    seen = {"max_pods": 0, "min_ready": replicas}

    def check(current: dict[str, dict[str, Any]]) -> None:
        live = [p for p in current.values() if not p["metadata"].get("deletionTimestamp")]
        seen["max_pods"] = max(seen["max_pods"], len(current))
        seen["min_ready"] = min(seen["min_ready"], sum(1 for p in live if ready(p)))
        assert len(current) <= replicas + surge, f"{len(current)} pods: above the surge"
        assert sum(1 for p in live if ready(p)) >= replicas - unavailable, "too few ready"

    with PodWatch(lab, namespace, check) as watch, Kubelet(lab, namespace, delay=0.5):
        lab.kubectl("set", "image", "deployment/web", "nginx=nginx:1.22", "-n", namespace)
        out = rollout_status(lab, namespace, "web", timeout="90s")
    assert "successfully rolled out" in out
    assert not watch.failures, watch.failures[:5]
    assert watch.events > 10
    # Not vacuous: the rollout used its budget (more pods, or fewer ready, than replicas).
    assert seen["max_pods"] > replicas or seen["min_ready"] < replicas, seen
    images = {p["spec"]["containers"][0]["image"] for p in pods(lab, namespace, "app=web")}
    assert images == {"nginx:1.22"}
    old, new = sorted(replica_sets(lab, namespace), key=lambda r: r["spec"]["replicas"])
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, replicas)


def test_rollout_history_undo_pause_resume_restart(lab: WorkloadLab, namespace: str) -> None:
    def run(*args: str) -> str:
        return lab.kubectl(*args, "-n", namespace).stdout

    with Kubelet(lab, namespace):
        run("create", "deployment", "web", "--image=nginx:1.21", "--replicas=2")
        rollout_status(lab, namespace, "web")
        run("annotate", "deployment/web", "kubernetes.io/change-cause=to 1.22")
        run("set", "image", "deployment/web", "nginx=nginx:1.22")
        rollout_status(lab, namespace, "web")
        history = run("rollout", "history", "deployment/web")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == [
            "1",
            "2",
        ]
        assert "to 1.22" in history

        run("rollout", "undo", "deployment/web")
        rollout_status(lab, namespace, "web")
        d = deployment(lab, namespace, "web")
        assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.21"
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
        by_image = {
            r["spec"]["template"]["spec"]["containers"][0]["image"]: r
            for r in replica_sets(lab, namespace)
        }
        assert len(by_image) == 2  # the first ReplicaSet is back, not a third one
        back = by_image["nginx:1.21"]["metadata"]["annotations"]
        assert back["deployment.kubernetes.io/revision"] == "3"
        assert back["deployment.kubernetes.io/revision-history"] == "1"

        run("rollout", "pause", "deployment/web")
        lab.until(
            lambda: any(
                c.get("reason") == "DeploymentPaused"
                for c in deployment(lab, namespace, "web")["status"]["conditions"]
            ),
            "the DeploymentPaused condition",
        )
        run("set", "image", "deployment/web", "nginx=nginx:1.23")
        time.sleep(1.5)
        assert len(replica_sets(lab, namespace)) == 2, "a paused deployment rolled out"
        run("rollout", "resume", "deployment/web")
        rollout_status(lab, namespace, "web")
        assert len(replica_sets(lab, namespace)) == 3

        run("rollout", "restart", "deployment/web")
        rollout_status(lab, namespace, "web")
        template = deployment(lab, namespace, "web")["spec"]["template"]
        assert "kubectl.kubernetes.io/restartedAt" in template["metadata"]["annotations"]
        assert len(replica_sets(lab, namespace)) == 4

        run("scale", "deployment/web", "--replicas=4")
        rollout_status(lab, namespace, "web")
        lab.until(lambda: len(pods(lab, namespace, "app=web")) == 4, "4 pods")
        scale = lab.kubectl_json("get", "deployment/web", "-n", namespace, "--subresource=scale")
        assert scale["spec"]["replicas"] == 4


def test_revision_history_limit_deletes_the_oldest_replica_sets(
    lab: WorkloadLab, namespace: str
) -> None:
    with Kubelet(lab, namespace):
        lab.kubectl(
            "create", "deployment", "web", "--image=nginx:1.21", "--replicas=1", "-n", namespace
        )
        lab.kubectl(
            "patch",
            "deployment/web",
            "-n",
            namespace,
            "-p",
            json.dumps({"spec": {"revisionHistoryLimit": 1}}),
        )
        for tag in ("1.22", "1.23", "1.24"):
            lab.kubectl("set", "image", "deployment/web", f"nginx=nginx:{tag}", "-n", namespace)
            rollout_status(lab, namespace, "web")
    lab.until(lambda: len(replica_sets(lab, namespace)) == 2, "two ReplicaSets left")
    revisions = sorted(
        r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        for r in replica_sets(lab, namespace)
    )
    assert revisions == ["3", "4"]


def test_recreate_never_runs_old_and_new_pods_together(lab: WorkloadLab, namespace: str) -> None:
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 2,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "postgres:15"}]},
            },
        },
    }
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
    with Kubelet(lab, namespace):
        rollout_status(lab, namespace, "db")

        def check(current: dict[str, dict[str, Any]]) -> None:
            images = {p["spec"]["containers"][0]["image"] for p in current.values()}
            assert len(images) <= 1, f"old and new pods together: {images}"

        with PodWatch(lab, namespace, check) as watch:
            lab.kubectl("set", "image", "deployment/db", "db=postgres:16", "-n", namespace)
            rollout_status(lab, namespace, "db")
    assert not watch.failures, watch.failures[:3]
    assert {p["spec"]["containers"][0]["image"] for p in pods(lab, namespace, "app=db")} == {
        "postgres:16"
    }


def test_a_rollout_without_progress_exceeds_its_deadline(lab: WorkloadLab, namespace: str) -> None:
    lab.kubectl(
        "create", "deployment", "stuck", "--image=nginx:1.21", "--replicas=1", "-n", namespace
    )
    lab.kubectl(
        "patch",
        "deployment/stuck",
        "-n",
        namespace,
        "-p",
        json.dumps({"spec": {"progressDeadlineSeconds": 2}}),
    )
    # No kubelet: the pod never becomes ready.
    lab.until(
        lambda: any(
            c.get("reason") == "ProgressDeadlineExceeded" and c["status"] == "False"
            for c in deployment(lab, namespace, "stuck").get("status", {}).get("conditions", [])
        ),
        "the ProgressDeadlineExceeded condition",
        timeout=20,
    )
    done = lab.kubectl(
        "rollout", "status", "deployment/stuck", "-n", namespace, "--timeout=10s", check=False
    )
    assert done.returncode != 0
    assert "exceeded its progress deadline" in done.stderr


def test_scaling_mid_rollout_is_proportional(lab: WorkloadLab, namespace: str) -> None:
    # Kubernetes' documented example: 10 replicas, maxSurge 3, maxUnavailable 2, a
    # rollout stuck with 8 old and 5 new pods (the new ones never become ready), scaled
    # to 15: 5 more, 3 to the old ReplicaSet and 2 to the new one.
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 10,
            "strategy": {"rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.21"}]},
            },
        },
    }
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
    with Kubelet(lab, namespace):
        rollout_status(lab, namespace, "web")
    lab.kubectl("set", "image", "deployment/web", "nginx=nginx:1.22", "-n", namespace)

    def sizes() -> dict[str, int]:
        return {
            r["spec"]["template"]["spec"]["containers"][0]["image"]: r["spec"]["replicas"]
            for r in replica_sets(lab, namespace)
        }

    lab.until(lambda: sizes() == {"nginx:1.21": 8, "nginx:1.22": 5}, "the stuck rollout")
    lab.kubectl("scale", "deployment/web", "--replicas=15", "-n", namespace)
    lab.until(lambda: sizes() == {"nginx:1.21": 11, "nginx:1.22": 7}, "a proportional scale")
