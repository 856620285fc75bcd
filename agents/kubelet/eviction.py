"""Node-pressure eviction (the kubelet's eviction manager): when memory or disk available
on the node falls below `--eviction-hard`, the kubelet stops pods itself, one per check,
before the kernel's OOM killer or a full disk picks victims at random. The node's
MemoryPressure/DiskPressure conditions (agents.kubelet.node) say the same to the
scheduler and the node controller, which taints the node.

Which pod goes first, as Kubernetes ranks them:

* memory: pods using more than they requested, then lower priority, then the largest
  use above the request (so a BestEffort pod, which requested nothing, goes before a
  Guaranteed one of the same priority);
* disk: lower priority, then the pod with the most in use; the runtime reports no
  per-pod disk use here, so among equals the youngest pod goes (it has done the least
  work), an approximation of Kubernetes' ranking by ephemeral-storage use.

Static pods (the control plane's) are never evicted. An evicted pod is stopped at once
(grace 0: a hard threshold) and stays in the API as Failed, reason Evicted, with a
message naming the resource, for its controller to replace.
"""

from __future__ import annotations

import logging

from agents.kubelet import podspec
from agents.kubelet.config import byte_count
from agents.kubelet.node import NodeStatus
from agents.kubelet.pods import PodWorkers
from agents.kubelet.runtime import CONTAINER_NAME, State
from kubelab.client.rest import Object

log = logging.getLogger("kubelab.kubelet.eviction")


def _memory_request(pod: Object) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        requests = podspec.requests_limits(c)[0]
        if "memory" in requests:
            total += byte_count(requests["memory"])
    return total


def _ki(n: int) -> str:
    """Bytes as the kubelet's eviction messages write them."""
    return f"{n // 1024}Ki"


class EvictionManager:
    def __init__(self, node: NodeStatus, workers: PodWorkers) -> None:
        self.node = node
        self.workers = workers

    def _memory_use(self, uid: str) -> dict[str, int]:
        """Working set by container name, of the pod's running containers."""
        use = {}
        for c in self.workers.pleg.snapshot(uid).containers:
            if c.state == State.RUNNING:
                stats = self.workers.runtime.stats(c.id)
                if stats is not None:
                    use[c.labels.get(CONTAINER_NAME, "")] = stats.memory_working_set
        return use

    def check(self) -> str | None:
        """Evict one pod if a threshold is met; return its uid (None: nothing to do)."""
        memory, disk = self.node.under_pressure()
        if not (memory or disk):
            return None
        candidates = self.workers.evictable()
        if not candidates:
            log.warning(
                "kubelet %s: under %s pressure and no pod to evict",
                self.node.config.node_name,
                "memory" if memory else "disk",
            )
            return None
        if memory:
            uid, message = self._memory_victim(candidates)
        else:
            uid, message = self._disk_victim(candidates)
        self.workers.evict(uid, message)
        return uid

    def _memory_victim(self, candidates: list[tuple[str, Object]]) -> tuple[str, str]:
        ranked = []
        for uid, pod in candidates:
            use = self._memory_use(uid)
            over = sum(use.values()) - _memory_request(pod)
            priority = int((pod.get("spec") or {}).get("priority") or 0)
            ranked.append((not over > 0, priority, -over, uid, pod, use))
        ranked.sort(key=lambda r: r[:3])
        *_, uid, pod, use = ranked[0]
        threshold = self.node.memory_threshold()
        available = self.node.machine.pressure().memory_available
        message = (
            f"The node was low on resource: memory. Threshold quantity: {_ki(threshold)}, "
            f"available: {_ki(available)}."
        )
        if use:
            name, most = max(use.items(), key=lambda kv: kv[1])
            message += (
                f" Container {name} was using {_ki(most)}, request is "
                f"{_ki(_memory_request(pod))}, has larger consumption of memory."
            )
        return uid, message

    def _disk_victim(self, candidates: list[tuple[str, Object]]) -> tuple[str, str]:
        youngest_first = sorted(
            candidates, key=lambda c: c[1]["metadata"].get("creationTimestamp") or "", reverse=True
        )
        youngest_first.sort(key=lambda c: int((c[1].get("spec") or {}).get("priority") or 0))
        return youngest_first[0][0], "The node was low on resource: ephemeral-storage."
