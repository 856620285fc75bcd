"""DefaultPreemption (post-filter): when no node fits a pod, make room on one by
deleting pods of lower priority, and nominate that node for the pod
(`status.nominatedNodeName`), as kube-scheduler does.

For each node that rejected the pod only in a way removing pods can fix (Unschedulable,
not UnschedulableAndUnresolvable): take every pod of lower priority off a copy of the
node; if the pod then fits, put them back one by one, highest priority first, keeping
back each one whose return still leaves room; the rest are the victims. The chosen node
is the one whose victims' highest priority is lowest, then whose victims' priorities sum
lowest, then with the fewest victims. The victims are deleted (with their grace period)
and get a Preempted Event; the pod waits in the queue for them to go.

A pod is not eligible when its `preemptionPolicy` is Never, or when victims it already
caused on its nominated node are still terminating (it would only preempt more).
Left out: PodDisruptionBudgets, and updating other plugins' pre-filter state for the
removed pods (inter-pod affinity to a victim is not re-evaluated).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client import ServerUnreachable, resource_for

from ..framework import (
    Code,
    CycleState,
    Handle,
    NodeInfo,
    PodInfo,
    Status,
    pod_key,
    pod_priority,
    unresolvable,
    unschedulable,
)

log = logging.getLogger("kubelab.scheduler.preemption")

NAME = "DefaultPreemption"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."
PODS = resource_for("v1", "Pod")


@dataclass
class Candidate:
    node: str
    victims: list[PodInfo]

    def rank(self) -> tuple[int, int, int]:
        priorities = [v.priority for v in self.victims]
        return (max(priorities, default=-(2**31)), sum(priorities), len(priorities))


def select_victims(pod: PodInfo, node: NodeInfo, fits: Any) -> list[PodInfo] | None:
    """The pods to remove from `node` so that `fits(node_copy)` holds, or None if even
    removing every lower-priority pod is not enough."""
    trial = node.clone()
    lower = sorted(
        (p for p in node.pods.values() if p.priority < pod.priority),
        key=lambda p: -p.priority,
    )
    for victim in lower:
        trial.remove_pod(victim.uid)
    if not fits(trial):
        return None
    victims = []
    for candidate in lower:
        trial.add_pod(candidate)
        if not fits(trial):
            trial.remove_pod(candidate.uid)
            victims.append(candidate)
    return victims


def summary(total: int, counts: Mapping[str, int]) -> str:
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


class DefaultPreemption:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[str, Status]:
        spec = pod.pod.get("spec") or {}
        if spec.get("preemptionPolicy") == "Never":
            return "", unresolvable(NEVER)
        nominated = (pod.pod.get("status") or {}).get("nominatedNodeName")
        snapshot = self.handle.snapshot
        if nominated:
            node = snapshot.get(nominated)
            if node is not None and any(
                (p.pod.get("metadata") or {}).get("deletionTimestamp") and p.priority < pod.priority
                for p in node.pods.values()
            ):
                return "", unschedulable(TERMINATING)
        counts: dict[str, int] = {}
        candidates = []
        for name, status in statuses.items():
            node = snapshot.get(name)
            if status.code != Code.UNSCHEDULABLE or node is None:
                counts[NOT_HELPFUL] = counts.get(NOT_HELPFUL, 0) + 1
                continue
            victims = select_victims(
                pod, node, lambda trial: self.handle.run_filters(state, pod, trial).ok
            )
            if not victims:
                counts[NO_VICTIMS] = counts.get(NO_VICTIMS, 0) + 1
                continue
            candidates.append(Candidate(name, victims))
        if not candidates:
            return "", unschedulable(summary(len(statuses), counts))
        best = min(candidates, key=Candidate.rank)
        self._preempt(pod, best)
        return best.node, Status(Code.SUCCESS)

    def _preempt(self, pod: PodInfo, candidate: Candidate) -> None:
        client, recorder = self.handle.client, self.handle.recorder
        for victim in candidate.victims:
            meta = victim.pod.get("metadata") or {}
            log.info(
                "preempting %s (priority %d) on %s for %s (priority %d)",
                victim.key,
                victim.priority,
                candidate.node,
                pod.key,
                pod_priority(pod.pod),
            )
            try:
                client.delete(PODS, meta["name"], meta["namespace"])
            except (StatusError, ServerUnreachable) as exc:
                log.warning("cannot delete victim %s: %s", victim.key, exc)
                continue
            recorder.event(
                victim.pod,
                "Normal",
                "Preempted",
                f"Preempted by pod {pod_key(pod.pod)} on node {candidate.node}",
            )


def new(args: Mapping[str, Any], handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(handle)
