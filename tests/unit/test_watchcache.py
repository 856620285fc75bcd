"""The watch cache, fed by a scripted store watch: replay from a resourceVersion, 410 for
history it no longer holds, selector transitions, and re-listing after compaction."""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import pytest

from controlplane.apiserver.storage import Object
from controlplane.apiserver.watchcache import (
    ADDED,
    DELETED,
    MODIFIED,
    Cacher,
    Event,
    TooOldResourceVersion,
)
from kubelab import storeclient
from kubelab.api.resources import Resource, lookup

PODS = lookup("", "v1", "pods")
assert PODS is not None


def _kv(key: str, obj: Object | None, rev: int, version: int) -> dict[str, Any]:
    import base64

    out: dict[str, Any] = {
        "key": base64.b64encode(key.encode()).decode(),
        "mod_revision": str(rev),
        "version": str(version),
        "create_revision": str(rev),
    }
    if obj is not None:
        out["value"] = base64.b64encode(json.dumps(obj).encode()).decode()
    return out


def _pod(name: str, **labels: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
    }


class ScriptedWatch:
    def __init__(self, frames: queue.Queue[dict[str, Any] | None]) -> None:
        self.frames = frames

    def __enter__(self) -> ScriptedWatch:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def __iter__(self) -> Iterator[storeclient.WatchResponse]:
        while True:
            frame = self.frames.get()
            if frame is None:
                raise storeclient.Unavailable(14, "scripted watch ended")
            yield storeclient.WatchResponse.parse(frame)

    def close(self) -> None:
        self.frames.put(None)


class ScriptedStore:
    """A store whose watch plays the frames a test puts; `scan` lists `initial`."""

    def __init__(self, initial: list[tuple[str, Object]], revision: int) -> None:
        self.initial = initial
        self.revision = revision
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.client = self
        self.watch_from: list[int] = []

    def scan(self, prefix: str) -> tuple[list[tuple[str, Object]], int]:
        out = []
        for key, obj in self.initial:
            stamped = json.loads(json.dumps(obj))
            stamped["metadata"]["resourceVersion"] = "1"
            out.append((key, stamped))
        return out, self.revision

    def watch(self, key: str, **kwargs: Any) -> ScriptedWatch:
        self.watch_from.append(kwargs["start_revision"])
        return ScriptedWatch(self.frames)

    def put(
        self, rev: int, key: str, obj: Object, version: int, prev: Object | None = None
    ) -> None:
        ev: dict[str, Any] = {"kv": _kv(key, obj, rev, version)}
        if prev is not None:
            ev["prev_kv"] = _kv(key, prev, rev - 1, version - 1)
        self.frames.put({"header": {"revision": str(rev)}, "events": [ev]})

    def delete(self, rev: int, key: str, prev: Object) -> None:
        self.frames.put(
            {
                "header": {"revision": str(rev)},
                "events": [
                    {
                        "type": "DELETE",
                        "kv": _kv(key, None, rev, 0),
                        "prev_kv": _kv(key, prev, rev - 1, 1),
                    }
                ],
            }
        )


@pytest.fixture
def store() -> ScriptedStore:
    return ScriptedStore([("/registry/pods/ns/a", _pod("a", app="web"))], revision=10)


@pytest.fixture
def cacher(store: ScriptedStore) -> Iterator[Cacher]:
    c = Cacher(store, capacity=3)  # type: ignore[arg-type]
    c.start()
    assert c.ready.wait(5)
    yield c
    c.stop()


def _drain(c: Cacher, w: Any, n: int) -> list[Event]:
    out = []
    for ev in c.events(w, timeout=lambda: 2.0):
        assert ev is not None, "timed out waiting for an event"
        out.append(ev)
        if len(out) == n:
            return out
    return out


def _everything(obj: Object) -> bool:
    return True


def test_the_initial_list_is_served_at_the_store_revision(cacher: Cacher) -> None:
    items, revision = cacher.list_objects(PODS, "/registry/pods/ns/", _everything)
    assert [i["metadata"]["name"] for i in items] == ["a"]
    assert revision == 10


def test_a_watch_without_a_version_starts_with_the_current_objects(
    cacher: Cacher, store: ScriptedStore
) -> None:
    w, first, _ = cacher.watch(PODS, "/registry/pods/", _everything, None)
    assert [(e.type, e.object["metadata"]["name"]) for e in first] == [(ADDED, "a")]
    store.put(11, "/registry/pods/ns/b", _pod("b"), 1)
    assert [(e.type, e.revision) for e in _drain(cacher, w, 1)] == [(ADDED, 11)]


def test_a_watch_from_a_version_replays_what_came_after_it(
    cacher: Cacher, store: ScriptedStore
) -> None:
    store.put(11, "/registry/pods/ns/b", _pod("b"), 1)
    store.put(12, "/registry/pods/ns/b", _pod("b", x="1"), 2, prev=_pod("b"))
    cacher.wait_fresh(12)
    _, first, _ = cacher.watch(PODS, "/registry/pods/", _everything, 11)
    assert [(e.type, e.revision) for e in first] == [(MODIFIED, 12)]


def test_a_version_older_than_the_ring_gets_410(cacher: Cacher, store: ScriptedStore) -> None:
    for rev in range(11, 16):  # capacity 3: revisions 11 and 12 fall out of the ring
        store.put(rev, f"/registry/pods/ns/p{rev}", _pod(f"p{rev}"), 1)
    cacher.wait_fresh(15)
    with pytest.raises(TooOldResourceVersion) as err:
        cacher.watch(PODS, "/registry/pods/", _everything, 11)
    assert "too old resource version: 11" in str(err.value)
    _, first, _ = cacher.watch(PODS, "/registry/pods/", _everything, 12)
    assert [e.revision for e in first] == [13, 14, 15]


def test_objects_leaving_or_entering_a_selector_are_deleted_or_added(
    cacher: Cacher, store: ScriptedStore
) -> None:
    def web(obj: Object) -> bool:
        return bool(obj["metadata"].get("labels", {}).get("app") == "web")

    w, _, _ = cacher.watch(PODS, "/registry/pods/", web, 10)
    store.put(11, "/registry/pods/ns/a", _pod("a", app="db"), 2, prev=_pod("a", app="web"))
    store.put(12, "/registry/pods/ns/a", _pod("a", app="web"), 3, prev=_pod("a", app="db"))
    store.delete(13, "/registry/pods/ns/a", _pod("a", app="web"))
    got = _drain(cacher, w, 3)
    assert [(e.type, e.revision) for e in got] == [(DELETED, 11), (ADDED, 12), (DELETED, 13)]


def test_keys_of_other_resources_and_allocations_are_not_pods(
    cacher: Cacher, store: ScriptedStore
) -> None:
    store.put(11, "/registry/ranges/serviceips/10.96.0.5", {"x": 1}, 1)
    store.put(12, "/registry/pods/ns/extra/deep", _pod("deep"), 1)
    store.put(13, "/registry/pods/ns/c", _pod("c"), 1)
    cacher.wait_fresh(13)
    items, _ = cacher.list_objects(PODS, "/registry/pods/", _everything)
    assert sorted(i["metadata"]["name"] for i in items) == ["a", "c"]


def test_a_lost_store_watch_resumes_after_the_last_revision(
    cacher: Cacher, store: ScriptedStore
) -> None:
    store.put(11, "/registry/pods/ns/b", _pod("b"), 1)
    cacher.wait_fresh(11)
    store.frames.put(None)  # the member went away
    store.put(12, "/registry/pods/ns/c", _pod("c"), 1)
    cacher.wait_fresh(12)
    assert store.watch_from[:2] == [11, 12]


def _bound(name: str, node: str) -> Object:
    pod = _pod(name)
    pod["spec"] = {"nodeName": node} if node else {}
    return pod


def test_a_watch_pinned_to_a_node_is_offered_only_that_nodes_pods(
    store: ScriptedStore, cacher: Cacher
) -> None:
    """The kubelet's watch (`spec.nodeName=n1`) is registered under n1: it sees a pod
    bound to n1 arrive (the binding moves it from "" to n1) and nothing of other nodes,
    and the filter is not even run for their events."""
    looked_at: list[str] = []

    def on_n1(obj: Object) -> bool:
        looked_at.append(obj["metadata"]["name"])
        return (obj.get("spec") or {}).get("nodeName") == "n1"

    w, first, _ = cacher.watch(PODS, "/registry/pods/", on_n1, 10, index_value="n1")
    assert first == []
    store.put(11, "/registry/pods/ns/b", _bound("b", "n2"), 1)
    store.put(12, "/registry/pods/ns/c", _bound("c", ""), 1)
    store.put(13, "/registry/pods/ns/c", _bound("c", "n1"), 2, prev=_bound("c", ""))
    store.delete(14, "/registry/pods/ns/c", _bound("c", "n1"))
    (added, deleted) = _drain(cacher, w, 2)
    assert (added.type, added.key, added.revision) == (ADDED, "/registry/pods/ns/c", 13)
    assert (deleted.type, deleted.revision) == (DELETED, 14)
    assert "b" not in looked_at
    items, _ = cacher.list_objects(PODS, "/registry/pods/", on_n1, index_value="n1")
    assert items == []
    items, _ = cacher.list_objects(PODS, "/registry/pods/", lambda o: True, index_value="n2")
    assert [o["metadata"]["name"] for o in items] == ["b"]
    assert cacher.watcher_count() == 1
    cacher.unwatch(PODS, w)
    assert cacher.watcher_count() == 0


WIDGETS = Resource("example.com", "v1", "Widget", "widgets", True)


def _widget(name: str) -> Object:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}}


def test_a_custom_resource_served_later_takes_the_objects_already_seen(
    cacher: Cacher, store: ScriptedStore
) -> None:
    """Custom objects written before their CRD is served (or listed at start-up, before
    the CRD controller ran) are kept aside, and move into the resource's cache when it
    is served; once unserved, its watches end."""
    store.put(11, "/registry/example.com/widgets/ns/w1", _widget("w1"), 1)
    cacher.wait_fresh(11)
    with pytest.raises(KeyError):
        cacher.cache_for(WIDGETS)
    cacher.serve(WIDGETS)
    items, _ = cacher.list_objects(WIDGETS, "/registry/example.com/widgets/", _everything)
    assert [i["metadata"]["name"] for i in items] == ["w1"]
    w, first, _ = cacher.watch(WIDGETS, "/registry/example.com/widgets/", _everything, None)
    assert [e.object["metadata"]["name"] for e in first] == ["w1"]
    store.put(12, "/registry/example.com/widgets/ns/w2", _widget("w2"), 1)
    assert [(e.type, e.revision) for e in _drain(cacher, w, 1)] == [(ADDED, 12)]
    other_version = Resource("example.com", "v2", "Widget", "widgets", True)
    assert cacher.cache_for(other_version) is cacher.cache_for(WIDGETS)
    cacher.unserve(WIDGETS)
    assert w.closed and "no longer served" in w.reason
