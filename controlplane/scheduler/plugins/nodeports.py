"""NodePorts (filter): two pods cannot claim the same host port (and protocol) on one
node; a claim on every address (hostIP unset or 0.0.0.0) conflicts with a claim on any
single address."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..framework import (
    SUCCESS,
    CycleState,
    Handle,
    NodeInfo,
    PodInfo,
    Status,
    host_ports,
    unschedulable,
)

NAME = "NodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


def fits(wanted: Iterable[tuple[str, str, int]], used: Mapping[tuple[str, str, int], int]) -> bool:
    for ip, protocol, port in wanted:
        for used_ip, used_protocol, used_port in used:
            if used_port != port or used_protocol != protocol:
                continue
            if not ip or not used_ip or ip == used_ip:
                return False
    return True


class NodePorts:
    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: object) -> Status:
        wanted = list(host_ports(pod.pod))
        if not wanted:
            state.skip_filter.add(NAME)
        state.write(NAME, wanted)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        wanted = state.read(NAME)
        if wanted is None:
            wanted = list(host_ports(pod.pod))
        return SUCCESS if fits(wanted, node.used_ports) else unschedulable(ERR_REASON)


def new(args: Mapping[str, Any], handle: Handle) -> NodePorts:
    return NodePorts()
