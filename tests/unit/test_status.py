"""Status bodies byte for byte as kube-apiserver writes them: clients compare them as
strings (the official client's create_from_yaml tests compare a refused create's whole
body), so the order of StatusDetails' fields, Go's escapes and the trailing newline are
part of the API."""

from __future__ import annotations

from controlplane.apiserver.handlers import json_response
from kubelab import fastjson
from kubelab.api import errors


def _body(exc: errors.StatusError) -> bytes:
    return json_response(exc.status(), exc.code).get_data()


def test_already_exists_is_the_body_the_official_client_compares() -> None:
    exc = errors.already_exists("apiservices", "v1alpha1.wardle.k8s.io", "apiregistration.k8s.io")
    assert _body(exc) == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"apiservices.apiregistration.k8s.io \\"v1alpha1.wardle.k8s.io\\" '
        b'already exists","reason":"AlreadyExists","details":{"name":"v1alpha1.wardle.k8s.io",'
        b'"group":"apiregistration.k8s.io","kind":"apiservices"},"code":409}\n'
    )


def test_details_follow_status_details_order_however_they_were_built() -> None:
    exc = errors.StatusError(
        409,
        "Conflict",
        "x",
        {"causes": [], "kind": "pods", "uid": "u", "group": "g", "name": "n", "extra": 1},
        retry_after=2,
    )
    assert list(exc.status()["details"]) == [
        "name",
        "group",
        "kind",
        "uid",
        "causes",
        "retryAfterSeconds",
    ]


def test_invalid_lists_causes_after_name_and_kind() -> None:
    exc = errors.invalid_object("Pod", "p", [errors.required("spec.containers")])
    assert _body(exc) == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"Pod \\"p\\" is invalid: spec.containers: Required value",'
        b'"reason":"Invalid","details":{"name":"p","kind":"Pod","causes":[{'
        b'"reason":"FieldValueRequired","message":"Required value",'
        b'"field":"spec.containers"}]},"code":422}\n'
    )


def test_retry_after_is_the_last_detail() -> None:
    exc = errors.too_many_requests("too many requests, please try again later", retry_after=1)
    assert _body(exc) == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"too many requests, please try again later","reason":"TooManyRequests",'
        b'"details":{"retryAfterSeconds":1},"code":429}\n'
    )


def test_html_characters_and_line_separators_are_escaped_as_go_escapes_them() -> None:
    exc = errors.bad_request("a<b>&c\u2028d\u2029")
    data = _body(exc)
    assert b'"message":"a\\u003cb\\u003e\\u0026c\\u2028d\\u2029"' in data
    assert fastjson.loads(data) == exc.status()
