"""The cache (`Indexer`), the `Reflector` against the fake API server (list, watch,
relist after 410, bookmarks, back-off) and the `SharedInformer`'s handler contract."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

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
from kubelab.client.kubeconfig import ClientConfig
from kubelab.client.rest import Object, RestClient, resource_for
from tests.unit.client.conftest import FAST_BACKOFF, eventually
from tests.unit.client.fakeapi import FakeApiServer, Recorded

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


def fast_client(api: FakeApiServer) -> RestClient:
    """No client-side retries: the reflector's own reactions are what is tested."""
    return RestClient(ClientConfig(server=api.url), qps=None, max_retries=0)


def start_reflector(
    api: FakeApiServer, store: Indexer, stop: threading.Event, **kwargs: Any
) -> tuple[Reflector, threading.Thread]:
    reflector = Reflector(fast_client(api), PODS, store, backoff=FAST_BACKOFF, **kwargs)
    thread = threading.Thread(target=reflector.run, args=(stop,), daemon=True)
    thread.start()
    return reflector, thread


def test_reflector_lists_in_pages_then_follows_the_watch(
    api: FakeApiServer, stop: threading.Event
) -> None:
    for name in "abc":
        api.create(PODS, pod(name), "default")
    store = Indexer()
    reflector, _ = start_reflector(api, store, stop, page_size=2)
    api.wait_for_watches(1)
    assert names(store.list()) == ["a", "b", "c"]
    assert store.get("default/a")["kind"] == "Pod"  # type: ignore[index]
    lists = api.calls("GET", "/pods")[:2]
    assert [r.query.get("continue") for r in lists] == [None, "2"]
    watch = api.calls("GET", "/pods")[2]
    assert watch.query["resourceVersion"] == reflector.last_sync_resource_version

    api.create(PODS, pod("d"), "default")
    api.delete(PODS, "default", "a")
    b = api.get(PODS, "default", "b")
    b["metadata"]["labels"] = {"new": "yes"}
    api.update(PODS, b)
    eventually(lambda: names(store.list()) == ["b", "c", "d"])
    eventually(lambda: store.get("default/b")["metadata"].get("labels") == {"new": "yes"})  # type: ignore[index]
    assert reflector.last_sync_resource_version == str(api.rv)


def test_reflector_relists_when_its_resource_version_expired(
    api: FakeApiServer, stop: threading.Event
) -> None:
    api.create(PODS, pod("a"), "default")
    api.create(PODS, pod("b"), "default")
    store = Indexer()
    reflector, _ = start_reflector(api, store, stop)
    api.wait_for_watches(1)
    old_rv = reflector.last_sync_resource_version

    # While the reflector is not watching, things change and the history is compacted.
    api.pause_watches()
    api.delete(PODS, "default", "a")
    api.create(PODS, pod("c"), "default")
    api.compact()
    api.resume_watches()

    eventually(lambda: names(store.list()) == ["b", "c"])
    calls = api.calls("GET", "/pods")
    rewatch = next(
        i for i, r in enumerate(calls) if r.query.get("resourceVersion") == old_rv and i > 1
    )
    assert "watch" not in calls[rewatch + 1].query, "a list follows the expired watch"
    eventually(lambda: reflector.last_sync_resource_version == str(api.rv))


def test_bookmarks_move_the_resource_version_forward(
    api: FakeApiServer, stop: threading.Event
) -> None:
    store = Indexer()
    reflector, _ = start_reflector(api, store, stop, namespace="default")
    api.wait_for_watches(1)
    api.create(PODS, pod("elsewhere", "other"), "other")  # not seen by this watch
    assert reflector.last_sync_resource_version != str(api.rv)
    api.bookmark(PODS)
    eventually(lambda: reflector.last_sync_resource_version == str(api.rv))
    assert len(store) == 0

    api.end_watches()  # the next watch resumes from the bookmark
    eventually(lambda: api.calls("GET", "/pods")[-1].query["resourceVersion"] == str(api.rv))
    assert api.calls("GET", "/pods")[-1].query["allowWatchBookmarks"] == "true"


@pytest.mark.parametrize(
    "fault", [{"code": 429, "retry_after": 1}, {"code": 0, "disconnect": True}], ids=["429", "conn"]
)
def test_reflector_backs_off_and_rewatches_without_relisting(
    api: FakeApiServer, stop: threading.Event, fault: dict[str, Any]
) -> None:
    api.create(PODS, pod("a"), "default")
    store = Indexer()
    reflector, _ = start_reflector(api, store, stop)
    api.wait_for_watches(1)
    rv = reflector.last_sync_resource_version

    api.inject(method="GET", path="/pods", times=3, **fault)
    api.end_watches()

    def watches() -> list[Recorded]:
        return [r for r in api.calls("GET", "/pods") if r.query.get("watch")]

    eventually(lambda: len(watches()) == 5)  # the first, 3 refused, 1 accepted
    api.wait_for_watches(1)
    assert len(api.calls("GET", "/pods")) == 6, "no second list"
    assert {r.query["resourceVersion"] for r in watches()} == {rv}


def test_reflector_stops_promptly_while_watching(api: FakeApiServer) -> None:
    stop = threading.Event()
    _, thread = start_reflector(api, Indexer(), stop)
    api.wait_for_watches(1)
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


def informer(api: FakeApiServer, **kwargs: Any) -> SharedInformer:
    return SharedInformer(fast_client(api), PODS, backoff=FAST_BACKOFF, **kwargs)


def relabel(api: FakeApiServer, name: str, value: str) -> None:
    obj = api.get(PODS, "default", name)
    obj["metadata"]["labels"] = {"v": value}
    api.update(PODS, obj)


def test_handlers_see_each_objects_changes_in_order_after_the_cache(
    api: FakeApiServer, stop: threading.Event
) -> None:
    api.create(PODS, pod("a"), "default")
    inf = informer(api)
    rec = Recorder(inf).register()
    assert not inf.has_synced()
    inf.start(stop)
    assert inf.wait_for_sync(5) and inf.has_synced()
    assert rec.events == [("add", "a", None)]

    relabel(api, "a", "1")
    api.create(PODS, pod("b"), "default")
    relabel(api, "a", "2")
    api.delete(PODS, "default", "a")
    eventually(lambda: len(rec.events) == 5)
    assert rec.events[1:] == [
        ("update", "a", (None, {"v": "1"})),
        ("add", "b", None),
        ("update", "a", ({"v": "1"}, {"v": "2"})),
        ("delete", "a", None),
    ]


def test_a_relist_reports_missed_deletes_as_final_state_unknown(
    api: FakeApiServer, stop: threading.Event
) -> None:
    api.create(PODS, pod("kept"), "default")
    api.create(PODS, pod("gone"), "default")
    inf = informer(api)
    rec = Recorder(inf).register()
    inf.start(stop)
    inf.wait_for_sync(5)
    api.wait_for_watches(1)

    api.pause_watches()
    api.delete(PODS, "default", "gone")
    relabel(api, "kept", "changed")
    api.compact()
    api.resume_watches()

    eventually(lambda: len(rec.events) == 4)
    assert sorted(rec.events[2:]) == [
        ("delete-unknown", "default/gone", "gone"),
        ("update", "kept", (None, {"v": "changed"})),
    ]


def test_a_late_handler_gets_the_cached_objects_as_adds(
    api: FakeApiServer, stop: threading.Event
) -> None:
    api.create(PODS, pod("a"), "default")
    api.create(PODS, pod("b"), "default")
    inf = informer(api)
    inf.start(stop)
    inf.wait_for_sync(5)
    rec = Recorder(inf).register()
    assert sorted(rec.events) == [("add", "a", None), ("add", "b", None)]
    api.create(PODS, pod("c"), "default")
    eventually(lambda: ("add", "c", None) in rec.events)


def test_a_failing_handler_does_not_stop_the_others(
    api: FakeApiServer, stop: threading.Event
) -> None:
    inf = informer(api)

    def broken(obj: Object) -> None:
        raise RuntimeError("handler bug")

    inf.add_event_handler(on_add=broken)
    rec = Recorder(inf).register()
    inf.start(stop)
    inf.wait_for_sync(5)
    api.create(PODS, pod("a"), "default")
    api.create(PODS, pod("b"), "default")
    eventually(lambda: [e[1] for e in rec.events] == ["a", "b"])


def test_an_object_the_cache_cannot_hold_does_not_stop_the_informer(
    api: FakeApiServer, stop: threading.Event
) -> None:
    api.create(PODS, poisoned("listed", node="n1"), "default")
    api.create(PODS, pod("a", node="n1"), "default")
    inf = informer(api, indexers={NODE_NAME_INDEX: picky_index})
    rec = Recorder(inf).register()
    inf.start(stop)
    assert inf.wait_for_sync(5), "the list syncs, without the object it cannot index"
    assert rec.events == [("add", "a", None)]
    api.create(PODS, poisoned("watched", node="n1"), "default")
    relabel(api, "a", "1")
    api.create(PODS, pod("b", node="n1"), "default")
    eventually(lambda: [e[1] for e in rec.events] == ["a", "a", "b"])
    assert names(inf.indexer.by_index(NODE_NAME_INDEX, "n1")) == ["a", "b"]


def test_the_informers_indexes_answer_by_node(api: FakeApiServer, stop: threading.Event) -> None:
    api.create(PODS, pod("a", node="n1"), "default")
    api.create(PODS, pod("b", node="n2"), "default")
    inf = informer(api, indexers={NODE_NAME_INDEX: node_name_index})
    inf.start(stop)
    inf.wait_for_sync(5)
    assert names(inf.indexer.by_index(NODE_NAME_INDEX, "n1")) == ["a"]
    binding = api.get(PODS, "default", "b")
    binding["spec"]["nodeName"] = "n1"
    api.update(PODS, binding)
    eventually(lambda: names(inf.indexer.by_index(NODE_NAME_INDEX, "n1")) == ["a", "b"])


def test_resync_redelivers_cached_objects_as_updates(
    api: FakeApiServer, stop: threading.Event
) -> None:
    api.create(PODS, pod("a"), "default")
    clock = FakeClock()
    inf = informer(api, resync_period=30.0, clock=clock)
    rec = Recorder(inf).register()
    inf.start(stop)
    inf.wait_for_sync(5)
    clock.step(29.9)
    time.sleep(0.1)
    assert rec.events == [("add", "a", None)]
    clock.step(0.1)
    eventually(lambda: rec.events[1:] == [("update", "a", (None, None))])


def test_resync_is_not_starved_by_a_busy_resource(
    api: FakeApiServer, stop: threading.Event
) -> None:
    """The queue of changes never empties (each handled change brings another): the
    resync still comes once its time is up, not once the resource quietens down."""
    api.create(PODS, pod("a"), "default")
    clock = FakeClock()
    inf = informer(api, resync_period=30.0, clock=clock)
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
    inf._deltas.update(api.get(PODS, "default", "a"))
    assert inside.wait(5)
    clock.step(31)  # the resync is due while changes keep coming
    release.set()
    eventually(lambda: "resync" in seen)
    assert seen.index("resync") <= 2, seen


def test_last_sync_resource_version_is_what_the_cache_holds(
    api: FakeApiServer, stop: threading.Event
) -> None:
    api.create(PODS, pod("a"), "default")
    inf = informer(api)
    inside, release = threading.Event(), threading.Event()

    def on_update(old: Object, new: Object) -> None:
        inside.set()
        release.wait(5)

    inf.add_event_handler(on_update=on_update)
    inf.start(stop)
    assert inf.wait_for_sync(5)
    assert inf.last_sync_resource_version == inf.indexer.list_resource_version != ""
    relabel(api, "a", "1")
    assert inside.wait(5)
    applied = inf.indexer.get("default/a")
    assert applied is not None
    relabel(api, "a", "2")  # read by the reflector, queued behind the blocked handler
    eventually(lambda: inf._reflector.last_sync_resource_version == str(api.rv))
    assert inf.last_sync_resource_version == applied["metadata"]["resourceVersion"]
    assert inf.last_sync_resource_version != str(api.rv)
    release.set()
    eventually(lambda: inf.last_sync_resource_version == str(api.rv))


def test_an_informer_stops_when_told(api: FakeApiServer) -> None:
    stop = threading.Event()
    inf = informer(api)
    thread = inf.start(stop)
    inf.wait_for_sync(5)
    stop.set()
    thread.join(2)
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="only be run once"):
        inf.run(stop)
