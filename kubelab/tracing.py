"""Tracing of kubelab's components with OpenTelemetry (issue 23): the one set-up every
component calls, the object's attributes on a span, and trace context carried through
an object from the write that caused a change to the component that reacts to it.

**Set-up** (`setup`): each component owns one `TracerProvider` whose Resource names it
(`service.name`: apiserver, store, controller-manager, scheduler, kubelet, kube-proxy,
dns) and its node (`host.name` and `k8s.node.name`). Ended spans go through the SDK's
`BatchSpanProcessor` to the OTLP/HTTP exporter, so exporting is off the hot path. The
endpoint is the component's `--tracing-endpoint` flag (the lab's collector) or else the
standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT` (a user's
own Jaeger or Tempo); with neither, tracing is off and spans cost nothing. The provider
is the component's, never the global one, so that components sharing a test process
keep their own `service.name`.

**A collector that is down** must not hurt the component: spans are dropped, never
waited for, and counted in the component's `/metrics`:
`kubelab_tracing_spans_exported_total` and `kubelab_tracing_spans_dropped_total{reason}`
with reason `queue_full` (the exporter fell behind: more spans waiting than the queue
holds) or `export_failed` (the endpoint could not be reached or refused the batch).
The SDK's processor drops on a full queue without telling anyone but its log, so spans
are admitted to it here, against the same capacity, and counted. After a failed export
the next batches within `RETRY_AFTER` seconds are dropped at once instead of each
waiting out the exporter's retries: a component's stop is not held up by a dead
collector, and the queue drains.

**The object on a span** (`object_attributes`): `k8s.object.kind`,
`k8s.object.namespace`, `k8s.object.name`, `k8s.object.uid`,
`k8s.object.resource_version` and `k8s.object.owner_uid` (the uid of the controller in
its ownerReferences). OpenTelemetry's semantic conventions name objects per kind
(`k8s.pod.uid`, `k8s.deployment.name`); one set of names for every kind lets the
collector index any object the same way, and the owner's uid lets `labctl trace` walk
down an owner chain (Deployment -> ReplicaSet -> Pods) from the spans alone, after the
objects are gone.

**Context through an object** (`inject`, `extract`, `link`): the apiserver keeps the
W3C `traceparent` (and `tracestate`, when there is one) of the request that wrote an
object in the annotations `trace.kubelab.io/traceparent` and
`trace.kubelab.io/tracestate`; the component that reacts to the watch event continues
that trace (`extract` as the parent context) or links to it (`link`). KEP-5915
proposes the same carrier as `tracing.k8s.io/traceparent`; that proposal is open and
`k8s.io` prefixes are Kubernetes' own, so kubelab uses its own domain with the same
value: moving to the KEP's name once it is accepted is a rename. The values are written
and read by OpenTelemetry's `TraceContextTextMapPropagator`, with the annotations as its
carrier.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import time
from collections.abc import Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes
from prometheus_client import CollectorRegistry, Counter

COMPONENTS = (
    "apiserver",
    "store",
    "controller-manager",
    "scheduler",
    "kubelet",
    "kube-proxy",
    "dns",
    "ingress-nginx",
)
"""The values of `service.name`: `labctl trace -o json`'s `component` is one of them."""

# Resource attributes (OpenTelemetry's semantic conventions).
SERVICE_NAME = "service.name"
SERVICE_NAMESPACE = "service.namespace"
HOST_NAME = "host.name"
NODE_NAME = "k8s.node.name"

# Span attributes: the object a span is about (module docstring).
OBJECT_KIND = "k8s.object.kind"
OBJECT_NAMESPACE = "k8s.object.namespace"
OBJECT_NAME = "k8s.object.name"
OBJECT_UID = "k8s.object.uid"
OBJECT_RESOURCE_VERSION = "k8s.object.resource_version"
OBJECT_OWNER_UID = "k8s.object.owner_uid"

TRACEPARENT_ANNOTATION = "trace.kubelab.io/traceparent"
TRACESTATE_ANNOTATION = "trace.kubelab.io/tracestate"
_ANNOTATION_OF_FIELD = {"traceparent": TRACEPARENT_ANNOTATION, "tracestate": TRACESTATE_ANNOTATION}

OTLP_TRACES_PATH = "/v1/traces"
MAX_QUEUE_SIZE = 2048
"""Spans waiting to be exported, at most (the SDK's default)."""
MAX_EXPORT_BATCH_SIZE = 512
"""Spans in one export request, at most (the SDK's default)."""
EXPORT_TIMEOUT = 3.0
"""Seconds one export may take, retries included, unless the standard
`OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or `OTEL_EXPORTER_OTLP_TIMEOUT` says otherwise (the
SDK's own default, 10 s, would hold a stopping component that long)."""
RETRY_AFTER = 5.0
"""Seconds after a failed export during which batches are dropped without trying."""

_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")

_PROPAGATOR = TraceContextTextMapPropagator()


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The tracing flag every component takes."""
    parser.add_argument(
        "--tracing-endpoint",
        default="",
        metavar="URL",
        help="OTLP/HTTP endpoint to send spans to, e.g. the lab's collector "
        "http://10.0.0.2:4318 (/v1/traces is appended); default: the standard "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, and with "
        "neither, tracing is off",
    )


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base URL, as the standard
    `OTEL_EXPORTER_OTLP_ENDPOINT` is turned into one."""
    return endpoint.rstrip("/") + OTLP_TRACES_PATH


class _Accounting:
    """The spans admitted to the batch processor and not yet settled by an export, and
    the counters of what became of them (module docstring)."""

    def __init__(self, registry: CollectorRegistry, capacity: int) -> None:
        self.capacity = capacity
        self.exported = Counter(
            "kubelab_tracing_spans_exported",
            "Spans the tracing endpoint accepted.",
            registry=registry,
        )
        self.dropped = Counter(
            "kubelab_tracing_spans_dropped",
            "Spans dropped: queue_full (the exporter fell behind), export_failed (the "
            "endpoint could not be reached or refused them).",
            ["reason"],
            registry=registry,
        )
        # Present at zero from the start, so that a rate over them is defined.
        for reason in ("queue_full", "export_failed"):
            self.dropped.labels(reason)
        self._lock = threading.Lock()
        self._in_flight = 0

    def admit(self) -> bool:
        with self._lock:
            if self._in_flight >= self.capacity:
                self.dropped.labels("queue_full").inc()
                return False
            self._in_flight += 1
            return True

    def settle(self, count: int, exported: bool) -> None:
        with self._lock:
            self._in_flight -= count
        if exported:
            self.exported.inc(count)
        else:
            self.dropped.labels("export_failed").inc(count)


class _AdmittingProcessor(SpanProcessor):
    """The SDK's batch processor behind an admission that counts what a full queue drops."""

    def __init__(self, batch: BatchSpanProcessor, accounting: _Accounting) -> None:
        self._batch = batch
        self._accounting = accounting

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._batch.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return
        if self._accounting.admit():
            self._batch.on_end(span)

    def shutdown(self) -> None:
        self._batch.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._batch.force_flush(timeout_millis)


class _CountingExporter(SpanExporter):
    """The OTLP exporter, counting each batch's outcome and not retrying an endpoint that
    just failed for `RETRY_AFTER` seconds."""

    def __init__(self, exporter: SpanExporter, accounting: _Accounting) -> None:
        self._exporter = exporter
        self._accounting = accounting
        self._retry_at = 0.0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = SpanExportResult.FAILURE
        try:
            if time.monotonic() >= self._retry_at:
                result = self._exporter.export(spans)
                if result is not SpanExportResult.SUCCESS:
                    self._retry_at = time.monotonic() + RETRY_AFTER
        finally:
            self._accounting.settle(len(spans), result is SpanExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


@dataclass
class Tracing:
    """A component's tracing: its `tracer`, and the provider behind it to flush and
    shut down when the component stops. `enabled` is False when no endpoint is set: the
    tracer is then a no-op one."""

    tracer: trace.Tracer
    enabled: bool
    _provider: TracerProvider | None = None

    def span(
        self,
        name: str,
        attributes: Attributes = None,
        *,
        context: Context | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
    ) -> AbstractContextManager[trace.Span]:
        """A span as the current one for a `with` block; while tracing is off, a shared
        do-nothing context that yields a non-recording span, so that a hot path (the
        apiserver's every request) pays no more than this call for its spans."""
        if not self.enabled:
            return _NOT_TRACED
        return self.tracer.start_as_current_span(
            name, context=context, kind=kind, attributes=attributes
        )

    def force_flush(self, timeout: float = 5.0) -> bool:
        """Export the spans waiting now (tests, and before a planned stop)."""
        if self._provider is None:
            return True
        return self._provider.force_flush(int(timeout * 1000))

    def shutdown(self) -> None:
        """Export what is waiting, if the endpoint takes it, and stop the exporter."""
        if self._provider is not None:
            self._provider.shutdown()


_NOT_TRACED = contextlib.nullcontext(trace.INVALID_SPAN)

DISABLED = Tracing(trace.NoOpTracer(), enabled=False)
"""Tracing off: the default of parts that are given a component's tracing."""


def setup(
    component: str,
    node: str,
    registry: CollectorRegistry,
    endpoint: str = "",
    *,
    exporter: SpanExporter | None = None,
    max_queue_size: int = MAX_QUEUE_SIZE,
    schedule_delay: float = 5.0,
) -> Tracing:
    """The component's tracing (module docstring). `endpoint` is `--tracing-endpoint`'s
    value (a base URL); `exporter` replaces the OTLP exporter (tests); the counters are
    registered in `registry`, the component's `/metrics`, even while tracing is off."""
    if component not in COMPONENTS:
        raise ValueError(f"unknown component {component!r}; one of {', '.join(COMPONENTS)}")
    accounting = _Accounting(registry, max_queue_size)
    if exporter is None:
        if not endpoint and not any(os.environ.get(name) for name in _ENDPOINT_VARIABLES):
            return Tracing(trace.NoOpTracer(), enabled=False)
        timeout = None if any(os.environ.get(n) for n in _TIMEOUT_VARIABLES) else EXPORT_TIMEOUT
        exporter = OTLPSpanExporter(
            endpoint=traces_url(endpoint) if endpoint else None, timeout=timeout
        )
    resource = Resource.create(
        {
            SERVICE_NAME: component,
            SERVICE_NAMESPACE: "kubelab",
            HOST_NAME: node,
            NODE_NAME: node,
        }
    )
    provider = TracerProvider(resource=resource)
    batch = BatchSpanProcessor(
        _CountingExporter(exporter, accounting),
        max_queue_size=max_queue_size,
        max_export_batch_size=min(MAX_EXPORT_BATCH_SIZE, max_queue_size),
        schedule_delay_millis=schedule_delay * 1000,
    )
    provider.add_span_processor(_AdmittingProcessor(batch, accounting))
    return Tracing(provider.get_tracer(f"kubelab.{component}"), enabled=True, _provider=provider)


# -- the object on a span -----------------------------------------------------------------


def object_attributes(obj: Mapping[str, Any], kind: str = "") -> dict[str, str]:
    """The object's span attributes (module docstring); `kind` for an object whose body
    does not say (the items of a list). Absent fields are left out."""
    metadata = obj.get("metadata") or {}
    owner = next(
        (ref for ref in metadata.get("ownerReferences") or () if ref.get("controller")), None
    )
    values = {
        OBJECT_KIND: kind or obj.get("kind", ""),
        OBJECT_NAMESPACE: metadata.get("namespace", ""),
        OBJECT_NAME: metadata.get("name", ""),
        OBJECT_UID: metadata.get("uid", ""),
        OBJECT_RESOURCE_VERSION: metadata.get("resourceVersion", ""),
        OBJECT_OWNER_UID: owner.get("uid", "") if owner else "",
    }
    return {key: value for key, value in values.items() if value}


# -- trace context through an object ------------------------------------------------------


class _AnnotationSetter(Setter[MutableMapping[str, str]]):
    def set(self, carrier: MutableMapping[str, str], key: str, value: str) -> None:
        carrier[_ANNOTATION_OF_FIELD[key]] = value


class _AnnotationGetter(Getter[Mapping[str, str]]):
    def get(self, carrier: Mapping[str, str], key: str) -> list[str] | None:
        value = carrier.get(_ANNOTATION_OF_FIELD[key])
        return [value] if isinstance(value, str) else None

    def keys(self, carrier: Mapping[str, str]) -> list[str]:
        return [field for field, name in _ANNOTATION_OF_FIELD.items() if name in carrier]


def inject(metadata: MutableMapping[str, Any], context: Context | None = None) -> None:
    """Keep the trace context (the current one by default) in the object's annotations,
    replacing an earlier write's; with no valid span in it, the annotations are removed,
    so an object never names a trace that did not write it."""
    annotations = metadata.get("annotations") or {}
    for name in _ANNOTATION_OF_FIELD.values():
        annotations.pop(name, None)
    _PROPAGATOR.inject(annotations, context, _AnnotationSetter())
    if annotations or "annotations" in metadata:
        metadata["annotations"] = annotations


def carry_over(metadata: MutableMapping[str, Any], previous: Mapping[str, Any]) -> None:
    """Give `metadata` the trace annotations of `previous` (an object's stored metadata),
    dropping any other: a write is then compared with what is stored without them, so
    that a write whose only change would be its trace context changes nothing."""
    annotations = metadata.get("annotations")
    kept = {
        name: value
        for name in _ANNOTATION_OF_FIELD.values()
        if (value := (previous.get("annotations") or {}).get(name)) is not None
    }
    if not annotations and not kept:
        return
    annotations = dict(annotations or {})
    for name in _ANNOTATION_OF_FIELD.values():
        annotations.pop(name, None)
    annotations.update(kept)
    metadata["annotations"] = annotations


def extract(obj: Mapping[str, Any]) -> Context:
    """The context kept in the object (an empty one if none or malformed): pass it as
    `context=` to continue the writer's trace."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return _PROPAGATOR.extract(annotations, getter=_AnnotationGetter())


def link(obj: Mapping[str, Any]) -> trace.Link | None:
    """A link to the span that last wrote the object, or None: for work that reacts to
    several objects and so has no single parent."""
    span_context = trace.get_current_span(extract(obj)).get_span_context()
    return trace.Link(span_context) if span_context.is_valid else None
