"""NodeResourcesBalancedAllocation (score): prefer the node where, with the pod on it,
CPU and memory would be used in the most similar proportions, so that no node runs out of
one while the other sits idle. The score is (1 - standard deviation of the used
fractions) x 100, as kube-scheduler computes it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..framework import MAX_NODE_SCORE, CycleState, Handle, NodeInfo, PodInfo
from .noderesources import DEFAULT_RESOURCES, requested_after

NAME = "NodeResourcesBalancedAllocation"


def balance_score(fractions: list[float]) -> int:
    """100 for equal fractions, less the further they are apart."""
    if not fractions:
        return 0
    mean = sum(fractions) / len(fractions)
    std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


class BalancedAllocation:
    name = NAME

    def __init__(self, resources: tuple[str, ...]) -> None:
        self.resources = resources

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        fractions = []
        for name in self.resources:
            allocatable = node.allocatable.get(name)
            if allocatable:
                fractions.append(min(1.0, requested_after(pod, node, name) / allocatable))
        return balance_score(fractions)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        return None


def new(args: Mapping[str, Any], handle: Handle) -> BalancedAllocation:
    resources = tuple(str(r["name"]) for r in args.get("resources") or [])
    return BalancedAllocation(resources or tuple(name for name, _ in DEFAULT_RESOURCES))
