"""NodeResourcesFit (pre-filter, filter, score): a pod fits a node when, for every
resource it requests, what the node's pods already request plus the pod's request stays
within the node's allocatable, and the node's pod count stays within its `pods`
allocatable. Scoring prefers the node with the most left over (LeastAllocated, the
default) or the least (MostAllocated, for bin packing), per `scoringStrategy`.

The seeds' example: node 2 "Insufficient memory (removed)" is this filter's reason;
nodes 1 and 3 are then ranked, node 3 with less in use scoring higher.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubelab.api.podscheduling import CPU, MEMORY, Resources

from ..framework import (
    MAX_NODE_SCORE,
    SUCCESS,
    CycleState,
    Handle,
    NodeInfo,
    PodInfo,
    Status,
    unschedulable,
)

NAME = "NodeResourcesFit"
REASON_TOO_MANY_PODS = "Too many pods"
LEAST_ALLOCATED, MOST_ALLOCATED = "LeastAllocated", "MostAllocated"
DEFAULT_RESOURCES = ((CPU, 1), (MEMORY, 1))


def insufficient(name: str) -> str:
    return f"Insufficient {name}"


def fits(requests: Resources, node: NodeInfo, names: Iterable[str] | None = None) -> list[str]:
    """The reasons the pod does not fit (empty: it fits); `names`: the resources it
    requests, if known already."""
    reasons = []
    if len(node.pods) + 1 > node.allocatable.pods:
        reasons.append(REASON_TOO_MANY_PODS)
    for name in requests.names() if names is None else names:
        if requests.get(name) > node.allocatable.get(name) - node.requested.get(name):
            reasons.append(insufficient(name))
    return reasons


def allocation_score(requested: int, allocatable: int, most: bool) -> int:
    """One resource's 0..100: the share left free (least allocated) or used (most)."""
    if allocatable <= 0 or requested > allocatable:
        return 0
    used = requested * MAX_NODE_SCORE // allocatable
    return used if most else MAX_NODE_SCORE - used


def requested_after(pod: PodInfo, node: NodeInfo, name: str) -> int:
    """What the node's pods would request of `name` with the pod on it, counting a
    request of nothing as the scheduler's defaults (so best-effort pods still spread)."""
    if name == CPU:
        return node.non_zero_cpu + pod.non_zero[0]
    if name == MEMORY:
        return node.non_zero_memory + pod.non_zero[1]
    return node.requested.get(name) + pod.requests.get(name)


class NodeResourcesFit:
    name = NAME

    def __init__(self, strategy: str, resources: tuple[tuple[str, int], ...]) -> None:
        self.most = strategy == MOST_ALLOCATED
        self.resources = resources

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        reasons = fits(pod.requests, node, pod.requested_names)
        return unschedulable(*reasons) if reasons else SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        total = weights = 0
        for name, weight in self.resources:
            allocatable = node.allocatable.get(name)
            if not allocatable:
                continue
            used = requested_after(pod, node, name)
            total += allocation_score(used, allocatable, self.most) * weight
            weights += weight
        return total // weights if weights else 0

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        return None


def new(args: Mapping[str, Any], handle: Handle) -> NodeResourcesFit:
    strategy = args.get("scoringStrategy") or {}
    kind = strategy.get("type", LEAST_ALLOCATED)
    if kind not in (LEAST_ALLOCATED, MOST_ALLOCATED):
        raise ValueError(
            f"{NAME}: scoringStrategy.type {kind!r} is not supported; use "
            f"{LEAST_ALLOCATED} or {MOST_ALLOCATED}"
        )
    resources = tuple(
        (str(r["name"]), int(r.get("weight", 1))) for r in strategy.get("resources") or []
    )
    return NodeResourcesFit(kind, resources or DEFAULT_RESOURCES)
