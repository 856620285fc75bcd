"""Two controller-managers (real processes) over one control plane: SIGKILL the leader
while it creates a Deployment's pods; the standby takes the Lease within its duration and
finishes the work, and no ReplicaSet or pod is created twice (the new leader's caches
start from a fresh list, and names and expectations keep it from repeating the dead
one's creates)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from kubelab.client.leaderelection import JITTER_FACTOR
from lab.localcluster import free_port
from tests.integration.controlplane_fixture import Lab, lab, namespace
from tests.integration.workloads import PodWatch, pods

__all__ = ["lab", "namespace"]  # pytest fixtures used below

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"


def holder(lab: Lab) -> str:
    return str(lab.api("GET", LEASE).json()["spec"].get("holderIdentity") or "")


@pytest.fixture
def standby(lab: Lab) -> Iterator[subprocess.Popen[bytes]]:
    """A second controller-manager, with a serving port of its own."""
    command = lab.plane.controller_manager_command()
    command[command.index("--secure-port") + 1] = str(free_port())
    command[command.index("--cert-dir") + 1] = str(lab.plane.dir / "standby-serving")
    with (lab.plane.dir / "standby.log").open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_sigkill_of_the_leader_hands_over_without_duplicates(
    lab: Lab, namespace: str, standby: subprocess.Popen[bytes]
) -> None:
    leader = lab.plane.controller_manager
    assert leader is not None
    first = holder(lab)
    time.sleep(1.0)  # the standby is campaigning
    assert standby.poll() is None
    with PodWatch(lab, namespace) as watch:
        lab.kubectl(
            "create", "deployment", "web", "--image=nginx:1.21", "--replicas=20", "-n", namespace
        )
        lab.until(lambda: len(pods(lab, namespace, "app=web")) >= 1, "the first pods")
        leader.send_signal(signal.SIGKILL)
        leader.wait(10)
        killed_at = time.monotonic()
        # The lease is 15 s: the standby takes over once it has expired.
        lab.until(lambda: holder(lab) not in ("", first), "the standby to lead", timeout=30)
        took = time.monotonic() - killed_at
        lab.until(lambda: len(pods(lab, namespace, "app=web")) == 20, "20 pods", timeout=60)
        time.sleep(2.0)  # anything doubled would show by now
    # client-go's bound: the standby sees the last renewal up to one jittered retry late
    # (retry period 2 s, jitter up to 1.2 more) and tries again one jittered retry after
    # the 15 s lease ran out; a second of slack for the requests themselves.
    jittered_retry = 2 * (1 + JITTER_FACTOR)
    assert took < 15 + 2 * jittered_retry + 1, f"handover took {took:.1f}s"
    replica_sets = lab.kubectl_json("get", "replicasets", "-n", namespace)["items"]
    assert len(replica_sets) == 1
    assert len(pods(lab, namespace, "app=web")) == 20
    added = [name for kind, name in watch.log if kind == "ADDED"]
    assert len(added) == len(set(added)) == 20, "a pod was created twice"
