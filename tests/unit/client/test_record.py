"""Events as components record them, against the real apiserver: one Event per thing
said about an object, its count raised when it is said again; cluster-scoped objects'
Events in "default"; a failure to record never reaches the caller, nor does a full
queue. Each test stops its recorder before looking: stopping writes what is queued."""

from __future__ import annotations

import uuid

from kubelab.client import RestClient, resource_for
from kubelab.client.record import EVENTS, NORMAL, WARNING, EventRecorder

CONFIGMAPS = resource_for("v1", "ConfigMap")
NODES = resource_for("v1", "Node")


def _events_about(admin: RestClient, namespace: str, name: str) -> list[dict[str, object]]:
    found = admin.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")
    return list(found["items"])


def test_repeats_count_on_the_first_event(
    client: RestClient, admin: RestClient, namespace: str
) -> None:
    cm = client.create(
        CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, namespace
    )
    with EventRecorder(client, "test-controller") as recorder:
        for _ in range(3):
            recorder.event(cm, WARNING, "Broken", "it broke")
        recorder.event(cm, NORMAL, "Fixed", "it works")
    events = sorted(_events_about(admin, namespace, "c"), key=lambda e: str(e["reason"]))
    assert [(e["reason"], e["type"], e["count"]) for e in events] == [
        ("Broken", "Warning", 3),
        ("Fixed", "Normal", 1),
    ]
    broken = events[0]
    assert broken["involvedObject"]["uid"] == cm["metadata"]["uid"]  # type: ignore[index]
    assert broken["source"] == {"component": "test-controller"}
    assert broken["reportingComponent"] == "test-controller"


def test_a_cluster_scoped_objects_events_go_to_default(
    client: RestClient, admin: RestClient
) -> None:
    name = f"rec-{uuid.uuid4().hex[:6]}"
    node = client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    try:
        with EventRecorder(client, "node-controller") as recorder:
            recorder.event(node, NORMAL, "Seen", f"Node {name} seen")
        (event,) = _events_about(admin, "default", name)
        assert event["message"] == f"Node {name} seen"
    finally:
        client.delete(NODES, name)


def test_a_node_agents_events_name_the_host_and_the_part(
    client: RestClient, admin: RestClient, namespace: str
) -> None:
    cm = client.create(
        CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}}, namespace
    )
    with EventRecorder(client, "kubelet", host="node-1") as recorder:
        recorder.event(cm, NORMAL, "Pulled", "image present", field_path="spec.containers{web}")
        recorder.event(cm, NORMAL, "Pulled", "image present", field_path="spec.containers{side}")
    events = _events_about(admin, namespace, "p")
    assert len(events) == 2, "one Event per part"
    assert events[0]["source"] == {"component": "kubelet", "host": "node-1"}
    assert {e["involvedObject"]["fieldPath"] for e in events} == {  # type: ignore[index]
        "spec.containers{web}",
        "spec.containers{side}",
    }


def test_a_failed_record_does_not_fail_the_caller(client: RestClient) -> None:
    gone = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "no-such-ns", "uid": "u"},
    }
    with EventRecorder(client, "test") as recorder:
        recorder.event(gone, NORMAL, "Anything", "is dropped")


def test_a_full_queue_drops_new_events_without_blocking(client: RestClient) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "q", "uid": "u"}}
    recorder = EventRecorder(client, "test", capacity=1)  # not started: nothing drains it
    recorder.event(cm, NORMAL, "First", "queued")
    recorder.event(cm, NORMAL, "Second", "dropped")
    assert recorder.dropped == 1


def test_objects_without_apiversion_and_kind_are_named_by_the_recorders_type(
    client: RestClient, admin: RestClient, namespace: str
) -> None:
    """The items of a list or a watch come without apiVersion and kind (the kubelet's
    pods): the recorder names them as it was told."""
    cm = client.create(
        CONFIGMAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bare"}},
        namespace,
    )
    bare = {"metadata": cm["metadata"]}
    with EventRecorder(client, "kubelet", object_type=("v1", "ConfigMap")) as recorder:
        recorder.event(bare, NORMAL, "Seen", "seen bare")
    (event,) = _events_about(admin, namespace, "bare")
    ref = event["involvedObject"]
    assert (ref["apiVersion"], ref["kind"]) == ("v1", "ConfigMap")  # type: ignore[index]


def test_without_a_client_nothing_is_recorded() -> None:
    """A hollow node's recorder: events are accepted and go nowhere, with no thread."""
    with EventRecorder(None, "kubelet", host="hollow-1") as recorder:
        recorder.event({"metadata": {"name": "p", "uid": "u"}}, NORMAL, "Started", "started")
        assert recorder._thread is None and recorder.dropped == 0
