"""The cache (`Indexer`), the `Reflector` against the real apiserver in-process (list,
watch, relist after 410, bookmarks, back-off) and the `SharedInformer`'s handler
contract. Each test's reflector or informer watches the test's own namespace."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from kubelab import tracing
from kubelab.api import errors
from kubelab.client.clock import FakeClock
from kubelab.client.informers import (
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    DeletedFinalStateUnknown,
    Indexer,
    Reflector,
    SharedInformer,
    namespace_index,
    node_name_index,
    object_key,
    split_key,
)
from kubelab.client.rest import Object, RestClient, resource_for
from lab.faults import Request
from lab.testenv import Environment
from tests.conftest import new_namespace
from tests.unit.client.conftest import FAST_BACKOFF, eventually

PODS = resource_for("v1", "Pod")
NODES = resource_for("v1", "Node")


def pod(name: str, namespace: str = "default", node: str | None = None, rv: str = "1") -> Object:
    spec = {"nodeName": node} if node else {}
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}, "spec": spec}


def names(objects: list[Object]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


# -- keys and the indexer ----------------------------------------------------------------


def test_keys_are_namespace_slash_name_or_just_name() -> None:
    assert object_key(pod("web", "prod")) == "prod/web"
    assert object_key({"metadata": {"name": "node-1"}}) == "node-1"
    assert object_key(DeletedFinalStateUnknown("prod/web", {})) == "prod/web"
    assert split_key("prod/web") == ("prod", "web")
    assert split_key("node-1") == ("", "node-1")
    with pytest.raises(ValueError):
        split_key("a/b/c")
    with pytest.raises(ValueError):
        object_key({"metadata": {}})


def test_indexes_follow_adds_updates_and_deletes() -> None:
    cache = Indexer({NAMESPACE_INDEX: namespace_index, NODE_NAME_INDEX: node_name_index})
    cache.add(pod("a", node="n1"))
    cache.add(pod("b", node="n1"))
    cache.add(pod("c", "kube-system", node="n2"))
    cache.add(pod("pending"))
    assert names(cache.by_index(NODE_NAME_INDEX, "n1")) == ["a", "b"]
    assert names(cache.by_index(NAMESPACE_INDEX, "default")) == ["a", "b", "pending"]

    old = cache.update(pod("b", node="n2", rv="2"))
    assert old is not None and old["spec"]["nodeName"] == "n1"
    assert names(cache.by_index(NODE_NAME_INDEX, "n1")) == ["a"]
    assert names(cache.by_index(NODE_NAME_INDEX, "n2")) == ["b", "c"]

    cache.delete(DeletedFinalStateUnknown("default/a", pod("a", node="n1")))
    assert cache.by_index(NODE_NAME_INDEX, "n1") == []
    assert cache.get("default/a") is None and len(cache) == 3

    cache.replace([pod("x", node="n9")])
    assert cache.keys() == ["default/x"]
    assert cache.by_index(NODE_NAME_INDEX, "n2") == []
    assert names(cache.by_index(NODE_NAME_INDEX, "n9")) == ["x"]


def test_an_index_added_later_covers_the_cached_objects() -> None:
    cache = Indexer()
    cache.add(pod("a", node="n1"))
    cache.add_indexers({NODE_NAME_INDEX: node_name_index})
    assert names(cache.by_index(NODE_NAME_INDEX, "n1")) == ["a"]
    with pytest.raises(ValueError, match="exists already"):
        cache.add_indexers({NODE_NAME_INDEX: node_name_index})
    with pytest.raises(ValueError, match="no index named 'nope'"):
        cache.by_index("nope", "x")


def picky_index(obj: Object) -> list[str]:
    """Pods by node, failing on pods labelled poison=yes: a faulty index function."""
    if (obj["metadata"].get("labels") or {}).get("poison"):
        raise KeyError("poison")
    return node_name_index(obj)


def poisoned(name: str, node: str | None = None) -> Object:
    obj = pod(name, node=node, rv="2")
    obj["metadata"]["labels"] = {"poison": "yes"}
    return obj


def test_an_index_function_that_raises_leaves_the_cache_as_it_was() -> None:
    cache = Indexer({NODE_NAME_INDEX: picky_index})
    cache.add(pod("a", node="n1"))
    with pytest.raises(KeyError):
        cache.update(poisoned("a", node="n2"))
    with pytest.raises(KeyError):
        cache.add(poisoned("b", node="n2"))
    assert cache.keys() == ["default/a"] and cache.get("default/a") == pod("a", node="n1")
    assert names(cache.by_index(NODE_NAME_INDEX, "n1")) == ["a"]
    assert cache.by_index(NODE_NAME_INDEX, "n2") == []
    cache.delete(pod("a"))
    assert len(cache) == 0 and cache.by_index(NODE_NAME_INDEX, "n1") == []

    cache.replace([pod("x", node="n1"), poisoned("y", node="n1"), {"metadata": {}}])
    assert cache.keys() == ["default/x"], "what cannot be cached is left out"
    assert names(cache.by_index(NODE_NAME_INDEX, "n1")) == ["x"]

    plain = Indexer()
    plain.add(poisoned("p"))  # cached while no index minds it ...
    with pytest.raises(KeyError):  # ... so an index that fails on it is not added
        plain.add_indexers({"picky": picky_index})
    with pytest.raises(ValueError, match="no index named 'picky'"):
        plain.by_index("picky", "n1")
    plain.add_indexers({"picky": node_name_index})


# -- reflector ---------------------------------------------------------------------------


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def fast_client(env: Environment) -> RestClient:
    """No client-side retries: the reflector's own reactions are what is tested."""
    return RestClient(env.client_config(), qps=None, max_retries=0)


def start_reflector(
    env: Environment, store: Indexer, stop: threading.Event, namespace: str, **kwargs: Any
) -> tuple[Reflector, threading.Thread]:
    reflector = Reflector(
        fast_client(env), PODS, store, namespace=namespace, backoff=FAST_BACKOFF, **kwargs
    )
    thread = threading.Thread(target=reflector.run, args=(stop,), daemon=True)
    thread.start()
    return reflector, thread


def api_pod(name: str, node: str | None = None, **labels: str) -> Object:
    """A pod the apiserver accepts (`pod` above is the cache's view of one)."""
    spec: Object = {"containers": [{"name": "c", "image": "nginx"}]}
    if node:
        spec["nodeName"] = node
    meta: Object = {"name": name, "labels": labels} if labels else {"name": name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def current_rv(admin: RestClient, namespace: str) -> str:
    """The store's current revision (a consistent list's resourceVersion)."""
    return str(admin.list(PODS, namespace)["metadata"]["resourceVersion"])


def expire_history(env: Environment, namespace: str) -> errors.StatusError:
    """Stand-in for compaction: the apiserver's watch cache keeps 10,000 events per
    resource, far more than a test makes, so the next watch in `namespace` is answered
    as one from a compacted resourceVersion is, once released: as Kubernetes' watch
    cache answers, HTTP 200 and then an ERROR event with a 410 Expired Status."""
    too_old = errors.gone("too old resource version: the history was compacted (injected)")
    fault = env.faults.watch_error(too_old, resource="pods", namespace=namespace).held()
    env.faults.end_watches(PODS, namespace)
    return fault  # type: ignore[return-value]


def test_reflector_lists_in_pages_then_follows_the_watch(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    for name in "abc":
        admin.create(PODS, api_pod(name), namespace)
    store = Indexer()
    with apiserver.record() as log:
        reflector, _ = start_reflector(apiserver, store, stop, namespace, page_size=2)
        apiserver.wait_for_watches(1, PODS, namespace)
    assert names(store.list()) == ["a", "b", "c"]
    assert store.get(f"{namespace}/a")["kind"] == "Pod"  # type: ignore[index]
    lists = log.calls("GET", "/pods")[:2]
    assert lists[0].query.get("continue") is None and lists[1].query.get("continue")
    watch = log.calls("GET", "/pods")[2]
    assert watch.query["resourceVersion"] == reflector.last_sync_resource_version

    admin.create(PODS, api_pod("d"), namespace)
    admin.delete(PODS, "a", namespace, grace_period_seconds=0)
    b = admin.get(PODS, "b", namespace)
    b["metadata"]["labels"] = {"new": "yes"}
    admin.update(PODS, b)
    eventually(lambda: names(store.list()) == ["b", "c", "d"])
    eventually(lambda: store.get(f"{namespace}/b")["metadata"].get("labels") == {"new": "yes"})  # type: ignore[index]
    assert reflector.last_sync_resource_version == current_rv(admin, namespace)


def test_reflector_relists_when_its_resource_version_expired(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    admin.create(PODS, api_pod("a"), namespace)
    admin.create(PODS, api_pod("b"), namespace)
    store = Indexer()
    with apiserver.record() as log:
        reflector, _ = start_reflector(apiserver, store, stop, namespace)
        apiserver.wait_for_watches(1, PODS, namespace)
        old_rv = reflector.last_sync_resource_version

        # While the reflector is not watching, things change and the history is compacted.
        expired = expire_history(apiserver, namespace)
        admin.delete(PODS, "a", namespace, grace_period_seconds=0)
        admin.create(PODS, api_pod("c"), namespace)
        expired.release()  # type: ignore[attr-defined]

        eventually(lambda: names(store.list()) == ["b", "c"])
    calls = log.calls("GET", "/pods")
    rewatch = next(
        i for i, r in enumerate(calls) if r.query.get("resourceVersion") == old_rv and i > 1
    )
    assert "watch" not in calls[rewatch + 1].query, "a list follows the expired watch"
    eventually(lambda: reflector.last_sync_resource_version == current_rv(admin, namespace))


def test_bookmarks_move_the_resource_version_forward(
    apiserver: Environment,
    admin: RestClient,
    namespace: str,
    stop: threading.Event,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A bookmark as soon as the watch is quiet (the apiserver looks once a second).
    monkeypatch.setattr(apiserver.server.registry, "bookmark_every", 0.0)
    store = Indexer()
    reflector, _ = start_reflector(apiserver, store, stop, namespace)
    apiserver.wait_for_watches(1, PODS, namespace)
    elsewhere = new_namespace(apiserver, "other")
    admin.create(PODS, api_pod("elsewhere"), elsewhere)  # not seen by this watch
    now = current_rv(admin, namespace)
    assert reflector.last_sync_resource_version != now
    eventually(lambda: reflector.last_sync_resource_version == now)
    assert len(store) == 0

    with apiserver.record() as log:
        apiserver.faults.end_watches(PODS, namespace)  # the next watch resumes from the bookmark
        eventually(lambda: len(log.calls("GET", "/pods")) == 1)
    assert log.calls("GET", "/pods")[-1].query["resourceVersion"] == now
    assert log.calls("GET", "/pods")[-1].query["allowWatchBookmarks"] == "true"


@pytest.mark.parametrize("fault", ["429", "conn"])
def test_reflector_backs_off_and_rewatches_without_relisting(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event, fault: str
) -> None:
    admin.create(PODS, api_pod("a"), namespace)
    store = Indexer()
    with apiserver.record() as log:
        reflector, _ = start_reflector(apiserver, store, stop, namespace)
        apiserver.wait_for_watches(1, PODS, namespace)
        rv = reflector.last_sync_resource_version

        if fault == "429":
            too_many = errors.too_many_requests("slow down", retry_after=1)
            apiserver.faults.status(too_many, count=3, method="GET", path="/pods")
        else:
            apiserver.faults.disconnect(count=3, method="GET", path="/pods")
        apiserver.faults.end_watches(PODS, namespace)

        def watches() -> list[Request]:
            return [r for r in log.calls("GET", "/pods") if r.query.get("watch")]

        eventually(lambda: len(watches()) == 5)  # the first, 3 refused, 1 accepted
        apiserver.wait_for_watches(1, PODS, namespace)
    assert len(log.calls("GET", "/pods")) == 6, "no second list"
    assert {r.query["resourceVersion"] for r in watches()} == {rv}


def test_reflector_stops_promptly_while_watching(apiserver: Environment, namespace: str) -> None:
    stop = threading.Event()
    _, thread = start_reflector(apiserver, Indexer(), stop, namespace)
    apiserver.wait_for_watches(1, PODS, namespace)
    stop.set()
    thread.join(2)
    assert not thread.is_alive()


# -- shared informer ---------------------------------------------------------------------


class Recorder:
    """Event handlers that record what they saw, and what the cache held meanwhile."""

    def __init__(self, informer: SharedInformer) -> None:
        self.informer = informer
        self.events: list[tuple[str, str, Any]] = []

    def _cached(self, obj: Object) -> Any:
        cached = self.informer.indexer.get(object_key(obj))
        return cached["metadata"]["resourceVersion"] if cached else None

    def on_add(self, obj: Object) -> None:
        assert self._cached(obj) == obj["metadata"]["resourceVersion"], "cache updated first"
        self.events.append(("add", obj["metadata"]["name"], None))

    def on_update(self, old: Object, new: Object) -> None:
        assert self._cached(new) == new["metadata"]["resourceVersion"], "cache updated first"
        labels = (old["metadata"].get("labels"), new["metadata"].get("labels"))
        self.events.append(("update", new["metadata"]["name"], labels))

    def on_delete(self, obj: Object | DeletedFinalStateUnknown) -> None:
        assert self.informer.indexer.get(object_key(obj)) is None, "cache updated first"
        if isinstance(obj, DeletedFinalStateUnknown):
            self.events.append(("delete-unknown", obj.key, obj.obj["metadata"]["name"]))
        else:
            self.events.append(("delete", obj["metadata"]["name"], None))

    def register(self) -> Recorder:
        self.informer.add_event_handler(self.on_add, self.on_update, self.on_delete)
        return self


def informer(env: Environment, namespace: str, **kwargs: Any) -> SharedInformer:
    return SharedInformer(
        fast_client(env), PODS, namespace=namespace, backoff=FAST_BACKOFF, **kwargs
    )


def relabel(admin: RestClient, namespace: str, name: str, value: str) -> None:
    obj = admin.get(PODS, name, namespace)
    obj["metadata"]["labels"] = {"v": value}
    admin.update(PODS, obj)


def test_handlers_see_each_objects_changes_in_order_after_the_cache(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    admin.create(PODS, api_pod("a"), namespace)
    inf = informer(apiserver, namespace)
    rec = Recorder(inf).register()
    assert not inf.has_synced()
    inf.start(stop)
    assert inf.wait_for_sync(5) and inf.has_synced()
    assert rec.events == [("add", "a", None)]

    relabel(admin, namespace, "a", "1")
    admin.create(PODS, api_pod("b"), namespace)
    relabel(admin, namespace, "a", "2")
    admin.delete(PODS, "a", namespace, grace_period_seconds=0)
    eventually(lambda: len(rec.events) == 5)
    assert rec.events[1:] == [
        ("update", "a", (None, {"v": "1"})),
        ("add", "b", None),
        ("update", "a", ({"v": "1"}, {"v": "2"})),
        ("delete", "a", None),
    ]


def test_only_the_events_of_traced_writes_are_spans(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    exporter = InMemorySpanExporter()
    traced = tracing.setup("controller-manager", "cp1", CollectorRegistry(), exporter=exporter)
    inf = informer(apiserver, namespace, tracer=traced.tracer)
    rec = Recorder(inf).register()
    inf.start(stop)
    inf.wait_for_sync(5)
    # The test apiserver does not trace: a write outside any span keeps no context (as a
    # Lease's renewal), one inside a span keeps the writer's.
    admin.create(PODS, api_pod("untraced"), namespace)
    with traced.tracer.start_as_current_span("writer") as writer:
        admin.create(PODS, api_pod("traced"), namespace)
    eventually(lambda: len(rec.events) == 2)
    traced.force_flush()
    events = [s for s in exporter.get_finished_spans() if s.name == "Informer.event"]
    assert [(s.attributes or {})[tracing.OBJECT_NAME] for s in events] == ["traced"]
    assert events[0].context is not None
    assert events[0].context.trace_id == writer.get_span_context().trace_id
    traced.shutdown()


def test_a_relist_reports_missed_deletes_as_final_state_unknown(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    admin.create(PODS, api_pod("kept"), namespace)
    admin.create(PODS, api_pod("gone"), namespace)
    inf = informer(apiserver, namespace)
    rec = Recorder(inf).register()
    inf.start(stop)
    inf.wait_for_sync(5)
    apiserver.wait_for_watches(1, PODS, namespace)

    expired = expire_history(apiserver, namespace)
    admin.delete(PODS, "gone", namespace, grace_period_seconds=0)
    relabel(admin, namespace, "kept", "changed")
    expired.release()  # type: ignore[attr-defined]

    eventually(lambda: len(rec.events) == 4)
    assert sorted(rec.events[2:]) == [
        ("delete-unknown", f"{namespace}/gone", "gone"),
        ("update", "kept", (None, {"v": "changed"})),
    ]


def test_a_late_handler_gets_the_cached_objects_as_adds(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    admin.create(PODS, api_pod("a"), namespace)
    admin.create(PODS, api_pod("b"), namespace)
    inf = informer(apiserver, namespace)
    inf.start(stop)
    inf.wait_for_sync(5)
    rec = Recorder(inf).register()
    assert sorted(rec.events) == [("add", "a", None), ("add", "b", None)]
    admin.create(PODS, api_pod("c"), namespace)
    eventually(lambda: ("add", "c", None) in rec.events)


def test_a_failing_handler_does_not_stop_the_others(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    inf = informer(apiserver, namespace)

    def broken(obj: Object) -> None:
        raise RuntimeError("handler bug")

    inf.add_event_handler(on_add=broken)
    rec = Recorder(inf).register()
    inf.start(stop)
    inf.wait_for_sync(5)
    admin.create(PODS, api_pod("a"), namespace)
    admin.create(PODS, api_pod("b"), namespace)
    eventually(lambda: [e[1] for e in rec.events] == ["a", "b"])


def test_an_object_the_cache_cannot_hold_does_not_stop_the_informer(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    admin.create(PODS, api_pod("listed", node="n1", poison="yes"), namespace)
    admin.create(PODS, api_pod("a", node="n1"), namespace)
    inf = informer(apiserver, namespace, indexers={NODE_NAME_INDEX: picky_index})
    rec = Recorder(inf).register()
    inf.start(stop)
    assert inf.wait_for_sync(5), "the list syncs, without the object it cannot index"
    assert rec.events == [("add", "a", None)]
    admin.create(PODS, api_pod("watched", node="n1", poison="yes"), namespace)
    relabel(admin, namespace, "a", "1")
    admin.create(PODS, api_pod("b", node="n1"), namespace)
    eventually(lambda: [e[1] for e in rec.events] == ["a", "a", "b"])
    assert names(inf.indexer.by_index(NODE_NAME_INDEX, "n1")) == ["a", "b"]


def test_the_informers_indexes_answer_by_node(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    admin.create(PODS, api_pod("a", node="n1"), namespace)
    admin.create(PODS, api_pod("b"), namespace)
    inf = informer(apiserver, namespace, indexers={NODE_NAME_INDEX: node_name_index})
    inf.start(stop)
    inf.wait_for_sync(5)
    assert names(inf.indexer.by_index(NODE_NAME_INDEX, "n1")) == ["a"]
    binding = {"apiVersion": "v1", "kind": "Binding", "target": {"kind": "Node", "name": "n1"}}
    admin.request("POST", PODS.path(namespace, "b") + "/binding", body=binding)
    eventually(lambda: names(inf.indexer.by_index(NODE_NAME_INDEX, "n1")) == ["a", "b"])


def test_resync_redelivers_cached_objects_as_updates(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    admin.create(PODS, api_pod("a"), namespace)
    clock = FakeClock()
    inf = informer(apiserver, namespace, resync_period=30.0, clock=clock)
    rec = Recorder(inf).register()
    inf.start(stop)
    inf.wait_for_sync(5)
    clock.step(29.9)
    time.sleep(0.1)
    assert rec.events == [("add", "a", None)]
    clock.step(0.1)
    eventually(lambda: rec.events[1:] == [("update", "a", (None, None))])


def test_resync_is_not_starved_by_a_busy_resource(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    """The queue of changes never empties (each handled change brings another): the
    resync still comes once its time is up, not once the resource quietens down."""
    admin.create(PODS, api_pod("a"), namespace)
    clock = FakeClock()
    inf = informer(apiserver, namespace, resync_period=30.0, clock=clock)
    seen: list[str] = []
    inside, release = threading.Event(), threading.Event()

    def on_update(old: Object, new: Object) -> None:
        if old is new:
            seen.append("resync")
            return
        seen.append("change")
        if len(seen) == 1:
            inside.set()
            release.wait(5)
        if seen.count("change") < 20:  # a busy resource: another change is queued
            busier = {**new, "metadata": {**new["metadata"], "resourceVersion": "x"}}
            inf._deltas.update(busier)

    inf.add_event_handler(on_update=on_update)
    inf.start(stop)
    assert inf.wait_for_sync(5)
    inf._deltas.update(admin.get(PODS, "a", namespace))
    assert inside.wait(5)
    clock.step(31)  # the resync is due while changes keep coming
    release.set()
    eventually(lambda: "resync" in seen)
    assert seen.index("resync") <= 2, seen


def test_last_sync_resource_version_is_what_the_cache_holds(
    apiserver: Environment, admin: RestClient, namespace: str, stop: threading.Event
) -> None:
    admin.create(PODS, api_pod("a"), namespace)
    inf = informer(apiserver, namespace)
    inside, release = threading.Event(), threading.Event()

    def on_update(old: Object, new: Object) -> None:
        inside.set()
        release.wait(5)

    inf.add_event_handler(on_update=on_update)
    inf.start(stop)
    assert inf.wait_for_sync(5)
    assert inf.last_sync_resource_version == inf.indexer.list_resource_version != ""
    relabel(admin, namespace, "a", "1")
    assert inside.wait(5)
    applied = inf.indexer.get(f"{namespace}/a")
    assert applied is not None
    relabel(admin, namespace, "a", "2")  # read by the reflector, queued behind the handler
    now = current_rv(admin, namespace)
    eventually(lambda: inf._reflector.last_sync_resource_version == now)
    assert inf.last_sync_resource_version == applied["metadata"]["resourceVersion"]
    assert inf.last_sync_resource_version != now
    release.set()
    eventually(lambda: inf.last_sync_resource_version == now)


def test_an_informer_stops_when_told(apiserver: Environment, namespace: str) -> None:
    stop = threading.Event()
    inf = informer(apiserver, namespace)
    thread = inf.start(stop)
    inf.wait_for_sync(5)
    stop.set()
    thread.join(2)
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="only be run once"):
        inf.run(stop)


def test_informers_sharing_a_stop_event_share_one_waiting_thread(
    apiserver: Environment, namespace: str
) -> None:
    """Hundreds of hollow kubelets in one process each run an informer on one stop event:
    the threads that wait to cut their watches short must not grow with their number."""
    stop = threading.Event()
    informers = [informer(apiserver, namespace) for _ in range(5)]
    threads = [inf.start(stop) for inf in informers]
    for inf in informers:
        assert inf.wait_for_sync(10)
    apiserver.wait_for_watches(5, PODS, namespace)
    waiting = [t for t in threading.enumerate() if t.name.endswith(f"-stop pods in {namespace}")]
    assert len(waiting) == 1
    stop.set()
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()
