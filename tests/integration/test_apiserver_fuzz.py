"""Schema-driven fuzzing of the apiserver with schemathesis, from its own OpenAPI document.

Every generated request (valid, invalid, garbage) must get an answer below 500, and
every error must be a `Status` object; afterwards every object the fuzzing managed to
store must still pass validation, so nothing half-written was kept.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubelab.api.resources import lookup
from kubelab.api.validation import validate
from tests.integration.controlplane_fixture import Lab, lab

__all__ = ["lab"]  # pytest fixture used below

FUZZ_NAMESPACE = "fuzz"
FUZZED = (
    r"^/(api/v1|apis/apps/v1|apis/batch/v1|apis/rbac.authorization.k8s.io/v1"
    r"|apis/networking.k8s.io/v1|apis/autoscaling/v1|apis/autoscaling/v2)/namespaces/"
    r"\{namespace\}/(configmaps|services|pods|secrets|deployments|jobs|roles"
    r"|ingresses|networkpolicies|horizontalpodautoscalers)"
    r"(/\{name\}(/status|/scale)?)?$"
)


@pytest.fixture(scope="module")
def operations(lab: Lab) -> Any:
    doc = lab.api("GET", "/openapi/v2", headers={"Accept": "application/json"}).json()
    r = lab.api(
        "POST",
        "/api/v1/namespaces",
        json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FUZZ_NAMESPACE}},
    )
    assert r.status_code in (201, 409), r.text
    return schemathesis.openapi.from_dict(doc).include(path_regex=FUZZED).as_strategy()


@given(data=st.data())
@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
def test_no_request_gets_a_5xx_or_a_non_status_error(data: Any, operations: Any, lab: Lab) -> None:
    case = data.draw(operations)
    if "namespace" in (case.path_parameters or {}):
        case.path_parameters["namespace"] = FUZZ_NAMESPACE
    if case.query and str(case.query.get("watch", "")).lower() in ("true", "1"):
        case.query["timeoutSeconds"] = 1  # a watch is a stream: end it, as clients do
    response = case.call(
        base_url=lab.server,
        session=lab.http,
        verify=lab.http.verify,
        cert=lab.http.cert,
        timeout=30,
    )
    assert response.status_code < 500, (case.method, case.formatted_path, response.text)
    if response.status_code >= 400:
        body = response.json()
        assert body["kind"] == "Status" and body["code"] == response.status_code, body
        assert "Traceback" not in response.text


def test_everything_stored_by_the_fuzzing_is_valid(lab: Lab) -> None:
    for group, version, plural in (
        ("", "v1", "configmaps"),
        ("", "v1", "services"),
        ("", "v1", "pods"),
        ("", "v1", "secrets"),
        ("apps", "v1", "deployments"),
        ("batch", "v1", "jobs"),
        ("rbac.authorization.k8s.io", "v1", "roles"),
        ("networking.k8s.io", "v1", "ingresses"),
        ("networking.k8s.io", "v1", "networkpolicies"),
        # The stored form; autoscaling/v1 writes are stored as v2 too.
        ("autoscaling", "v2", "horizontalpodautoscalers"),
    ):
        r = lookup(group, version, plural)
        assert r is not None
        listed = lab.api("GET", r.path(FUZZ_NAMESPACE)).json()
        for obj in listed["items"]:
            assert validate(r.kind, obj) == [], obj
