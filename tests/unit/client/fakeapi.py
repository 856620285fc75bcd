"""A small in-process Kubernetes API server for the client library's tests.

It serves the REST paths of `kubelab.api.resources` over real HTTP (optionally HTTPS with
client certificates and bearer tokens) from a thread, so that the tests run the client's
real transport: connection reuse, TLS, chunked watch streams, timeouts.

What it does, as the apiserver does: objects in a dict, one global resourceVersion
counter; create (409 AlreadyExists), get (404), list with label/field selectors and
limit/continue, update with optimistic concurrency (409 Conflict), the status
subresource, merge and JSON patches, delete with preconditions, and watch streams from a
resourceVersion (410 once the history was compacted), with bookmarks on request. Errors
are the `StatusError`s of `kubelab.api.errors`.

What tests steer: `inject()` queues canned failures (any code, Retry-After, non-JSON
bodies, an ERROR event inside a watch stream, a dropped connection); `compact()` forgets
history; `pause_watches()` ends the open streams and holds new ones until
`resume_watches()`; `bookmark()` sends a BOOKMARK; every request is recorded.
"""

from __future__ import annotations

import copy
import datetime
import http.server
import json
import ssl
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from kubelab import pki
from kubelab.api import errors
from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource, lookup

Object = dict[str, Any]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    user: str


@dataclass
class Fault:
    code: int
    method: str | None
    path: str | None
    times: int
    retry_after: int | None
    body: str | None
    in_watch: bool
    disconnect: bool

    def matches(self, method: str, path: str, watch: bool) -> bool:
        return (
            (self.method is None or self.method == method)
            and (self.path is None or self.path in path)
            and (not self.in_watch or watch)
        )


@dataclass
class _Event:
    rv: int
    resource: Resource
    namespace: str
    type: str
    obj: Object


@dataclass
class TLSFiles:
    """A CA, the server's certificate and a client certificate (CN `alice`)."""

    directory: Path
    ca: pki.CertKey
    client: pki.CertKey = field(init=False)

    def __post_init__(self) -> None:
        server = pki.issue(self.ca, "apiserver", ip_addresses=["127.0.0.1"], server=True)
        pki.write_pair(self.ca, self.directory, "ca")
        pki.write_pair(server, self.directory, "server")
        self.client = pki.issue(self.ca, "alice", organizations=["devs"], client=True)

    def server_context(self) -> ssl.SSLContext:
        d = self.directory
        return pki.server_ssl_context(
            d / "ca.crt", d / "server.crt", d / "server.key", require_client_cert=False
        )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Object, ops: list[dict[str, Any]]) -> Object:
    """RFC 6902, for add/replace/remove on object members (enough for the tests)."""
    result = copy.deepcopy(target)
    for op in ops:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"][1:].split("/")
        ]
        node = result
        for p in parents:
            node = node.setdefault(p, {})
        if op["op"] == "remove":
            del node[last]
        else:
            node[last] = op["value"]
    return result


def _matches_labels(obj: Object, selector: str) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k) != v.lstrip("="):
                return False
        elif term not in labels:
            return False
    return True


def _matches_fields(obj: Object, selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        path, want = term.split("=", 1)
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if str(value or "") != want:
            return False
    return True


class FakeApiServer:
    def __init__(self, tls: TLSFiles | None = None, tokens: dict[str, str] | None = None) -> None:
        self.tls = tls
        self.tokens = tokens or {}
        self.require_auth = bool(tls or tokens)
        self.objects: dict[tuple[str, str, str], Object] = {}
        self.rv = 1
        self.compacted = 0
        self.events: list[_Event] = []
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self.cond = threading.Condition()
        self.paused = False
        self.watch_generation = 0
        self.stopping = False
        self.open_watches = 0
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.server_context().wrap_socket(
                self.httpd.socket, server_side=True
            )
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> FakeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- steering ------------------------------------------------------------------------

    def inject(
        self,
        code: int,
        *,
        method: str | None = None,
        path: str | None = None,
        times: int = 1,
        retry_after: int | None = None,
        body: str | None = None,
        in_watch: bool = False,
        disconnect: bool = False,
    ) -> None:
        """Answer the next `times` matching requests with `code` (a Status, or `body`
        verbatim); `in_watch`: as an ERROR event in a 200 watch stream; `disconnect`:
        close the connection without answering."""
        with self.cond:
            self.faults.append(
                Fault(code, method, path, times, retry_after, body, in_watch, disconnect)
            )

    def compact(self) -> None:
        """Forget all history: a watch from an older resourceVersion gets 410."""
        with self.cond:
            self.compacted = self.rv

    def pause_watches(self) -> None:
        """End every open watch stream and hold new watch requests until resumed."""
        with self.cond:
            self.paused = True
            self.watch_generation += 1
            self.cond.notify_all()

    def resume_watches(self) -> None:
        with self.cond:
            self.paused = False
            self.cond.notify_all()

    def end_watches(self) -> None:
        """End every open watch stream (as the apiserver's timeout would)."""
        with self.cond:
            self.watch_generation += 1
            self.cond.notify_all()

    def bookmark(self, resource: Resource) -> None:
        with self.cond:
            meta = {"resourceVersion": str(self.rv)}
            obj = {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta}
            self.events.append(_Event(self.rv, resource, "", "BOOKMARK", obj))
            self.cond.notify_all()

    def wait_for_watches(self, n: int, timeout: float = 5.0) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.open_watches >= n, timeout):
                raise AssertionError(f"{self.open_watches} watches open, expected {n}")

    def calls(self, method: str | None = None, path: str | None = None) -> list[Recorded]:
        with self.cond:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or path in r.path)
            ]

    # -- the store, also used directly by tests as "another client" ------------------------

    def _record(self, resource: Resource, namespace: str, kind: str, obj: Object) -> None:
        self.events.append(_Event(self.rv, resource, namespace, kind, copy.deepcopy(obj)))
        self.cond.notify_all()

    def create(self, resource: Resource, obj: Object, namespace: str = "") -> Object:
        with self.cond:
            meta = obj.setdefault("metadata", {})
            name = meta.get("name", "")
            if not name:
                raise errors.invalid_object(
                    resource.kind, "", [errors.required("metadata.name")], resource.group
                )
            namespace = namespace if resource.namespaced else ""
            key = (resource.group_resource, namespace, name)
            if key in self.objects:
                raise errors.already_exists(resource.plural, name, resource.group)
            self.rv += 1
            obj.setdefault("apiVersion", resource.api_version)
            obj.setdefault("kind", resource.kind)
            if namespace:
                meta["namespace"] = namespace
            meta.update(
                uid=str(uuid.uuid4()), resourceVersion=str(self.rv), creationTimestamp=_now()
            )
            self.objects[key] = obj
            self._record(resource, namespace, "ADDED", obj)
            return copy.deepcopy(obj)

    def get(self, resource: Resource, namespace: str, name: str) -> Object:
        with self.cond:
            try:
                return copy.deepcopy(self.objects[(resource.group_resource, namespace, name)])
            except KeyError:
                raise errors.not_found(resource.plural, name, resource.group) from None

    def update(self, resource: Resource, obj: Object, subresource: str = "") -> Object:
        with self.cond:
            meta = obj.get("metadata") or {}
            namespace = meta.get("namespace", "") if resource.namespaced else ""
            name = meta.get("name", "")
            current = self.get(resource, namespace, name)
            wanted_rv = meta.get("resourceVersion")
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise errors.conflict(resource.plural, name, resource.group)
            new = copy.deepcopy(current)
            if subresource == "status":
                new["status"] = obj.get("status")
            else:
                new = {**copy.deepcopy(obj), "status": current.get("status")}
                if new["status"] is None:
                    del new["status"]
                new["metadata"] = {**current["metadata"], **meta}
            self.rv += 1
            new["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[(resource.group_resource, namespace, name)] = new
            self._record(resource, namespace, "MODIFIED", new)
            return copy.deepcopy(new)

    def delete(
        self, resource: Resource, namespace: str, name: str, options: Object | None = None
    ) -> Object:
        with self.cond:
            current = self.get(resource, namespace, name)
            pre = (options or {}).get("preconditions") or {}
            meta = current["metadata"]
            if ("uid" in pre and pre["uid"] != meta["uid"]) or (
                "resourceVersion" in pre and pre["resourceVersion"] != meta["resourceVersion"]
            ):
                raise errors.conflict(resource.plural, name, resource.group, "precondition failed")
            del self.objects[(resource.group_resource, namespace, name)]
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            self._record(resource, namespace, "DELETED", current)
            return current

    def list(self, resource: Resource, namespace: str, query: dict[str, str]) -> Object:
        with self.cond:
            items = [
                copy.deepcopy(obj)
                for (res, ns, _), obj in sorted(self.objects.items(), key=lambda kv: kv[0][1:])
                if res == resource.group_resource
                and (not namespace or ns == namespace)
                and _matches_labels(obj, query.get("labelSelector", ""))
                and _matches_fields(obj, query.get("fieldSelector", ""))
            ]
            meta: Object = {"resourceVersion": str(self.rv)}
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0)
        if limit and start + limit < len(items):
            meta["continue"] = str(start + limit)
            items = items[start : start + limit]
        else:
            items = items[start:]
        return {
            "kind": resource.list_kind,
            "apiVersion": resource.api_version,
            "metadata": meta,
            "items": items,
        }

    def watch_events(
        self, resource: Resource, namespace: str, query: dict[str, str]
    ) -> Iterator[Object]:
        """The events of a watch request, as the stream should carry them; ends when the
        stream should end."""
        bookmarks = query.get("allowWatchBookmarks") == "true"
        timeout = float(query.get("timeoutSeconds") or 0)
        deadline = datetime.datetime.now() + datetime.timedelta(seconds=timeout or 3600)
        rv = query.get("resourceVersion", "")
        with self.cond:
            self.cond.wait_for(lambda: not self.paused or self.stopping)
            generation = self.watch_generation
            self.open_watches += 1
            self.cond.notify_all()
            if rv in ("", "0"):
                initial = self.list(resource, namespace, query)["items"]
                pending = [{"type": "ADDED", "object": o} for o in initial]
                position = len(self.events)
            elif int(rv) < self.compacted:
                msg = f"too old resource version: {rv} ({self.compacted})"
                pending = [{"type": "ERROR", "object": errors.gone(msg).status()}]
                position = -1
            else:
                position = next(
                    (i for i, e in enumerate(self.events) if e.rv > int(rv)), len(self.events)
                )
                pending = []
        try:
            yield from pending
            while position >= 0:
                with self.cond:
                    idle = len(self.events) == position
                    if idle and self.watch_generation == generation and not self.stopping:
                        self.cond.wait(0.05)
                    if self.watch_generation != generation or self.stopping:
                        return
                    if datetime.datetime.now() >= deadline:
                        return
                    new = self.events[position:]
                    position = len(self.events)
                for e in new:
                    if e.resource != resource:
                        continue
                    if e.type == "BOOKMARK":
                        if bookmarks:
                            yield {"type": e.type, "object": e.obj}
                        continue
                    if namespace and e.namespace != namespace:
                        continue
                    selectors = query.get("labelSelector", ""), query.get("fieldSelector", "")
                    if not (
                        _matches_labels(e.obj, selectors[0])
                        and _matches_fields(e.obj, selectors[1])
                    ):
                        continue
                    yield {"type": e.type, "object": e.obj}
        finally:
            with self.cond:
                self.open_watches -= 1
                self.cond.notify_all()

    def take_fault(self, method: str, path: str, watch: bool) -> Fault | None:
        with self.cond:
            for fault in self.faults:
                if fault.matches(method, path, watch):
                    fault.times -= 1
                    if fault.times <= 0:
                        self.faults.remove(fault)
                    return fault
        return None


def _route(path: str) -> tuple[Resource, str, str, str]:
    """(resource, namespace, name, subresource) of a REST path."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    else:
        group, version, rest = parts[1], parts[2], parts[3:]
    namespace = ""
    # namespaces/<ns>/<resource>..., unless <resource> is a subresource of the Namespace.
    if rest[0] == "namespaces" and len(rest) >= 3 and lookup(group, version, rest[2]):
        namespace, rest = rest[1], rest[2:]
    resource = lookup(group, version, rest[0])
    if resource is None:
        raise errors.not_found("resource", path)
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    return resource, namespace, name, sub


def _make_handler(api: FakeApiServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else each response waits for a delayed ACK

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
            if isinstance(body, str):
                data, ctype = body.encode(), "text/plain"
            else:
                data, ctype = json.dumps(body).encode(), "application/json"
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _stream(self, events: Iterator[Object]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in events:
                    self._chunk(json.dumps(event).encode() + b"\n")
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass  # the client went away
            finally:
                self.close_connection = True
                close = getattr(events, "close", None)  # a generator: run its cleanup
                if close is not None:
                    close()

        def _user(self) -> str:
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Bearer ") and auth[7:] in api.tokens:
                return api.tokens[auth[7:]]
            if isinstance(self.connection, ssl.SSLSocket):
                subject: Any = (self.connection.getpeercert() or {}).get("subject", ())
                for rdn in subject:
                    for key, value in rdn:
                        if key == "commonName":
                            return str(value)
            return ""

        def _handle(self) -> None:
            url = urlsplit(self.path)
            query = dict(parse_qsl(url.query))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            user = self._user()
            with api.cond:
                api.requests.append(
                    Recorded(self.command, url.path, query, dict(self.headers), body, user)
                )
            watch = query.get("watch") in ("1", "true")
            fault = api.take_fault(self.command, url.path, watch)
            try:
                if fault is not None:
                    self._fault(fault)
                    return
                if api.require_auth and not user:
                    raise errors.unauthorized()
                self._serve(url.path, query, body, watch)
            except StatusError as e:
                headers = {"Retry-After": str(e.retry_after)} if e.retry_after else {}
                self._send(e.code, e.status(), headers)

        def _fault(self, fault: Fault) -> None:
            if fault.disconnect:
                self.close_connection = True
                return
            if fault.in_watch:
                error = StatusError(fault.code, "Expired", "injected watch error")
                self._stream(iter([{"type": "ERROR", "object": error.status()}]))
                return
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else {}
            if fault.body is not None:
                self._send(fault.code, fault.body, headers)
                return
            error = StatusError(fault.code, "Injected", f"injected {fault.code}")
            self._send(fault.code, error.status(), headers)

        def _serve(self, path: str, query: dict[str, str], body: Any, watch: bool) -> None:
            resource, namespace, name, sub = _route(path)
            method = self.command
            if method == "GET" and not name:
                if watch:
                    self._stream(api.watch_events(resource, namespace, query))
                else:
                    self._send(200, api.list(resource, namespace, query))
            elif method == "GET" and sub == "log":
                self._send(200, f"log of {name}\n")
            elif method == "GET":
                self._send(200, api.get(resource, namespace, name))
            elif method == "POST" and sub == "binding":
                pod = api.get(resource, namespace, name)
                pod.setdefault("spec", {})["nodeName"] = body["target"]["name"]
                api.update(resource, pod)
                self._send(201, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
            elif method == "POST":
                self._send(201, api.create(resource, body, namespace))
            elif method == "PUT":
                if body["metadata"].get("name") != name:
                    raise errors.bad_request("the name in the body does not match the URL")
                self._send(200, api.update(resource, body, sub))
            elif method == "PATCH":
                current = api.get(resource, namespace, name)
                ctype = self.headers.get("Content-Type", "")
                if ctype == "application/json-patch+json":
                    patched = json_patch(current, body)
                else:
                    patched = merge_patch(current, body)
                patched["metadata"].pop("resourceVersion", None)
                self._send(200, api.update(resource, patched, sub))
            elif method == "DELETE":
                self._send(200, api.delete(resource, namespace, name, body))
            else:
                raise errors.method_not_allowed(f"{method} is not supported")

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    return Handler
