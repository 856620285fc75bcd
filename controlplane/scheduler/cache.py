"""The scheduler cache: every node with the pods on it, kept from the informers'
events, plus the pods this scheduler has *assumed* onto a node but whose binding the
watch has not confirmed yet.

Why assume. Binding is a request to the apiserver, and the informer hears of the bound
pod some time later. Without counting the pod on its node meanwhile, the next pods
would be scheduled against a node that looks emptier than it is, and a node could be
overcommitted. So the scheduling cycle assumes the pod (adds it to its node here) before
binding starts; when the pod's add event arrives the assumption is confirmed; if binding
fails the pod is forgotten (taken off the node); if binding succeeded but no event comes
within `assumed_ttl` after it (the pod was deleted meanwhile and the event missed), the
assumption expires.

Reading. A scheduling cycle holds `lock` while it filters and scores, and reads the
NodeInfos in place (`Snapshot`): copying hundreds of nodes for every pod, as
kube-scheduler's generation-based snapshot avoids, would cost more here than the cycle.
Informer events wait for the cycle to finish.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .framework import Node, NodeInfo, Pod, PodInfo, pod_key, pod_uid

log = logging.getLogger("kubelab.scheduler.cache")

ASSUMED_TTL = 30.0
"""Seconds an assumed pod stays after its binding finished without the watch confirming."""


@dataclass
class _PodState:
    info: PodInfo
    node: str
    assumed: bool
    deadline: float | None = None
    """When an assumed pod whose binding finished expires (None: binding in flight)."""


class Cache:
    """Nodes and placed pods (module docstring). All methods take `lock` themselves;
    the scheduling cycle also holds it while it reads (it is reentrant)."""

    def __init__(
        self, assumed_ttl: float = ASSUMED_TTL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.lock = threading.RLock()
        self._nodes: dict[str, NodeInfo] = {}
        self._order: list[NodeInfo] = []
        self._pods: dict[str, _PodState] = {}
        self._image_nodes: dict[str, int] = {}
        self._affinity_pods: dict[str, _PodState] = {}
        self._assumed_ttl = assumed_ttl
        self._finished: collections.deque[tuple[str, float]] = collections.deque()
        self._clock = clock

    # -- Snapshot ------------------------------------------------------------------------

    def node_infos(self) -> list[NodeInfo]:
        return self._order

    def get(self, node_name: str) -> NodeInfo | None:
        return self._nodes.get(node_name)

    def node_count(self) -> int:
        return len(self._nodes)

    def nodes_with_image(self, image: str) -> int:
        return self._image_nodes.get(image, 0)

    def pods_with_affinity(self) -> list[tuple[NodeInfo, PodInfo]]:
        out = []
        for state in self._affinity_pods.values():
            node = self._nodes.get(state.node)
            if node is not None:
                out.append((node, state.info))
        return out

    # -- nodes ---------------------------------------------------------------------------

    def set_node(self, node: Node) -> None:
        name = str((node.get("metadata") or {}).get("name", ""))
        with self.lock:
            info = self._nodes.get(name)
            if info is None:
                info = NodeInfo(node)
                self._nodes[name] = info
                self._order.append(info)
                for state in self._pods.values():
                    if state.node == name:
                        info.add_pod(state.info)
            else:
                self._count_images(info, -1)
            info.set_node(node)
            self._count_images(info, 1)

    def remove_node(self, name: str) -> None:
        """The node is gone; pods still bound to it stay known (their deletion follows)."""
        with self.lock:
            info = self._nodes.pop(name, None)
            if info is not None:
                self._order.remove(info)
                self._count_images(info, -1)

    def _count_images(self, info: NodeInfo, sign: int) -> None:
        for image in info.images:
            count = self._image_nodes.get(image, 0) + sign
            if count > 0:
                self._image_nodes[image] = count
            else:
                self._image_nodes.pop(image, None)

    # -- pods ----------------------------------------------------------------------------

    def _place(self, state: _PodState) -> None:
        self._pods[state.info.uid] = state
        if state.info.has_affinity:
            self._affinity_pods[state.info.uid] = state
        node = self._nodes.get(state.node)
        if node is not None:
            node.add_pod(state.info)

    def _unplace(self, uid: str) -> _PodState | None:
        state = self._pods.pop(uid, None)
        self._affinity_pods.pop(uid, None)
        if state is not None:
            node = self._nodes.get(state.node)
            if node is not None:
                node.remove_pod(uid)
        return state

    def assume(self, pod: Pod, node_name: str) -> PodInfo:
        """Count `pod` on `node_name` before binding it; the PodInfo placed there."""
        bound = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node_name}}
        info = PodInfo.of(bound)
        with self.lock:
            if info.uid in self._pods:
                raise ValueError(f"pod {pod_key(pod)} ({info.uid}) is in the cache already")
            self._place(_PodState(info, node_name, assumed=True))
        return info

    def finish_binding(self, pod: Pod) -> None:
        """The binding succeeded: the assumption now waits for the watch, for a while.
        Noted without the lock (a binding thread must not wait for a scheduling cycle);
        `cleanup_expired` applies it."""
        self._finished.append((pod_uid(pod), self._clock() + self._assumed_ttl))

    def forget(self, pod: Pod) -> None:
        """The binding failed: take the assumed pod off its node."""
        with self.lock:
            state = self._pods.get(pod_uid(pod))
            if state is not None and state.assumed:
                self._unplace(pod_uid(pod))

    def is_assumed(self, pod: Pod) -> bool:
        with self.lock:
            state = self._pods.get(pod_uid(pod))
            return state is not None and state.assumed

    def add_pod(self, pod: Pod) -> None:
        """A bound pod from the informer (also the confirmation of an assumed one)."""
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        with self.lock:
            old = self._pods.get(pod_uid(pod))
            if old is not None and old.assumed and old.node != node:
                log.warning(
                    "pod %s was assumed on %s but is bound to %s", pod_key(pod), old.node, node
                )
            self._unplace(pod_uid(pod))
            self._place(_PodState(PodInfo.of(pod), node, assumed=False))

    update_pod = add_pod

    def remove_pod(self, pod: Pod) -> None:
        with self.lock:
            self._unplace(pod_uid(pod))

    def cleanup_expired(self) -> list[str]:
        """Forget assumed pods whose confirmation is overdue; their keys."""
        now = self._clock()
        with self.lock:
            while self._finished:
                uid, deadline = self._finished.popleft()
                state = self._pods.get(uid)
                if state is not None and state.assumed:
                    state.deadline = deadline
            expired = [
                uid
                for uid, s in self._pods.items()
                if s.assumed and s.deadline is not None and s.deadline <= now
            ]
            keys = []
            for uid in expired:
                state = self._unplace(uid)
                if state is not None:
                    keys.append(state.info.key)
                    log.warning("assumed pod %s on %s expired", state.info.key, state.node)
            return keys

    def pod_count(self) -> int:
        with self.lock:
            return len(self._pods)

    def assumed_count(self) -> int:
        with self.lock:
            return sum(1 for s in self._pods.values() if s.assumed)
