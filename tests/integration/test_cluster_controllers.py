"""The controller-manager's cluster controllers against a real apiserver, run in-process
with short timings (`incluster_controllers`), driven with the real kubectl; the tests
play the kubelets (node Leases, pod phases and readiness)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.integration.controlplane_fixture import Lab
from tests.integration.incluster_controllers import controllers, plane

__all__ = ["plane"]  # pytest fixtures used below


def _node(name: str, **spec: Any) -> str:
    return json.dumps(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec}
    )


def _pod_cidr(lab: Lab, node: str) -> str:
    r = lab.api("GET", f"/api/v1/nodes/{node}")
    return str(r.json().get("spec", {}).get("podCIDR") or "") if r.status_code == 200 else ""


def _events(lab: Lab, namespace: str, name: str) -> list[dict[str, Any]]:
    items = lab.kubectl_json(
        "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}"
    )["items"]
    return list(items)


def test_node_ipam_gives_each_node_its_own_range_and_reuses_a_deleted_nodes(plane: Lab) -> None:
    lab = plane
    prefix = f"ipam-{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i}" for i in range(5)]
    flags = (
        "--controllers=node-ipam-controller",
        "--allocate-node-cidrs",
        "--cluster-cidr=10.250.0.0/22",
        "--node-cidr-mask-size=24",
    )
    # A node that already has a range (given by an earlier controller-manager): the new
    # term must not hand it out again.
    lab.kubectl(
        "create",
        "-f",
        "-",
        input=_node(names[0], podCIDR="10.250.1.0/24", podCIDRs=["10.250.1.0/24"]),
    )
    with controllers(lab, *flags):
        for name in names[1:4]:
            lab.kubectl("create", "-f", "-", input=_node(name))
        for name in names[1:4]:
            lab.until(lambda n=name: _pod_cidr(lab, n), f"node {name} to get a podCIDR")
        cidrs = {n: _pod_cidr(lab, n) for n in names[:4]}
        assert sorted(cidrs.values()) == [f"10.250.{i}.0/24" for i in range(4)], cidrs
        node = lab.kubectl_json("get", "node", names[1])
        assert node["spec"]["podCIDRs"] == [node["spec"]["podCIDR"]]

        # The range is full: the fifth node waits, with a Warning that says why.
        lab.kubectl("create", "-f", "-", input=_node(names[4]))
        lab.until(
            lambda: any(
                e["reason"] == "CIDRNotAvailable" for e in _events(lab, "default", names[4])
            ),
            "a CIDRNotAvailable event",
        )
        event = next(
            e for e in _events(lab, "default", names[4]) if e["reason"] == "CIDRNotAvailable"
        )
        assert event["type"] == "Warning"
        assert f"Node {names[4]} status is now: CIDRNotAvailable" in event["message"]
        assert not _pod_cidr(lab, names[4])

        # A deleted node's range goes to the waiting one.
        freed = cidrs[names[2]]
        lab.kubectl("delete", "node", names[2])
        lab.until(
            lambda: _pod_cidr(lab, names[4]) == freed, f"{names[4]} to get {freed}", timeout=60
        )
    for name in names:
        lab.kubectl("delete", "node", name, "--ignore-not-found")
