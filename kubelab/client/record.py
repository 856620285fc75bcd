"""Events about objects, as client-go's `tools/record` writes them: what a component did
to an object, or why it could not, for `kubectl describe` and `kubectl get events`.

An Event is a core/v1 object in the namespace of the object it is about ("default" for
cluster-scoped ones, as Kubernetes files them), named `<object>.<hex nanoseconds>`. A
component that says the same thing about the same object again bumps the first Event's
`count` and `lastTimestamp` instead of writing another (client-go's EventCorrelator
does this too), so that a controller retrying every few seconds leaves one line, not
hundreds. Recording never fails its caller: an Event that cannot be written is logged
and dropped, since a lost Event must not stop a controller from doing its work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client.clock import REAL_CLOCK, Clock, rfc3339
from kubelab.client.rest import Object, RestClient, ServerUnreachable, resource_for

EVENTS = resource_for("v1", "Event")

NORMAL = "Normal"
SEEN_CAPACITY = 4096
"""Events remembered for counting repeats (client-go's LRU holds as many)."""
WARNING = "Warning"

log = logging.getLogger("kubelab.client.record")


def involved_object(obj: Object, field_path: str = "") -> dict[str, Any]:
    """The reference an Event keeps to `obj` (`field_path`: the part of it, such as
    "spec.containers{web}")."""
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    if field_path:
        ref["fieldPath"] = field_path
    return ref


class EventRecorder:
    """Writes Events as `component` (on `host`, for a node's agents; module docstring).
    Thread-safe."""

    def __init__(
        self, client: RestClient, component: str, clock: Clock = REAL_CLOCK, host: str = ""
    ) -> None:
        self._client = client
        self._component = component
        self._source = {"component": component, **({"host": host} if host else {})}
        self._clock = clock
        self._lock = threading.Lock()
        # (uid, field path, type, reason, message) -> (namespace, event name, count) of
        # the Event already written for it.
        self._seen: OrderedDict[tuple[str, ...], tuple[str, str, int]] = OrderedDict()

    def _remember(self, key: tuple[str, ...], value: tuple[str, str, int]) -> None:
        with self._lock:
            self._seen[key] = value
            self._seen.move_to_end(key)
            while len(self._seen) > SEEN_CAPACITY:
                self._seen.popitem(last=False)

    def event(
        self, obj: Object, kind: str, reason: str, message: str, field_path: str = ""
    ) -> None:
        """Record that `reason`: `message` happened to `obj` (or its part `field_path`);
        `kind` is NORMAL or WARNING."""
        ref = involved_object(obj, field_path)
        namespace = ref.get("namespace") or "default"
        key = (str(ref["uid"]), field_path, kind, reason, message)
        now = rfc3339(self._clock.utcnow())
        with self._lock:
            seen = self._seen.get(key)
        try:
            if seen is not None:
                ns, name, count = seen
                self._client.patch(
                    EVENTS, name, {"count": count + 1, "lastTimestamp": now}, namespace=ns
                )
                self._remember(key, (ns, name, count + 1))
                return
            name = f"{ref['name']}.{time.time_ns():x}"
            self._client.create(
                EVENTS,
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": namespace},
                    "involvedObject": ref,
                    "reason": reason,
                    "message": message,
                    "type": kind,
                    "count": 1,
                    "firstTimestamp": now,
                    "lastTimestamp": now,
                    "source": self._source,
                    "reportingComponent": self._component,
                    "reportingInstance": self._component,
                },
                namespace,
            )
            self._remember(key, (namespace, name, 1))
        except StatusError as exc:
            if seen is not None and exc.code == 404:
                # The first Event expired or was deleted: write a new one next time.
                with self._lock:
                    self._seen.pop(key, None)
            log.warning(
                "%s: could not record event %s on %s %s: %s",
                self._component,
                reason,
                ref["kind"],
                ref["name"],
                exc,
            )
        except ServerUnreachable as exc:
            log.warning("%s: could not record event %s: %s", self._component, reason, exc)
