"""Each plugin's rule as a table: (case, input, expected). Pure and fast: the plugins'
`fits()` / score helpers and their filter through a NodeInfo, no apiserver."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler.cache import Cache
from controlplane.scheduler.framework import Code, CycleState, NodeInfo, PodInfo
from controlplane.scheduler.plugins import (
    balancedallocation,
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    podtopologyspread,
    tainttoleration,
)
from kubelab.api.podscheduling import pod_requests

from .builders import node, pod


def node_info(n: dict[str, Any], *pods: dict[str, Any]) -> NodeInfo:
    info = NodeInfo(n)
    info.set_node(n)
    for p in pods:
        info.add_pod(PodInfo.of(p))
    return info


# -- requests -----------------------------------------------------------------------------

REQUESTS = [
    ("one container", pod("p", "500m", "1Gi"), (500, 1 << 30)),
    ("nothing requested", pod("p"), (0, 0)),
    (
        "an init container bigger than the app containers wins",
        pod(
            "p",
            "100m",
            "64Mi",
            initContainers=[{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
        ),
        (2000, 64 << 20),
    ),
    (
        "a sidecar (restartPolicy Always) adds to the app containers",
        pod(
            "p",
            "100m",
            initContainers=[
                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
            ],
        ),
        (1100, 0),
    ),
    ("overhead is added", pod("p", "1", overhead={"cpu": "250m"}), (1250, 0)),
]


@pytest.mark.parametrize(("case", "p", "expected"), REQUESTS, ids=[r[0] for r in REQUESTS])
def test_pod_requests(case: str, p: dict[str, Any], expected: tuple[int, int]) -> None:
    r = pod_requests(p)
    assert (r.milli_cpu, r.memory) == expected


# -- NodeResourcesFit ---------------------------------------------------------------------

FIT = [
    ("fits", node("n", "2", "4Gi"), [pod("a", "1", "1Gi")], pod("p", "1", "1Gi"), []),
    (
        "memory short",
        node("n", "2", "4Gi"),
        [pod("a", "500m", "3Gi")],
        pod("p", "500m", "2Gi"),
        ["Insufficient memory"],
    ),
    (
        "cpu and memory short",
        node("n", "1", "1Gi"),
        [],
        pod("p", "2", "2Gi"),
        ["Insufficient cpu", "Insufficient memory"],
    ),
    ("pod count reached", node("n", pods=1), [pod("a")], pod("p"), ["Too many pods"]),
    (
        "nothing requested fits a full node",
        node("n", "1", "1Gi"),
        [pod("a", "1", "1Gi")],
        pod("p"),
        [],
    ),
    (
        "an extended resource the node lacks",
        node("n"),
        [],
        pod("p", overhead={"example.com/gpu": "1"}),
        ["Insufficient example.com/gpu"],
    ),
]


@pytest.mark.parametrize(("case", "n", "placed", "p", "reasons"), FIT, ids=[f[0] for f in FIT])
def test_node_resources_fit(
    case: str,
    n: dict[str, Any],
    placed: list[dict[str, Any]],
    p: dict[str, Any],
    reasons: list[str],
) -> None:
    assert noderesources.fits(pod_requests(p), node_info(n, *placed)) == reasons


ALLOCATION = [
    ("least allocated: half free", 50, 100, False, 50),
    ("least allocated: empty", 0, 100, False, 100),
    ("most allocated: a quarter used", 25, 100, True, 25),
    ("over capacity scores 0", 150, 100, False, 0),
    ("no capacity scores 0", 1, 0, False, 0),
]


@pytest.mark.parametrize(
    ("case", "requested", "allocatable", "most", "score"),
    ALLOCATION,
    ids=[a[0] for a in ALLOCATION],
)
def test_allocation_score(
    case: str, requested: int, allocatable: int, most: bool, score: int
) -> None:
    assert noderesources.allocation_score(requested, allocatable, most) == score


BALANCE = [
    ("equal fractions", [0.3, 0.3], 100),
    ("a tenth apart", [0.2, 0.3], 95),
    ("all and nothing", [1.0, 0.0], 50),
]


@pytest.mark.parametrize(("case", "fractions", "score"), BALANCE, ids=[b[0] for b in BALANCE])
def test_balanced_allocation(case: str, fractions: list[float], score: int) -> None:
    assert balancedallocation.balance_score(fractions) == score


# -- node name, unschedulable, affinity, taints, ports -------------------------------------

GPU = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
NODE_FILTERS = [
    ("nodeName elsewhere", nodename.fits(pod("p", nodeName="b"), "a"), False),
    ("nodeName here", nodename.fits(pod("p", nodeName="a"), "a"), True),
    ("no nodeName", nodename.fits(pod("p"), "a"), True),
    ("cordoned", nodeunschedulable.fits(pod("p"), node("n", unschedulable=True)), False),
    (
        "cordoned, tolerated",
        nodeunschedulable.fits(
            pod(
                "p",
                tolerations=[
                    {
                        "key": "node.kubernetes.io/unschedulable",
                        "operator": "Exists",
                        "effect": "NoSchedule",
                    }
                ],
            ),
            node("n", unschedulable=True),
        ),
        True,
    ),
    (
        "nodeSelector matches",
        nodeaffinity.fits(
            pod("p", nodeSelector={"disk": "ssd"}), node("n", labels={"disk": "ssd"})
        ),
        True,
    ),
    (
        "nodeSelector differs",
        nodeaffinity.fits(
            pod("p", nodeSelector={"disk": "ssd"}), node("n", labels={"disk": "hdd"})
        ),
        False,
    ),
    (
        "required affinity In",
        nodeaffinity.fits(
            pod(
                "p",
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["a", "b"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            ),
            node("n", labels={"zone": "b"}),
        ),
        True,
    ),
    (
        "required affinity Gt fails",
        nodeaffinity.fits(
            pod(
                "p",
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "cores", "operator": "Gt", "values": ["8"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            ),
            node("n", labels={"cores": "4"}),
        ),
        False,
    ),
    (
        "matchFields on the node name",
        nodeaffinity.fits(
            pod(
                "p",
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": ["n"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            ),
            node("n"),
        ),
        True,
    ),
    (
        "untolerated NoSchedule taint",
        tainttoleration.fits(pod("p"), node("n", taints=[GPU])) == GPU,
        True,
    ),
    (
        "tolerated by Equal",
        tainttoleration.fits(
            pod("p", tolerations=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
            node("n", taints=[GPU]),
        )
        is None,
        True,
    ),
    (
        "tolerated by an empty-key Exists",
        tainttoleration.fits(
            pod("p", tolerations=[{"operator": "Exists"}]), node("n", taints=[GPU])
        )
        is None,
        True,
    ),
    (
        "a PreferNoSchedule taint does not filter",
        tainttoleration.fits(pod("p"), node("n", taints=[{**GPU, "effect": "PreferNoSchedule"}]))
        is None,
        True,
    ),
    ("host port free", nodeports.fits([("", "TCP", 80)], {("", "TCP", 8080): 1}), True),
    ("host port taken", nodeports.fits([("", "TCP", 80)], {("10.0.0.1", "TCP", 80): 1}), False),
    ("same port, other protocol", nodeports.fits([("", "UDP", 53)], {("", "TCP", 53): 1}), True),
    (
        "same port, other address",
        nodeports.fits([("10.0.0.2", "TCP", 80)], {("10.0.0.1", "TCP", 80): 1}),
        True,
    ),
]


@pytest.mark.parametrize(
    ("case", "got", "expected"), NODE_FILTERS, ids=[f[0] for f in NODE_FILTERS]
)
def test_node_filters(case: str, got: bool, expected: bool) -> None:
    assert got is expected


def test_untolerated_taint_reason_names_the_taint() -> None:
    status = tainttoleration.TaintToleration().filter(
        CycleState(), PodInfo.of(pod("p")), node_info(node("n", taints=[GPU]))
    )
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("node(s) had untolerated taint {gpu: true}",)


def test_image_locality_prefers_a_node_with_the_image() -> None:
    assert imagelocality.normalized_image_name("nginx") == "nginx:latest"
    assert imagelocality.normalized_image_name("reg:5000/nginx") == "reg:5000/nginx:latest"
    assert imagelocality.locality_score(0, 1) == 0
    assert imagelocality.locality_score(1000 * 1024 * 1024, 1) == 100
    assert 0 < imagelocality.locality_score(500 * 1024 * 1024, 1) < 100


# -- pod topology spread and inter-pod affinity ------------------------------------------


def _cluster(*nodes: tuple[dict[str, Any], list[dict[str, Any]]]) -> Cache:
    cache = Cache()
    for n, placed in nodes:
        cache.set_node(n)
        for p in placed:
            cache.add_pod({**p, "spec": {**p["spec"], "nodeName": n["metadata"]["name"]}})
    return cache


WEB = {"app": "web"}
SPREAD = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": WEB},
        }
    ]
}
SPREAD_CASES = [
    ("the empty zone fits", "b", None),
    ("the fuller zone breaks maxSkew", "a", podtopologyspread.ERR_REASON_CONSTRAINTS_NOT_MATCH),
    ("a node without the key", "c", podtopologyspread.ERR_REASON_NODE_LABEL_NOT_MATCH),
]


@pytest.mark.parametrize(
    ("case", "target", "reason"), SPREAD_CASES, ids=[c[0] for c in SPREAD_CASES]
)
def test_pod_topology_spread(case: str, target: str, reason: str | None) -> None:
    cache = _cluster(
        (node("a", labels={"zone": "a"}), [pod("w1", labels=WEB)]),
        (node("b", labels={"zone": "b"}), []),
        (node("c"), []),
    )
    incoming = pod("w2", labels=WEB, **SPREAD)
    cs = podtopologyspread.constraints(incoming)
    counts = podtopologyspread.domain_counts(incoming, cs, cache.node_infos())
    info = cache.get(target)
    assert info is not None
    assert podtopologyspread.fits(incoming, cs, counts, info) == reason


def _anti(key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": WEB}, "topologyKey": key}
            ]
        }
    }


def _with(key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": key}
            ]
        }
    }


AFFINITY_CASES = [
    (
        "anti-affinity keeps off a node with a match",
        pod("p", labels=WEB, affinity=_anti()),
        "a",
        interpodaffinity.ERR_REASON_ANTI_AFFINITY,
    ),
    ("anti-affinity allows the other node", pod("p", labels=WEB, affinity=_anti()), "b", None),
    (
        "an existing pod's anti-affinity keeps a match away",
        pod("p", labels=WEB),
        "c",
        interpodaffinity.ERR_REASON_EXISTING_ANTI_AFFINITY,
    ),
    (
        "affinity needs the db's node",
        pod("p", affinity=_with()),
        "b",
        interpodaffinity.ERR_REASON_AFFINITY,
    ),
    ("affinity fits next to the db", pod("p", affinity=_with()), "d", None),
]


@pytest.mark.parametrize(
    ("case", "p", "target", "reason"), AFFINITY_CASES, ids=[c[0] for c in AFFINITY_CASES]
)
def test_inter_pod_affinity(case: str, p: dict[str, Any], target: str, reason: str | None) -> None:
    cache = _cluster(
        (node("a"), [pod("w", labels=WEB)]),
        (node("b"), []),
        (node("c"), [pod("lonely", labels={"app": "lonely"}, affinity=_anti())]),
        (node("d"), [pod("db", labels={"app": "db"})]),
    )
    state = interpodaffinity.compute(p, cache)
    info = cache.get(target)
    assert info is not None
    assert interpodaffinity.fits(p, state, info) == reason


def test_the_first_pod_of_a_group_that_wants_to_be_together_lands_somewhere() -> None:
    cache = _cluster((node("a"), []))
    p = pod("db-0", labels={"app": "db"}, affinity=_with())
    info = cache.get("a")
    assert info is not None
    assert interpodaffinity.fits(p, interpodaffinity.compute(p, cache), info) is None
