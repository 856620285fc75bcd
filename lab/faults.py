"""Faults and a request log for the in-process test apiserver (`lab.testenv`), as WSGI
middleware in front of the real app.

A client-side component (an informer, a controller, the kubelet) must survive what a real
control plane does to it now and then: the store losing its leader (503), a write
racing another (409), a slow answer, a watch cut mid-way, history compacted away (410),
a proxy's HTML error page, a connection reset. Provoking those for real takes processes
and timing; here a test asks for them:

    fault = env.faults.conflict(verb="update", resource="deployments")
    ...                      # the next update of a Deployment gets a 409
    assert fault.hits == 1

Each fault matches requests by HTTP method, Kubernetes verb, resource (``pods``, or
``pods/status`` for a subresource), namespace, name and a regular expression on the path
(all optional), and fires for the next `count` matching requests (None: every one). The
Status bodies are the ones the real apiserver sends for the same condition, so clients
take the same path as against a failing control plane. Everything else passes through
to the real app untouched.

`RequestLog` records what clients sent (method, path, query, headers, body, and on which
connection) while a test holds it open: for tests of a client's wire behaviour (its
User-Agent, its delete options, its watch parameters, its reuse of connections).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from io import BytesIO
from typing import Any
from urllib.parse import parse_qsl

from controlplane.apiserver import requestinfo
from controlplane.apiserver.watchcache import Cacher
from kubelab import fastjson
from kubelab.api import errors
from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]


class Disconnect(BaseException):
    """Raised through the server to close the client's connection without an answer
    (or mid-stream). A BaseException, so that the WSGI server's own error handling (a
    500 page) does not turn it into an answer; `lab.testenv`'s handler catches it."""


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
    answer: Callable[[requestinfo.RequestInfo], tuple[int, str, bytes, int | None]] | None = None
    """(code, content type, body, Retry-After) of the answer given instead of the app's."""
    in_watch: StatusError | None = None
    """Answer 200 and a watch stream whose only event is an ERROR with this Status."""
    delay: float = 0.0
    gate: threading.Event | None = None
    """Hold matching requests until `release`."""
    drop_after: int | None = None
    """For a watch: end the stream after this many events."""
    disconnect: bool = False
    """Close the connection: with `drop_after` mid-stream, else without an answer."""
    hits: int = field(default=0)

    def held(self) -> Fault:
        """Hold the requests this fault matches until `release`, then answer them: for
        a test to change things while, say, a client waits to re-watch."""
        self.gate = threading.Event()
        return self

    def release(self) -> None:
        """Let held requests (and later ones) through."""
        if self.gate is not None:
            self.gate.set()


def _status(err: StatusError) -> tuple[int, str, bytes, int | None]:
    return err.code, "application/json", fastjson.dumps(err.status()), err.retry_after


class Faults:
    """The middleware: wrap the app, then add faults; `clear` removes them all."""

    def __init__(self, app: WSGIApp, cacher: Cacher) -> None:
        self.app = app
        self.cacher = cacher
        self._faults: list[Fault] = []
        self._added: list[Fault] = []  # used up or not: `clear` releases what they hold
        self._lock = threading.Lock()

    # -- answers instead of the app's ----------------------------------------------------

    def status(self, error: StatusError, count: int | None = 1, **match: Any) -> Fault:
        """Answer with `error`'s Status (its code, and Retry-After if it has one)."""
        return self._add(Fault(Match(**match), count, answer=lambda info: _status(error)))

    def store_error(self, count: int | None = 1, retry_after: int = 1, **match: Any) -> Fault:
        """A 503 as the apiserver answers while its store has no leader."""
        error = errors.service_unavailable(
            "the store is unavailable (etcdserver: no leader); the apiserver will retry, try again",
            retry_after,
        )
        return self.status(error, count, **match)

    def conflict(self, count: int | None = 1, **match: Any) -> Fault:
        """A 409 Conflict on the request's object, as for a stale resourceVersion."""

        def answer(info: requestinfo.RequestInfo) -> tuple[int, str, bytes, int | None]:
            return _status(errors.conflict(info.resource, info.name, info.group))

        return self._add(Fault(Match(**match), count, answer=answer))

    def gone(self, count: int | None = 1, **match: Any) -> Fault:
        """A 410 Gone, as for a list or watch from a resourceVersion no longer held."""
        error = errors.gone("too old resource version: the history was compacted (injected)")
        return self.status(error, count, **match)

    def answer(
        self,
        code: int,
        body: str,
        content_type: str = "text/html",
        count: int | None = 1,
        **match: Any,
    ) -> Fault:
        """Answer with `body` verbatim: what a proxy in front of an apiserver may send."""
        raw = body.encode()
        return self._add(
            Fault(Match(**match), count, answer=lambda info: (code, content_type, raw, None))
        )

    def watch_error(self, error: StatusError, count: int | None = 1, **match: Any) -> Fault:
        """Answer a watch with 200 and one ERROR event carrying `error`, as Kubernetes'
        watch cache reports a resourceVersion it no longer holds."""
        return self._add(Fault(Match(**{"verb": "watch", **match}), count, in_watch=error))

    # -- the app's answer, changed --------------------------------------------------------

    def slow(self, seconds: float, count: int | None = 1, **match: Any) -> Fault:
        """Answer `seconds` late (the request is then served as usual)."""
        return self._add(Fault(Match(**match), count, delay=seconds))

    def hold(self, count: int | None = None, **match: Any) -> Fault:
        """Hold matching requests until the returned fault's `release()`, then serve
        them (the test's window to change things while, say, no watch is open)."""
        return self._add(Fault(Match(**match), count).held())

    def disconnect(self, count: int | None = 1, **match: Any) -> Fault:
        """Close the connection without answering, as when an apiserver dies."""
        return self._add(Fault(Match(**match), count, disconnect=True))

    def drop_watch(
        self, after: int = 0, count: int | None = 1, abrupt: bool = False, **match: Any
    ) -> Fault:
        """End a watch stream after `after` events: cleanly, as when the apiserver ends
        it, or `abrupt`ly (the connection closes mid-response). Only watches match."""
        m = Match(**{"verb": "watch", **match})
        return self._add(Fault(m, count, drop_after=after, disconnect=abrupt))

    def end_watches(self, resource: Resource, namespace: str | None = None) -> int:
        """End the open watches on `resource` (all, or those of `namespace`) as the
        apiserver does to a watcher it drops; returns how many. Their clients re-watch."""
        ended = 0
        for w in list(self.cacher.cache_for(resource).watchers):
            if namespace is None or w.prefix == resource.collection_prefix(namespace):
                self.cacher.unwatch(resource, w)
                ended += 1
        return ended

    def clear(self) -> None:
        """Remove every fault, releasing the requests any of them holds."""
        with self._lock:
            for fault in self._added:
                fault.release()
            self._faults.clear()
            self._added.clear()

    def _add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
            self._added.append(fault)
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
        info = _info(environ)
        fault = self._take(environ["REQUEST_METHOD"], info)
        if fault is None:
            return self.app(environ, start_response)
        if fault.delay:
            time.sleep(fault.delay)
        if fault.gate is not None:
            fault.gate.wait()
        if fault.answer is not None:
            code, content_type, body, retry_after = fault.answer(info)
            headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
            if retry_after is not None:
                headers.append(("Retry-After", str(retry_after)))
            start_response(f"{code} {HTTPStatus(code).phrase}", headers)
            return [body]
        if fault.in_watch is not None:
            event = {"type": "ERROR", "object": fault.in_watch.status()}
            start_response("200 OK", [("Content-Type", "application/json")])
            return [fastjson.dumps(event) + b"\n"]
        if fault.drop_after is not None:
            body_iter = self.app(environ, start_response)
            return _Dropped(body_iter, fault.drop_after, fault.disconnect)
        if fault.disconnect:
            raise Disconnect()
        return self.app(environ, start_response)


def _info(environ: Environ) -> requestinfo.RequestInfo:
    query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
    return requestinfo.parse(environ["REQUEST_METHOD"], environ.get("PATH_INFO", "/"), query)


class _Dropped:
    """A watch body cut after `after` events (the headers still go out first)."""

    def __init__(self, body: Iterable[bytes], after: int, abrupt: bool) -> None:
        self.body, self.after, self.abrupt = body, after, abrupt

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for chunk in self.body:
            if chunk and sent >= self.after:
                if self.abrupt:
                    raise Disconnect()
                return
            yield chunk
            sent += bool(chunk)

    def close(self) -> None:
        close = getattr(self.body, "close", None)
        if close is not None:
            close()


# -- the request log ---------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    """The JSON body decoded (None without one; the text if it is not JSON)."""
    connection: str
    """The client's end of the connection it came on ("address:port"): requests on one
    kept-alive connection share it."""


class RequestLog:
    """Every request while open (`with env.record() as log:`), in arrival order."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._lock = threading.Lock()

    def add(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def calls(self, method: str | None = None, path: str | None = None) -> list[Request]:
        """The requests with `method` whose path contains `path`."""
        with self._lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or path in r.path)
            ]


class Recorder:
    """The middleware that feeds the open `RequestLog`s."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self.logs: list[RequestLog] = []

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        logs = list(self.logs)
        if logs:
            request = _request(environ)
            for log in logs:
                log.add(request)
        return self.app(environ, start_response)


def _request(environ: Environ) -> Request:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = BytesIO(raw)  # the app reads it again
    body: Any = None
    if raw:
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
    headers = {
        k[5:].replace("_", "-").title(): v for k, v in environ.items() if k.startswith("HTTP_")
    }
    if environ.get("CONTENT_TYPE"):
        headers["Content-Type"] = environ["CONTENT_TYPE"]
    return Request(
        environ["REQUEST_METHOD"],
        environ.get("PATH_INFO", "/"),
        dict(parse_qsl(environ.get("QUERY_STRING", ""))),
        headers,
        body,
        f"{environ.get('REMOTE_ADDR', '')}:{environ.get('REMOTE_PORT', '')}",
    )
