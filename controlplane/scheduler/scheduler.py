"""The scheduler: the seeds' "Scheduler watches for unscheduled pods, evaluates all
nodes, binds pod to Node 3" as kube-scheduler does it.

Two informers feed it: pods (except finished ones) and nodes. Their handlers sort what
arrives: a pending pod of one of our profiles goes to the scheduling queue; a bound pod
goes to the cache (and confirms an assumed one); a node goes to the cache; an event
that may make unschedulable pods fit moves them back (`queue.HINTS`). Plugins that read
more of the cluster (VolumeBinding: claims, volumes, classes) get informers of their
own through the handle, started and synced with these.

One thread runs scheduling cycles, one pod at a time, which is what keeps decisions
consistent with each other: pop the next pod; under the cache's lock find a node
(`Framework.find_nodes`) and *assume* the pod there; run reserve and permit. Binding
(the binding cycle: the pre-bind plugins' writes, such as a claim's selected node, then
the bind plugins' POST to `pods/<name>/binding`, then the
`Scheduled` Event) runs in a pool of threads, so the next cycle starts without waiting
for the apiserver; the assumed pod keeps the node's resources counted meanwhile. A
failed binding forgets the assumption and sends the pod back with back-off.

A pod no node fits gets a post-filter pass (preemption), a `FailedScheduling` Event
with Kubernetes' summary ("0/5 nodes are available: 2 Insufficient memory, 3 node(s)
had untolerated taint {...}. preemption: ..."), the PodScheduled=False condition
(what `kubectl get pods` shows as Pending with a reason), and waits as unschedulable.

Tracing (docs/architecture.md, "Tracing"): each attempt at a pod is `Scheduler.queue`
(from the moment the pod was queued until the cycle took it) and `Scheduler.schedule`
(the cycle: the pod, `kubelab.scheduler.node` the node chosen, the result), with the
framework's `Scheduler.filter` and `Scheduler.score` (`runtime`), `Scheduler.postFilter`
(preemption) and, in the binding pool, `Scheduler.bind` (with a `Scheduler.preBind` per
pre-bind plugin that writes, such as VolumeBinding's), whose request carries its
`traceparent`: the apiserver keeps it on the bound pod, and the kubelet continues it.
The cycle continues the pod's trace (`kubelab.tracing.extract`) rather than linking to
it: a cycle is about one pod, and the chain from the Deployment to the containers is
then one trace. A pod that waits long and is retried adds each attempt to its trace.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context

from kubelab import tracing
from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource
from kubelab.client import (
    DeletedFinalStateUnknown,
    PatchType,
    RestClient,
    ServerUnreachable,
    SharedInformer,
    resource_for,
)
from kubelab.client.record import NORMAL, WARNING, EventRecorder

from . import queue as q
from .cache import Cache
from .config import SchedulerConfig
from .framework import (
    Code,
    CycleState,
    NodeInfo,
    Pod,
    PodInfo,
    QueuedPod,
    Snapshot,
    Status,
    pod_key,
)
from .metrics import Metrics
from .runtime import FitError, Framework

log = logging.getLogger("kubelab.scheduler")

PODS = resource_for("v1", "Pod")
NODES = resource_for("v1", "Node")

UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"
"""The pod informer's field selector: finished pods hold no resources."""
CLEANUP_PERIOD = 1.0

PROFILE_ATTRIBUTE = "kubelab.scheduler.profile"
ATTEMPT_ATTRIBUTE = "kubelab.scheduler.attempt"
NODE_ATTRIBUTE = "kubelab.scheduler.node"
RESULT_ATTRIBUTE = "kubelab.scheduler.result"


def _spec_of(pod: Pod) -> tuple[Any, ...]:
    """What a pending pod's scheduling depends on: a change elsewhere (status, our own
    condition patch, resourceVersion) is no reason to try it again."""
    meta = pod.get("metadata") or {}
    return (
        pod.get("spec"),
        meta.get("labels"),
        meta.get("annotations"),
        meta.get("deletionTimestamp"),
    )


def _node_relevant(node: Pod) -> tuple[Any, ...]:
    """What of a node the filters read (heartbeats change none of it)."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    return (
        (node.get("metadata") or {}).get("labels"),
        spec.get("taints"),
        spec.get("unschedulable"),
        status.get("allocatable"),
        status.get("images"),
    )


def _bound(pod: Pod) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


class _Handle:
    """What a profile's plugins get (`framework.Handle`)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self.framework: Framework | None = None

    @property
    def client(self) -> RestClient:
        return self._scheduler.client

    @property
    def snapshot(self) -> Snapshot:
        return self._scheduler.cache

    @property
    def recorder(self) -> EventRecorder:
        return self._scheduler.recorder

    def run_filters(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        assert self.framework is not None
        return self.framework.run_filters(state, pod, node)

    def informer(self, resource: Resource) -> SharedInformer:
        return self._scheduler.informer(resource)


class Nominator:
    """Pods nominated to a node by preemption, so that the room made there is kept for
    them (`Framework.find_nodes` counts them on that node for pods of lower priority)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._node_of: dict[str, str] = {}
        self._by_node: dict[str, dict[str, PodInfo]] = {}

    def nominate(self, pod: PodInfo, node: str) -> None:
        with self._lock:
            self._remove(pod.key)
            if node:
                self._node_of[pod.key] = node
                self._by_node.setdefault(node, {})[pod.key] = pod

    def remove(self, key: str) -> None:
        with self._lock:
            self._remove(key)

    def _remove(self, key: str) -> None:
        node = self._node_of.pop(key, None)
        if node is not None:
            pods = self._by_node.get(node, {})
            pods.pop(key, None)
            if not pods:
                self._by_node.pop(node, None)

    def by_node(self) -> dict[str, list[PodInfo]]:
        with self._lock:
            return {node: list(pods.values()) for node, pods in self._by_node.items()}


class Scheduler:
    """A term of scheduling: informers, cache, queue, profiles, the scheduling loop and
    the binding pool (module docstring). Built per term of leadership."""

    def __init__(
        self,
        client: RestClient,
        config: SchedulerConfig,
        metrics: Metrics,
        *,
        event_client: RestClient | None = None,
        bind_workers: int = 16,
        identity: str = "",
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.client = client
        self.tracer = tracer or trace.NoOpTracer()
        self.metrics = metrics
        self.cache = Cache()
        self.nominator = Nominator()
        self._plugin_informers: dict[str, SharedInformer] = {}
        self.recorder = EventRecorder(event_client or client, "default-scheduler", host=identity)
        self.frameworks: dict[str, Framework] = {}
        for profile in config.profiles:
            handle = _Handle(self)
            fwk = Framework(
                profile, handle, metrics, config.percentage_of_nodes_to_score, tracer=self.tracer
            )
            handle.framework = fwk
            self.frameworks[profile.scheduler_name] = fwk
        first = next(iter(self.frameworks.values()))
        self.queue = q.SchedulingQueue(
            metrics,
            first.less,
            config.pod_initial_backoff_seconds,
            config.pod_max_backoff_seconds,
        )
        self.pods = SharedInformer(client, PODS, field_selector=UNFINISHED_PODS)
        self.nodes = SharedInformer(client, NODES)
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.nodes.add_event_handler(self._node_added, self._node_updated, self._node_deleted)
        self._binder = concurrent.futures.ThreadPoolExecutor(
            max_workers=bind_workers, thread_name_prefix="bind"
        )
        self.synced = threading.Event()

    def informer(self, resource: Resource) -> SharedInformer:
        """The cache of `resource` that plugins read (`framework.Handle.informer`): one
        per resource, run with the pods and nodes; any change to it may make a pod some
        plugin rejected fit (`queue.STORAGE_CHANGE`: claims, volumes and classes are what
        plugins ask for)."""
        informer = self._plugin_informers.get(resource.group_resource)
        if informer is None:
            informer = SharedInformer(self.client, resource)
            informer.add_event_handler(
                lambda _obj: self._storage_changed(),
                lambda _old, _new: self._storage_changed(),
                lambda _obj: self._storage_changed(),
            )
            self._plugin_informers[resource.group_resource] = informer
        return informer

    # -- event handlers (informer threads) -------------------------------------------------

    def _storage_changed(self) -> None:
        self.queue.move_for_event(q.STORAGE_CHANGE)

    def _responsible(self, pod: Pod) -> bool:
        name = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        return name in self.frameworks

    def _pod_added(self, pod: Pod) -> None:
        if _bound(pod):
            self.cache.add_pod(pod)
            self.queue.move_for_event(q.POD_ADD)
        elif self._responsible(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            info = PodInfo.of(pod)
            nominated = (pod.get("status") or {}).get("nominatedNodeName")
            if nominated:
                self.nominator.nominate(info, nominated)
            self.queue.add(info)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        if _bound(new):
            if not _bound(old):
                self.queue.delete(pod_key(new))
                self.nominator.remove(pod_key(new))
            self.cache.update_pod(new)
        elif self._responsible(new):
            if (new.get("metadata") or {}).get("deletionTimestamp"):
                self.queue.delete(pod_key(new))
                self.nominator.remove(pod_key(new))
            elif _spec_of(old) != _spec_of(new):
                self.queue.update(PodInfo.of(new))

    def _pod_deleted(self, obj: Pod | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if _bound(pod):
            self.cache.remove_pod(pod)
            self.queue.move_for_event(q.POD_DELETE)
        else:
            self.queue.delete(pod_key(pod))
            self.nominator.remove(pod_key(pod))

    def _node_added(self, node: Pod) -> None:
        self.cache.set_node(node)
        self.queue.move_for_event(q.NODE_ADD)

    def _node_updated(self, old: Pod, new: Pod) -> None:
        self.cache.set_node(new)
        if _node_relevant(old) != _node_relevant(new):
            self.queue.move_for_event(q.NODE_UPDATE)

    def _node_deleted(self, obj: Pod | DeletedFinalStateUnknown) -> None:
        node = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.cache.remove_node(str((node.get("metadata") or {}).get("name", "")))

    # -- running -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Schedule until `stop` is set."""
        self.recorder.start()
        informers = [self.nodes, self.pods, *self._plugin_informers.values()]
        for informer in informers:
            informer.start(stop)
        try:
            while not all(informer.wait_for_sync(1.0) for informer in informers):
                if stop.is_set():
                    return
            self.synced.set()
            log.info(
                "caches synced: %d nodes, %d pods placed; scheduling for %s",
                self.cache.node_count(),
                self.cache.pod_count(),
                ", ".join(self.frameworks),
            )
            next_cleanup = time.monotonic() + CLEANUP_PERIOD
            while not stop.is_set():
                self.schedule_one(timeout=0.5)
                if time.monotonic() >= next_cleanup:
                    self._housekeeping()
                    next_cleanup = time.monotonic() + CLEANUP_PERIOD
        finally:
            self.queue.close()
            self._binder.shutdown(wait=True, cancel_futures=True)
            self.recorder.stop()

    def _housekeeping(self) -> None:
        """Expire overdue assumed pods; refresh the cache size gauges."""
        for key in self.cache.cleanup_expired():
            log.warning("assumed pod %s expired before its binding was seen", key)
        size = self.metrics.cache_size
        size.labels("nodes").set(self.cache.node_count())
        size.labels("pods").set(self.cache.pod_count())
        size.labels("assumed_pods").set(self.cache.assumed_count())

    def schedule_one(self, timeout: float) -> None:
        """One scheduling cycle (module docstring); binding is handed to the pool."""
        qp = self.queue.pop(timeout)
        if qp is None:
            return
        key = qp.info.key
        current = self.pods.indexer.get(key)
        if (
            current is None
            or _bound(current)
            or (current.get("metadata") or {}).get("deletionTimestamp")
            or self.cache.is_assumed(current)
        ):
            self.queue.done(key)
            return
        context = tracing.extract(current)
        now = time.time_ns()
        waited = self.queue.waited(qp)
        self.tracer.start_span(
            "Scheduler.queue", context=context, start_time=now - int(waited * 1e9)
        ).end(end_time=now)
        with self.tracer.start_as_current_span("Scheduler.schedule", context=context) as span:
            if span.is_recording():
                span.set_attributes(tracing.object_attributes(current, PODS.kind))
                span.set_attribute(ATTEMPT_ATTRIBUTE, qp.attempts)
            self._schedule(span, qp, current)

    def _schedule(self, span: trace.Span, qp: QueuedPod, current: Pod) -> None:
        """The cycle of `schedule_one`, in its span."""
        key = qp.info.key
        qp.info = PodInfo.of(current)
        fwk = self.frameworks[
            (current.get("spec") or {}).get("schedulerName") or "default-scheduler"
        ]
        span.set_attribute(PROFILE_ATTRIBUTE, fwk.profile)
        cycle = self.queue.scheduling_cycle
        started = time.perf_counter()
        state = CycleState()
        try:
            with self.cache.lock:
                result = fwk.find_nodes(state, qp.info, self.cache, self.nominator.by_node())
                assumed = self.cache.assume(current, result.node)
        except FitError as fit:
            span.set_attribute(RESULT_ATTRIBUTE, "unschedulable")
            self._unschedulable(fwk, state, qp, fit, cycle, started)
            return
        except Exception as exc:
            log.exception("scheduling %s failed", key)
            span.set_attribute(RESULT_ATTRIBUTE, "error")
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
            self._failed(fwk, qp, f"scheduling error: {exc}", cycle, started)
            return
        span.set_attribute(NODE_ATTRIBUTE, result.node)
        status = fwk.run_reserve(state, assumed, result.node)
        if status.ok:
            status = fwk.run_permit(state, assumed, result.node)
        if not status.ok:
            span.set_attribute(RESULT_ATTRIBUTE, "unschedulable" if status.rejected else "error")
            fwk.run_unreserve(state, assumed, result.node)
            self.cache.forget(current)
            self._failed(fwk, qp, status.message(), cycle, started, unschedulable=status.rejected)
            return
        span.set_attribute(RESULT_ATTRIBUTE, "scheduled")
        log.debug(
            "%s: %s fits (%d of %d nodes evaluated, %d feasible)",
            key,
            result.node,
            result.evaluated,
            self.cache.node_count(),
            result.feasible,
        )
        self._binder.submit(
            self._bind,
            fwk,
            state,
            qp,
            assumed,
            result.node,
            started,
            trace.set_span_in_context(span),
        )

    def _bind(
        self,
        fwk: Framework,
        state: CycleState,
        qp: QueuedPod,
        assumed: PodInfo,
        node: str,
        started: float,
        cycle: Context,
    ) -> None:
        """The binding cycle, in a pool thread, as a span of the cycle's."""
        pod = qp.info.pod
        with self.tracer.start_as_current_span("Scheduler.bind", context=cycle) as span:
            if span.is_recording():
                span.set_attributes(tracing.object_attributes(pod, PODS.kind))
                span.set_attribute(NODE_ATTRIBUTE, node)
            try:
                status = fwk.run_pre_bind(state, assumed, node)
                if status.ok:
                    status = fwk.run_bind(state, assumed, node)
            except Exception as exc:  # a plugin must not kill the pool thread silently
                log.exception("binding %s failed", qp.info.key)
                status = Status(Code.ERROR, (str(exc),), "bind")
            if not status.ok:
                span.set_status(trace.Status(trace.StatusCode.ERROR, status.message()))
        if not status.ok:
            fwk.run_unreserve(state, assumed, node)
            self.cache.forget(pod)
            log.warning("binding %s to %s failed: %s", qp.info.key, node, status.message())
            self.recorder.event(
                pod, WARNING, "FailedScheduling", f"Binding rejected: {status.message()}"
            )
            self._failed(fwk, qp, status.message(), self.queue.scheduling_cycle, started)
            return
        self.cache.finish_binding(pod)
        self.nominator.remove(qp.info.key)
        self.queue.done(qp.info.key)
        elapsed = time.perf_counter() - started
        self.metrics.attempts.labels("scheduled", fwk.profile).inc()
        self.metrics.attempt_duration.labels("scheduled", fwk.profile).observe(elapsed)
        self.metrics.pod_scheduling_attempts.observe(qp.attempts)
        meta = pod.get("metadata") or {}
        log.info(
            "bound %s (uid %s) to %s in %.1f ms",
            qp.info.key,
            meta.get("uid", ""),
            node,
            elapsed * 1000,
        )
        self.recorder.event(
            pod,
            NORMAL,
            "Scheduled",
            f"Successfully assigned {meta.get('namespace')}/{meta.get('name')} to {node}",
            action="Binding",
        )

    # -- failures ------------------------------------------------------------------------

    def _unschedulable(
        self,
        fwk: Framework,
        state: CycleState,
        qp: QueuedPod,
        fit: FitError,
        cycle: int,
        started: float,
    ) -> None:
        message = str(fit)
        nominated = ""
        if fwk.post_filters and fit.statuses:
            self.metrics.preemption_attempts.inc()
            with self.tracer.start_as_current_span("Scheduler.postFilter") as span, self.cache.lock:
                nominated, status = fwk.run_post_filter(state, qp.info, fit)
                if nominated:
                    span.set_attribute(NODE_ATTRIBUTE, nominated)
            if nominated:
                self.nominator.nominate(qp.info, nominated)
            elif status.reasons:
                message = f"{message} preemption: {status.message()}"
        qp.rejected_by = fit.rejected_by
        log.info("%s is unschedulable: %s", qp.info.key, message)
        self.metrics.attempts.labels("unschedulable", fwk.profile).inc()
        self.metrics.attempt_duration.labels("unschedulable", fwk.profile).observe(
            time.perf_counter() - started
        )
        self.recorder.event(qp.info.pod, WARNING, "FailedScheduling", message)
        self._set_unschedulable_condition(qp.info.pod, message, nominated)
        self.queue.requeue_failed(qp, cycle, unschedulable=True)

    def _failed(
        self,
        fwk: Framework,
        qp: QueuedPod,
        message: str,
        cycle: int,
        started: float,
        unschedulable: bool = False,
    ) -> None:
        result = "unschedulable" if unschedulable else "error"
        self.metrics.attempts.labels(result, fwk.profile).inc()
        self.metrics.attempt_duration.labels(result, fwk.profile).observe(
            time.perf_counter() - started
        )
        self.queue.requeue_failed(qp, cycle, unschedulable=unschedulable)

    def _set_unschedulable_condition(self, pod: Pod, message: str, nominated: str) -> None:
        """PodScheduled=False (reason Unschedulable) and the nominated node, unless the
        pod already says so: no write per retry of a pod that stays pending."""
        status = pod.get("status") or {}
        condition: Mapping[str, Any] = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {}
        )
        same = (
            condition.get("status") == "False"
            and condition.get("message") == message
            and (status.get("nominatedNodeName") or "") == nominated
        )
        if same:
            return
        patch: dict[str, Any] = {
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": message,
                        "lastProbeTime": None,
                        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                ]
            }
        }
        if nominated:
            patch["status"]["nominatedNodeName"] = nominated
        meta = pod.get("metadata") or {}
        try:
            self.client.patch(
                PODS,
                meta["name"],
                patch,
                meta["namespace"],
                patch_type=PatchType.STRATEGIC_MERGE,
                subresource="status",
            )
        except (StatusError, ServerUnreachable) as exc:
            log.warning("cannot update the status of %s: %s", pod_key(pod), exc)

    # -- introspection -------------------------------------------------------------------

    def pending(self) -> Mapping[str, int]:
        return self.queue.depths()
