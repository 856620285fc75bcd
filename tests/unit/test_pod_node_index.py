"""The apiserver's pod-by-node index, through the real apiserver in-process (`lab.testenv`):
a kubelet's list and watch (`fieldSelector=spec.nodeName=<node>`) see exactly that
node's pods, including a pod the moment a binding moves it onto the node, and its
deletion."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubelab.client import RestClient, resource_for
from lab.testenv import Environment

PODS = resource_for("v1", "Pod")


@pytest.fixture
def admin(apiserver: Environment) -> Iterator[RestClient]:
    with RestClient(apiserver.client_config(), qps=None, max_retries=0) as client:
        yield client


def _pod(name: str, node: str = "") -> dict[str, object]:
    spec: dict[str, object] = {"containers": [{"name": "c", "image": "nginx:1.21"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_a_node_watch_sees_its_pods_and_a_pod_bound_to_it(
    admin: RestClient, namespace: str
) -> None:
    node = f"{namespace}-n1"
    admin.create(PODS, _pod("here", node), namespace)
    admin.create(PODS, _pod("elsewhere", f"{namespace}-n2"), namespace)
    admin.create(PODS, _pod("pending"), namespace)
    selector = f"spec.nodeName={node}"
    listed = admin.list(PODS, field_selector=selector)
    assert [p["metadata"]["name"] for p in listed["items"]] == ["here"]
    with admin.watch(
        PODS,
        field_selector=selector,
        resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=10,
    ) as watch:
        admin.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/pods/pending/binding",
            body={
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "pending"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
        )
        admin.delete(PODS, "elsewhere", namespace, grace_period_seconds=0)
        admin.delete(PODS, "here", namespace, grace_period_seconds=0)
        seen = []
        for kind, obj in watch:
            if kind == "BOOKMARK":
                continue
            seen.append((kind, obj["metadata"]["name"]))
            if len(seen) == 2:
                break
    # Nothing of the other node's pod, deleted in between.
    assert seen == [("ADDED", "pending"), ("DELETED", "here")]
