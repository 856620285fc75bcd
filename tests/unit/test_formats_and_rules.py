"""CRD schema formats (`kubelab.api.formats`) and CEL validation rules
(`kubelab.api.celrules`) as pure functions; their use by the apiserver is tested with
the real kubectl in tests/integration/test_crds.py."""

from __future__ import annotations

import pytest

from kubelab.api import celrules, formats


@pytest.mark.parametrize(
    ("format_", "good", "bad"),
    [
        ("date-time", "2024-05-01T10:00:00.5+02:00", "2024-05-01"),
        ("datetime", "2024-05-01T10:00:00Z", "tomorrow"),
        ("date", "2024-02-29", "2023-02-29"),
        ("uuid", "123E4567-E89B-12D3-A456-426614174000", "123"),
        ("uuid4", "123e4567-e89b-42d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000"),
        ("email", "ops@example.com", "ops"),
        ("ipv4", "10.0.0.1", "10.0.0.256"),
        ("ipv6", "fe80::1", "10.0.0.1"),
        ("cidr", "10.0.0.0/8", "10.0.0.1"),
        ("mac", "01:23:45:67:89:ab", "01:23:45"),
        ("hostname", "web-1.example.com", "-web"),
        ("byte", "aGVsbG8=", "not base64!"),
        ("bsonobjectid", "507f1f77bcf86cd799439011", "507f"),
        ("hexcolor", "#fff", "#ggg"),
        ("duration", "1h30m", "soon"),
        ("uri", "https://example.com/x", "example"),
    ],
)
def test_formats_kubernetes_checks(format_: str, good: str, bad: str) -> None:
    assert formats.valid(format_, good)
    assert not formats.valid(format_, bad)


@pytest.mark.parametrize("format_", ["int32", "int64", "double", "password", "made-up"])
def test_formats_kubernetes_does_not_check_take_anything(format_: str) -> None:
    assert formats.valid(format_, "anything at all")


SCHEMA = {
    "type": "object",
    "properties": {
        "limits": {
            "type": "object",
            "additionalProperties": {
                "type": "integer",
                "x-kubernetes-validations": [
                    {"rule": "self >= oldSelf", "message": "a limit may only grow"}
                ],
            },
        },
    },
}


def test_a_transition_rule_runs_only_where_an_old_value_is_correlated() -> None:
    assert celrules.validate(SCHEMA, {"limits": {"cpu": 1}}) == []  # a create
    new = {"limits": {"cpu": 1, "memory": 1}}
    errors = celrules.validate(SCHEMA, new, {"limits": {"cpu": 2}})
    assert [(e.field, e.detail) for e in errors] == [("limits.cpu", "a limit may only grow")]


def test_a_rule_that_cannot_be_evaluated_names_itself() -> None:
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self.a > 1"}]}
    (error,) = celrules.validate(schema, {})
    assert error.field == "<root>" and error.detail.startswith("self.a > 1: evaluation failed")
