"""InterPodAffinity (pre-filter, filter, pre-score, score): place a pod near pods it
names (podAffinity) or away from them (podAntiAffinity), by topology domain, and respect
the anti-affinity of pods already placed.

Filter, for a node whose value of each term's `topologyKey` is its domain:
* every required affinity term must have a matching pod in the node's domain, except
  when no pod anywhere matches and the pod matches its own terms (the first pod of a
  group that wants to be together must land somewhere);
* no required anti-affinity term may have a matching pod in the node's domain;
* no pod already placed may have a required anti-affinity term that matches this pod,
  in the node's domain.
Score: the weights of the preferred terms, added for affinity and subtracted for
anti-affinity, per domain of each matching pod; min-max normalized onto 0..100.

Terms apply to the pod's own namespace unless they list `namespaces`; an empty
`namespaceSelector` ({}) means every namespace. Left out: non-empty namespaceSelectors
(they would need the namespaces' labels), and the scoring of existing pods' preferred
terms towards the incoming pod.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from kubelab.api.selectors import Selector, selector_from_label_selector

from ..framework import (
    MAX_NODE_SCORE,
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
    pod_labels,
    unschedulable,
)

NAME = "InterPodAffinity"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True)
class Term:
    selector: Selector
    namespaces: frozenset[str] | None
    """None: every namespace."""
    topology_key: str
    weight: int = 0

    def __hash__(self) -> int:
        # Computed once: terms are grouped by value on every cycle.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.selector, self.namespaces, self.topology_key, self.weight))
            object.__setattr__(self, "_hash", cached)
        return cached

    def matches(self, pod: Pod) -> bool:
        namespace = (pod.get("metadata") or {}).get("namespace", "")
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return self.selector.matches(pod_labels(pod))


def _term(raw: Mapping[str, Any], own_namespace: str, weight: int = 0) -> Term:
    listed = raw.get("namespaces") or []
    all_namespaces = raw.get("namespaceSelector") == {} and not listed
    namespaces = None if all_namespaces else frozenset(listed or [own_namespace])
    return Term(
        selector_from_label_selector(raw.get("labelSelector")),
        namespaces,
        str(raw.get("topologyKey", "")),
        weight,
    )


def terms(pod: Pod, kind: str, when: str) -> list[Term]:
    """The pod's `kind` (podAffinity, podAntiAffinity) terms, `when` required/preferred."""
    namespace = (pod.get("metadata") or {}).get("namespace", "")
    spec = (((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}).get(when) or []
    if when == REQUIRED:
        return [_term(t, namespace) for t in spec]
    return [
        _term(t.get("podAffinityTerm") or {}, namespace, int(t.get("weight") or 0)) for t in spec
    ]


Pair = tuple[str, str]
"""(topology key, value): one domain."""


@dataclass
class PreFilterState:
    affinity: list[Term]
    anti_affinity: list[Term]
    affinity_counts: dict[Pair, int]
    anti_affinity_counts: dict[Pair, int]
    existing_anti_affinity: dict[Pair, int]


def _pods(nodes: Iterable[NodeInfo]) -> Iterable[tuple[NodeInfo, PodInfo]]:
    for node in nodes:
        for info in node.pods.values():
            yield node, info


def _count(counts: dict[Pair, int], node: NodeInfo, key: str) -> None:
    if key in node.labels:
        pair = (key, node.labels[key])
        counts[pair] = counts.get(pair, 0) + 1


def compute(
    pod: Pod, snapshot: Snapshot, interned: MutableMapping[Term, Term] | None = None
) -> PreFilterState:
    """Count, per domain, the pods matching the pod's required terms (a walk over every
    pod, only when it has such terms) and the placed pods whose required anti-affinity
    matches it (a walk over the pods that have affinity terms only). `interned` maps
    each placed pod's term to one equal instance, so that grouping them by term finds
    them by identity instead of comparing selectors field by field."""
    if interned is None:
        interned = {}
    affinity = terms(pod, "podAffinity", REQUIRED)
    anti = terms(pod, "podAntiAffinity", REQUIRED)
    state = PreFilterState(affinity, anti, {}, {}, {})
    if affinity or anti:
        # Verdicts per (namespace, labels): a workload's pods share them.
        memo: dict[tuple[str, frozenset[tuple[str, str]]], tuple[bool, list[bool]]] = {}
        for node, info in _pods(snapshot.node_infos()):
            verdict = memo.get(info.label_key)
            if verdict is None:
                verdict = memo[info.label_key] = (
                    bool(affinity) and all(t.matches(info.pod) for t in affinity),
                    [t.matches(info.pod) for t in anti],
                )
            if verdict[0]:
                for t in affinity:
                    _count(state.affinity_counts, node, t.topology_key)
            for t, hit in zip(anti, verdict[1], strict=True):
                if hit:
                    _count(state.anti_affinity_counts, node, t.topology_key)
    # Pods of one workload share their terms: each distinct term is matched once.
    nodes_by_term: dict[Term, list[NodeInfo]] = {}
    for node, info in snapshot.pods_with_affinity():
        placed_anti = info.parsed.get(NAME)
        if placed_anti is None:
            placed_anti = info.parsed[NAME] = [
                interned.setdefault(t, t) for t in terms(info.pod, "podAntiAffinity", REQUIRED)
            ]
        for t in placed_anti:
            nodes_by_term.setdefault(t, []).append(node)
    for t, nodes in nodes_by_term.items():
        if t.matches(pod):
            for node in nodes:
                _count(state.existing_anti_affinity, node, t.topology_key)
    return state


def fits(pod: Pod, s: PreFilterState, node: NodeInfo) -> str | None:
    """The reason the node breaks an (anti-)affinity rule, or None."""
    labels = node.labels
    for (key, value), count in s.existing_anti_affinity.items():
        if count and labels.get(key) == value:
            return ERR_REASON_EXISTING_ANTI_AFFINITY
    for t in s.anti_affinity:
        if t.topology_key in labels and s.anti_affinity_counts.get(
            (t.topology_key, labels[t.topology_key]), 0
        ):
            return ERR_REASON_ANTI_AFFINITY
    if s.affinity:
        satisfied = all(
            t.topology_key in labels
            and s.affinity_counts.get((t.topology_key, labels[t.topology_key]), 0) > 0
            for t in s.affinity
        )
        if not satisfied:
            first_of_group = not s.affinity_counts and all(t.matches(pod) for t in s.affinity)
            if not (first_of_group and all(t.topology_key in labels for t in s.affinity)):
                return ERR_REASON_AFFINITY
    return None


class InterPodAffinity:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.interned: MutableMapping[Term, Term] = weakref.WeakValueDictionary()
        """One instance per distinct term of the placed pods (a workload's pods share
        theirs), gone with the last pod that holds it."""

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status:
        s = compute(pod.pod, snapshot, self.interned)
        if not (s.affinity or s.anti_affinity or s.existing_anti_affinity):
            state.skip_filter.add(NAME)
            return SKIP
        state.write(NAME, s)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s = state.read(NAME)
        if s is None:
            return error(f"{NAME}: no pre-filter state for {pod.key}")
        reason = fits(pod.pod, s, node)
        return SUCCESS if reason is None else unschedulable(reason)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        preferred = [(t, 1) for t in terms(pod.pod, "podAffinity", PREFERRED)] + [
            (t, -1) for t in terms(pod.pod, "podAntiAffinity", PREFERRED)
        ]
        if not preferred:
            state.skip_score.add(NAME)
            return SKIP
        weights: dict[Pair, int] = {}
        for node, info in _pods(self.handle.snapshot.node_infos()):
            for t, sign in preferred:
                if t.topology_key in node.labels and t.matches(info.pod):
                    pair = (t.topology_key, node.labels[t.topology_key])
                    weights[pair] = weights.get(pair, 0) + sign * t.weight
        state.write(NAME + "/score", weights)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        weights: dict[Pair, int] = state.read(NAME + "/score")
        return sum(w for (key, value), w in weights.items() if node.labels.get(key) == value)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        if not scores:
            return
        low, high = min(scores.values()), max(scores.values())
        for name, value in scores.items():
            scores[name] = MAX_NODE_SCORE * (value - low) // (high - low) if high > low else 0


def new(args: Mapping[str, Any], handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(handle)
