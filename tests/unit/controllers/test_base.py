"""The worker loop every controller runs: retries with back-off, keys that come back
after a wait, a clean stop that leaves the backlog alone; informers shared per resource."""

from __future__ import annotations

import itertools
import logging
import threading
import time

from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from controlplane.controllers.base import (
    KEY_ATTRIBUTE,
    InformerFactory,
    SyncError,
    SyncResult,
    Workers,
)
from kubelab import tracing
from kubelab.api.errors import StatusError
from kubelab.client import (
    ClientConfig,
    ItemExponentialFailureRateLimiter,
    RestClient,
    SharedInformer,
    WorkQueue,
    resource_for,
)
from lab.testenv import Environment
from tests.unit.client.conftest import eventually

log = logging.getLogger("test-controller")
PODS = resource_for("v1", "Pod")


def run(workers: Workers[str], count: int = 2) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=workers.run, args=(count, stop), daemon=True)
    thread.start()
    return stop, thread


def test_a_failing_key_is_retried_with_back_off_until_it_succeeds() -> None:
    queue: WorkQueue[str] = WorkQueue(ItemExponentialFailureRateLimiter(0.01, 1.0))
    calls: list[float] = []
    failures = [SyncError("not yet"), StatusError(409, "Conflict", "modified"), KeyError("x")]

    def sync(key: str) -> SyncResult:
        calls.append(time.monotonic())
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return None

    stop, thread = run(Workers("test", queue, sync, log))
    queue.add("k")
    eventually(lambda: len(calls) == 4)
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert gaps[0] >= 0.01 and gaps[1] >= 0.02 and gaps[2] >= 0.04, gaps
    eventually(lambda: queue.num_requeues("k") == 0)  # forgotten once it succeeded
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


def test_a_key_whose_sync_waits_comes_back_after_the_wait() -> None:
    queue: WorkQueue[str] = WorkQueue()
    calls: list[float] = []

    def sync(key: str) -> SyncResult:
        calls.append(time.monotonic())
        return 0.1 if len(calls) == 1 else None

    stop, thread = run(Workers("test", queue, sync, log))
    queue.add("k")
    eventually(lambda: len(calls) == 2)
    assert calls[1] - calls[0] >= 0.1
    stop.set()
    thread.join(5)


def test_keys_still_queued_when_stopped_are_left_alone() -> None:
    queue: WorkQueue[str] = WorkQueue()
    synced: list[str] = []
    busy, release = threading.Event(), threading.Event()

    def sync(key: str) -> SyncResult:
        synced.append(key)
        busy.set()
        release.wait(5)
        return None

    stop, thread = run(Workers("test", queue, sync, log), count=1)
    queue.add("first")
    assert busy.wait(5)
    queue.add("second")
    stop.set()  # leadership lost while "first" is being synced
    release.set()
    thread.join(5)
    assert not thread.is_alive()
    assert synced == ["first"], "the next leader's business"


def test_informers_are_shared_per_resource() -> None:
    with RestClient(ClientConfig(server="http://127.0.0.1:1")) as client:
        factory = InformerFactory(client)
        pods = factory.informer(resource_for("v1", "Pod"))
        assert factory.informer(resource_for("v1", "Pod")) is pods
        assert factory.informer(resource_for("v1", "ConfigMap")) is not pods
        assert len(factory) == 2


def test_join_bounds_the_wait_in_all_and_names_the_informers_still_running() -> None:
    factory = InformerFactory(RestClient(ClientConfig(server="http://127.0.0.1:1")))
    release = threading.Event()
    threads = [
        threading.Thread(target=release.wait, name=f"informer {n}", daemon=True)
        for n in ("pods", "nodes", "leases")
    ]
    for thread in threads:
        thread.start()
    factory._threads = threads
    started = time.monotonic()
    assert factory.join(0.3) == ["informer pods", "informer nodes", "informer leases"]
    assert time.monotonic() - started < 1.0, "the bound is for all of them together"
    release.set()
    assert factory.join(5) == []


def test_a_traced_key_is_its_queue_wait_and_a_reconcile_in_the_objects_trace() -> None:
    exporter = InMemorySpanExporter()
    traced = tracing.setup("controller-manager", "cp1", CollectorRegistry(), exporter=exporter)
    writer = traced.tracer.start_span("kubectl create")
    deployment: dict[str, object] = {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}
    }
    tracing.inject(deployment["metadata"], trace.set_span_in_context(writer))  # type: ignore[arg-type]
    objects = SharedInformer(
        RestClient(ClientConfig(server="http://127.0.0.1:1")), resource_for("apps/v1", "Deployment")
    )
    objects.indexer.add(deployment)
    queue: WorkQueue[str] = WorkQueue()
    synced: list[str] = []

    def sync(key: str) -> SyncResult:
        synced.append(key)
        if key == "ns/web":
            raise SyncError("the ReplicaSet is not there yet")
        return None

    workers = Workers(
        "deployment-controller", queue, sync, log, tracer=traced.tracer, objects=objects
    )
    queue.add("ns/web")
    queue.add("ns/gone")
    stop, thread = run(workers, count=1)
    eventually(lambda: len(synced) >= 2)
    stop.set()
    thread.join()
    traced.force_flush()
    spans = exporter.get_finished_spans()
    wait, reconcile = [
        s for s in spans if s.attributes and s.attributes[KEY_ATTRIBUTE] == "ns/web"
    ][:2]
    assert (wait.name, reconcile.name) == ("WorkQueue.wait", "Controller.reconcile")
    writer_context = writer.get_span_context()
    for span in (wait, reconcile):
        assert span.context.trace_id == writer_context.trace_id
        assert span.parent is not None and span.parent.span_id == writer_context.span_id
    assert wait.start_time is not None and wait.end_time is not None
    assert reconcile.start_time is not None and wait.end_time <= reconcile.start_time
    assert reconcile.attributes is not None
    assert reconcile.attributes[tracing.OBJECT_KIND] == "Deployment"
    assert reconcile.attributes[tracing.OBJECT_UID] == "u1"
    assert reconcile.attributes["kubelab.controller"] == "deployment-controller"
    assert reconcile.status.description == "the ReplicaSet is not there yet"
    # A key whose object the cache does not hold: a reconcile in a trace of its own.
    (gone,) = (
        s
        for s in spans
        if s.name == "Controller.reconcile"
        and s.attributes
        and s.attributes[KEY_ATTRIBUTE] == "ns/gone"
    )
    assert gone.parent is None
    assert gone.status.is_ok


def test_a_reconcile_links_to_the_events_that_queued_its_key(
    apiserver: Environment, namespace: str
) -> None:
    """A pod's events queue its owner's key, as a ReplicaSet's handlers do: the owner's
    reconcile stays in the owner's trace and links to each distinct `Informer.event`
    that queued it (each in the trace of the write it reports); a key whose object is
    not cached continues the first cause's trace."""
    exporter = InMemorySpanExporter()
    traced = tracing.setup("controller-manager", "cp1", CollectorRegistry(), exporter=exporter)
    watcher = RestClient(apiserver.client_config(), qps=None)
    pods = SharedInformer(
        watcher,
        PODS,
        namespace=namespace,
        tracer=traced.tracer,
    )
    queue: WorkQueue[str] = WorkQueue()
    queued = threading.Event()

    def owner_of(obj: object) -> None:
        queue.add(f"{namespace}/owner")
        queue.add(f"{namespace}/gone")
        queued.set()

    pods.add_event_handler(owner_of, lambda old, new: owner_of(new), owner_of)
    stop = threading.Event()
    pods.start(stop)
    assert pods.wait_for_sync(5)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }
    admin = RestClient(apiserver.client_config(), qps=None)
    admin.create(PODS, pod, namespace)  # untraced: its event is no cause
    writers = []
    for value in ("a", "b"):
        with traced.tracer.start_as_current_span(f"kubectl label {value}") as writer:
            current = admin.get(PODS, "p", namespace)
            current["metadata"]["labels"] = {"v": value}
            admin.update(PODS, current)
        writers.append(writer.get_span_context().trace_id)
    eventually(lambda: len(queue) == 2 and len(queue._causes.get(f"{namespace}/gone", [])) == 2)

    owner_write = traced.tracer.start_span("kubectl create owner")
    owners = SharedInformer(RestClient(ClientConfig(server="http://127.0.0.1:1")), PODS)
    owner: dict[str, object] = {"metadata": {"name": "owner", "namespace": namespace}}
    tracing.inject(owner["metadata"], trace.set_span_in_context(owner_write))  # type: ignore[arg-type]
    owners.indexer.add(owner)
    synced: list[str] = []
    workers = Workers(
        "replicaset-controller",
        queue,
        lambda key: synced.append(key),
        log,
        tracer=traced.tracer,
        objects=owners,
    )
    worker_stop, thread = run(workers, count=1)
    eventually(lambda: len(synced) == 2)
    worker_stop.set()
    stop.set()
    thread.join(5)
    admin.close()
    watcher.close()
    traced.force_flush()
    spans = exporter.get_finished_spans()
    events = {s.context.span_id: s for s in spans if s.name == "Informer.event"}
    reconciles = {
        str((s.attributes or {})[KEY_ATTRIBUTE]): s
        for s in spans
        if s.name == "Controller.reconcile"
    }
    reconcile = reconciles[f"{namespace}/owner"]
    assert reconcile.context.trace_id == owner_write.get_span_context().trace_id
    linked = [events[link.context.span_id] for link in reconcile.links]
    assert [s.context.trace_id for s in linked] == writers
    gone = reconciles[f"{namespace}/gone"]
    assert gone.parent is not None and gone.context.trace_id == writers[0]
    assert len(gone.links) == 2
    traced.shutdown()
