"""The framework as a whole over a cache of nodes: the seeds' scheduling example with
its numbers, Kubernetes' FailedScheduling summary, percentageOfNodesToScore, the
configuration's profiles, and preemption's choice of victims."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler.cache import Cache
from controlplane.scheduler.config import (
    ConfigError,
    load,
    num_feasible_nodes_to_find,
    parse,
)
from controlplane.scheduler.framework import CycleState, NodeInfo, PodInfo, Status
from controlplane.scheduler.metrics import Metrics
from controlplane.scheduler.plugins import defaultpreemption
from controlplane.scheduler.runtime import FitError, Framework
from kubelab.api.resources import Resource
from kubelab.client import SharedInformer

from .builders import node, pod


class StubHandle:
    """A handle over a cache, without an apiserver."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.framework: Framework | None = None

    @property
    def client(self) -> Any:
        return None

    @property
    def snapshot(self) -> Cache:
        return self.cache

    @property
    def recorder(self) -> Any:
        return None

    def run_filters(self, state: CycleState, p: PodInfo, n: NodeInfo) -> Status:
        assert self.framework is not None
        return self.framework.run_filters(state, p, n)

    def informer(self, resource: Resource) -> SharedInformer:
        return SharedInformer(None, resource)  # type: ignore[arg-type]  # never started


def framework(cache: Cache, doc: dict[str, Any] | None = None) -> Framework:
    config = parse(doc) if doc else load(None)
    handle = StubHandle(cache)
    fwk = Framework(config.profiles[0], handle, Metrics(), config.percentage_of_nodes_to_score)
    handle.framework = fwk
    return fwk


def place(cache: Cache, node_name: str, *pods: dict[str, Any]) -> None:
    for p in pods:
        cache.add_pod({**p, "spec": {**p["spec"], "nodeName": node_name}})


def seeds_cluster() -> Cache:
    """The seeds' four nodes (10 CPUs, 10Gi each): node1 20 % CPU and 30 % memory used,
    node2 almost out of memory, node3 10 % CPU and 25 % memory, node4 tainted."""
    cache = Cache()
    for name in ("node1", "node2", "node3"):
        cache.set_node(node(name, "10", "10Gi"))
    cache.set_node(
        node(
            "node4",
            "10",
            "10Gi",
            taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}],
        )
    )
    place(cache, "node1", pod("used1", "2", "3Gi"))
    place(cache, "node2", pod("used2", "1", "10000Mi"))
    place(cache, "node3", pod("used3", "1", "2560Mi"))
    return cache


def test_the_seeds_scheduling_example() -> None:
    """Filtering removes node 2 (Insufficient memory) and node 4 (untolerated taint);
    scoring ranks node 3 (10 % CPU, 25 % memory used) above node 1 (20 %, 30 %), and the
    pod goes to node 3. The seeds' 85 and 92 are illustrative; kube-scheduler's
    default plugins and weights, which these are, give node 1 467 and node 3 472."""
    cache = seeds_cluster()
    fwk = framework(cache)
    nginx = PodInfo.of(pod("nginx", "100m", "256Mi"))
    state = CycleState()
    assert fwk.run_pre_filter(state, nginx, cache).ok
    statuses = {n.name: fwk.run_filters(state, nginx, n) for n in cache.node_infos()}
    assert statuses["node2"].reasons == ("Insufficient memory",)
    assert statuses["node4"].reasons == ("node(s) had untolerated taint {dedicated: infra}",)
    assert statuses["node1"].ok and statuses["node3"].ok
    feasible = [n for n in cache.node_infos() if statuses[n.name].ok]
    scores = fwk.score_nodes(state, nginx, feasible)
    assert scores == {"node1": 467, "node3": 472}
    for _ in range(5):  # round robin start points must not change the winner
        assert fwk.find_nodes(CycleState(), nginx, cache, {}).node == "node3"


def test_the_failed_scheduling_summary_counts_reasons_over_nodes() -> None:
    cache = seeds_cluster()
    fwk = framework(cache)
    with pytest.raises(FitError) as fit:
        fwk.find_nodes(CycleState(), PodInfo.of(pod("big", "1", "20Gi")), cache, {})
    assert str(fit.value) == (
        "0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, "
        "3 Insufficient memory."
    )
    assert fit.value.rejected_by == {"NodeResourcesFit", "TaintToleration"}


def test_an_assumed_pod_counts_before_its_binding_is_seen() -> None:
    cache = Cache()
    cache.set_node(node("only", "1", "1Gi"))
    fwk = framework(cache)
    first = pod("first", "600m")
    assert fwk.find_nodes(CycleState(), PodInfo.of(first), cache, {}).node == "only"
    cache.assume(first, "only")
    with pytest.raises(FitError, match="1 Insufficient cpu"):
        fwk.find_nodes(CycleState(), PodInfo.of(pod("second", "600m")), cache, {})
    cache.forget(first)  # the binding failed: the room is free again
    assert fwk.find_nodes(CycleState(), PodInfo.of(pod("second", "600m")), cache, {}).node == "only"


def test_an_assumed_pod_expires_when_its_binding_is_never_seen() -> None:
    now = [0.0]
    cache = Cache(assumed_ttl=30, clock=lambda: now[0])
    cache.set_node(node("only", "1", "1Gi"))
    p = pod("p", "600m")
    cache.assume(p, "only")
    cache.finish_binding(p)
    now[0] = 29
    assert cache.cleanup_expired() == []
    now[0] = 31
    assert cache.cleanup_expired() == ["default/p"]
    info = cache.get("only")
    assert info is not None and info.requested.milli_cpu == 0


PERCENTAGE = [
    ("a small cluster: every node", 50, 0, 50),
    ("100 nodes: the 100-node minimum", 100, 0, 100),
    ("500 nodes: 50 - 500/125 = 46 %", 500, 0, 230),
    ("5,000 nodes: 10 %", 5000, 0, 500),
    ("10,000 nodes: the 5 % floor", 10000, 0, 500),
    ("configured 30 %", 1000, 30, 300),
    ("configured 10 % of 200: still 100", 200, 10, 100),
    ("configured 100 %", 1000, 100, 1000),
]


@pytest.mark.parametrize(
    ("case", "nodes", "pct", "wanted"), PERCENTAGE, ids=[p[0] for p in PERCENTAGE]
)
def test_percentage_of_nodes_to_score(case: str, nodes: int, pct: int, wanted: int) -> None:
    assert num_feasible_nodes_to_find(nodes, pct) == wanted


def test_the_filters_stop_once_enough_feasible_nodes_are_found() -> None:
    cache = Cache()
    for i in range(500):
        cache.set_node(node(f"n{i:03}"))
    fwk = framework(cache)
    result = fwk.find_nodes(CycleState(), PodInfo.of(pod("p")), cache, {})
    assert (result.evaluated, result.feasible) == (230, 230)
    second = fwk.find_nodes(CycleState(), PodInfo.of(pod("q")), cache, {})
    assert second.evaluated == 230  # from where the first stopped, round robin


CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 20
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packer
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}, {name: ImageLocality}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
"""


def test_profiles_from_a_configuration_file(tmp_path: Any) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    config = load(path)
    assert config.percentage_of_nodes_to_score == 20
    default, packer = config.profiles
    assert default.scheduler_name == "default-scheduler"
    assert default.weights["TaintToleration"] == 3
    assert "NodeResourcesBalancedAllocation" in default.points["score"]
    assert packer.scheduler_name == "bin-packer"
    assert "NodeResourcesBalancedAllocation" not in packer.points["score"]
    assert "NodeResourcesBalancedAllocation" not in packer.points["score"]
    assert packer.weights["NodeResourcesFit"] == 5
    assert "NodeResourcesFit" in packer.points["filter"]

    # MostAllocated packs: the fuller of two nodes wins.
    cache = Cache()
    cache.set_node(node("empty"))
    cache.set_node(node("busy"))
    place(cache, "busy", pod("x", "2", "4Gi"))
    handle = StubHandle(cache)
    fwk = Framework(packer, handle, Metrics())
    handle.framework = fwk
    assert fwk.find_nodes(CycleState(), PodInfo.of(pod("p", "1", "1Gi")), cache, {}).node == "busy"


BAD_CONFIGS = [
    ("wrong kind", {"apiVersion": "v1", "kind": "Pod"}, "expected apiVersion"),
    (
        "unknown plugin",
        {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]},
        "unknown plugin 'Nope'",
    ),
    (
        "unknown point",
        {"profiles": [{"plugins": {"filters": {}}}]},
        "unknown extension point 'filters'",
    ),
    (
        "a score plugin at filter",
        {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "ImageLocality"}]}}}]},
        "does not implement filter",
    ),
    (
        "no binder",
        {"profiles": [{"plugins": {"bind": {"disabled": [{"name": "*"}]}}}]},
        "bind plugin",
    ),
    ("duplicate names", {"profiles": [{}, {}]}, "duplicate schedulerName"),
    ("typo at the top", {"percentageOfNodes": 5}, "unknown field"),
]


@pytest.mark.parametrize(("case", "doc", "message"), BAD_CONFIGS, ids=[b[0] for b in BAD_CONFIGS])
def test_bad_configurations_say_what_is_wrong(case: str, doc: dict[str, Any], message: str) -> None:
    full = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        **doc,
    }
    with pytest.raises(ConfigError, match=message):
        parse(full)


def test_preemption_picks_the_fewest_lowest_priority_victims() -> None:
    cache = Cache()
    cache.set_node(node("a", "2", "4Gi"))
    cache.set_node(node("b", "2", "4Gi"))
    place(cache, "a", pod("a-low", "1", priority=1), pod("a-mid", "1", priority=5))
    place(cache, "b", pod("b-mid1", "1", priority=5), pod("b-mid2", "1", priority=5))
    incoming = PodInfo.of(pod("urgent", "1", priority=10))
    fwk = framework(cache)
    state = CycleState()
    assert fwk.run_pre_filter(state, incoming, cache).ok
    victims = {
        name: defaultpreemption.select_victims(
            incoming, info, lambda trial: fwk.run_filters(state, incoming, trial).ok
        )
        for name in ("a", "b")
        if (info := cache.get(name)) is not None
    }
    assert [v.key for v in victims["a"] or []] == ["default/a-low"]
    assert [v.key for v in victims["b"] or []] == ["default/b-mid1"] or [
        v.key for v in victims["b"] or []
    ] == ["default/b-mid2"]
    ranks = {n: defaultpreemption.Candidate(n, v or []).rank() for n, v in victims.items()}
    assert min(ranks, key=lambda n: ranks[n]) == "a"
    equal = PodInfo.of(pod("peer", "1", priority=1))
    info = cache.get("a")
    assert info is not None
    assert (
        defaultpreemption.select_victims(
            equal, info, lambda t: fwk.run_filters(CycleState(), equal, t).ok
        )
        is None
    )
