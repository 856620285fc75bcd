"""Schema-driven fuzzing of the apiserver with schemathesis, from its own OpenAPI documents:
v2 for the built-in resources, and the v3 document of a CRD's group version for a custom
resource (with formats, CEL rules, defaults and a status subresource).

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

from controlplane.apiserver.strategies import Strategies
from kubelab.api import celrules, structural
from kubelab.api.resources import lookup
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
    _call_and_check(data.draw(operations), lab)


def _call_and_check(case: Any, lab: Lab) -> None:
    """Send one generated request: an answer below 500; an error is a Status."""
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
    rules = Strategies()
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
            assert rules.for_resource(r).validate(obj) == [], obj


# -- custom resources, from their group version's OpenAPI v3 document -------------------

CUSTOM_GROUP = "fuzz.kubelab.example.com"
CUSTOM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "x-kubernetes-validations": [
                {"rule": "self.size <= self.limit", "message": "size must not exceed limit"},
                {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable"},
            ],
            "properties": {
                "size": {"type": "integer", "minimum": 0, "maximum": 100},
                "limit": {"type": "integer", "default": 10},
                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                "owner": {"type": "string", "format": "email", "maxLength": 64},
                "since": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


NEAR_VALID_SPEC = st.fixed_dictionaries(
    {"size": st.integers(-1, 101)},
    optional={
        "limit": st.integers(-1, 101),
        "mode": st.sampled_from(["fast", "slow", "other"]),
        "owner": st.sampled_from(["ops@example.com", "not an address", ""]),
        "since": st.sampled_from(["2024-05-01T10:00:00Z", "2024-13-01T00:00:00Z", "later"]),
        "tags": st.lists(st.text(max_size=5), max_size=6),
        "labels": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
        "free": st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    },
)


@pytest.fixture(scope="module")
def custom_operations(lab: Lab, operations: Any) -> Any:
    """A CRD with formats, rules, defaults and both subresource-free and map fields,
    served; the schemathesis strategy of its OpenAPI v3 document."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"probes.{CUSTOM_GROUP}"},
        "spec": {
            "group": CUSTOM_GROUP,
            "scope": "Namespaced",
            "names": {"plural": "probes", "singular": "probe", "kind": "Probe"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": CUSTOM_SCHEMA},
                    "subresources": {"status": {}},
                }
            ],
        },
    }
    r = lab.api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
    assert r.status_code in (201, 409), r.text
    path = f"/openapi/v3/apis/{CUSTOM_GROUP}/v1"
    lab.until(lambda: lab.api("GET", path).status_code == 200, "the CRD's OpenAPI document")
    doc = lab.api("GET", path, headers={"Accept": "application/json"}).json()
    custom = r"^/apis/[^/]+/v1/namespaces/\{namespace\}/probes(/\{name\}(/status)?)?$"
    return schemathesis.openapi.from_dict(doc).include(path_regex=custom).as_strategy()


@given(data=st.data())
@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
def test_no_custom_resource_request_gets_a_5xx_or_a_non_status_error(
    data: Any, custom_operations: Any, lab: Lab
) -> None:
    case = data.draw(custom_operations)
    # The document asks for a bearer token, so schemathesis makes one up: a 401 tests
    # nothing here. Half the bodies get a right kind, a valid name and a spec near the
    # schema's and the rules' edges, so that they reach the checks and some are stored.
    (case.headers or {}).pop("authorization", None)
    if isinstance(case.body, dict) and data.draw(st.booleans()):
        name = f"p-{data.draw(st.integers(0, 20))}"
        case.body.update(
            apiVersion=f"{CUSTOM_GROUP}/v1",
            kind="Probe",
            metadata={"name": name},
            spec=data.draw(NEAR_VALID_SPEC),
        )
        if "name" in (case.path_parameters or {}):
            case.path_parameters["name"] = name
    _call_and_check(case, lab)


def test_every_custom_object_stored_by_the_fuzzing_is_valid(
    lab: Lab, custom_operations: Any
) -> None:
    listed = lab.api("GET", f"/apis/{CUSTOM_GROUP}/v1/namespaces/{FUZZ_NAMESPACE}/probes").json()
    for obj in listed["items"]:
        assert structural.validate(CUSTOM_SCHEMA, obj) == [], obj
        assert celrules.validate(CUSTOM_SCHEMA, obj) == [], obj
