"""An event recorder: what a component did to an object, as core/v1 Events that
`kubectl describe` and `kubectl get events` show ("Scheduled: Successfully assigned
default/nginx to node3").

As client-go's EventBroadcaster, recording never blocks the caller: events go into a
bounded queue and a background thread writes them; when the apiserver is slow and the
queue is full, new events are dropped (and counted) rather than slowing the component
down. Events are best-effort in Kubernetes too.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import queue
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client.rest import RestClient, ServerUnreachable, resource_for

log = logging.getLogger(__name__)

EVENTS = resource_for("v1", "Event")

NORMAL, WARNING = "Normal", "Warning"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Records Events about objects as `component` (e.g. "default-scheduler") from
    `host`; `start()` the writer, `stop()` it (what is queued is written first, within
    a bound)."""

    def __init__(
        self, client: RestClient, component: str, host: str = "", capacity: int = 1000
    ) -> None:
        self._client = client
        self.component = component
        self.host = host
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self.dropped = 0

    def event(
        self,
        obj: Mapping[str, Any],
        event_type: str,
        reason: str,
        message: str,
        action: str = "",
    ) -> None:
        """Queue an Event about `obj` (a full object with apiVersion, kind, metadata)."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = _now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name', 'unknown')}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", "v1"),
                "kind": obj.get("kind", ""),
                "name": meta.get("name", ""),
                "namespace": meta.get("namespace", ""),
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": self.component, **({"host": self.host} if self.host else {})},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "eventTime": None,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            **({"action": action} if action else {}),
        }
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            self.dropped += 1

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        if self._thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            body = self._queue.get()
            if body is None:
                return
            try:
                self._client.create(EVENTS, body)
            except (StatusError, ServerUnreachable) as exc:
                log.warning(
                    "cannot record event %s for %s/%s: %s",
                    body["reason"],
                    body["metadata"]["namespace"],
                    body["involvedObject"]["name"],
                    exc,
                )
