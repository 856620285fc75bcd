"""Conversions between API versions that share one stored object.

Kubernetes stores one Event per key and serves it as ``v1`` Event (core, the one
``kubectl get events`` and ``kubectl describe`` read) and as ``events.k8s.io/v1`` Event
(the newer shape recorders write and ``kubectl events`` reads). The two differ in field
names only:

    core/v1                 events.k8s.io/v1
    involvedObject          regarding
    message                 note
    source                  deprecatedSource
    firstTimestamp          deprecatedFirstTimestamp
    lastTimestamp           deprecatedLastTimestamp
    count                   deprecatedCount
    reportingComponent      reportingController

Everything else (metadata, reason, type, action, related, eventTime, series,
reportingInstance) keeps its name. The store holds the core form.
"""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]

_RENAMES = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
)


def _renamed(obj: Object, pairs: tuple[tuple[str, str], ...]) -> Object:
    mapping = dict(pairs)
    return {mapping.get(k, k): v for k, v in obj.items()}


def core_event_to_events_v1(event: Object) -> Object:
    out = _renamed(event, _RENAMES)
    out["apiVersion"], out["kind"] = "events.k8s.io/v1", "Event"
    return out


def events_v1_to_core_event(event: Object) -> Object:
    out = _renamed(event, tuple((new, old) for old, new in _RENAMES))
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out
