"""NodeAffinity (filter, score): the pod's `nodeSelector` and required node affinity
must match the node's labels (a mismatch is final: preemption cannot relabel a node);
among the nodes that fit, those matching more of its preferred terms, by weight, score
higher."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubelab.api.podscheduling import node_selector_term_matches, required_node_affinity_matches

from ..framework import (
    SKIP,
    SUCCESS,
    CycleState,
    Handle,
    Node,
    NodeInfo,
    Pod,
    PodInfo,
    Snapshot,
    Status,
    normalize_reverse,
    unresolvable,
)

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"


def fits(pod: Pod, node: Node) -> bool:
    return required_node_affinity_matches(pod, node)


def preferred_terms(pod: Pod) -> list[Mapping[str, Any]]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    return list(affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or [])


def preference_score(terms: list[Mapping[str, Any]], node: Node) -> int:
    """The summed weights of the preferred terms the node matches."""
    return sum(
        int(t.get("weight") or 0)
        for t in terms
        if node_selector_term_matches(t.get("preference") or {}, node)
    )


def constrained(pod: Pod) -> bool:
    """Whether the pod has a nodeSelector or required node affinity to check."""
    spec = pod.get("spec") or {}
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    return bool(
        spec.get("nodeSelector")
        or node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    )


class NodeAffinity:
    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status:
        if not constrained(pod.pod):
            state.skip_filter.add(NAME)
            return SKIP
        return SUCCESS

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        terms = preferred_terms(pod.pod)
        if not terms:
            state.skip_score.add(NAME)
            return SKIP
        state.write(NAME, terms)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS if fits(pod.pod, node.node) else unresolvable(ERR_REASON_POD)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        terms = state.read(NAME)
        if terms is None:
            terms = preferred_terms(pod.pod)
        return preference_score(terms, node.node)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        normalize_reverse(scores, reverse=False)


def new(args: Mapping[str, Any], handle: Handle) -> NodeAffinity:
    return NodeAffinity()
