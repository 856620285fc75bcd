"""The StatefulSet controller against the real apiserver (in-process, with the controllers:
`workloads.WorkloadLab`), with the real kubectl; the tests play the kubelet. Ordinal
names, OrderedReady and Parallel, scale down in reverse order, rolling update by ordinal
(reverse order, partition), PersistentVolumeClaims from templates."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.integration.workloads import Kubelet, PodWatch, WorkloadLab, get, lab, namespace, pods

__all__ = ["lab", "namespace"]  # pytest fixtures used below


def stateful_set(name: str, replicas: int, **spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "serviceName": name,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.21"}]},
                },
                **spec,
            },
        }
    )


def names(lab: WorkloadLab, namespace: str, app: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods(lab, namespace, f"app={app}"))


def sts(lab: WorkloadLab, namespace: str, name: str) -> dict[str, Any]:
    return get(lab, f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}")


CLAIM = {
    "metadata": {"name": "data"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
}


def test_ordered_ready_starts_pod_n_after_pod_n_minus_1_is_ready(
    lab: WorkloadLab, namespace: str
) -> None:
    manifest = stateful_set("web", 3, volumeClaimTemplates=[CLAIM])
    with PodWatch(lab, namespace) as watch:
        lab.kubectl("apply", "-n", namespace, "-f", "-", input=manifest)
        lab.until(lambda: names(lab, namespace, "web") == ["web-0"], "web-0")
        time.sleep(1.0)
        assert names(lab, namespace, "web") == ["web-0"], "web-1 started before web-0 was ready"
        with Kubelet(lab, namespace):
            lab.until(
                lambda: sts(lab, namespace, "web").get("status", {}).get("readyReplicas") == 3,
                "3 ready replicas",
            )
    added = [name for kind, name in watch.log if kind == "ADDED"]
    assert added == ["web-0", "web-1", "web-2"]
    pod = get(lab, f"/api/v1/namespaces/{namespace}/pods/web-1")
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("web-1", "web")
    assert pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "web-1"
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "data"]
    assert volume["persistentVolumeClaim"]["claimName"] == "data-web-1"
    claims = lab.kubectl_json("get", "pvc", "-n", namespace)["items"]
    assert sorted(c["metadata"]["name"] for c in claims) == [
        "data-web-0",
        "data-web-1",
        "data-web-2",
    ]


def test_scale_down_goes_in_reverse_order_and_keeps_the_claims(
    lab: WorkloadLab, namespace: str
) -> None:
    with Kubelet(lab, namespace):
        lab.kubectl(
            "apply",
            "-n",
            namespace,
            "-f",
            "-",
            input=stateful_set("web", 3, volumeClaimTemplates=[CLAIM]),
        )
        lab.kubectl("rollout", "status", "statefulset/web", "-n", namespace, "--timeout=60s")
        with PodWatch(lab, namespace) as watch:
            lab.kubectl("scale", "statefulset/web", "--replicas=1", "-n", namespace)
            lab.until(lambda: names(lab, namespace, "web") == ["web-0"], "only web-0 left")
    deleted = [name for kind, name in watch.log if kind == "DELETED"]
    assert deleted == ["web-2", "web-1"]
    claims = lab.kubectl_json("get", "pvc", "-n", namespace)["items"]
    assert len(claims) == 3  # the data outlives the pods


def test_rolling_update_goes_by_ordinal_in_reverse_and_respects_the_partition(
    lab: WorkloadLab, namespace: str
) -> None:
    with Kubelet(lab, namespace):
        lab.kubectl("apply", "-n", namespace, "-f", "-", input=stateful_set("web", 3))
        lab.kubectl("rollout", "status", "statefulset/web", "-n", namespace, "--timeout=60s")
        first = sts(lab, namespace, "web")["status"]["currentRevision"]
        with PodWatch(lab, namespace) as watch:
            lab.kubectl("set", "image", "statefulset/web", "web=nginx:1.22", "-n", namespace)
            out = lab.kubectl(
                "rollout", "status", "statefulset/web", "-n", namespace, "--timeout=60s"
            ).stdout
        # The apiserver defaults the partition to 0, so kubectl reports a partitioned one.
        assert "partitioned roll out complete: 3 new pods have been updated" in out
        deleted = [name for kind, name in watch.log if kind == "DELETED"]
        assert deleted == ["web-2", "web-1", "web-0"]
        status = sts(lab, namespace, "web")["status"]
        assert status["currentRevision"] == status["updateRevision"] != first
        assert status["updatedReplicas"] == 3
        images = {p["spec"]["containers"][0]["image"] for p in pods(lab, namespace, "app=web")}
        assert images == {"nginx:1.22"}
        history = lab.kubectl("rollout", "history", "statefulset/web", "-n", namespace).stdout
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]

        # With a partition of 2, only web-2 moves to the next template.
        lab.kubectl(
            "patch",
            "statefulset/web",
            "-n",
            namespace,
            "-p",
            json.dumps(
                {
                    "spec": {
                        "updateStrategy": {"rollingUpdate": {"partition": 2}},
                        "template": {
                            "spec": {"containers": [{"name": "web", "image": "nginx:1.23"}]}
                        },
                    }
                }
            ),
        )
        lab.until(
            lambda: (
                sts(lab, namespace, "web").get("status", {}).get("updatedReplicas") == 1
                and sts(lab, namespace, "web")["status"].get("readyReplicas") == 3
            ),
            "web-2 updated",
        )
        by_name = {
            p["metadata"]["name"]: p["spec"]["containers"][0]["image"]
            for p in pods(lab, namespace, "app=web")
        }
        assert by_name == {"web-0": "nginx:1.22", "web-1": "nginx:1.22", "web-2": "nginx:1.23"}


def test_parallel_creates_every_pod_at_once(lab: WorkloadLab, namespace: str) -> None:
    lab.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=stateful_set("par", 3, podManagementPolicy="Parallel"),
    )
    # No kubelet: none becomes ready, all are created all the same.
    lab.until(lambda: names(lab, namespace, "par") == ["par-0", "par-1", "par-2"], "3 pods")
