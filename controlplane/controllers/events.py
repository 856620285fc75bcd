"""Events: what a controller tells the user it did, as core/v1 Events on the object it
acted on (`kubectl describe deployment web` lists them, `kubectl get events` too).

Kubernetes' controllers record through client-go's event broadcaster, which writes
asynchronously and merges repeats into one Event with a count. Here a recorder writes
each Event at once, from the worker that acted, with the reasons Kubernetes uses
(SuccessfulCreate, ScalingReplicaSet, ...): an Event is a report, so a failure to write
one is logged and never fails the sync that did the work.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client import REAL_CLOCK, Clock, Object, RestClient, ServerUnreachable, resource_for

EVENTS = resource_for("v1", "Event")

NORMAL = "Normal"
WARNING = "Warning"


class EventRecorder:
    """Writes Events as the controller `component` (their `source.component` and
    `reportingComponent`, e.g. "replicaset-controller")."""

    def __init__(
        self, client: RestClient, component: str, log: logging.Logger, clock: Clock = REAL_CLOCK
    ) -> None:
        self._client = client
        self._component = component
        self._log = log
        self._clock = clock

    def event(self, obj: Object, type_: str, reason: str, message: str) -> None:
        """Record that `reason` happened to `obj` (`type_` Normal or Warning)."""
        meta: dict[str, Any] = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        now = self._clock.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                # As client-go names them: the object's name and a unique suffix.
                "name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        level = logging.INFO if type_ == NORMAL else logging.WARNING
        self._log.log(
            level, "%s %s/%s: %s: %s", obj.get("kind"), namespace, meta.get("name"), reason, message
        )
        try:
            self._client.create(EVENTS, event, namespace)
        except (StatusError, ServerUnreachable) as exc:
            self._log.warning(
                "could not record the event %s on %s/%s: %s",
                reason,
                namespace,
                meta.get("name"),
                exc,
            )
