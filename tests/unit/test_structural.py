"""Structural schemas of CustomResourceDefinitions: validation in Kubernetes' words,
defaulting at every level, and the simple JSON paths of printer columns and scale."""

from __future__ import annotations

from typing import Any

from kubelab.api.structural import default, json_path, set_path, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "port": {"x-kubernetes-int-or-string": True},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "limits": {
                    "type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 0},
                },
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"weight": {"type": "number", "default": 1}},
                    },
                },
            },
        }
    },
}


def _messages(obj: dict[str, Any]) -> list[str]:
    return [e.message() for e in validate(SCHEMA, obj)]


def test_a_valid_object_has_no_problems() -> None:
    spec = {"size": 3, "name": "abc", "port": "http", "tags": ["x"], "limits": {"cpu": 2}}
    assert validate(SCHEMA, {"spec": spec}) == []


def test_types_bounds_enums_patterns_and_required_fields_are_checked() -> None:
    assert _messages({"spec": {"size": "3"}}) == [
        'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"'
    ]
    assert _messages({"spec": {"size": 11}}) == [
        "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"
    ]
    assert _messages({"spec": {}}) == ["spec.size: Required value"]
    problems = _messages({"spec": {"size": 1, "mode": "c", "name": "ABCDEF"}})
    assert 'spec.mode: Unsupported value: "c": supported values: "a", "b"' in problems
    assert any("spec.name" in p and "should match" in p for p in problems)
    assert any("spec.name" in p and "may not be more than 5" in p for p in problems)


def test_maps_lists_and_int_or_string_are_checked_inside() -> None:
    problems = _messages(
        {"spec": {"size": 1, "port": 1.5, "tags": ["a", "b", "c"], "limits": {"cpu": -1}}}
    )
    assert any(p.startswith("spec.port:") for p in problems)
    assert any(p.startswith("spec.tags:") and "at most 2 items" in p for p in problems)
    assert any(p.startswith("spec.limits.cpu:") for p in problems)


def test_defaults_fill_missing_fields_at_every_level() -> None:
    obj: dict[str, Any] = {"spec": {"size": 1, "items": [{}, {"weight": 5}]}}
    default(SCHEMA, obj)
    assert obj["spec"]["mode"] == "a"
    assert obj["spec"]["items"] == [{"weight": 1}, {"weight": 5}]


def test_simple_json_paths() -> None:
    obj = {"spec": {"replicas": 2}, "status": {"conditions": [{"type": "Ready"}]}}
    assert json_path(obj, ".spec.replicas") == 2
    assert json_path(obj, "{.status.conditions[0].type}") == "Ready"
    assert json_path(obj, ".status.conditions[3].type") is None
    assert json_path(obj, ".spec.missing.deeper") is None
    set_path(obj, ".spec.scale.replicas", 4)
    assert obj["spec"]["scale"] == {"replicas": 4}
