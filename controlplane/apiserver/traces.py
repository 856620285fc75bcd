"""The apiserver's spans (issue 23; docs/architecture.md, "Tracing").

Each request is one span, `APIServer.<verb> <resource>[/<subresource>]` (a path for a
non-resource request: `APIServer.get /version`), the child of the client's span when the
request carries a W3C `traceparent` header (the REST client sends one on every request),
else the root of a new trace: the apiserver starts the trace of a request that brings
none. The steps of the request chain that do no I/O of their own are attributes of that
span rather than spans: authentication (`enduser.id`), authorization (the rule that
allowed or denied it), each admission plugin with its time and, if it refused, its
verdict (`admission/chain.py`), validation's time (`step`), the store transaction
(`store_outcome`: its operation, revision and time), where a read took its objects from
(`read_source`: the watch cache or the store, and the resourceVersion semantics that
chose it) and the response (its status code; its encoding is the span's end). A span
costs the SDK some 20-40 us of CPU to make and 15 us to encode for export, and each
attribute some 6 us more (docs/benchmarks.md, "Tracing off and on"): a span per step, a
dozen per write, would cost many times the 5 % of a request's CPU tracing may, for steps
of a few microseconds each. The store transaction is no span either: the store client's
request is made in the request span's context, so the store's own spans (`Store.txn`,
`Raft.*`) are that span's children and show the transaction's path, where a span of the
apiserver's between them would only repeat its time. The steps that call a kubelet are
children: `APIServer.proxy <subresource>` for the live-data requests. The watch cache's
delivery of a write's event is `WatchCache.dispatch`, in the writer's trace
(`watchcache`): it happens after the request, in the watch cache's thread.

**Routine requests are not traced** (`routine`): the health checks (`/healthz`,
`/readyz`, `/livez` and their checks, `/metrics`: haproxy's probe, the kubelets' probes
of the static pods, Prometheus' scrapes) and the reads and renewals of Leases (`get`,
`update`, `patch` of `leases`: every node's heartbeat, every leader's renewal) make no
span unless the client sent a `traceparent`: an idle lab would otherwise make a trace
per probe and heartbeat, dozens a second, burying the traces of what a user did. A
client's sampled `traceparent` (a user's `curl` with one, a test) is still honoured.

The request's context is the current OpenTelemetry context while the request runs, so
the registry stamps it on what the request writes (`tracing.inject`), and every child
span and every step's attribute finds the request's span without being handed it. While
tracing is off the spans are not made at all (`Tracing.span`) nor the steps timed, but
a client's `traceparent` still becomes the current context: the annotation then carries
the client's own span, and the components after the apiserver still continue the
client's trace.
"""

from __future__ import annotations

import contextlib
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Status, StatusCode
from werkzeug.datastructures import Headers

from kubelab import tracing
from kubelab.storeclient import TxnResult

from .requestinfo import RequestInfo

# Span attributes (OpenTelemetry's HTTP and user conventions; the rest kubelab's).
USER_AGENT = "user_agent.original"
METHOD = "http.request.method"
PATH = "url.path"
STATUS_CODE = "http.response.status_code"
USER = "enduser.id"
GROUP = "k8s.request.group"
REASON = "kubelab.authorization.reason"
PLUGIN = "kubelab.admission.plugin"
STORE_OPERATION = "kubelab.store.operation"
STORE_REVISION = "kubelab.store.revision"
STORE_SECONDS = "kubelab.store.duration_seconds"
VALIDATION_SECONDS = "kubelab.validation.duration_seconds"
READ_SOURCE = "kubelab.read.source"
READ_SEMANTICS = "kubelab.read.resource_version_semantics"
READ_REVISION = "kubelab.read.revision"
WATCH_CACHE = "watch-cache"
STORE = "store"
WATCHERS = "kubelab.watch.watchers"
EVENT_TYPE = "k8s.event.type"


ROUTINE_PATHS = ("/healthz", "/readyz", "/livez", "/metrics")
"""Non-resource paths not traced without a client's context (module docstring), each
with its sub-paths (`/readyz/etcd`)."""
ROUTINE_LEASE_VERBS = frozenset({"get", "update", "patch"})


def routine(info: RequestInfo) -> bool:
    """Whether the request is a health check, a scrape, or a Lease's read or renewal:
    traced only in a client's trace (module docstring)."""
    if not info.is_resource:
        return any(info.path == p or info.path.startswith(p + "/") for p in ROUTINE_PATHS)
    return info.resource == "leases" and info.verb in ROUTINE_LEASE_VERBS


def span_name(info: RequestInfo) -> str:
    """The request span's name: the verb and what it acts on, few enough distinct names
    to group by (no object names in it)."""
    if not info.is_resource:
        return f"APIServer.{info.verb} {info.path}"
    what = info.resource + (f"/{info.subresource}" if info.subresource else "")
    return f"APIServer.{info.verb} {what}"


@dataclass
class RequestSpan:
    """One request's span (None while tracing is off) and the token that made its
    context current, to detach when the request ends."""

    span: trace.Span | None
    token: object

    def finish(self, code: int) -> None:
        """End the span with the response's code; an error status for a 5xx (a 4xx is
        the client's doing, as OpenTelemetry's HTTP server conventions say)."""
        span, self.span = self.span, None
        if span is None:
            return
        span.set_attribute(STATUS_CODE, code)
        if code >= 500:
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    def close(self) -> None:
        """Leave the request's context (and end a span nobody finished)."""
        if self.span is not None:
            self.span.end()
            self.span = None
        otel_context.detach(self.token)  # type: ignore[arg-type]


def begin(
    traced: tracing.Tracing,
    info: RequestInfo,
    method: str,
    headers: Headers,
) -> RequestSpan | None:
    """Start the request's span and make its context current; None when there is no
    context to keep (tracing off and no `traceparent` from the client)."""
    parent = propagate.extract(headers) if "traceparent" in headers else None
    if parent is None:
        if not traced.enabled or routine(info):
            return None
    elif not traced.enabled:
        return RequestSpan(None, otel_context.attach(parent))
    # The verb, resource and subresource are in the span's name: not repeated.
    attributes = {METHOD: method, PATH: info.path, USER_AGENT: headers.get("User-Agent", "")}
    if info.is_resource:
        if info.group:
            attributes[GROUP] = info.group
        if info.namespace:
            attributes[tracing.OBJECT_NAMESPACE] = info.namespace
        if info.name:
            attributes[tracing.OBJECT_NAME] = info.name
    span = traced.tracer.start_span(
        span_name(info), context=parent, kind=trace.SpanKind.SERVER, attributes=attributes
    )
    return RequestSpan(span, otel_context.attach(trace.set_span_in_context(span, parent)))


class _Step:
    """Times a step of the request and records its seconds on the current span (the
    request's) as `key` when the step ends, whether or not it raised."""

    __slots__ = ("key", "started")

    def __init__(self, key: str) -> None:
        self.key = key
        self.started = 0.0

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(self.key, time.perf_counter() - self.started)


_UNTIMED: AbstractContextManager[None] = contextlib.nullcontext()


def step(traced: tracing.Tracing, key: str) -> AbstractContextManager[None]:
    """A step of the request chain that does no I/O of its own (validation): its time is
    an attribute of the request span, `key`, rather than a span of its own (module
    docstring); while tracing is off, nothing is timed."""
    return _Step(key) if traced.enabled else _UNTIMED


def store_outcome(span: trace.Span, operation: str, result: TxnResult, seconds: float) -> None:
    """A store transaction's outcome on the request's (recording) span: the operation,
    its seconds and, if its compare held, the revision it made (module docstring). A
    request that retries a transaction (an update on a conflict) keeps the last's."""
    attributes: dict[str, str | int | float] = {STORE_OPERATION: operation, STORE_SECONDS: seconds}
    if result.succeeded:
        attributes[STORE_REVISION] = result.header.revision
    span.set_attributes(attributes)


def describe(obj: object) -> None:
    """Name the object a request answers with on the current span (the request's, when
    the answer is being made)."""
    span = trace.get_current_span()
    if not span.is_recording() or not isinstance(obj, dict):
        return
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and metadata.get("name"):  # not a list, nor a Status
        span.set_attributes(tracing.object_attributes(obj))


def read_source(source: str, semantics: str, revision: int | None = None) -> None:
    """Where a get or list took its objects from, on the current (request) span: `source`
    `WATCH_CACHE` or `STORE`; `semantics` the resourceVersion semantics that chose it,
    Kubernetes' names: `most-recent` (resourceVersion unset: the cache first catches up
    with the store's current revision), `any` ("0": whatever the cache has),
    `not-older-than` (a given revision), `exact` (resourceVersionMatch=Exact) or
    `continue` (a page's token); `revision` the store revision the cache waited for, if
    it waited. A request that reads several times (a proxied request finds the pod, then
    its node) keeps the last read's."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    attributes: dict[str, str | int] = {READ_SOURCE: source, READ_SEMANTICS: semantics}
    if revision is not None:
        attributes[READ_REVISION] = revision
    span.set_attributes(attributes)
