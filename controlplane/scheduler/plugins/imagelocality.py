"""ImageLocality (score): prefer nodes that already hold the pod's images (from the
node's `status.images`), so the pod starts without a pull. As in kube-scheduler, an
image counts by its size scaled by how many nodes have it (an image every node has
does not tell nodes apart), and the sum is mapped from [23 MB, 1000 MB per container]
onto 0..100."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..framework import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    CycleState,
    Handle,
    NodeInfo,
    PodInfo,
    Snapshot,
    Status,
)

NAME = "ImageLocality"
MIN_THRESHOLD = 23 * 1024 * 1024
MAX_CONTAINER_THRESHOLD = 1000 * 1024 * 1024


def normalized_image_name(name: str) -> str:
    """ "nginx" and "nginx:latest" are one image; a digest or tag is kept."""
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last or "@" in name else f"{name}:latest"


def locality_score(sum_scores: int, containers: int) -> int:
    top = MAX_CONTAINER_THRESHOLD * max(containers, 1)
    clamped = min(max(sum_scores, MIN_THRESHOLD), top)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (top - MIN_THRESHOLD)


class ImageLocality:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        images = [
            normalized_image_name(str(c.get("image", "")))
            for c in (pod.pod.get("spec") or {}).get("containers") or []
        ]
        snapshot: Snapshot = self.handle.snapshot
        total = max(snapshot.node_count(), 1)
        spread = {image: snapshot.nodes_with_image(image) / total for image in images}
        if not any(spread.values()):
            state.skip_score.add(NAME)  # no node has them: every node would score 0
            return SKIP
        state.write(NAME, (images, spread))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        images, spread = state.read(NAME)
        total = sum(int(node.images[i] * spread[i]) for i in images if i in node.images)
        return locality_score(total, len(images))

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        return None


def new(args: Mapping[str, Any], handle: Handle) -> ImageLocality:
    return ImageLocality(handle)
