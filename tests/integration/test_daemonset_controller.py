"""The DaemonSet controller against the real apiserver (in-process, with the controllers:
`workloads.WorkloadLab`), with the real kubectl; the tests register the nodes and play
the scheduler and the kubelets (`Kubelet` binds each pod to the node its affinity pins).
One pod per eligible node (nodeSelector, taints and tolerations, the default DaemonSet
tolerations), nodes coming and going, a NoExecute taint, a rolling update within
maxUnavailable."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.integration.workloads import (
    Kubelet,
    PodWatch,
    WorkloadLab,
    get,
    lab,
    namespace,
    pods,
)

__all__ = ["lab", "namespace"]  # pytest fixtures used below


class Nodes:
    """Nodes of the test's own, all labelled `pool=<unique>` so that only the test's
    DaemonSets (which select that label) run on them."""

    def __init__(self, lab: WorkloadLab) -> None:
        self.lab = lab
        self.pool = uuid.uuid4().hex[:8]

    def name(self, short: str) -> str:
        return f"{short}-{self.pool}"

    def add(self, short: str, labels: dict[str, str] | None = None, **spec: Any) -> str:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name(short), "labels": {"pool": self.pool, **(labels or {})}},
            "spec": spec,
        }
        r = self.lab.api("POST", "/api/v1/nodes", json=node)
        assert r.status_code == 201, r.text
        return self.name(short)

    def patch(self, short: str, patch: dict[str, Any]) -> None:
        r = self.lab.api(
            "PATCH",
            f"/api/v1/nodes/{self.name(short)}",
            data=json.dumps(patch),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert r.status_code == 200, r.text

    def delete(self, short: str) -> None:
        assert self.lab.api("DELETE", f"/api/v1/nodes/{self.name(short)}").status_code == 200


def daemon_set(nodes: Nodes, name: str, **pod_spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "nodeSelector": {"pool": nodes.pool},
                        "containers": [{"name": name, "image": "fluentd:1.16"}],
                        **pod_spec,
                    },
                },
            },
        }
    )


def placed(lab: WorkloadLab, namespace: str, app: str) -> list[str]:
    """The nodes the DaemonSet's pods are for (by their node affinity)."""
    targets = []
    for pod in pods(lab, namespace, f"app={app}"):
        terms = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        targets.append(terms[0]["matchFields"][0]["values"][0])
    return sorted(targets)


def ds_status(lab: WorkloadLab, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = get(
        lab, f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"
    ).get("status", {})
    return status


def test_one_pod_per_eligible_node(lab: WorkloadLab, namespace: str) -> None:
    nodes = Nodes(lab)
    plain = nodes.add("plain")
    ssd = nodes.add("ssd", {"disk": "ssd"})
    infra = nodes.add(
        "infra", taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    )
    # A cordoned node not ready: the default DaemonSet tolerations let a daemon run there.
    cordoned = nodes.add(
        "cordoned",
        unschedulable=True,
        taints=[
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        ],
    )
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=daemon_set(nodes, "logs"))
    expected = sorted([plain, ssd, cordoned])
    lab.until(lambda: placed(lab, namespace, "logs") == expected, f"pods on {expected}")
    pod = pods(lab, namespace, "app=logs")[0]
    tolerated = {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]}
    assert ("node.kubernetes.io/unreachable", "NoExecute") in tolerated
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in tolerated
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    with Kubelet(lab, namespace):
        lab.until(lambda: ds_status(lab, namespace, "logs").get("numberReady") == 3, "3 ready")
        status = ds_status(lab, namespace, "logs")
        assert status["desiredNumberScheduled"] == status["currentNumberScheduled"] == 3
        assert status["numberMisscheduled"] == 0

        # Tolerating the taint adds the infra node.
        toleration = [{"key": "dedicated", "operator": "Equal", "value": "infra"}]
        lab.kubectl(
            "patch",
            "daemonset/logs",
            "-n",
            namespace,
            "-p",
            json.dumps({"spec": {"template": {"spec": {"tolerations": toleration}}}}),
        )
        everywhere = sorted([plain, ssd, cordoned, infra])
        lab.until(lambda: placed(lab, namespace, "logs") == everywhere, "a pod on every node")
        done = lab.kubectl(
            "rollout", "status", "daemonset/logs", "-n", namespace, "--timeout=60s"
        ).stdout
        assert "successfully rolled out" in done

        # A node comes and goes; a NoExecute taint evicts the daemon.
        extra = nodes.add("extra")
        lab.until(lambda: extra in placed(lab, namespace, "logs"), "a pod on the new node")
        nodes.delete("extra")
        lab.until(lambda: extra not in placed(lab, namespace, "logs"), "its pod gone")
        nodes.patch("ssd", {"spec": {"taints": [{"key": "broken", "effect": "NoExecute"}]}})
        lab.until(lambda: ssd not in placed(lab, namespace, "logs"), "the evicted pod gone")
        lab.until(
            lambda: ds_status(lab, namespace, "logs").get("desiredNumberScheduled") == 3,
            "3 desired",
        )


def test_node_selector_narrows_the_nodes(lab: WorkloadLab, namespace: str) -> None:
    nodes = Nodes(lab)
    nodes.add("hdd", {"disk": "hdd"})
    ssd = nodes.add("ssd", {"disk": "ssd"})
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                ]
            }
        }
    }
    lab.kubectl(
        "apply", "-n", namespace, "-f", "-", input=daemon_set(nodes, "cache", affinity=affinity)
    )
    lab.until(lambda: placed(lab, namespace, "cache") == [ssd], "a pod on the ssd node only")
    # Relabelled, the other node qualifies too.
    nodes.patch("hdd", {"metadata": {"labels": {"disk": "ssd"}}})
    lab.until(lambda: len(placed(lab, namespace, "cache")) == 2, "pods on both nodes")


def test_rolling_update_within_max_unavailable(lab: WorkloadLab, namespace: str) -> None:
    nodes = Nodes(lab)
    for i in range(4):
        nodes.add(f"n{i}")
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=daemon_set(nodes, "agent"))
    with Kubelet(lab, namespace):
        lab.kubectl("rollout", "status", "daemonset/agent", "-n", namespace, "--timeout=60s")

    def check(current: dict[str, dict[str, Any]]) -> None:
        live = [p for p in current.values() if not p["metadata"].get("deletionTimestamp")]
        ready = [
            p
            for p in live
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions", [])
            )
        ]
        assert len(ready) >= 4 - 1, f"{len(ready)} ready: more than maxUnavailable (1) down"

    with PodWatch(lab, namespace, check) as watch, Kubelet(lab, namespace, delay=0.3):
        lab.kubectl("set", "image", "daemonset/agent", "agent=fluentd:1.17", "-n", namespace)
        lab.kubectl("rollout", "status", "daemonset/agent", "-n", namespace, "--timeout=90s")
    assert not watch.failures, watch.failures[:3]
    images = {p["spec"]["containers"][0]["image"] for p in pods(lab, namespace, "app=agent")}
    assert images == {"fluentd:1.17"}
    assert len(pods(lab, namespace, "app=agent")) == 4
    history = lab.kubectl("rollout", "history", "daemonset/agent", "-n", namespace).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    # Undo applies revision 1's template again: it comes back as revision 3.
    with Kubelet(lab, namespace):
        lab.kubectl("rollout", "undo", "daemonset/agent", "-n", namespace)
        lab.kubectl("rollout", "status", "daemonset/agent", "-n", namespace, "--timeout=60s")
    images = {p["spec"]["containers"][0]["image"] for p in pods(lab, namespace, "app=agent")}
    assert images == {"fluentd:1.16"}
    history = lab.kubectl("rollout", "history", "daemonset/agent", "-n", namespace).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]
