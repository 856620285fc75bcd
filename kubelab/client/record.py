"""Events about objects, as client-go's `tools/record` writes them: what a component did
to an object, or why it could not, for `kubectl describe` and `kubectl get events`
("Scheduled: Successfully assigned default/nginx to node3"). Every component that
writes Events (the scheduler, the controllers, a node's agents) does it through this
one recorder.

An Event is a core/v1 object in the namespace of the object it is about ("default" for
cluster-scoped ones, as Kubernetes files them), named `<object>.<hex nanoseconds>`.

Recording never blocks or fails its caller, as with client-go's EventBroadcaster:
`event()` puts the Event in a bounded queue and a background thread (`start()`,
`stop()`) writes it; when the apiserver is slow and the queue is full, new Events are
dropped and counted (`dropped`) rather than slowing a scheduler or controller down, and
an Event that cannot be written is logged and dropped. The writer also does what
client-go's EventCorrelator does: a component that says the same thing about the same
object again bumps the first Event's `count` and `lastTimestamp` instead of writing
another, so that a controller retrying every few seconds leaves one line, not hundreds.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client.clock import REAL_CLOCK, Clock, rfc3339
from kubelab.client.rest import RestClient, ServerUnreachable, resource_for

EVENTS = resource_for("v1", "Event")

NORMAL = "Normal"
QUEUE_CAPACITY = 1000
"""Events waiting to be written before new ones are dropped."""
SEEN_CAPACITY = 4096
"""Events remembered for counting repeats (client-go's LRU holds as many)."""
WARNING = "Warning"

log = logging.getLogger("kubelab.client.record")


def involved_object(
    obj: Mapping[str, Any], field_path: str = "", object_type: tuple[str, str] = ("", "")
) -> dict[str, Any]:
    """The reference an Event keeps to `obj` (`field_path`: the part of it, such as
    "spec.containers{web}"; `object_type`: the apiVersion and kind to name when `obj`
    does not carry them)."""
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion") or object_type[0],
        "kind": obj.get("kind") or object_type[1],
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    if field_path:
        ref["fieldPath"] = field_path
    return ref


@dataclass(frozen=True)
class _Pending:
    """An Event queued for the writer: what repeats are matched on, the body to create,
    and when it happened (a repeat's lastTimestamp is when it was said, not written)."""

    key: tuple[str, ...]
    body: dict[str, Any]
    when: str


class EventRecorder:
    """Writes Events as `component` (on `host`, for a node's agents and a replica of a
    control-plane component; module docstring). `start()` the writer and `stop()` it
    (what is queued is written first, within a bound), or run the component inside
    `with recorder:`. Thread-safe.

    Without a `client` nothing is recorded: the hollow kubelets of the scheduler
    benchmark run the kubelet's code, and their Events would only load the apiserver
    under test. `object_type` is the (apiVersion, kind) of objects that come without
    them, as the items of a list or a watch do (the kubelet's pods)."""

    def __init__(
        self,
        client: RestClient | None,
        component: str,
        *,
        host: str = "",
        clock: Clock = REAL_CLOCK,
        capacity: int = QUEUE_CAPACITY,
        object_type: tuple[str, str] = ("", ""),
    ) -> None:
        self._client = client
        self._object_type = object_type
        self._component = component
        self._host = host
        self._source = {"component": component, **({"host": host} if host else {})}
        self._clock = clock
        self._queue: queue.Queue[_Pending | None] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self._dropped = 0
        self._dropped_lock = threading.Lock()
        # Only the writer thread touches this: (uid, field path, type, reason, message)
        # -> (namespace, event name, count) of the Event already written for it.
        self._seen: OrderedDict[tuple[str, ...], tuple[str, str, int]] = OrderedDict()

    @property
    def dropped(self) -> int:
        """Events dropped because the queue was full."""
        with self._dropped_lock:
            return self._dropped

    def event(
        self,
        obj: Mapping[str, Any],
        kind: str,
        reason: str,
        message: str,
        *,
        field_path: str = "",
        action: str = "",
    ) -> None:
        """Record that `reason`: `message` happened to `obj` (a full object with
        apiVersion, kind, metadata; or to its part `field_path`); `kind` is NORMAL or
        WARNING, `action` what was done (e.g. "Binding")."""
        if self._client is None:
            return
        ref = involved_object(obj, field_path, self._object_type)
        namespace = ref.get("namespace") or "default"
        now = rfc3339(self._clock.utcnow())
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ref['name']}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": kind,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": self._source,
            "reportingComponent": self._component,
            "reportingInstance": self._host or self._component,
            **({"action": action} if action else {}),
        }
        key = (str(ref["uid"]), field_path, kind, reason, message)
        try:
            self._queue.put_nowait(_Pending(key, body, now))
        except queue.Full:
            with self._dropped_lock:
                self._dropped += 1

    def start(self) -> None:
        """Start writing queued Events in a background thread."""
        if self._client is None:
            return
        self._thread = threading.Thread(
            target=self._run, name=f"events-{self._component}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued (within `timeout` seconds), then stop the writer."""
        if self._thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> EventRecorder:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        while (pending := self._queue.get()) is not None:
            self._write(pending)

    def _write(self, pending: _Pending) -> None:
        assert self._client is not None  # nothing is queued without one
        key, body = pending.key, pending.body
        seen = self._seen.get(key)
        try:
            if seen is not None:
                namespace, name, count = seen
                self._client.patch(
                    EVENTS,
                    name,
                    {"count": count + 1, "lastTimestamp": pending.when},
                    namespace=namespace,
                )
                self._remember(key, (namespace, name, count + 1))
                return
            namespace = body["metadata"]["namespace"]
            self._client.create(EVENTS, body, namespace)
            self._remember(key, (namespace, body["metadata"]["name"], 1))
        except StatusError as exc:
            if seen is not None and exc.code == 404:
                # The first Event expired or was deleted: write a new one next time.
                self._seen.pop(key, None)
            self._failed(body, exc)
        except ServerUnreachable as exc:
            self._failed(body, exc)

    def _remember(self, key: tuple[str, ...], value: tuple[str, str, int]) -> None:
        self._seen[key] = value
        self._seen.move_to_end(key)
        while len(self._seen) > SEEN_CAPACITY:
            self._seen.popitem(last=False)

    def _failed(self, body: dict[str, Any], exc: Exception) -> None:
        ref = body["involvedObject"]
        log.warning(
            "%s: could not record event %s on %s %s/%s: %s",
            self._component,
            body["reason"],
            ref["kind"],
            body["metadata"]["namespace"],
            ref["name"],
            exc,
        )
