"""The scheduler as a process against the real apiserver (a local control plane), with
nodes created as API objects and the real kubectl reading the outcome: the seeds'
scheduling example, a pod that fits nowhere until a node that fits registers,
preemption, its health and metrics endpoints, and the SIGKILL of the leading
scheduler among several.

The control plane serves the whole module, so each test's nodes carry a label of its
own and its pods select it (nodes are cluster-scoped; other tests' nodes must not take
its pods); the nodes are deleted at the end of each test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.integration.controlplane_fixture import Lab, lab, namespace

__all__ = ["lab", "namespace"]  # pytest fixtures used below

RUN_LABEL = "kubelab.test/run"


class Nodes:
    """Nodes a test registers (as a kubelet would: the object, then its status)."""

    def __init__(self, lab: Lab, run: str) -> None:
        self.lab = lab
        self.run = run
        self.names: list[str] = []

    def add(
        self,
        name: str,
        cpu: str = "4",
        memory: str = "8Gi",
        taints: list[dict[str, str]] | None = None,
    ) -> str:
        full = f"{self.run}-{name}"
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": full,
                "labels": {RUN_LABEL: self.run, "kubernetes.io/hostname": full},
            },
            "spec": {"taints": taints or []},
        }
        r = self.lab.api("POST", "/api/v1/nodes", json=body)
        assert r.status_code == 201, r.text
        self.names.append(full)
        allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
        status = {"status": {"capacity": allocatable, "allocatable": allocatable}}
        r = self.lab.api(
            "PATCH",
            f"/api/v1/nodes/{full}/status",
            data=json.dumps(status),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert r.status_code == 200, r.text
        return full

    def delete_all(self) -> None:
        for name in self.names:
            self.lab.api("DELETE", f"/api/v1/nodes/{name}")


@pytest.fixture
def nodes(lab: Lab, namespace: str) -> Iterator[Nodes]:
    n = Nodes(lab, namespace)
    try:
        yield n
    finally:
        n.delete_all()


def pod_body(
    name: str,
    run: str,
    cpu: str = "100m",
    memory: str = "128Mi",
    *,
    node_name: str = "",
    priority_class: str = "",
    scheduler_name: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": {RUN_LABEL: run},
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "c",
                "image": "nginx:1.21",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        # The Priority admission plugin sets spec.priority from the class.
        spec["priorityClassName"] = priority_class
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def create_pod(lab: Lab, namespace: str, body: dict[str, Any]) -> None:
    r = lab.api("POST", f"/api/v1/namespaces/{namespace}/pods", json=body)
    assert r.status_code == 201, r.text


def get_pod(lab: Lab, namespace: str, name: str) -> dict[str, Any]:
    r = lab.api("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def bound_to(lab: Lab, namespace: str, name: str, timeout: float = 30) -> str:
    found: list[str] = []

    def bound() -> bool:
        node = get_pod(lab, namespace, name)["spec"].get("nodeName")
        if node:
            found.append(node)
        return bool(node)

    lab.until(bound, f"{namespace}/{name} to be bound", timeout)
    return found[0]


def events(lab: Lab, namespace: str, pod: str, reason: str) -> list[dict[str, Any]]:
    r = lab.api(
        "GET",
        f"/api/v1/namespaces/{namespace}/events",
        params={"fieldSelector": f"involvedObject.name={pod},reason={reason}"},
    )
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def wait_event(lab: Lab, namespace: str, pod: str, reason: str) -> dict[str, Any]:
    lab.until(lambda: events(lab, namespace, pod, reason), f"a {reason} event for {pod}")
    return events(lab, namespace, pod, reason)[-1]


def test_the_seeds_scheduling_example(lab: Lab, namespace: str, nodes: Nodes) -> None:
    """Four nodes (10 CPUs, 10Gi): node 2 without enough memory, node 4 tainted; node 1
    has 20 % CPU and 30 % memory in use, node 3 10 % and 25 %. The pod goes to node 3,
    and `kubectl describe` shows the Scheduled event."""
    names = {n: nodes.add(n, "10", "10Gi") for n in ("node1", "node2", "node3")}
    names["node4"] = nodes.add(
        "node4",
        "10",
        "10Gi",
        taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}],
    )
    for used, node, cpu, memory in (
        ("used1", "node1", "2", "3Gi"),
        ("used2", "node2", "1", "10000Mi"),
        ("used3", "node3", "1", "2560Mi"),
    ):
        create_pod(lab, namespace, pod_body(used, namespace, cpu, memory, node_name=names[node]))
    create_pod(lab, namespace, pod_body("nginx", namespace, "100m", "256Mi"))
    assert bound_to(lab, namespace, "nginx") == names["node3"]
    event = wait_event(lab, namespace, "nginx", "Scheduled")
    assert event["message"] == f"Successfully assigned {namespace}/nginx to {names['node3']}"
    assert event["source"]["component"] == "default-scheduler"
    described = lab.kubectl("describe", "pod", "nginx", "-n", namespace).stdout
    assert "Scheduled" in described and names["node3"] in described


def test_a_pod_that_fits_nowhere_waits_for_a_node_that_fits(
    lab: Lab, namespace: str, nodes: Nodes
) -> None:
    small = nodes.add("small", "2", "4Gi")
    nodes.add(
        "tainted", "64", "256Gi", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    )
    create_pod(lab, namespace, pod_body("big", namespace, "32", "1Gi"))
    both = ("1 Insufficient cpu", "1 node(s) had untolerated taint {gpu: true}")

    def judged_on_both_nodes() -> list[dict[str, Any]]:
        """The FailedScheduling events that name both nodes' reasons. A loaded scheduler
        may try the pod before its cache has both nodes (or their capacity): that
        attempt's event says so, and the nodes' arrival makes it try again."""
        failed = events(lab, namespace, "big", "FailedScheduling")
        return [e for e in failed if all(reason in e["message"] for reason in both)]

    lab.until(judged_on_both_nodes, "a FailedScheduling event for big naming both nodes")
    event = judged_on_both_nodes()[-1]
    # Other tests' nodes (none should be left) would show up as node affinity misses.
    message = event["message"]
    assert message.startswith("0/")
    assert "preemption: 0/" in message and "No preemption victims found" in message
    assert event["type"] == "Warning"
    condition = next(
        c
        for c in get_pod(lab, namespace, "big")["status"]["conditions"]
        if c["type"] == "PodScheduled"
    )
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert not get_pod(lab, namespace, "big")["spec"].get("nodeName")
    roomy = nodes.add("roomy", "64", "256Gi")
    assert bound_to(lab, namespace, "big") == roomy
    assert small != roomy
    event = wait_event(lab, namespace, "big", "Scheduled")
    assert event["message"] == f"Successfully assigned {namespace}/big to {roomy}"


def test_a_higher_priority_pod_preempts_a_lower_one(lab: Lab, namespace: str, nodes: Nodes) -> None:
    only = nodes.add("only", "2", "4Gi")
    urgent_class = f"urgent-{namespace}"
    made = lab.api(
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        json={
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": urgent_class},
            "value": 1000,
        },
    )
    assert made.status_code == 201, made.text
    for name in ("low-a", "low-b"):  # no class: priority 0
        create_pod(lab, namespace, pod_body(name, namespace, "1", "1Gi"))
    assert {bound_to(lab, namespace, n) for n in ("low-a", "low-b")} == {only}
    create_pod(
        lab, namespace, pod_body("urgent", namespace, "1", "1Gi", priority_class=urgent_class)
    )
    assert bound_to(lab, namespace, "urgent", timeout=60) == only
    left = [
        name
        for name in ("low-a", "low-b")
        if lab.api("GET", f"/api/v1/namespaces/{namespace}/pods/{name}").status_code == 200
    ]
    assert len(left) == 1, "exactly one victim"
    (victim,) = {"low-a", "low-b"} - set(left)
    preempted = wait_event(lab, namespace, victim, "Preempted")
    assert preempted["message"] == f"Preempted by pod {namespace}/urgent on node {only}"
    lab.api("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{urgent_class}")


def test_health_and_metrics_over_https(lab: Lab) -> None:
    base = f"https://127.0.0.1:{lab.plane.scheduler_port}"
    # A serving certificate of its own, as kube-scheduler makes without --tls-cert-file.
    ca = str(lab.plane.pki / "scheduler-serving" / "kube-scheduler-ca.crt")
    assert requests.get(base + "/healthz", verify=ca, timeout=5).text == "ok"
    assert requests.get(base + "/readyz", verify=ca, timeout=5).status_code == 200
    anonymous = requests.get(base + "/metrics", verify=ca, timeout=5)
    assert anonymous.status_code == 403, "/metrics is for whom the apiserver authorizes"
    assert 'User "system:anonymous" cannot get path "/metrics"' in anonymous.json()["message"]
    with lab.plane.monitoring_session() as scraper:
        metrics = scraper.get(base + "/metrics", verify=ca, timeout=5).text
    for name in (
        "scheduler_schedule_attempts_total",
        "scheduler_framework_extension_point_duration_seconds_bucket",
        'scheduler_pending_pods{queue="active"}',
    ):
        assert name in metrics


HANDOVER_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
  resourceName: handover-scheduler
  resourceNamespace: kube-system
profiles:
- schedulerName: handover-scheduler
"""


def test_sigkill_of_the_leading_scheduler_hands_over_and_binds_each_pod_once(
    lab: Lab, namespace: str, nodes: Nodes, tmp_path: Path
) -> None:
    """Three schedulers of their own profile and lease (4 s): SIGKILL the leader while
    pods are being created; another takes the lease within the lease duration (plus a
    retry), every pod is bound, and none got two Scheduled events."""
    for i in range(3):
        nodes.add(f"n{i}", "8", "16Gi")
    config = tmp_path / "config.yaml"
    config.write_text(HANDOVER_CONFIG)
    procs: dict[int, subprocess.Popen[bytes]] = {}
    logs = []
    try:
        for i in range(3):
            log = (tmp_path / f"scheduler-{i}.log").open("wb")
            logs.append(log)
            p = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "controlplane.scheduler",
                    "--config",
                    str(config),
                    "--kubeconfig",
                    str(lab.plane.scheduler_kubeconfig),
                    "--secure-port",
                    "0",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            procs[p.pid] = p
        lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/handover-scheduler"

        def holder() -> str:
            r = lab.api("GET", lease_path)
            return str(r.json()["spec"].get("holderIdentity") or "") if r.status_code == 200 else ""

        lab.until(holder, "a scheduler to lead", 30)
        first = holder()
        for i in range(10):
            create_pod(
                lab, namespace, pod_body(f"p{i}", namespace, scheduler_name="handover-scheduler")
            )
        for i in range(10):
            bound_to(lab, namespace, f"p{i}")
        leader = _leader_process(procs, tmp_path, first)
        for i in range(10, 20):
            create_pod(
                lab, namespace, pod_body(f"p{i}", namespace, scheduler_name="handover-scheduler")
            )
        killed_at = time.monotonic()
        os.kill(leader.pid, signal.SIGKILL)
        leader.wait()
        lab.until(lambda: holder() not in ("", first), "another scheduler to take the lease", 20)
        took = time.monotonic() - killed_at
        assert took <= 4 + 2, f"handover took {took:.1f}s"
        for i in range(20, 30):
            create_pod(
                lab, namespace, pod_body(f"p{i}", namespace, scheduler_name="handover-scheduler")
            )
        for i in range(30):
            bound_to(lab, namespace, f"p{i}", timeout=30)
        for i in range(30):
            scheduled = events(lab, namespace, f"p{i}", "Scheduled")
            assert len(scheduled) <= 1, f"p{i} has {len(scheduled)} Scheduled events"
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in logs:
            log.close()


def _leader_process(
    procs: dict[int, subprocess.Popen[bytes]], logs: Path, identity: str
) -> subprocess.Popen[bytes]:
    """The process whose log says it campaigned as `identity`."""
    for i, p in enumerate(procs.values()):
        text = (logs / f"scheduler-{i}.log").read_text(errors="replace")
        if f"as {identity}" in text:
            return p
    raise AssertionError(f"no scheduler log names {identity}")


def test_a_bad_configuration_stops_the_scheduler_with_a_clear_message(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- plugins: {score: {enabled: [{name: MostRequested}]}}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "controlplane.scheduler", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "unknown plugin 'MostRequested'" in done.stderr
