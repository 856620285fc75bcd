"""NodeUnschedulable (filter): a cordoned node (`spec.unschedulable`, what `kubectl
cordon` sets) takes no new pods, unless the pod tolerates the
`node.kubernetes.io/unschedulable:NoSchedule` taint that stands for it (DaemonSet pods
do)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubelab.api.podscheduling import NO_SCHEDULE, pod_tolerations, tolerates

from ..framework import (
    SUCCESS,
    CycleState,
    Handle,
    Node,
    NodeInfo,
    Pod,
    PodInfo,
    Status,
    unresolvable,
)

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_KEY = "node.kubernetes.io/unschedulable"


def fits(pod: Pod, node: Node) -> bool:
    if not (node.get("spec") or {}).get("unschedulable"):
        return True
    taint = {"key": TAINT_KEY, "effect": NO_SCHEDULE}
    return any(tolerates(t, taint) for t in pod_tolerations(pod))


class NodeUnschedulable:
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS if fits(pod.pod, node.node) else unresolvable(ERR_REASON_UNSCHEDULABLE)


def new(args: Mapping[str, Any], handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()
