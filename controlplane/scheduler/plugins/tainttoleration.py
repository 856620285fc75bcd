"""TaintToleration (filter, score): a node's NoSchedule and NoExecute taints keep off
every pod that does not tolerate them (the seeds' node 4: "Has taint that pod doesn't
tolerate (removed)"); among the nodes left, fewer untolerated PreferNoSchedule taints
score higher."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubelab.api.podscheduling import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    node_taints,
    pod_tolerations,
    tolerates,
    untolerated_taint,
)

from ..framework import (
    SUCCESS,
    CycleState,
    Handle,
    Node,
    NodeInfo,
    Pod,
    PodInfo,
    Status,
    normalize_reverse,
    unresolvable,
)

NAME = "TaintToleration"


def untolerated_reason(taint: Mapping[str, Any]) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


def fits(pod: Pod, node: Node) -> Mapping[str, Any] | None:
    """The taint that keeps the pod off the node, or None."""
    return untolerated_taint(node_taints(node), pod_tolerations(pod), (NO_SCHEDULE, NO_EXECUTE))


def intolerable_preferences(pod: Pod, node: Node) -> int:
    tolerations = [
        t for t in pod_tolerations(pod) if t.get("effect") in ("", None, PREFER_NO_SCHEDULE)
    ]
    return sum(
        1
        for taint in node_taints(node)
        if taint.get("effect") == PREFER_NO_SCHEDULE
        and not any(tolerates(t, taint) for t in tolerations)
    )


class TaintToleration:
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if not node.taints:
            return SUCCESS
        taint = fits(pod.pod, node.node)
        return SUCCESS if taint is None else unresolvable(untolerated_reason(taint))

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return intolerable_preferences(pod.pod, node.node) if node.taints else 0

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        normalize_reverse(scores, reverse=True)


def new(args: Mapping[str, Any], handle: Handle) -> TaintToleration:
    return TaintToleration()
