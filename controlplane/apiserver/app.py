"""The Flask application: HTTP in, the request chain, HTTP out.

Every request goes through the same chain, in Kubernetes' order:

    authentication (authn) -> authorization (authz) -> handler
        handler = decode -> registry (strategy, defaults, admission, validation, storage)

and ends in one audit record and one sample of the request metrics. Errors anywhere come
back as a `Status` object (`kubelab.api.errors`), never as a traceback: an unexpected
exception is logged here with its traceback and answered with a 500 Status that says so.

Resource paths are parsed once (`requestinfo`) and dispatched by verb: the main
resource's verbs here, over the registry (or a conversion view); a subresource's to its
REST object (`subresources`: status, scale, binding, eviction, log, exec, token, ...); the
review resources (SelfSubjectAccessReview, TokenReview, ...) to `handlers`.
Watches stream newline-delimited JSON events, one per chunk, as the real API does.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, g, request

from kubelab import fastjson
from kubelab.api import errors, patch, resources

from . import audit, fieldvalidation, handlers, negotiation, traces, warning
from .authn import UserInfo
from .handlers import json_response
from .impersonation import PREFIX, impersonate
from .negotiation import Form
from .registry import DeleteOptions, EventStream, ListOptions, decode_body
from .requestinfo import RequestInfo
from .requestinfo import parse as parse_request
from .watchcache import CacheNotReady

if TYPE_CHECKING:
    from .apiserver import APIServer

log = logging.getLogger("kubelab.apiserver")

_JSON = "application/json"


def _status_response(exc: errors.StatusError) -> Response:
    resp = json_response(exc.status(), exc.code)
    if exc.retry_after is not None:
        resp.headers["Retry-After"] = str(exc.retry_after)
    return resp


# Go's wording where Python's differs (or changed between versions).
_GO_PHRASES = {
    413: "Request Entity Too Large",
    414: "Request URI Too Long",
    416: "Requested Range Not Satisfiable",
    422: "Unprocessable Entity",
}


def reason_phrase(code: int) -> str:
    """The status line's phrase as Go's net/http writes it ("409 Conflict"): werkzeug
    upper-cases its own ("409 CONFLICT"), which clients that print the status line show."""
    if code in _GO_PHRASES:
        return _GO_PHRASES[code]
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return f"status code {code}"


def create_app(server: APIServer) -> Flask:
    app = Flask("kubelab-apiserver")
    app.config["MAX_CONTENT_LENGTH"] = 3 * 1024 * 1024
    app.url_map.strict_slashes = False  # clients ask for /apis/ and /api/v1/ too

    @app.before_request
    def chain() -> Response | None:
        g.started = time.monotonic()
        g.audit_id = str(uuid.uuid4())
        warning.begin()
        audit.begin_annotations()
        g.info = parse_request(request.method, request.path, request.args)
        g.trace = traces.begin(server.tracing, g.info, request.method, request.headers)
        server.metrics.inflight.inc()
        g.counted = True
        user = server.authn.authenticate(
            request.path,
            request.environ.get("kubelab.client_cert"),
            request.headers.get("Authorization", ""),
        )
        asked = [(k, v) for k, v in request.headers.items() if k.lower().startswith(PREFIX)]
        if asked:
            g.impersonator = user
            user = impersonate(user, asked, server.authz)
            log.info(
                "apiserver: %s acts as %s (groups %s) for %s %s",
                g.impersonator.name,
                user.name,
                ",".join(user.groups),
                request.method,
                request.path,
            )
        g.user = user
        info: RequestInfo = g.info
        _check_scope(server.api.resources, info)
        decision = server.authz.authorize(user, info)
        if g.trace is not None and g.trace.span is not None:
            # Authentication and authorization as attributes: neither calls out here. A
            # denial is the 403 of the span's status code.
            g.trace.span.set_attributes({traces.USER: user.name, traces.REASON: decision.reason})
        if not decision.allowed:
            raise _forbidden(user, info)
        if info.verb in ("create", "update", "patch"):
            fieldvalidation.begin(request.args.get("fieldValidation"))
        return None

    @app.after_request
    def record(resp: Response) -> Response:
        resp.headers["Audit-Id"] = g.get("audit_id", "")
        resp.status = f"{resp.status_code} {reason_phrase(resp.status_code)}"
        check = fieldvalidation.current()
        texts = warning.take()
        if check is not None and check.directive is fieldvalidation.Directive.WARN:
            texts = check.warnings() + texts
        for text in texts:
            resp.headers.add("Warning", warning.header(text))
        record_ = _Record.current()
        if record_ is not None and not g.get("streaming"):
            record_.finish(server, resp.status_code)
        active: traces.RequestSpan | None = g.get("trace")
        if active is not None:
            # A watch's span ends here too, once its headers are on their way: its
            # events are traced in the trace of the write each one reports.
            active.finish(resp.status_code)
        return resp

    @app.teardown_request
    def teardown(exc: BaseException | None) -> None:
        fieldvalidation.end()
        active: traces.RequestSpan | None = g.pop("trace", None)
        if active is not None:
            active.close()
        if g.get("counted"):
            server.metrics.inflight.dec()
            g.counted = False

    @app.errorhandler(errors.StatusError)
    def status_error(exc: errors.StatusError) -> Response:
        return _status_response(exc)

    @app.errorhandler(CacheNotReady)
    def cache_not_ready(exc: CacheNotReady) -> Response:
        return _status_response(errors.service_unavailable(str(exc)))

    @app.errorhandler(404)
    def not_found(exc: Exception) -> Response:
        return _status_response(
            errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        )

    @app.errorhandler(405)
    def not_allowed(exc: Exception) -> Response:
        return _status_response(
            errors.method_not_allowed(
                f"the server does not allow this method on the requested resource "
                f"({request.method} {request.path})"
            )
        )

    @app.errorhandler(413)
    def too_large(exc: Exception) -> Response:
        return _status_response(
            errors.StatusError(
                413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"
            )
        )

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        log.exception("apiserver: %s %s failed", request.method, request.path)
        return _status_response(
            errors.internal_error(
                f"{type(exc).__name__}: {exc} (see the apiserver log, audit id "
                f"{g.get('audit_id', '?')})"
            )
        )

    # -- health, version, metrics --------------------------------------------------------

    @app.get("/healthz")
    @app.get("/livez")
    @app.get("/readyz")
    @app.get("/healthz/<path:check>")
    @app.get("/livez/<path:check>")
    @app.get("/readyz/<path:check>")
    def health(check: str = "") -> Response:
        checks = server.health_checks(ready=request.path.startswith("/readyz"))
        if check:
            checks = {k: v for k, v in checks.items() if k == check}
            if not checks:
                raise errors.StatusError(404, "NotFound", f"no health check named {check!r}")
        failed = [k for k, ok in checks.items() if not ok]
        if "verbose" in request.args:
            lines = [
                f"[{'+' if ok else '-'}]{k} {'ok' if ok else 'failed'}" for k, ok in checks.items()
            ]
            verdict = "check failed" if failed else "check passed"
            text = "\n".join(lines) + f"\n{request.path.strip('/').split('/')[0]} {verdict}\n"
        else:
            text = "ok" if not failed else "\n".join(f"[-]{k} failed" for k in failed) + "\n"
        return Response(text, status=500 if failed else 200, mimetype="text/plain")

    @app.get("/version")
    def version() -> Response:
        return json_response(server.version_info())

    @app.get("/metrics")
    def metrics() -> Response:
        body, content_type = server.metrics.render()
        return Response(body, mimetype=content_type)

    # -- discovery and OpenAPI -----------------------------------------------------------

    @app.get("/api")
    @app.get("/apis")
    @app.get("/api/<version>")
    @app.get("/apis/<group>")
    @app.get("/apis/<group>/<version>")
    def discover(group: str = "", version: str = "") -> Response:
        served = server.api.discovery.serve(request.path, request.headers.get("Accept"))
        return Response(served.body, status=served.status, headers=served.headers)

    @app.get("/openapi/v2")
    @app.get("/openapi/v3")
    @app.get("/openapi/v3/<path:rest>")
    def openapi_doc(rest: str = "") -> Response:
        served = server.api.openapi.serve(
            request.path,
            request.headers.get("Accept"),
            request.args,
            request.headers.get("If-None-Match"),
        )
        return Response(served.body, status=served.status, headers=served.headers)

    # -- resources -----------------------------------------------------------------------

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]

    @app.route("/api/v1/<path:rest>", methods=methods)
    @app.route("/apis/<group>/<version>/<path:rest>", methods=methods)
    def resource(rest: str, group: str = "", version: str = "v1") -> Response:
        info: RequestInfo = g.info
        r = server.api.resources.lookup(info.group, info.version, info.resource)
        if r is None or not info.is_resource:
            raise errors.StatusError(
                404,
                "NotFound",
                f"the server could not find the requested resource "
                f"({info.resource!r} in {info.group_version or 'v1'})",
            )
        if info.verb not in r.verbs and not info.subresource:
            raise errors.method_not_allowed(f"{info.verb} is not supported on {r.group_resource}")
        if info.subresource:
            return server.subresources.serve(r, info, g.user)
        if not r.stored:
            answer = handlers.virtual(server, r, info, g.user)
            form = negotiation.negotiate(request.headers.get("Accept"), info.verb)
            if form is Form.TABLE and info.verb in ("get", "list"):
                items = answer["items"] if info.verb == "list" else [answer]
                include = _include(request.args.to_dict())
                answer = server.api.printers.to_table(r, items, include_object=include)
            return json_response(answer, 201 if info.verb == "create" else 200)
        return _dispatch(server, r, info, g.user)

    return app


def _check_scope(served: resources.ResourceTable, info: RequestInfo) -> None:
    """A path must address a resource at its own scope, before authorization: RBAC
    decides by the namespace in the path, so a cluster-scoped resource under a namespace
    (or a namespaced one created at cluster scope) must not get that far."""
    if not info.is_resource:
        return
    r = served.lookup(info.group, info.version, info.resource)
    if r is None:
        return  # the handler answers 404 for an unknown resource
    if not r.namespaced and info.namespace and r.plural != "namespaces":
        raise errors.StatusError(
            404,
            "NotFound",
            f"{r.group_resource} is cluster-scoped: use {r.path()} without a namespace",
        )
    if r.namespaced and not info.namespace and (info.name or info.verb == "create"):
        raise errors.StatusError(
            404, "NotFound", f"{r.group_resource} live in namespaces: use {r.path('<namespace>')}"
        )


def _forbidden(user: UserInfo, info: RequestInfo) -> errors.StatusError:
    if not info.is_resource:
        return errors.forbidden_path(user.name, info.verb, info.path)
    return errors.forbidden_request(
        user.name, info.verb, info.resource, info.group, info.namespace, info.name, info.subresource
    )


@dataclass(frozen=True)
class _Record:
    """What the audit log and the metrics need of a request, taken while it is current
    (a watch ends after Flask's request context has gone)."""

    info: RequestInfo
    user: UserInfo | None
    impersonator: UserInfo | None  # who authenticated, when `user` is impersonated
    started: float
    audit_id: str
    source: str
    agent: str
    annotations: dict[str, str]
    """The audit annotations given so far (admission's, for a write)."""

    @classmethod
    def current(cls) -> _Record | None:
        info, started = g.get("info"), g.get("started")
        if info is None or started is None:
            return None
        return cls(
            info,
            g.get("user"),
            g.get("impersonator"),
            started,
            g.get("audit_id", ""),
            request.remote_addr or "",
            request.headers.get("User-Agent", ""),
            audit.take_annotations(),
        )

    def finish(self, server: APIServer, code: int) -> None:
        server.metrics.observe(self.info, code, time.monotonic() - self.started)
        server.audit.record(
            self.audit_id,
            self.info,
            self.user,
            code,
            self.source,
            self.agent,
            self.impersonator,
            self.annotations,
        )


def _dispatch(
    server: APIServer, r: resources.Resource, info: RequestInfo, user: UserInfo
) -> Response:
    reg = server.registry_for(r)
    args = request.args.to_dict()
    dry_run = "dryRun" in args and args["dryRun"] == "All"
    if "dryRun" in args and args["dryRun"] != "All":
        raise errors.bad_request(
            f'dryRun: Unsupported value: "{args["dryRun"]}": supported values: "All"'
        )
    ns = info.namespace if r.namespaced else ""
    verb = info.verb
    form = negotiation.negotiate(request.headers.get("Accept"), verb)
    if verb == "get":
        obj = reg.get(r, ns, info.name, args.get("resourceVersion", ""))
        if form is Form.TABLE:
            table = server.api.printers.to_table(r, [obj], include_object=_include(args))
            return json_response(table)
        if form is Form.PARTIAL:
            return json_response(negotiation.partial_object(obj))
        return json_response(obj)
    if verb == "list":
        opts = ListOptions.parse(args)
        listed = reg.list_objects(r, ns, opts)
        if form is Form.TABLE:
            return json_response(
                server.api.printers.to_table(
                    r, listed["items"], include_object=_include(args), list_meta=listed["metadata"]
                )
            )
        if form is Form.PARTIAL:
            return json_response(negotiation.partial_list(listed))
        return json_response(listed)
    if verb == "watch":
        opts = ListOptions.parse(args)
        events = reg.watch(r, ns, opts)
        g.streaming = True
        record_ = _Record.current()
        assert record_ is not None
        if g.get("counted"):  # a watch is long-running: not a request in flight
            server.metrics.inflight.dec()
            g.counted = False
        return Response(
            _WatchBody(server, r, events, form, _include(args), record_),
            mimetype=_JSON,
            headers={"Cache-Control": "no-cache, private"},
        )
    if verb == "create":
        body = decode_body(request.get_data(), request.content_type or "")
        return json_response(reg.create(r, ns, body, user, dry_run), 201)
    if verb == "update":
        body = decode_body(request.get_data(), request.content_type or "")
        manager = handlers.field_manager()
        return json_response(
            reg.update(r, ns, info.name, body, user, dry_run=dry_run, manager=manager)
        )
    if verb == "patch":
        media = (request.content_type or "").split(";")[0].strip().lower()
        if media == patch.APPLY_PATCH:
            if not args.get("fieldManager"):
                raise errors.bad_request(
                    "fieldManager is required for apply requests: name the applier "
                    "(kubectl sends fieldManager=kubectl)"
                )
            force = args.get("force", "").lower() in ("true", "1")
            applied = reg.apply(
                r,
                ns,
                info.name,
                request.get_data(),
                user,
                handlers.field_manager(),
                dry_run,
                force,
            )
            return json_response(applied)
        return json_response(
            reg.patch(
                r,
                ns,
                info.name,
                request.get_data(),
                request.content_type or "",
                user,
                dry_run=dry_run,
                manager=handlers.field_manager(),
            )
        )
    if verb == "delete":
        return json_response(
            reg.delete(r, ns, info.name, DeleteOptions.parse(args, _optional_body()), user)
        )
    if verb == "deletecollection":
        lopts = ListOptions.parse(args)
        dopts = DeleteOptions.parse(args, _optional_body())
        return json_response(reg.delete_collection(r, ns, lopts, dopts, user))
    raise errors.method_not_allowed(f"{verb} is not supported")


def _optional_body() -> dict[str, Any] | None:
    data = request.get_data()
    if not data.strip():
        return None
    return decode_body(data, request.content_type or _JSON)


def _include(args: dict[str, str]) -> str:
    value = args.get("includeObject", "Metadata")
    if value not in ("None", "Metadata", "Object"):
        raise errors.bad_request(
            f'includeObject: Unsupported value: "{value}": supported '
            'values: "None", "Metadata", "Object"'
        )
    return value


class _WatchBody:
    """A watch response body: one JSON event per line. `close()` (called by the server
    when the stream ends or the client goes away, started or not) releases the cache
    watcher and writes the audit record and metrics, with the watch's duration."""

    def __init__(
        self,
        server: APIServer,
        r: resources.Resource,
        events: EventStream,
        form: Form,
        include: str,
        record: _Record,
    ) -> None:
        self.server, self.r, self.events = server, r, events
        self.form, self.include, self.record = form, include, record
        self.closed = False
        server.metrics.watchers.inc()

    def __iter__(self) -> Iterator[bytes]:
        yield b""  # the server sends the headers now (see server.CertHandler)
        for ev in self.events:
            if self.form is Form.TABLE and ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                ev = {
                    "type": ev["type"],
                    "object": self.server.api.printers.to_table(
                        self.r, [ev["object"]], include_object=self.include
                    ),
                }
            elif self.form is Form.PARTIAL and ev["type"] != "ERROR":
                ev = {"type": ev["type"], "object": negotiation.partial_object(ev["object"])}
            yield fastjson.dumps_as_go(ev) + b"\n"

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.events.close()
        self.server.metrics.watchers.dec()
        self.record.finish(self.server, 200)
