"""Pure parts of the new API groups: the HPA v1/v2 conversion round trip, webhook rule
matching, and Accept negotiation."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver import negotiation
from controlplane.apiserver.admission import webhooks
from controlplane.apiserver.registry import Attributes
from kubelab.api import errors
from kubelab.api.conversion import hpa_v1_to_v2, hpa_v2_to_v1
from kubelab.api.resources import lookup

V2_HPA: dict[str, Any] = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web", "namespace": "ns"},
    "spec": {
        "scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "minReplicas": 1,
        "maxReplicas": 5,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 70},
                },
            },
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "qps"},
                    "target": {"type": "AverageValue", "averageValue": "10"},
                },
            },
        ],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}},
    },
    "status": {
        "currentReplicas": 2,
        "desiredReplicas": 3,
        "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40}}}
        ],
        "conditions": [{"type": "AbleToScale", "status": "True"}],
    },
}


def test_an_hpa_survives_a_v1_round_trip() -> None:
    v1 = hpa_v2_to_v1(V2_HPA)
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 70
    assert v1["status"]["currentCPUUtilizationPercentage"] == 40
    assert "metrics" not in v1["spec"] and "conditions" not in v1["status"]
    assert hpa_v1_to_v2(v1) == V2_HPA


def _attrs(plural: str, group: str = "", version: str = "v1", sub: str = "") -> Attributes:
    r = lookup(group, version, plural)
    assert r is not None
    obj = {"metadata": {"name": "x", "labels": {"app": "web"}}}
    return Attributes("CREATE", r, sub, "ns", "x", obj, None, None, False)


def _rule(**over: Any) -> dict[str, Any]:
    rule = {
        "operations": ["CREATE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
        "scope": "*",
    }
    return {**rule, **over}


@pytest.mark.parametrize(
    ("rule", "attrs", "matches"),
    [
        (_rule(), _attrs("pods"), True),
        (_rule(operations=["UPDATE"]), _attrs("pods"), False),
        (_rule(resources=["*"]), _attrs("pods", sub="status"), False),
        (_rule(resources=["*/status"]), _attrs("pods", sub="status"), True),
        (_rule(resources=["pods/*"]), _attrs("pods", sub="binding"), True),
        (_rule(scope="Cluster"), _attrs("pods"), False),
        (
            _rule(apiGroups=["autoscaling"], apiVersions=["v1"], resources=["*"]),
            _attrs("horizontalpodautoscalers", "autoscaling", "v2"),
            True,
        ),
    ],
)
def test_webhook_rules_match_as_kubernetes_matches_them(
    rule: dict[str, Any], attrs: Attributes, matches: bool
) -> None:
    assert webhooks._rule_matches(rule, attrs, equivalent=True) is matches


def test_exact_match_policy_needs_the_version_listed() -> None:
    rule = _rule(apiGroups=["autoscaling"], apiVersions=["v1"], resources=["*"])
    attrs = _attrs("horizontalpodautoscalers", "autoscaling", "v2")
    assert webhooks._rule_matches(rule, attrs, equivalent=False) is False


@pytest.mark.parametrize(
    ("accept", "verb", "form"),
    [
        (None, "get", negotiation.Form.OBJECT),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            "list",
            negotiation.Form.TABLE,
        ),
        (
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            "list",
            negotiation.Form.PARTIAL,
        ),
        (
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            "watch",
            negotiation.Form.PARTIAL,
        ),
        ("application/vnd.kubernetes.protobuf, */*", "get", negotiation.Form.OBJECT),
        ("application/vnd.kubernetes.protobuf", "create", negotiation.Form.OBJECT),
    ],
)
def test_accept_negotiation(accept: str | None, verb: str, form: negotiation.Form) -> None:
    assert negotiation.negotiate(accept, verb) is form


@pytest.mark.parametrize(
    ("accept", "verb"),
    [
        ("application/vnd.kubernetes.protobuf", "get"),
        ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", "list"),
        ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", "get"),
    ],
)
def test_nothing_producible_is_406(accept: str, verb: str) -> None:
    with pytest.raises(errors.StatusError) as err:
        negotiation.negotiate(accept, verb)
    assert (err.value.code, err.value.reason) == (406, "NotAcceptable")


def _hook(**selectors: Any) -> dict[str, Any]:
    return {"rules": [_rule(resources=["configmaps"])], **selectors}


@pytest.mark.parametrize(
    ("hook", "matches"),
    [
        (_hook(), True),
        (_hook(objectSelector={"matchLabels": {"app": "web"}}), True),
        (_hook(objectSelector={"matchLabels": {"app": "db"}}), False),
        (_hook(namespaceSelector={"matchLabels": {"team": "a"}}), True),
        (
            _hook(
                namespaceSelector={
                    "matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]
                }
            ),
            False,
        ),
    ],
)
def test_webhook_selectors_match_the_object_and_its_namespace(
    hook: dict[str, Any], matches: bool
) -> None:
    namespaces = {"ns": {"metadata": {"name": "ns", "labels": {"team": "a"}}}}
    hooks = webhooks.Webhooks(lambda plural, ns: [], namespaces.get)
    assert hooks._matches(hook, _attrs("configmaps")) is matches
