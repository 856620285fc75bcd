"""PodTopologySpread (pre-filter, filter, pre-score, score): spread a group of pods over
topology domains (nodes, zones) by the pod's `topologySpreadConstraints`.

For a `DoNotSchedule` constraint, placing the pod in a domain must keep
`pods matching in that domain + 1 - fewest matching in any eligible domain <= maxSkew`;
a node without the constraint's topology key cannot take the pod at all. Eligible
domains are those of nodes that match the pod's node selector and required node affinity
(`nodeAffinityPolicy: Honor`, the default). `ScheduleAnyway` constraints only score:
fewer matching pods in the node's domain is better.

Pre-filter counts the matching pods per domain once per pod (CycleState); filter and
score look the node's domain up. Left out: `minDomains`, `matchLabelKeys`,
`nodeTaintsPolicy: Honor`, and the cluster-level default constraints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.api.podscheduling import required_node_affinity_matches
from kubelab.api.selectors import Selector, selector_from_label_selector

from ..framework import (
    SKIP,
    SUCCESS,
    CycleState,
    Handle,
    NodeInfo,
    Pod,
    PodInfo,
    Snapshot,
    Status,
    error,
    normalize_reverse,
    pod_labels,
    unresolvable,
    unschedulable,
)

NAME = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"


@dataclass(frozen=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: Selector
    hard: bool


def constraints(pod: Pod) -> list[Constraint]:
    out = []
    for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
        out.append(
            Constraint(
                int(c.get("maxSkew") or 1),
                str(c.get("topologyKey", "")),
                selector_from_label_selector(c.get("labelSelector")),
                c.get("whenUnsatisfiable", DO_NOT_SCHEDULE) == DO_NOT_SCHEDULE,
            )
        )
    return out


Verdicts = dict[tuple[str, frozenset[tuple[str, str]]], bool]


def count_matching(node: NodeInfo, namespace: str, selector: Selector, memo: Verdicts) -> int:
    """The node's pods (not terminating) in `namespace` that `selector` selects; `memo`
    keeps the verdict per (namespace, labels), which a workload's pods share."""
    count = 0
    for info in node.pods.values():
        if info.terminating:
            continue
        verdict = memo.get(info.label_key)
        if verdict is None:
            verdict = memo[info.label_key] = info.label_key[0] == namespace and selector.matches(
                pod_labels(info.pod)
            )
        count += verdict
    return count


def domain_counts(pod: Pod, cs: list[Constraint], nodes: list[NodeInfo]) -> list[dict[str, int]]:
    """Per constraint: matching pods per domain value, over the eligible nodes."""
    namespace = (pod.get("metadata") or {}).get("namespace", "")
    counts: list[dict[str, int]] = [{} for _ in cs]
    memos: list[Verdicts] = [{} for _ in cs]
    for node in nodes:
        labels = node.labels
        if not all(c.topology_key in labels for c in cs):
            continue
        if not required_node_affinity_matches(pod, node.node):
            continue
        for i, c in enumerate(cs):
            value = labels[c.topology_key]
            matching = count_matching(node, namespace, c.selector, memos[i])
            counts[i][value] = counts[i].get(value, 0) + matching
    return counts


def fits(
    pod: Pod, cs: list[Constraint], counts: list[dict[str, int]], node: NodeInfo
) -> str | None:
    """The reason the node breaks a hard constraint, or None."""
    for c, per_domain in zip(cs, counts, strict=True):
        if not c.hard:
            continue
        value = node.labels.get(c.topology_key)
        if value is None:
            return ERR_REASON_NODE_LABEL_NOT_MATCH
        self_match = 1 if c.selector.matches(pod_labels(pod)) else 0
        fewest = min(per_domain.values(), default=0)
        if per_domain.get(value, 0) + self_match - fewest > c.max_skew:
            return ERR_REASON_CONSTRAINTS_NOT_MATCH
    return None


class PodTopologySpread:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status:
        cs = [c for c in constraints(pod.pod) if c.hard]
        if not cs:
            state.skip_filter.add(NAME)
            return SKIP
        state.write(NAME, (cs, domain_counts(pod.pod, cs, snapshot.node_infos())))
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        saved = state.read(NAME)
        if saved is None:
            return error(f"{NAME}: no pre-filter state for {pod.key}")
        cs, counts = saved
        reason = fits(pod.pod, cs, counts, node)
        if reason is None:
            return SUCCESS
        if reason == ERR_REASON_NODE_LABEL_NOT_MATCH:
            return unresolvable(reason)
        return unschedulable(reason)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        cs = [c for c in constraints(pod.pod) if not c.hard]
        if not cs:
            state.skip_score.add(NAME)
            return SKIP
        everyone = self.handle.snapshot.node_infos()
        state.write(NAME + "/score", (cs, domain_counts(pod.pod, cs, everyone)))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        cs, counts = state.read(NAME + "/score")
        return sum(
            per_domain.get(node.labels.get(c.topology_key, ""), 0)
            for c, per_domain in zip(cs, counts, strict=True)
        )

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        normalize_reverse(scores, reverse=True)


def new(args: Mapping[str, Any], handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(handle)
