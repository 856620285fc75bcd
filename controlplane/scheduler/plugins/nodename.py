"""NodeName (filter): a pod that names a node in `spec.nodeName` fits that node only.
The scheduler never queues such a pod (it is bound already); the check matters to whoever
asks "would this pod fit there?" with the same filters, and its rejection is final
(no preemption can change a name)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    unresolvable,
)

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: Pod, node_name: str) -> bool:
    wanted = (pod.get("spec") or {}).get("nodeName")
    return not wanted or wanted == node_name


class NodeName:
    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status:
        if not (pod.pod.get("spec") or {}).get("nodeName"):
            state.skip_filter.add(NAME)
            return SKIP
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS if fits(pod.pod, node.name) else unresolvable(ERR_REASON)


def new(args: Mapping[str, Any], handle: Handle) -> NodeName:
    return NodeName()
