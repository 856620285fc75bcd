"""PrioritySort (queue-sort): the pending pod with the higher `spec.priority` goes first,
and among equals the one queued earlier, so that a flood of low-priority pods cannot
starve an important one and equal pods are served in order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..framework import Handle, QueuedPod

NAME = "PrioritySort"


def less(a: QueuedPod, b: QueuedPod) -> bool:
    pa, pb = a.info.priority, b.info.priority
    return pa > pb or (pa == pb and a.timestamp < b.timestamp)


class PrioritySort:
    name = NAME

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        return less(a, b)


def new(args: Mapping[str, Any], handle: Handle) -> PrioritySort:
    return PrioritySort()
