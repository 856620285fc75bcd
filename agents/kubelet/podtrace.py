"""The pod worker's spans (issue 23; docs/architecture.md, "Tracing"): the seeds' step 5,
the kubelet making a pod run, as a part of the trace of the write that caused it.

A sync continues the trace kept in the pod (`kubelab.tracing.extract`: the annotation
the apiserver stamps on the binding, the pod's deletion, ...) under the name of its kind
of work, as Kubernetes' pod workers call it: `Kubelet.syncPod` (make it run),
`Kubelet.syncTerminatingPod` (deleted or evicted: stop it within its grace period, report,
confirm the deletion) and `Kubelet.syncTerminatedPod` (gone: remove what is left). Each
step it takes is a child span: `Kubelet.runPodSandbox`, `Kubelet.ensureImage` (with
`kubelab.kubelet.image`: present, pulled or why not), `Kubelet.createContainer`,
`Kubelet.startContainer`, `Kubelet.probe` (a probe's verdict turning to success),
`Kubelet.updateStatus` (its PATCH carries the span's traceparent through the REST
client), `Kubelet.killPod` with a `Kubelet.stopContainer` per container (the grace period
as an attribute), `Kubelet.stopPodSandbox`, `Kubelet.deletePod`, `Kubelet.removeContainer`
and `Kubelet.removePodSandbox`.

A worker syncs every pod again and again (every `--sync-frequency`, after each probe,
each back-off); most of those syncs find nothing to do. A sync's span is therefore made
at its first step, with the sync's start as its start time: a sync that took no step
makes no span, and a pod's trace holds what the kubelet did, not how often it looked.

The sync in progress is a context variable of the worker's thread (`syncing`), so the
steps deep in the worker (`step`) need no tracer passed around, and cost a lookup when
the kubelet does not trace.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from kubelab import tracing

CONTAINER = "k8s.container.name"
IMAGE = "container.image.name"
IMAGE_OUTCOME = "kubelab.kubelet.image"
"""`Kubelet.ensureImage`'s outcome: present, pulled, or the waiting reason."""
PROBE = "kubelab.kubelet.probe"
GRACE_PERIOD = "kubelab.kubelet.grace_period_seconds"
ATTEMPT = "kubelab.kubelet.attempt"
PHASE = "k8s.pod.phase"

SYNC_POD = "Kubelet.syncPod"
SYNC_TERMINATING_POD = "Kubelet.syncTerminatingPod"
SYNC_TERMINATED_POD = "Kubelet.syncTerminatedPod"


class PodSync:
    """One sync of a pod worker: its span, made at the first step (module docstring)."""

    def __init__(self, tracer: trace.Tracer, name: str, pod: Mapping[str, Any]) -> None:
        self._tracer = tracer
        self._name = name
        self._pod = pod
        self._start = time.time_ns()
        self.span: Span | None = None

    def _parent(self) -> Context:
        if self.span is None:
            self.span = self._tracer.start_span(
                self._name,
                context=tracing.extract(self._pod),
                start_time=self._start,
                attributes=tracing.object_attributes(self._pod, "Pod"),
            )
        return trace.set_span_in_context(self.span)

    @contextlib.contextmanager
    def step(self, name: str, attributes: Mapping[str, AttributeValue]) -> Iterator[Span]:
        """A step as a span: the child of the step it is in, or of the sync's span."""
        current = trace.get_current_span().get_span_context().is_valid
        with self._tracer.start_as_current_span(
            name, context=None if current else self._parent(), attributes=attributes
        ) as span:
            yield span

    def record(self, name: str, start_ns: int, attributes: Mapping[str, AttributeValue]) -> None:
        """A step known to be one only once done (a probe's success): from `start_ns`."""
        current = trace.get_current_span().get_span_context().is_valid
        self._tracer.start_span(
            name,
            context=None if current else self._parent(),
            start_time=start_ns,
            attributes=attributes,
        ).end()


_SYNC: contextvars.ContextVar[PodSync | None] = contextvars.ContextVar(
    "kubelab_kubelet_pod_sync", default=None
)


@contextlib.contextmanager
def syncing(
    tracer: trace.Tracer | None, name: str, pod: Mapping[str, Any] | None
) -> Iterator[None]:
    """The sync of `pod` (its last known state) in this thread, traced with `tracer`
    (None: not traced). An error that ends the sync marks its span, if it has one."""
    if tracer is None or pod is None:
        yield
        return
    sync = PodSync(tracer, name, pod)
    token = _SYNC.set(sync)
    # Steps are children of this sync, whatever span the caller's thread is in.
    detached = otel_context.attach(Context())
    try:
        yield
    except Exception as exc:
        if sync.span is not None:
            sync.span.record_exception(exc)
            sync.span.set_status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        otel_context.detach(detached)
        _SYNC.reset(token)
        if sync.span is not None:
            sync.span.end()


def step(
    name: str, attributes: Mapping[str, AttributeValue] | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """The step `name` of the sync in progress as a span (yielding it), or nothing when
    the sync is not traced (yielding None)."""
    sync = _SYNC.get()
    return contextlib.nullcontext() if sync is None else sync.step(name, attributes or {})


def record(
    name: str, start_ns: int, attributes: Mapping[str, AttributeValue] | None = None
) -> None:
    """A step of the sync in progress known only once done (`PodSync.record`)."""
    sync = _SYNC.get()
    if sync is not None:
        sync.record(name, start_ns, attributes or {})
