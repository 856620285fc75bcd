"""Discovery documents: content negotiation, the shapes clients decode, and that every
resource in the table is discoverable with its short names, scope and kind."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.models import (
    V1APIGroup,
    V1APIGroupList,
    V1APIResourceList,
    V1APIVersions,
    V2APIGroupDiscoveryList,
)

from controlplane.apiserver import discovery
from kubelab.api.errors import StatusError
from kubelab.api.resources import BUILT_IN, RESOURCES, Resource

KUBECTL_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)
V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
DISCOVERY = discovery.Discovery(BUILT_IN)


def _body(path: str, accept: str | None) -> Any:
    return json.loads(DISCOVERY.serve(path, accept).body)


LEGACY = discovery.Negotiated(None, "application/json")


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (KUBECTL_ACCEPT, discovery.Negotiated("v2", V2)),
        (f"{V2BETA1},application/json", discovery.Negotiated("v2beta1", V2BETA1)),
        ("application/json", LEGACY),
        ("application/json, */*", LEGACY),
        ("*/*", LEGACY),
        (None, LEGACY),
        ("", LEGACY),
        # Protobuf is never produced: the client's next choice wins.
        (
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;"
            "as=APIGroupDiscoveryList," + KUBECTL_ACCEPT,
            discovery.Negotiated("v2", V2),
        ),
        # Quality wins over order.
        (f"{V2};q=0.5, application/json", LEGACY),
        # An aggregated range for an unknown version or list kind matches nothing.
        ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", None),
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=Other, application/json", LEGACY),
        ("text/html", None),
    ],
)
def test_negotiate(accept: str | None, expected: discovery.Negotiated | None) -> None:
    assert discovery.negotiate(accept) == expected


def test_negotiate_below_the_roots_ignores_aggregated_ranges() -> None:
    assert discovery.negotiate(KUBECTL_ACCEPT, aggregated=False) == discovery.Negotiated(
        None, "application/json"
    )
    assert discovery.negotiate(V2, aggregated=False) is None


def test_parse_accept_orders_by_quality_then_position() -> None:
    ranges = discovery.parse_accept("text/plain;q=0.2, application/json, */*;q=0.5, x/y;q=0")
    assert [(r.type, r.subtype, r.quality) for r in ranges] == [
        ("application", "json", 1.0),
        ("*", "*", 0.5),
        ("text", "plain", 0.2),
    ]


def test_aggregated_apis_answers_with_the_negotiated_content_type() -> None:
    served = DISCOVERY.serve("/apis", KUBECTL_ACCEPT)
    assert served.status == 200
    assert served.headers["Content-Type"] == V2
    doc = json.loads(served.body)
    assert doc["kind"] == "APIGroupDiscoveryList"
    assert doc["apiVersion"] == "apidiscovery.k8s.io/v2"
    # The official client's model is strict (unknown fields are errors): it checks the shape.
    V2APIGroupDiscoveryList.from_dict(doc)
    names = [item["metadata"]["name"] for item in doc["items"]]
    assert "" not in names
    assert {"apps", "batch", "rbac.authorization.k8s.io", "metrics.k8s.io"} <= set(names)


def test_aggregated_api_is_the_core_group_with_subresources() -> None:
    doc = _body("/api", KUBECTL_ACCEPT)
    V2APIGroupDiscoveryList.from_dict(doc)
    [core] = doc["items"]
    assert core["metadata"]["name"] == ""
    [v1] = core["versions"]
    assert v1["version"] == "v1"
    assert v1["freshness"] == "Current"
    pods = next(r for r in v1["resources"] if r["resource"] == "pods")
    assert pods["scope"] == "Namespaced"
    assert pods["singularResource"] == "pod"
    assert pods["shortNames"] == ["po"]
    assert pods["categories"] == ["all"]
    assert pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    subs = {s["subresource"]: s for s in pods["subresources"]}
    assert subs["status"]["verbs"] == ["get", "patch", "update"]
    assert subs["status"]["responseKind"]["kind"] == "Pod"
    assert subs["log"]["verbs"] == ["get"]
    assert subs["binding"]["responseKind"] == {"group": "", "version": "v1", "kind": "Binding"}
    assert subs["eviction"]["responseKind"] == {
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
    }
    assert subs["exec"]["responseKind"]["kind"] == "PodExecOptions"


def test_v2beta1_has_the_same_content_under_its_own_api_version() -> None:
    v2, v2beta1 = _body("/apis", V2), _body("/apis", f"{V2BETA1},application/json")
    assert v2beta1["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    assert v2beta1["items"] == v2["items"]


def test_scale_subresource_names_its_foreign_group() -> None:
    apps = next(
        i for i in _body("/apis", KUBECTL_ACCEPT)["items"] if i["metadata"]["name"] == "apps"
    )
    deployments = next(
        r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments"
    )
    scale = next(s for s in deployments["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}

    legacy = _body("/apis/apps/v1", "application/json")
    entry = next(r for r in legacy["resources"] if r["name"] == "deployments/scale")
    assert entry["kind"] == "Scale"
    assert (entry["group"], entry["version"]) == ("autoscaling", "v1")
    status = next(r for r in legacy["resources"] if r["name"] == "deployments/status")
    assert "group" not in status and status["kind"] == "Deployment"


def test_legacy_documents() -> None:
    versions = _body("/api", "application/json")
    V1APIVersions.from_dict(versions)
    assert versions["versions"] == ["v1"]

    group_list = _body("/apis", "application/json")
    V1APIGroupList.from_dict(group_list)
    apps = next(g for g in group_list["groups"] if g["name"] == "apps")
    assert apps["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    assert all(g["name"] for g in group_list["groups"])

    group = _body("/apis/apps", "application/json")
    V1APIGroup.from_dict(group)
    assert group["kind"] == "APIGroup"

    core = _body("/api/v1", None)
    V1APIResourceList.from_dict(core)
    assert core["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["shortNames"] == ["po"]
    assert by_name["pods"]["storageVersionHash"]
    assert by_name["pods/status"] == {
        "name": "pods/status",
        "singularName": "",
        "namespaced": True,
        "kind": "Pod",
        "verbs": ["get", "patch", "update"],
    }
    assert by_name["pods/log"]["verbs"] == ["get"]
    assert by_name["namespaces"]["namespaced"] is False


def test_server_address_is_published_when_known() -> None:
    assert discovery.api_versions(BUILT_IN, "10.0.0.1:6443")["serverAddressByClientCIDRs"] == [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}
    ]
    assert discovery.api_versions(BUILT_IN)["serverAddressByClientCIDRs"] == []


@pytest.mark.parametrize(
    "path", ["/apis/nope", "/apis/nope/v1", "/api/v2", "/apis/apps/v2", "/apis/apps/v1/x"]
)
def test_unknown_paths_are_404(path: str) -> None:
    with pytest.raises(StatusError) as raised:
        DISCOVERY.serve(path, "application/json")
    assert raised.value.code == 404


def test_unacceptable_is_406() -> None:
    with pytest.raises(StatusError) as raised:
        DISCOVERY.serve("/apis", "text/html")
    assert raised.value.code == 406
    assert raised.value.reason == "NotAcceptable"
    # Below the roots only the legacy list exists.
    with pytest.raises(StatusError):
        DISCOVERY.serve("/api/v1", V2)


def _aggregated_entries() -> dict[tuple[str, str, str], dict[str, Any]]:
    entries = {}
    for path in ("/api", "/apis"):
        for group in _body(path, KUBECTL_ACCEPT)["items"]:
            for version in group["versions"]:
                for r in version["resources"]:
                    key = (group["metadata"]["name"], version["version"], r["resource"])
                    assert key not in entries
                    entries[key] = r
    return entries


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.group_resource)
def test_every_resource_is_discoverable(resource: Resource) -> None:
    """What `kubectl api-resources` prints: NAME, SHORTNAMES, APIVERSION, NAMESPACED, KIND."""
    entry = _aggregated_entries()[(resource.group, resource.version, resource.plural)]
    assert entry.get("shortNames", []) == list(resource.short_names)
    assert entry["scope"] == ("Namespaced" if resource.namespaced else "Cluster")
    assert entry["responseKind"]["kind"] == resource.kind
    assert entry["verbs"] == list(resource.verbs)
    assert [s["subresource"] for s in entry.get("subresources", [])] == list(resource.subresources)

    legacy = discovery.api_resource_list(BUILT_IN, resource.group, resource.version)
    assert legacy is not None
    names = [r["name"] for r in legacy["resources"]]
    assert resource.plural in names
    assert all(f"{resource.plural}/{s}" in names for s in resource.subresources)


def test_serve_caches_encoded_documents() -> None:
    first = DISCOVERY.serve("/apis", KUBECTL_ACCEPT)
    assert DISCOVERY.serve("/apis/", KUBECTL_ACCEPT).body is first.body
