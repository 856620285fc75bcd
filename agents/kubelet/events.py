"""The kubelet's Events (Pulling, Pulled, Created, Started, Killing, BackOff, Unhealthy,
FailedMount, ...), as `kubectl describe pod` shows them in the seeds: written with
`source.component: kubelet` and `source.host: <node>`.

An Event repeated about the same object bumps the first one's count instead of writing
another, so a crash-looping container leaves one BackOff line with a growing count.
Writing never fails nor holds up the caller: Events are queued and written by one
thread of their own, as client-go's broadcaster does, so a pod worker does not wait out
the client's retries while the apiserver is away (a control-plane node's kubelet starts
the apiserver itself, with every Event of that start failing); a full queue drops
Events, with a warning. `Recorder(None, ...)` records nothing: hollow nodes, whose
Events would only load the apiserver under test.
"""

from __future__ import annotations

import datetime
import logging
import queue
import threading
import time
from collections import OrderedDict
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client import RestClient, ServerUnreachable, resource_for

log = logging.getLogger("kubelab.kubelet.events")

EVENTS = resource_for("v1", "Event")
NORMAL, WARNING = "Normal", "Warning"
_REMEMBERED = 1024
_QUEUED = 1000

Object = dict[str, Any]


class Recorder:
    def __init__(self, client: RestClient | None, node: str) -> None:
        self._client = client
        self._node = node
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, ...], Object] = OrderedDict()
        self._queue: queue.Queue[tuple[Object, str, str, str, str, str]] = queue.Queue(_QUEUED)
        self._writer: threading.Thread | None = None

    def event(
        self, pod: Object, kind: str, reason: str, message: str, field_path: str = ""
    ) -> None:
        """Queue an Event about `pod` (written soon, by the writer thread)."""
        if self._client is None:
            return
        meta = pod["metadata"]
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            self._queue.put_nowait((meta, kind, reason, message, field_path, now))
        except queue.Full:
            log.warning(
                "kubelet %s: event %s on %s/%s dropped: %d Events wait to be written",
                self._node, reason, meta.get("namespace"), meta.get("name"), _QUEUED,
            )  # fmt: skip
            return
        with self._lock:
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._run, name=f"kubelet {self._node} events", daemon=True
                )
                self._writer.start()

    def _run(self) -> None:
        while True:
            self._write(*self._queue.get())

    def _write(
        self, meta: Object, kind: str, reason: str, message: str, field_path: str, now: str
    ) -> None:
        assert self._client is not None
        ns = meta.get("namespace") or "default"
        key = (ns, meta.get("uid", ""), field_path, kind, reason, message)
        with self._lock:
            earlier = self._seen.pop(key, None)
        try:
            if earlier is not None:
                written = self._client.patch(
                    EVENTS,
                    earlier["metadata"]["name"],
                    {"count": int(earlier.get("count", 1)) + 1, "lastTimestamp": now},
                    ns,
                )
            else:
                ref: Object = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "namespace": ns,
                    "uid": meta.get("uid", ""),
                }
                if field_path:
                    ref["fieldPath"] = field_path
                written = self._client.create(
                    EVENTS,
                    {
                        "apiVersion": "v1",
                        "kind": "Event",
                        "metadata": {
                            "name": f"{meta['name']}.{time.time_ns():x}",
                            "namespace": ns,
                        },
                        "involvedObject": ref,
                        "type": kind,
                        "reason": reason,
                        "message": message,
                        "count": 1,
                        "firstTimestamp": now,
                        "lastTimestamp": now,
                        "source": {"component": "kubelet", "host": self._node},
                        "reportingComponent": "kubelet",
                        "reportingInstance": self._node,
                    },
                )
        except (StatusError, ServerUnreachable) as exc:
            log.warning(
                "kubelet %s: event %s on %s/%s not written: %s",
                self._node,
                reason,
                ns,
                meta["name"],
                exc,
            )
            return
        with self._lock:
            self._seen[key] = written
            while len(self._seen) > _REMEMBERED:
                self._seen.popitem(last=False)
