"""The audit log: one JSON line per request (level Metadata, stage ResponseComplete), in
the shape of Kubernetes' ``audit.k8s.io/v1`` Event, so "who did what, when, and what was
the answer" can be followed with grep or jq. Writes are serialized by a lock and
buffered: flushed by the first request a second or more after the last flush, and on
shutdown, like Kubernetes' batching audit backend. An apiserver without
``--audit-log-path`` keeps no log.

Parts of a request's handling may annotate its event (`annotate`: PodSecurity's
``pod-security.kubernetes.io/enforce-policy`` and ``.../audit-violations``), as
Kubernetes' admission plugins add audit annotations; the annotations travel in a context
variable (per greenlet under gevent), as the request's warnings do (`warning`)."""

from __future__ import annotations

import contextvars
import datetime
import threading
import time
from pathlib import Path
from typing import IO

from kubelab import fastjson

from .authn import UserInfo
from .requestinfo import RequestInfo

_annotations: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "kubelab_audit_annotations", default=None
)


def begin_annotations() -> None:
    """Start collecting the annotations of a request's audit event."""
    _annotations.set({})


def annotate(key: str, value: str) -> None:
    """Annotate the current request's audit event (outside a request: nothing to do)."""
    current = _annotations.get()
    if current is not None:
        current[key] = value


def take_annotations() -> dict[str, str]:
    """The annotations of the current request; it collects no more."""
    current = _annotations.get() or {}
    _annotations.set(None)
    return current


class AuditLog:
    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._flushed = time.monotonic()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Block-buffered and flushed at least every second (see `record`): a write
            # per request was a measurable share of the apiserver's CPU.
            self._file = path.open("a", buffering=64 * 1024)

    def record(
        self,
        audit_id: str,
        info: RequestInfo,
        user: UserInfo | None,
        code: int,
        source: str,
        user_agent: str,
        impersonator: UserInfo | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        """Record one request; `user` is who it acted as, `impersonator` who
        authenticated when that was someone else (Kubernetes' ``user`` and
        ``impersonatedUser``)."""
        if self._file is None:
            return
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        event: dict[str, object] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": audit_id,
            "stage": "ResponseComplete",
            "requestURI": info.path,
            "verb": info.verb,
            "user": (impersonator or user).as_dict() if user is not None else {"username": ""},
            "sourceIPs": [source],
            "userAgent": user_agent,
            "responseStatus": {"metadata": {}, "code": code},
            "requestReceivedTimestamp": now,
            "stageTimestamp": now,
        }
        if impersonator is not None and user is not None:
            event["impersonatedUser"] = user.as_dict()
        if annotations:
            event["annotations"] = annotations
        if info.is_resource:
            ref = {
                "resource": info.resource,
                "namespace": info.namespace,
                "name": info.name,
                "apiGroup": info.group,
                "apiVersion": info.version,
                "subresource": info.subresource,
            }
            event["objectRef"] = {k: v for k, v in ref.items() if v}
        line = fastjson.dumps(event).decode()
        with self._lock:
            if self._file is None:
                return  # closed meanwhile: the server is stopping, a watch outlived it
            self._file.write(line + "\n")
            tick = time.monotonic()
            if tick - self._flushed >= 1.0:
                self._file.flush()
                self._flushed = tick

    def close(self) -> None:
        """Flush and close; requests that end afterwards (watches still open while the
        server stops) are not recorded, rather than failing on a closed file."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
