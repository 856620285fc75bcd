"""Unknown and duplicated fields are found by their paths and dropped, as the request's
fieldValidation directive says."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.apiserver import fieldvalidation
from controlplane.apiserver.registry import decode_body
from kubelab.api import errors
from kubelab.api.resources import lookup

PODS = lookup("", "v1", "pods")
CONFIGMAPS = lookup("", "v1", "configmaps")
assert PODS is not None and CONFIGMAPS is not None
SCHEMAS = fieldvalidation.FieldSchemas()


@pytest.fixture(autouse=True)
def _request_over() -> Iterator[None]:
    yield
    fieldvalidation.end()


def _pod(**container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"any-key": "kept"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", **container}]},
    }


def test_an_unknown_field_is_dropped_and_warned_about_by_its_path() -> None:
    check = fieldvalidation.begin(None)  # Warn, Kubernetes' default
    pod = _pod(imagePullPolizy="Always", resources={"limits": {"memory": "1Gi"}})
    SCHEMAS.prune(PODS, pod)
    assert "imagePullPolizy" not in pod["spec"]["containers"][0]
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"memory": "1Gi"}}
    assert pod["metadata"]["labels"] == {"any-key": "kept"}, "map keys are not fields"
    assert check.warnings() == ['unknown field "spec.containers[0].imagePullPolizy"']


def test_strict_refuses_naming_duplicates_then_unknown_fields() -> None:
    fieldvalidation.begin("Strict")
    body = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","name":"b"},"dta":{}}'
    obj = decode_body(body, "application/json")
    assert obj["metadata"]["name"] == "b", "the last of a duplicated field wins"
    with pytest.raises(errors.StatusError) as refused:
        SCHEMAS.prune(CONFIGMAPS, obj)
    assert refused.value.code == 400
    assert refused.value.message == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
        'duplicate field "metadata.name", unknown field "dta"'
    )


def test_ignore_drops_silently_and_a_stray_status_is_never_kept() -> None:
    check = fieldvalidation.begin("Ignore")
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    configmap["status"] = {"phase": "Active"}
    SCHEMAS.prune(CONFIGMAPS, configmap)
    assert "status" not in configmap and check.warnings() == []


def test_writes_outside_a_request_drop_unknown_fields_silently() -> None:
    pod = _pod(bogus=1)
    SCHEMAS.prune(PODS, pod)
    assert "bogus" not in pod["spec"]["containers"][0]


def test_an_unsupported_directive_is_a_bad_request() -> None:
    with pytest.raises(errors.StatusError) as refused:
        fieldvalidation.begin("Loose")
    assert refused.value.code == 400 and '"Ignore", "Strict", "Warn"' in refused.value.message


def test_duplicates_in_lists_are_named_with_their_index() -> None:
    check = fieldvalidation.begin("Warn")
    pod = _pod()
    text = json.dumps(pod).replace('"image": "busybox"', '"image": "a", "image": "busybox"')
    SCHEMAS.prune(PODS, decode_body(text.encode(), "application/json"))
    assert check.warnings() == ['duplicate field "spec.containers[0].image"']
