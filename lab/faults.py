"""Faults for the in-process test apiserver (`lab.testenv`), as WSGI middleware.

A client-side component (an informer, a controller, the kubelet) must survive what a real
control plane does to it now and then: the store losing its leader (503), a write
racing another (409), a slow answer, a watch cut mid-way, history compacted away (410).
Provoking those for real takes processes and timing; here a test asks for them:

    fault = env.faults.conflict(verb="update", resource="deployments")
    ...                      # the next update of a Deployment gets a 409
    assert fault.hits == 1

Each fault matches requests by HTTP method, Kubernetes verb, resource (``pods``, or
``pods/status`` for a subresource), namespace, name and a regular expression on the path
(all optional), and fires for the next `count` matching requests (None: every one). The
Status bodies are the ones the real apiserver sends for the same condition, so clients
take the same path as against a failing control plane. Everything else passes through
to the real app untouched.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

from controlplane.apiserver import requestinfo
from kubelab import fastjson
from kubelab.api import errors

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]


@dataclass(frozen=True)
class Match:
    """Which requests a fault applies to; an unset field matches anything."""

    method: str | None = None
    verb: str | None = None
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    path: str | None = None
    """A regular expression searched in the request path."""

    def __call__(self, method: str, info: requestinfo.RequestInfo) -> bool:
        resource = info.resource + ("/" + info.subresource if info.subresource else "")
        return (
            (self.method is None or self.method.upper() == method)
            and (self.verb is None or self.verb == info.verb)
            and (self.resource is None or self.resource == resource)
            and (self.namespace is None or self.namespace == info.namespace)
            and (self.name is None or self.name == info.name)
            and (self.path is None or re.search(self.path, info.path) is not None)
        )


@dataclass(eq=False)
class Fault:
    """One injected fault; `hits` counts the requests it fired on."""

    match: Match
    remaining: int | None
    status: Callable[[requestinfo.RequestInfo], errors.StatusError] | None = None
    delay: float = 0.0
    drop_after: int | None = None
    """For a watch: end the stream after this many events."""
    hits: int = field(default=0)


class Faults:
    """The middleware: wrap the app, then add faults; `clear` removes them all."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    # -- what a test asks for ------------------------------------------------------------

    def store_error(self, count: int | None = 1, **match: Any) -> Fault:
        """A 503 as the apiserver answers while its store has no leader."""
        return self._add(
            Fault(
                Match(**match),
                count,
                status=lambda info: errors.service_unavailable(
                    "the store is unavailable (etcdserver: no leader); the apiserver will "
                    "retry, try again"
                ),
            )
        )

    def conflict(self, count: int | None = 1, **match: Any) -> Fault:
        """A 409 Conflict on the request's object, as for a stale resourceVersion."""
        return self._add(
            Fault(
                Match(**match),
                count,
                status=lambda info: errors.conflict(info.resource, info.name, info.group),
            )
        )

    def gone(self, count: int | None = 1, **match: Any) -> Fault:
        """A 410 Gone, as for a list or watch from a resourceVersion no longer held."""
        return self._add(
            Fault(
                Match(**match),
                count,
                status=lambda info: errors.gone(
                    "too old resource version: the history was compacted (injected fault)"
                ),
            )
        )

    def slow(self, seconds: float, count: int | None = 1, **match: Any) -> Fault:
        """Answer `seconds` late (the request is then served as usual)."""
        return self._add(Fault(Match(**match), count, delay=seconds))

    def drop_watch(self, after: int = 0, count: int | None = 1, **match: Any) -> Fault:
        """End a watch stream after `after` events, as when the connection is lost; only
        watch requests match."""
        return self._add(Fault(Match(**{"verb": "watch", **match}), count, drop_after=after))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def _add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def _take(self, method: str, info: requestinfo.RequestInfo) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.match(method, info):
                    fault.hits += 1
                    if fault.remaining is not None:
                        fault.remaining -= 1
                        if fault.remaining <= 0:
                            self._faults.remove(fault)
                    return fault
        return None

    # -- the middleware ------------------------------------------------------------------

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if not self._faults:
            return self.app(environ, start_response)
        method = environ["REQUEST_METHOD"]
        query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
        info = requestinfo.parse(method, environ.get("PATH_INFO", "/"), query)
        fault = self._take(method, info)
        if fault is None:
            return self.app(environ, start_response)
        if fault.delay:
            time.sleep(fault.delay)
        if fault.status is not None:
            err = fault.status(info)
            body = fastjson.dumps(err.status())
            headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            if err.retry_after is not None:
                headers.append(("Retry-After", str(err.retry_after)))
            start_response(f"{err.code} {HTTPStatus(err.code).phrase}", headers)
            return [body]
        if fault.drop_after is not None:
            return _Dropped(self.app(environ, start_response), fault.drop_after)
        return self.app(environ, start_response)


class _Dropped:
    """A watch body cut after `after` events (the headers still go out first)."""

    def __init__(self, body: Iterable[bytes], after: int) -> None:
        self.body, self.after = body, after

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for chunk in self.body:
            if chunk and sent >= self.after:
                return
            yield chunk
            sent += bool(chunk)

    def close(self) -> None:
        close = getattr(self.body, "close", None)
        if close is not None:
            close()
