"""Taints and tolerations, matched as Kubernetes matches them: the node lifecycle's
taint eviction decides with them which pods leave a tainted node, and when; the
scheduler which pods may land on one.

A toleration tolerates a taint when its effect is empty or the taint's, and its key is
empty with operator Exists (it tolerates everything) or the taint's key, with operator
Exists, or Equal (the default) and the taint's value.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

Obj = Mapping[str, Any]

NO_EXECUTE = "NoExecute"
NO_SCHEDULE = "NoSchedule"


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Whether `toleration` tolerates `taint` (module docstring)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(taints: Iterable[Obj], tolerations: Iterable[Obj]) -> list[Obj]:
    """The taints that no toleration tolerates."""
    tolerations = list(tolerations)
    return [t for t in taints if not any(tolerates(tol, t) for tol in tolerations)]


def parse_time(text: str) -> datetime.datetime:
    """An RFC 3339 time of the API ("2026-01-02T03:04:05Z")."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def eviction_time(
    taints: Iterable[Obj], tolerations: Iterable[Obj], now: datetime.datetime
) -> datetime.datetime | None:
    """When a pod with `tolerations` must leave a node with the NoExecute `taints`:
    at once (`now`) if one is not tolerated; else when the shortest tolerationSeconds of
    the tolerations used has run out, counted from the time each taint was added (or
    `now` for a taint without one); None if the pod may stay for ever."""
    tolerations = list(tolerations)
    deadline: datetime.datetime | None = None
    for taint in taints:
        if taint.get("effect") != NO_EXECUTE:
            continue
        used = [t for t in tolerations if tolerates(t, taint)]
        if not used:
            return now
        added = parse_time(str(taint["timeAdded"])) if taint.get("timeAdded") else now
        for toleration in used:
            seconds = toleration.get("tolerationSeconds")
            if seconds is None:
                continue
            at = added + datetime.timedelta(seconds=max(0, int(seconds)))
            deadline = at if deadline is None else min(deadline, at)
    return deadline
