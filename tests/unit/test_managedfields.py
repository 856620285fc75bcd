"""Field sets for server-side apply (`controlplane.apiserver.managedfields`)."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver import managedfields as mf

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}, "uid": "u"},
    "spec": {
        "replicas": 2,
        "template": {
            "spec": {
                "containers": [
                    {"name": "nginx", "image": "nginx:1", "args": ["-g", "daemon off;"]}
                ],
            }
        },
    },
    "status": {"replicas": 2},
}
CONTAINER = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"nginx"}')


def test_a_field_set_names_leaves_list_elements_by_key_and_atomic_lists_whole() -> None:
    assert mf.field_set("Deployment", DEPLOYMENT) == {
        ("f:metadata", "f:labels", "f:app"),
        ("f:spec", "f:replicas"),
        (*CONTAINER, "."),
        (*CONTAINER, "f:name"),
        (*CONTAINER, "f:image"),
        (*CONTAINER, "f:args"),
    }


def test_a_set_of_scalars_is_one_leaf_per_value() -> None:
    obj = {"metadata": {"finalizers": ["a.io/x", "b.io/y"]}}
    assert mf.field_set("Deployment", obj) == {
        ("f:metadata", "f:finalizers", 'v:"a.io/x"'),
        ("f:metadata", "f:finalizers", 'v:"b.io/y"'),
    }


def test_fields_v1_round_trips() -> None:
    fields = mf.field_set("Deployment", DEPLOYMENT)
    doc = mf.to_fields_v1(fields)
    assert doc["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"nginx"}'] == {
        ".": {},
        "f:name": {},
        "f:image": {},
        "f:args": {},
    }
    assert mf.from_fields_v1(doc) == fields
    assert mf.from_fields_v1("not a document") == set()


def test_remove_deletes_fields_and_list_elements() -> None:
    obj: dict[str, Any] = {
        "metadata": {"labels": {"app": "web", "tier": "front"}},
        "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}},
    }
    mf.remove(obj, ("f:metadata", "f:labels", "f:tier"))
    mf.remove(obj, ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"a"}', "."))
    mf.remove(obj, ("f:spec", "f:nothing", "f:here"))  # absent: nothing happens
    assert obj == {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"template": {"spec": {"containers": [{"name": "b"}]}}},
    }


def _entry(manager: str, operation: str, fields: mf.FieldSet) -> dict[str, Any]:
    return mf.entry(manager, operation, "apps/v1", "2026-11-22T00:00:00Z", fields)


REPLICAS = ("f:spec", "f:replicas")
APP = ("f:metadata", "f:labels", "f:app")


def test_changes_are_the_fields_set_anew_or_to_another_value_and_those_dropped() -> None:
    old = {"metadata": {"labels": {"app": "web", "tier": "a"}}, "spec": {"replicas": 2}}
    new = {"metadata": {"labels": {"app": "web", "x": "1"}}, "spec": {"replicas": 3}}
    changed, removed = mf.changes("Deployment", old, new)
    assert changed == {REPLICAS, ("f:metadata", "f:labels", "f:x")}
    assert removed == {("f:metadata", "f:labels", "f:tier")}


def test_an_update_takes_the_fields_it_changed_from_their_owners() -> None:
    entries = [_entry("applier", "Apply", {REPLICAS, APP})]
    after = mf.record_update(entries, "scaler", "apps/v1", "now", {REPLICAS}, set())
    owners = {e["manager"]: mf.from_fields_v1(e["fieldsV1"]) for e in after}
    assert owners == {"applier": {APP}, "scaler": {REPLICAS}}


def test_an_entry_left_with_no_field_goes() -> None:
    entries = [_entry("scaler", "Update", {REPLICAS})]
    after = mf.record_update(entries, "editor", "apps/v1", "now", {REPLICAS}, set())
    assert [e["manager"] for e in after] == ["editor"]


def test_conflicts_are_other_managers_fields_set_to_another_value() -> None:
    live = {"spec": {"replicas": 5}, "metadata": {"labels": {"app": "web"}}}
    entries = [_entry("scaler", "Update", {REPLICAS, APP}), _entry("me", "Apply", {REPLICAS})]
    config = {"spec": {"replicas": 3}, "metadata": {"labels": {"app": "web"}}}
    applied = mf.field_set("Deployment", config)
    assert mf.conflicts(entries, "me", applied, config, live) == {"scaler": [REPLICAS]}
    same = {"spec": {"replicas": 5}}
    assert mf.conflicts(entries, "me", mf.field_set("Deployment", same), same, live) == {}


def test_paths_render_as_kubernetes_prints_them() -> None:
    assert (
        mf.render((*CONTAINER, "f:image")) == '.spec.template.spec.containers[name="nginx"].image'
    )
    assert mf.value_at(DEPLOYMENT, (*CONTAINER, "f:image")) == "nginx:1"
