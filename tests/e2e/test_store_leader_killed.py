"""Last of the session (it leaves a dead node): the node whose store member leads is
killed (`docker kill`), and the cluster stays writable and serving through the load
balancer within seconds: haproxy marks the dead apiserver down after two failed
/readyz checks and redispatches refused connections, the store's survivors elect a
new leader, and the controller-manager and scheduler leases move if they were there."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from kubelab.storeclient import StoreClient, StoreError
from lab.cluster import Lab
from lab.nodes import Node
from tests.e2e.conftest import store
from tests.e2e.test_lab import KUBECTL, kubectl
from tests.waiting import until


def test_killing_the_store_leader_keeps_the_cluster_writable(lab: Lab, store_files: Path) -> None:
    nodes = lab.control_plane_nodes
    leader = None
    for node in nodes:
        with store(store_files, [node]) as one:
            if one.status().is_leader:
                leader = node
    assert leader is not None, "no store member says it leads"
    leader.container.kill()
    killed = time.monotonic()

    configmap = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: after-{leader.name}}}\n"

    errors: list[str] = []

    def written() -> bool:
        # apply, not create: a create whose answer was lost may have been stored.
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", str(lab.kubeconfig), "apply", "-f", "-"],
            input=configmap, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        errors.append(done.stderr.strip())
        return done.returncode == 0

    try:
        until(written, "a write through the load balancer after the leader's node died", 60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; kubectl's last errors: {errors[-3:]}") from None
    print(f"\nwritable again {time.monotonic() - killed:.1f}s after killing {leader.name}")
    survivors = [n for n in nodes if n is not leader]
    with store(store_files, survivors) as client:
        until(lambda: _has_leader(client, survivors), "a new store leader", timeout=30)
    assert "after-" in kubectl(lab, "get", "configmaps")


def _has_leader(client: StoreClient, nodes: list[Node]) -> bool:
    try:
        return client.status().leader != 0
    except StoreError:
        return False
