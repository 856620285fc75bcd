"""PATCH bodies: JSON merge patch, JSON patch and Kubernetes' strategic merge patch, with the
directives kubectl sends (`kubectl apply`'s `$setElementOrder`, `$retainKeys`, deletions)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelab.api.patch import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    UnsupportedPatchError,
    apply_patch,
    json_patch,
    merge_patch,
    patch_meta,
    strategic_merge_patch,
)
from kubelab.api.resources import RESOURCES


def smp(kind: str, original: dict[str, Any], patch: Any) -> dict[str, Any]:
    """A strategic merge patch sent the way the apiserver receives it."""
    return apply_patch(kind, original, json.dumps(patch).encode(), STRATEGIC_MERGE_PATCH)


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["name"] for item in items]


def pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": list(containers), **spec},
    }


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.25",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "ports": [{"containerPort": 80}],
                        },
                        {"name": "mesh-proxy", "image": "envoy:1"},
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                },
            },
        },
    }


# --- content types -------------------------------------------------------------------------


def test_patch_types_are_the_three_supported_formats() -> None:
    assert set(PATCH_TYPES) == {MERGE_PATCH, JSON_PATCH, STRATEGIC_MERGE_PATCH}
    assert APPLY_PATCH not in PATCH_TYPES


def test_content_type_parameters_and_case_are_ignored() -> None:
    patched = apply_patch(
        "Pod",
        pod(),
        b'{"metadata":{"labels":{"tier":"x"}}}',
        "Application/Merge-Patch+JSON; charset=utf-8",
    )
    assert patched["metadata"]["labels"] == {"app": "web", "tier": "x"}


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", ""])
def test_an_unknown_content_type_is_unsupported_with_the_accepted_ones_named(
    content_type: str,
) -> None:
    with pytest.raises(UnsupportedPatchError) as raised:
        apply_patch("Pod", pod(), b"{}", content_type)
    assert raised.value.code == 415
    assert MERGE_PATCH in str(raised.value)


def test_server_side_apply_is_refused_as_unsupported() -> None:
    with pytest.raises(UnsupportedPatchError, match="server-side apply"):
        apply_patch("Pod", pod(), b"{}", APPLY_PATCH)


@pytest.mark.parametrize("body", [b"", b"{", b"\xff\xfe{", b'{"a": NaN}', b'{"a": Infinity}'])
@pytest.mark.parametrize("content_type", PATCH_TYPES)
def test_a_body_that_is_not_json_is_a_bad_request(body: bytes, content_type: str) -> None:
    with pytest.raises(PatchError, match="not valid JSON") as raised:
        apply_patch("Pod", pod(), body, content_type)
    assert raised.value.code == 400


@pytest.mark.parametrize("content_type", [MERGE_PATCH, STRATEGIC_MERGE_PATCH])
@pytest.mark.parametrize("body", [b"[]", b"3", b'"x"', b"null"])
def test_merge_style_bodies_must_be_objects(content_type: str, body: bytes) -> None:
    with pytest.raises(PatchError, match="must be a JSON object") as raised:
        apply_patch("Pod", pod(), body, content_type)
    assert raised.value.code == 400


@pytest.mark.parametrize("content_type", PATCH_TYPES)
def test_a_patch_nested_too_deeply_is_a_patch_error_not_a_crash(content_type: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(PatchError):
        apply_patch("Pod", pod(), deep.encode(), content_type)


# --- JSON merge patch ----------------------------------------------------------------------


def test_merge_patch_null_deletes_a_key_and_objects_merge() -> None:
    original = {"metadata": {"labels": {"a": "1", "b": "2"}, "name": "x"}}
    patched = merge_patch(original, {"metadata": {"labels": {"a": None, "c": "3"}}})
    assert patched == {"metadata": {"labels": {"b": "2", "c": "3"}, "name": "x"}}


def test_merge_patch_replaces_lists_wholesale_even_keyed_ones() -> None:
    original = pod({"name": "a", "image": "1"}, {"name": "b", "image": "2"})
    patched = apply_patch(
        "Pod", original, b'{"spec":{"containers":[{"name":"a","image":"3"}]}}', MERGE_PATCH
    )
    assert patched["spec"]["containers"] == [{"name": "a", "image": "3"}]


def test_merge_patch_null_under_a_new_key_adds_nothing() -> None:
    assert merge_patch({}, {"a": {"b": None, "c": 1}}) == {"a": {"c": 1}}


def test_merge_patch_that_is_not_an_object_replaces_the_document() -> None:
    assert merge_patch({"a": 1}, [1, 2]) == [1, 2]


def test_merge_patch_works_for_custom_resources() -> None:
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": 1}}
    patched = apply_patch("Widget", widget, b'{"spec":{"size":2}}', MERGE_PATCH)
    assert patched["spec"] == {"size": 2}


# --- JSON patch ----------------------------------------------------------------------------


def test_json_patch_adds_removes_and_replaces() -> None:
    operations = [
        {"op": "add", "path": "/metadata/labels/tier", "value": "front"},
        {"op": "remove", "path": "/metadata/labels/app"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:2"},
        {"op": "add", "path": "/spec/containers/-", "value": {"name": "b", "image": "busybox"}},
        {"op": "test", "path": "/spec/containers/1/name", "value": "b"},
    ]
    patched = json_patch(pod({"name": "a", "image": "nginx:1"}), operations)
    assert patched["metadata"]["labels"] == {"tier": "front"}
    assert patched["spec"]["containers"] == [
        {"name": "a", "image": "nginx:2"},
        {"name": "b", "image": "busybox"},
    ]


def test_json_patch_moves_and_copies() -> None:
    operations = [
        {"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"},
        {"op": "move", "from": "/metadata/labels/app", "path": "/metadata/labels/name"},
    ]
    patched = json_patch(pod(), operations)
    assert patched["metadata"]["annotations"] == {"app": "web"}
    assert patched["metadata"]["labels"] == {"name": "web"}


def test_a_failing_json_patch_test_is_unprocessable_and_names_the_operation() -> None:
    body = json.dumps(
        [
            {"op": "add", "path": "/spec/replicas", "value": 1},
            {"op": "test", "path": "/kind", "value": "Node"},
        ]
    ).encode()
    with pytest.raises(PatchError, match=r"operation 1 \(test /kind\) failed") as raised:
        apply_patch("Pod", pod(), body, JSON_PATCH)
    assert raised.value.code == 422


def test_a_json_test_does_not_take_true_for_1() -> None:
    with pytest.raises(PatchError) as raised:
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": True}])
    assert raised.value.code == 422


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "remove", "path": "/metadata/missing"},
        {"op": "replace", "path": "/spec/missing", "value": 1},
        {"op": "add", "path": "/spec/missing/child", "value": 1},
        {"op": "add", "path": "/spec/containers/9", "value": {}},
        {"op": "move", "from": "/metadata", "path": "/metadata/inner"},
    ],
)
def test_a_json_patch_operation_that_does_not_fit_the_object_is_unprocessable(
    operation: dict[str, Any],
) -> None:
    with pytest.raises(PatchError, match="operation 0") as raised:
        json_patch(pod(), [operation])
    assert raised.value.code == 422


@pytest.mark.parametrize(
    "operations",
    [
        [{"op": "append", "path": "/metadata/name", "value": "x"}],
        [{"op": "add", "path": "metadata", "value": 1}],
        [{"op": "add", "path": 3, "value": 1}],
        [{"path": "/metadata"}],
        [{"op": "add", "path": "/metadata/x"}],
        [{"op": "move", "path": "/metadata/x"}],
        ["add"],
        [7],
    ],
)
def test_a_malformed_json_patch_operation_is_a_bad_request(operations: list[Any]) -> None:
    with pytest.raises(PatchError, match="operation 0") as raised:
        json_patch(pod(), operations)
    assert raised.value.code == 400


@pytest.mark.parametrize("operations", [{"op": "add"}, "x", None, 1])
def test_a_json_patch_must_be_an_array(operations: Any) -> None:
    with pytest.raises(PatchError, match="JSON array of operations") as raised:
        json_patch(pod(), operations)
    assert raised.value.code == 400


def test_a_json_patch_may_not_turn_the_object_into_a_non_object() -> None:
    with pytest.raises(PatchError, match="must still be an object"):
        json_patch(pod(), [{"op": "replace", "path": "", "value": [1]}])


def test_json_patch_errors_do_not_quote_a_whole_large_object() -> None:
    big = {"data": {f"key{i}": "x" * 50 for i in range(200)}}
    with pytest.raises(PatchError) as raised:
        json_patch(big, [{"op": "add", "path": "/missing/child", "value": 1}])
    assert len(str(raised.value)) < 400


# --- strategic merge patch: maps and kubectl's everyday patches ----------------------------


def test_strategic_merge_merges_maps_and_null_deletes_like_kubectl_label() -> None:
    patched = smp("Pod", pod(), {"metadata": {"labels": {"app": None, "tier": "front"}}})
    assert patched["metadata"]["labels"] == {"tier": "front"}
    assert patched["metadata"]["name"] == "web"


def test_kubectl_scale_patch_on_the_scale_subresource() -> None:
    scale = {"kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 1}}
    assert smp("Scale", scale, {"spec": {"replicas": 5}})["spec"] == {"replicas": 5}


def test_kubectl_rollout_restart_adds_a_template_annotation() -> None:
    patch = {
        "spec": {
            "template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "t"}}}
        }
    }
    patched = smp("Deployment", deployment(), patch)
    template = patched["spec"]["template"]
    assert template["metadata"] == {
        "labels": {"app": "web"},
        "annotations": {"kubectl.kubernetes.io/restartedAt": "t"},
    }
    assert names(template["spec"]["containers"]) == ["web", "mesh-proxy"]


def test_null_under_a_key_the_object_lacks_adds_nothing() -> None:
    patched = smp("Pod", pod(), {"metadata": {"annotations": {"a": None, "b": "1"}}})
    assert patched["metadata"]["annotations"] == {"b": "1"}


# --- strategic merge patch: lists ----------------------------------------------------------


def test_containers_merge_by_name_and_untouched_ones_stay() -> None:
    original = pod({"name": "a", "image": "1"}, {"name": "b", "image": "2"})
    patched = smp("Pod", original, {"spec": {"containers": [{"name": "b", "image": "3"}]}})
    assert patched["spec"]["containers"] == [
        {"name": "a", "image": "1"},
        {"name": "b", "image": "3"},
    ]


def test_env_merges_by_name_within_a_container() -> None:
    original = pod({"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]})
    patch = {
        "spec": {
            "containers": [
                {"name": "a", "env": [{"name": "Y", "value": "20"}, {"name": "Z", "value": "3"}]}
            ]
        }
    }
    env = smp("Pod", original, patch)["spec"]["containers"][0]["env"]
    assert {e["name"]: e["value"] for e in env} == {"X": "1", "Y": "20", "Z": "3"}


def test_a_container_env_var_loses_a_field_set_to_null() -> None:
    original = pod({"name": "a", "env": [{"name": "X", "value": "1"}]})
    patch = {
        "spec": {
            "containers": [
                {"name": "a", "env": [{"name": "X", "value": None, "valueFrom": {"k": "v"}}]}
            ]
        }
    }
    env = smp("Pod", original, patch)["spec"]["containers"][0]["env"]
    assert env == [{"name": "X", "valueFrom": {"k": "v"}}]


def test_container_ports_merge_by_container_port() -> None:
    original = pod({"name": "a", "ports": [{"containerPort": 80, "name": "http"}]})
    patch = {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 443}]}]}}
    ports = smp("Pod", original, patch)["spec"]["containers"][0]["ports"]
    assert sorted(p["containerPort"] for p in ports) == [80, 443]


def test_a_new_element_goes_before_the_ones_only_the_server_has_as_in_kubernetes() -> None:
    original = pod({"name": "a"}, {"name": "b"})
    patched = smp("Pod", original, {"spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert names(patched["spec"]["containers"]) == ["c", "a", "b"]


def test_a_plain_patch_list_orders_the_elements_it_names() -> None:
    """`c` before `a` as the patch lists them; `b`, which only the server has, stays
    before `c`, which it preceded."""
    original = pod({"name": "a"}, {"name": "b"}, {"name": "c"})
    patch = {"spec": {"containers": [{"name": "c", "image": "1"}, {"name": "a", "image": "2"}]}}
    assert names(smp("Pod", original, patch)["spec"]["containers"]) == ["b", "c", "a"]


def test_patch_delete_directive_removes_a_container_by_name() -> None:
    original = pod({"name": "a"}, {"name": "b"}, {"name": "c"})
    patch = {"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}
    assert names(smp("Pod", original, patch)["spec"]["containers"]) == ["a", "c"]


def test_a_delete_directive_for_a_missing_element_is_harmless() -> None:
    patch = {"spec": {"containers": [{"name": "zzz", "$patch": "delete"}]}}
    assert names(smp("Pod", pod({"name": "a"}), patch)["spec"]["containers"]) == ["a"]


def test_a_delete_directive_must_carry_the_merge_key() -> None:
    patch = {"spec": {"containers": [{"image": "x", "$patch": "delete"}]}}
    with pytest.raises(PatchError, match="'name'"):
        smp("Pod", pod({"name": "a"}), patch)


def test_lists_without_a_merge_key_are_replaced_tolerations_and_env_from() -> None:
    original = pod(
        {"name": "a", "envFrom": [{"configMapRef": {"name": "one"}}]},
        tolerations=[{"key": "k1", "operator": "Exists"}],
    )
    patch = {
        "spec": {
            "tolerations": [{"key": "k2", "operator": "Exists"}],
            "containers": [{"name": "a", "envFrom": [{"secretRef": {"name": "two"}}]}],
        }
    }
    patched = smp("Pod", original, patch)
    assert patched["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]
    assert patched["spec"]["containers"][0]["envFrom"] == [{"secretRef": {"name": "two"}}]


def test_finalizers_merge_as_a_set() -> None:
    original = {"metadata": {"name": "x", "finalizers": ["a", "b"]}}
    patched = smp("ConfigMap", original, {"metadata": {"finalizers": ["b", "c"]}})
    assert sorted(patched["metadata"]["finalizers"]) == ["a", "b", "c"]


def test_delete_from_primitive_list_removes_finalizers() -> None:
    original = {"metadata": {"name": "x", "finalizers": ["a", "b", "c"]}}
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zzz"]}}
    assert smp("ConfigMap", original, patch)["metadata"]["finalizers"] == ["a", "c"]


def test_delete_from_primitive_list_of_a_missing_list_creates_nothing() -> None:
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}
    assert "finalizers" not in smp("ConfigMap", {"metadata": {"name": "x"}}, patch)["metadata"]


def test_delete_from_primitive_list_is_refused_for_a_keyed_list() -> None:
    patch = {"spec": {"$deleteFromPrimitiveList/containers": ["a"]}}
    with pytest.raises(PatchError, match=r'"\$patch": "delete"'):
        smp("Pod", pod({"name": "a"}), patch)


@pytest.mark.parametrize("directive", ["$deleteFromPrimitiveList", "$setElementOrder"])
def test_list_directives_are_refused_for_a_list_that_is_replaced(directive: str) -> None:
    patch = {"spec": {f"{directive}/tolerations": [{"key": "k"}]}}
    with pytest.raises(PatchError, match="replaced as a whole"):
        smp("Pod", pod(tolerations=[{"key": "k"}]), patch)


def test_patch_replace_element_replaces_a_merged_list() -> None:
    original = pod({"name": "a"}, {"name": "b"})
    patch = {"spec": {"containers": [{"name": "c", "image": "x"}, {"$patch": "replace"}]}}
    assert smp("Pod", original, patch)["spec"]["containers"] == [{"name": "c", "image": "x"}]


def test_patch_merge_element_is_the_default_for_a_merged_list() -> None:
    original = pod({"name": "a"})
    patch = {"spec": {"containers": [{"name": "b"}, {"$patch": "merge"}]}}
    assert sorted(names(smp("Pod", original, patch)["spec"]["containers"])) == ["a", "b"]


def test_patch_merge_element_is_refused_for_a_list_without_merge_key() -> None:
    patch = {"spec": {"tolerations": [{"key": "k"}, {"$patch": "merge"}]}}
    with pytest.raises(PatchError, match="no merge key"):
        smp("Pod", pod(), patch)


def test_an_element_of_a_merged_list_needs_its_merge_key() -> None:
    with pytest.raises(PatchError, match="needs that key"):
        smp("Pod", pod({"name": "a"}), {"spec": {"containers": [{"image": "x"}]}})


@pytest.mark.parametrize("element", [None, "a", ["a"]])
def test_an_element_of_a_merged_list_must_be_an_object(element: Any) -> None:
    with pytest.raises(PatchError):
        smp("Pod", pod({"name": "a"}), {"spec": {"containers": [element]}})


@pytest.mark.parametrize("element", [None, {"a": 1}, ["a"]])
def test_a_set_of_primitives_takes_only_primitives(element: Any) -> None:
    with pytest.raises(PatchError, match="set of strings or numbers"):
        smp("ConfigMap", {"metadata": {"name": "x"}}, {"metadata": {"finalizers": [element]}})


# --- strategic merge patch: map directives -------------------------------------------------


def test_patch_replace_on_a_map_drops_the_keys_it_does_not_set() -> None:
    original = pod({"name": "a", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}})
    patch = {
        "spec": {
            "containers": [
                {"name": "a", "resources": {"$patch": "replace", "limits": {"memory": "1Gi"}}}
            ]
        }
    }
    container = smp("Pod", original, patch)["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"memory": "1Gi"}}


def test_patch_delete_on_a_map_removes_it() -> None:
    patch = {"spec": {"strategy": {"rollingUpdate": {"$patch": "delete"}}}}
    assert smp("Deployment", deployment(), patch)["spec"]["strategy"] == {"type": "RollingUpdate"}


def test_patch_merge_on_a_map_merges_as_usual() -> None:
    patch = {"metadata": {"labels": {"$patch": "merge", "tier": "x"}}}
    assert smp("Pod", pod(), patch)["metadata"]["labels"] == {"app": "web", "tier": "x"}


@pytest.mark.parametrize("value", ["bogus", 1, None, ["replace"]])
def test_an_unknown_patch_directive_value_is_an_error(value: Any) -> None:
    with pytest.raises(PatchError, match=r"\$patch must be replace, delete or merge"):
        smp("Pod", pod(), {"metadata": {"labels": {"$patch": value}}})


def test_an_unknown_patch_directive_value_in_a_list_is_an_error() -> None:
    with pytest.raises(PatchError, match=r"\$patch must be"):
        smp("Pod", pod({"name": "a"}), {"spec": {"containers": [{"$patch": "bogus"}]}})


def test_patch_replace_at_the_top_replaces_the_whole_object() -> None:
    patched = smp(
        "ConfigMap",
        {"metadata": {"name": "x"}, "data": {"a": "1"}},
        {"$patch": "replace", "data": {"b": "2"}},
    )
    assert patched == {"data": {"b": "2"}}


def test_patch_delete_at_the_top_is_refused() -> None:
    with pytest.raises(PatchError, match="DELETE verb"):
        smp("Pod", pod(), {"$patch": "delete"})


@pytest.mark.parametrize("key", ["$foo", "$setElementOrder", "$patchx", "$"])
def test_an_unknown_dollar_directive_is_an_error(key: str) -> None:
    with pytest.raises(PatchError, match="unknown directive"):
        smp("Pod", pod(), {"spec": {key: []}})


def test_a_list_directive_must_name_its_list() -> None:
    with pytest.raises(PatchError, match="must name a list"):
        smp("Pod", pod(), {"spec": {"$setElementOrder/": []}})


# --- strategic merge patch: $retainKeys ----------------------------------------------------


def test_retain_keys_switches_a_deployment_to_recreate() -> None:
    patch = {
        "spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None}}
    }
    assert smp("Deployment", deployment(), patch)["spec"]["strategy"] == {"type": "Recreate"}


def test_retain_keys_switches_a_volume_source_inside_a_merged_list() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "volumes": [
                        {
                            "$retainKeys": ["configMap", "name"],
                            "name": "data",
                            "configMap": {"name": "settings"},
                        }
                    ]
                }
            }
        }
    }
    volumes = smp("Deployment", deployment(), patch)["spec"]["template"]["spec"]["volumes"]
    assert volumes == [{"name": "data", "configMap": {"name": "settings"}}]


def test_retain_keys_must_list_every_key_the_patch_sets() -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 2}}}}
    with pytest.raises(PatchError, match="rollingUpdate"):
        smp("Deployment", deployment(), patch)


@pytest.mark.parametrize("value", ["type", [1], {"type": 1}])
def test_retain_keys_must_be_a_list_of_field_names(value: Any) -> None:
    with pytest.raises(PatchError, match=r"\$retainKeys"):
        smp("Deployment", deployment(), {"spec": {"strategy": {"$retainKeys": value}}})


# --- strategic merge patch: $setElementOrder (kubectl apply) -------------------------------


def test_kubectl_apply_patch_with_set_element_order() -> None:
    """What `kubectl apply` sends after the config gained an init-like first container, a
    new env var at the front, a new image and dropped the `B` env var: `mesh-proxy`, which
    an admission webhook injected and the config never had, must survive in place."""
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "setup"}, {"name": "web"}],
                    "containers": [
                        {"name": "setup", "image": "busybox"},
                        {
                            "name": "web",
                            "image": "nginx:1.26",
                            "$setElementOrder/env": [{"name": "Z"}, {"name": "A"}],
                            "env": [
                                {"name": "Z", "value": "26"},
                                {"name": "B", "$patch": "delete"},
                            ],
                        },
                    ],
                }
            }
        }
    }
    spec = smp("Deployment", deployment(), patch)["spec"]["template"]["spec"]
    assert names(spec["containers"]) == ["setup", "web", "mesh-proxy"]
    web = spec["containers"][1]
    assert web["image"] == "nginx:1.26"
    assert web["env"] == [{"name": "Z", "value": "26"}, {"name": "A", "value": "1"}]
    assert web["ports"] == [{"containerPort": 80}]


def test_set_element_order_alone_reorders_a_keyed_list() -> None:
    original = pod({"name": "a"}, {"name": "b"}, {"name": "c"})
    patch = {"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}}
    assert names(smp("Pod", original, patch)["spec"]["containers"]) == ["c", "a", "b"]


def test_set_element_order_reorders_finalizers() -> None:
    original = {"metadata": {"name": "x", "finalizers": ["a", "b", "c"]}}
    patch = {"metadata": {"$setElementOrder/finalizers": ["c", "b", "a"]}}
    assert smp("ConfigMap", original, patch)["metadata"]["finalizers"] == ["c", "b", "a"]


def test_set_element_order_with_a_primitive_deletion_like_kubectl_apply() -> None:
    original = {"metadata": {"name": "x", "finalizers": ["a", "b", "c"]}}
    patch = {
        "metadata": {
            "$setElementOrder/finalizers": ["a", "c"],
            "$deleteFromPrimitiveList/finalizers": ["b"],
        }
    }
    assert smp("ConfigMap", original, patch)["metadata"]["finalizers"] == ["a", "c"]


def test_set_element_order_for_a_list_neither_side_has_creates_nothing() -> None:
    patch = {"spec": {"$setElementOrder/initContainers": [{"name": "a"}]}}
    assert "initContainers" not in smp("Pod", pod(), patch)["spec"]


def test_set_element_order_must_list_every_element_of_the_patch_list() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}],
            "containers": [{"name": "a"}, {"name": "b"}],
        }
    }
    with pytest.raises(PatchError, match="must list every element"):
        smp("Pod", pod({"name": "a"}), patch)


def test_set_element_order_must_agree_with_the_patch_list_order() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "b"}, {"name": "a"}],
        }
    }
    with pytest.raises(PatchError, match="order the elements differently"):
        smp("Pod", pod({"name": "a"}), patch)


@pytest.mark.parametrize("order", ["a", ["a"], [{"image": "x"}]])
def test_set_element_order_entries_must_carry_the_merge_key(order: Any) -> None:
    with pytest.raises(PatchError, match=r"\$setElementOrder/containers"):
        smp("Pod", pod({"name": "a"}), {"spec": {"$setElementOrder/containers": order}})


def test_a_list_named_by_a_directive_must_be_a_list() -> None:
    patch = {"spec": {"$setElementOrder/containers": [{"name": "a"}], "containers": {"name": "a"}}}
    with pytest.raises(PatchError, match="must be a list"):
        smp("Pod", pod({"name": "a"}), patch)


def test_a_null_list_with_directives_deletes_the_list() -> None:
    original = {"metadata": {"name": "x", "finalizers": ["a"]}}
    patch = {"metadata": {"finalizers": None, "$setElementOrder/finalizers": ["a"]}}
    assert "finalizers" not in smp("ConfigMap", original, patch)["metadata"]


def test_directives_inside_new_content_are_applied_not_stored() -> None:
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "new",
                    "$setElementOrder/env": [{"name": "A"}],
                    "env": [{"name": "A", "value": "1"}],
                    "resources": {"$patch": "replace", "limits": {"cpu": "1"}},
                    "securityContext": {"$patch": "delete"},
                }
            ],
            "nodeSelector": {"$retainKeys": ["disk"], "disk": "ssd", "gone": None},
        }
    }
    patched = smp("Pod", pod({"name": "a"}), patch)
    assert patched["spec"]["containers"][0] == {
        "name": "new",
        "env": [{"name": "A", "value": "1"}],
        "resources": {"limits": {"cpu": "1"}},
    }
    assert patched["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert "$" not in json.dumps(patched)


# --- strategic merge patch: where the metadata comes from ----------------------------------


@pytest.mark.parametrize(
    ("kind", "prefix"),
    [
        ("ReplicaSet", ("spec", "template", "spec")),
        ("DaemonSet", ("spec", "template", "spec")),
        ("StatefulSet", ("spec", "template", "spec")),
        ("ReplicationController", ("spec", "template", "spec")),
        ("Job", ("spec", "template", "spec")),
        ("CronJob", ("spec", "jobTemplate", "spec", "template", "spec")),
    ],
)
def test_every_workload_template_merges_containers_by_name(
    kind: str, prefix: tuple[str, ...]
) -> None:
    def nest(value: Any) -> dict[str, Any]:
        for key in reversed(prefix):
            value = {key: value}
        return dict(value)

    original = nest({"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]})
    patched = smp(kind, original, nest({"containers": [{"name": "b", "image": "3"}]}))
    spec = patched
    for key in prefix:
        spec = spec[key]
    assert spec["containers"] == [{"name": "a", "image": "1"}, {"name": "b", "image": "3"}]
    assert patch_meta(kind, (*prefix, "containers", "env")) == ("merge", "name")


def test_pod_status_conditions_merge_by_type() -> None:
    original = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "PodScheduled", "status": "True"},
            ]
        }
    }
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    conditions = smp("Pod", original, patch)["status"]["conditions"]
    assert {c["type"]: c["status"] for c in conditions} == {"Ready": "True", "PodScheduled": "True"}


def test_node_status_addresses_and_conditions_merge_by_type() -> None:
    original = {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}}
    patch = {"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}}
    addresses = smp("Node", original, patch)["status"]["addresses"]
    assert sorted(a["type"] for a in addresses) == ["Hostname", "InternalIP"]
    assert patch_meta("Node", ("status", "conditions")) == ("merge", "type")


def test_service_ports_merge_by_port() -> None:
    original = {"spec": {"ports": [{"port": 80, "targetPort": 8080}]}}
    patch = {"spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 443}]}}
    ports = smp("Service", original, patch)["spec"]["ports"]
    assert sorted((p["port"], p.get("targetPort")) for p in ports) == [(80, 9090), (443, None)]


def test_owner_references_merge_by_uid() -> None:
    original = {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}}
    patch = {"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}}
    refs = smp("ReplicaSet", original, patch)["metadata"]["ownerReferences"]
    assert sorted(r["uid"] for r in refs) == ["1", "2"]


def test_merge_key_values_keep_json_types_apart() -> None:
    original = pod({"name": "a", "ports": [{"containerPort": 80}]})
    patch = {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": "80"}]}]}}
    ports = smp("Pod", original, patch)["spec"]["containers"][0]["ports"]
    assert ports == [{"containerPort": "80"}, {"containerPort": 80}]


@pytest.mark.parametrize(
    ("kind", "path", "meta"),
    [
        ("Pod", ("spec", "containers"), ("merge", "name")),
        ("Pod", ("spec", "initContainers", "volumeMounts"), ("merge", "mountPath")),
        ("Pod", ("spec", "containers", "volumeDevices"), ("merge", "devicePath")),
        ("Pod", ("spec", "volumes"), ("merge,retainKeys", "name")),
        ("Pod", ("spec", "hostAliases"), ("merge", "ip")),
        ("Pod", ("spec", "topologySpreadConstraints"), ("merge", "topologyKey")),
        ("Pod", ("spec", "tolerations"), None),
        ("Pod", ("spec", "containers", "envFrom"), None),
        ("Node", ("spec", "taints"), None),
        ("Node", ("spec", "podCIDRs"), ("merge", "")),
        ("Deployment", ("spec", "strategy"), ("retainKeys", "")),
        ("Deployment", ("spec", "template", "spec", "imagePullSecrets"), ("merge", "name")),
        (
            "CronJob",
            ("spec", "jobTemplate", "spec", "template", "spec", "containers"),
            ("merge", "name"),
        ),
        ("ServiceAccount", ("secrets",), ("merge", "name")),
        ("ConfigMap", ("metadata", "finalizers"), ("merge", "")),
        ("ConfigMap", ("data",), None),
    ],
)
def test_patch_meta_follows_the_kubernetes_go_type_tags(
    kind: str, path: tuple[str, ...], meta: tuple[str, str] | None
) -> None:
    assert patch_meta(kind, path) == meta


def test_patch_meta_refuses_a_kind_it_does_not_know() -> None:
    with pytest.raises(UnsupportedPatchError):
        patch_meta("Widget", ("spec",))


def test_strategic_merge_is_refused_for_custom_resources_with_what_to_use() -> None:
    with pytest.raises(UnsupportedPatchError) as raised:
        strategic_merge_patch("Widget", {"spec": {}}, {"spec": {"size": 1}})
    assert raised.value.code == 415
    assert MERGE_PATCH in str(raised.value)
    assert JSON_PATCH in str(raised.value)


def test_strategic_merge_for_an_unknown_kind_is_refused_before_the_body_is_read() -> None:
    with pytest.raises(UnsupportedPatchError):
        apply_patch("Widget", {}, b"not json", STRATEGIC_MERGE_PATCH)


def test_every_patchable_built_in_kind_takes_a_strategic_merge_patch() -> None:
    """The apiserver serves these; a kind added there without an entry in the patch
    metadata table would answer kubectl's default patch with 415."""
    for resource in RESOURCES:
        if "patch" in resource.verbs:
            assert strategic_merge_patch(resource.kind, {}, {}) == {}, resource.kind


# --- never mutating the inputs -------------------------------------------------------------

_ORIGINAL_NOT_MUTATED = [
    (
        STRATEGIC_MERGE_PATCH,
        {
            "metadata": {"labels": {"app": None}, "$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {
                "template": {
                    "spec": {
                        "$setElementOrder/containers": [{"name": "web"}, {"name": "new"}],
                        "containers": [
                            {"name": "web", "env": [{"name": "A", "value": "9"}]},
                            {"name": "new", "image": "x"},
                            {"name": "mesh-proxy", "$patch": "delete"},
                        ],
                        "volumes": [
                            {"$retainKeys": ["name", "secret"], "name": "data", "secret": {}}
                        ],
                    }
                },
                "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
            },
        },
    ),
    (MERGE_PATCH, {"metadata": {"labels": None}, "spec": {"template": {"spec": {"a": 1}}}}),
    (
        JSON_PATCH,
        [
            {"op": "remove", "path": "/spec/template/spec/containers/0/env/0"},
            {"op": "replace", "path": "/spec/replicas", "value": 9},
        ],
    ),
]


@pytest.mark.parametrize(("content_type", "patch"), _ORIGINAL_NOT_MUTATED)
def test_the_original_object_is_never_mutated_nor_shared(content_type: str, patch: Any) -> None:
    original = deployment()
    original["metadata"]["finalizers"] = ["a", "b"]
    original["metadata"]["labels"] = {"app": "web"}
    snapshot = copy.deepcopy(original)
    patched = apply_patch("Deployment", original, json.dumps(patch).encode(), content_type)
    assert original == snapshot
    assert patched != snapshot
    # The result shares nothing with the original: changing it changes nothing there.
    patched["spec"]["template"]["spec"]["containers"][0]["name"] = "changed"
    patched["spec"]["template"]["metadata"]["labels"]["x"] = "y"
    assert original == snapshot


def test_strategic_merge_does_not_mutate_or_share_the_patch() -> None:
    patch = {"spec": {"containers": [{"name": "b", "env": [{"name": "X", "value": "1"}]}]}}
    snapshot = copy.deepcopy(patch)
    patched = strategic_merge_patch("Pod", pod({"name": "a"}), patch)
    patched["spec"]["containers"][0]["env"][0]["value"] = "changed"
    assert patch == snapshot


# --- properties ----------------------------------------------------------------------------

_KEYS = st.text(alphabet="abcde", min_size=1, max_size=2)
_SCALARS = st.booleans() | st.integers(-3, 3) | st.text(alphabet="xyz", max_size=2)


def _json(nulls: bool) -> st.SearchStrategy[Any]:
    leaves = _SCALARS | st.none() if nulls else _SCALARS
    return st.recursive(
        leaves,
        lambda children: (
            st.lists(_SCALARS, max_size=3) | st.dictionaries(_KEYS, children, max_size=3)
        ),
        max_leaves=12,
    )


_OBJECTS = st.dictionaries(_KEYS, _json(nulls=True), max_size=4)
_NULL_FREE_OBJECTS = st.dictionaries(_KEYS, _json(nulls=False), max_size=4)


def _merge_diff(source: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns `source` into `target`."""
    patch: dict[str, Any] = {key: None for key in source if key not in target}
    for key, value in target.items():
        before = source.get(key)
        if key in source and json.dumps(before) == json.dumps(value):
            continue
        if isinstance(value, dict) and isinstance(before, dict):
            patch[key] = _merge_diff(before, value)
        else:
            patch[key] = value
    return patch


@settings(max_examples=200, deadline=None)
@given(_OBJECTS, _NULL_FREE_OBJECTS)
def test_merge_patch_of_the_diff_turns_one_object_into_the_other(
    source: dict[str, Any], target: dict[str, Any]
) -> None:
    assert merge_patch(source, _merge_diff(source, target)) == target


@settings(max_examples=200, deadline=None)
@given(_OBJECTS, _OBJECTS)
def test_merge_patch_is_idempotent_and_leaves_its_inputs_alone(
    original: dict[str, Any], patch: dict[str, Any]
) -> None:
    snapshot = (copy.deepcopy(original), copy.deepcopy(patch))
    once = merge_patch(original, patch)
    assert merge_patch(once, patch) == once
    assert (original, patch) == snapshot


@settings(max_examples=200, deadline=None)
@given(_OBJECTS, _OBJECTS)
def test_strategic_merge_without_keyed_lists_or_directives_equals_merge_patch(
    original: dict[str, Any], patch: dict[str, Any]
) -> None:
    snapshot = copy.deepcopy(original)
    assert strategic_merge_patch("ConfigMap", original, patch) == merge_patch(original, patch)
    assert original == snapshot


_NAMES = st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=6)


@settings(max_examples=200, deadline=None)
@given(_NAMES, _NAMES, st.sets(st.sampled_from("abcdefgh")))
def test_an_apply_shaped_patch_gives_the_configured_order_and_keeps_server_only_elements(
    live: list[str], configured: list[str], applied_before: set[str]
) -> None:
    """kubectl apply lists the configured containers in `$setElementOrder`, sends the new
    ones and deletes those it applied before but no longer configures; the others the
    server has (added by someone else) must stay, in their old relative order."""
    deleted = [name for name in live if name in applied_before and name not in configured]
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": name} for name in configured],
            "containers": [
                {"name": name, "image": "new"} for name in configured if name not in live
            ]
            + [{"name": name, "$patch": "delete"} for name in deleted],
        }
    }
    result = names(smp("Pod", pod(*({"name": name} for name in live)), patch)["spec"]["containers"])
    server_only = [name for name in live if name not in configured and name not in deleted]
    assert sorted(result) == sorted(configured + server_only)
    assert [name for name in result if name in configured] == configured
    assert [name for name in result if name in server_only] == server_only
