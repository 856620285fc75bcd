"""metrics.k8s.io from kept figures: what a scrape pass keeps when a kubelet fails or a
node goes, and selectors on the Nodes' and Pods' own labels and fields."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.metricscache import MetricsCache
from kubelab.api import errors
from kubelab.api.resources import by_kind

NODE_METRICS = by_kind("metrics.k8s.io/v1beta1", "NodeMetrics")
POD_METRICS = by_kind("metrics.k8s.io/v1beta1", "PodMetrics")


def _usage(milli_cores: int) -> dict[str, Any]:
    return {
        "cpu": {"usageNanoCores": milli_cores * 1_000_000},
        "memory": {"workingSetBytes": 1 << 20},
    }


class Kubelets:
    """The kubelets' answers by node name; a node absent from `up` does not answer."""

    def __init__(self) -> None:
        self.up: dict[str, list[str]] = {}  # node -> its pods (namespace "ns")
        self.asked = 0

    def get_json(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        self.asked += 1
        name = node["metadata"]["name"]
        if name not in self.up:
            raise errors.service_unavailable(f'the kubelet of node "{name}" is not reachable')
        return {
            "node": {"nodeName": name, **_usage(100)},
            "pods": [
                {
                    "podRef": {"name": pod, "namespace": "ns"},
                    "containers": [{"name": "c", **_usage(5)}],
                }
                for pod in self.up[name]
            ],
        }


class Cache:
    """The apiserver's cached Nodes and Pods."""

    def __init__(self) -> None:
        self.objects: dict[str, list[dict[str, Any]]] = {"nodes": [], "pods": []}

    def add(self, plural: str, name: str, **labels: str) -> None:
        meta = {"name": name, "labels": labels}
        if plural == "pods":
            meta["namespace"] = "ns"
        self.objects[plural].append({"metadata": meta})

    def list(self, plural: str, namespace: str) -> list[dict[str, Any]]:
        return [
            o
            for o in self.objects[plural]
            if not namespace or o["metadata"].get("namespace") == namespace
        ]


@pytest.fixture
def setup() -> tuple[Kubelets, Cache, MetricsCache]:
    kubelets, cache = Kubelets(), Cache()
    for node, role in (("cp1", "control-plane"), ("worker1", "worker")):
        cache.add("nodes", node, role=role)
    for pod, app in (("web-1", "web"), ("web-2", "web"), ("db-1", "db")):
        cache.add("pods", pod, app=app)
    kubelets.up = {"cp1": ["db-1"], "worker1": ["web-1", "web-2"]}
    return kubelets, cache, MetricsCache(kubelets, cache.list)  # type: ignore[arg-type]


def _names(answer: dict[str, Any]) -> list[str]:
    return sorted(item["metadata"]["name"] for item in answer["items"])


def test_answers_come_from_the_last_pass_not_from_the_kubelets(
    setup: tuple[Kubelets, Cache, MetricsCache],
) -> None:
    kubelets, _, metrics = setup
    metrics.scrape()
    assert kubelets.asked == 2
    assert _names(metrics.get(NODE_METRICS, "", "", "", "")) == ["cp1", "worker1"]
    assert _names(metrics.get(POD_METRICS, "ns", "", "", "")) == ["db-1", "web-1", "web-2"]
    assert metrics.get(POD_METRICS, "ns", "web-1", "", "")["containers"][0]["usage"]["cpu"] == (
        "5000000n"
    )
    assert kubelets.asked == 2


def test_selectors_select_on_the_objects_labels_and_fields(
    setup: tuple[Kubelets, Cache, MetricsCache],
) -> None:
    _, _, metrics = setup
    metrics.scrape()
    assert _names(metrics.get(POD_METRICS, "ns", "", "app=web", "")) == ["web-1", "web-2"]
    assert _names(metrics.get(POD_METRICS, "", "", "", "metadata.name!=web-1")) == [
        "db-1",
        "web-2",
    ]
    assert _names(metrics.get(NODE_METRICS, "", "", "role=worker", "")) == ["worker1"]
    with pytest.raises(errors.StatusError) as refused:
        metrics.get(POD_METRICS, "ns", "", "app in (web", "")
    assert refused.value.code == 400


def test_a_node_that_stops_answering_or_goes_keeps_no_figures(
    setup: tuple[Kubelets, Cache, MetricsCache],
) -> None:
    kubelets, cache, metrics = setup
    metrics.scrape()
    del kubelets.up["worker1"]
    metrics.scrape()
    assert _names(metrics.get(NODE_METRICS, "", "", "", "")) == ["cp1"]
    assert _names(metrics.get(POD_METRICS, "ns", "", "", "")) == ["db-1"]
    with pytest.raises(errors.StatusError) as missing:
        metrics.get(NODE_METRICS, "", "worker1", "", "")
    assert missing.value.code == 404
    cache.objects["nodes"] = cache.objects["nodes"][:1]
    metrics.scrape()
    assert _names(metrics.get(NODE_METRICS, "", "", "", "")) == ["cp1"]
