"""Field sets for server-side apply (`kubelab.api.managedfields`)."""

from __future__ import annotations

from typing import Any

from kubelab.api import managedfields as mf

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
