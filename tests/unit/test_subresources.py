"""The apiserver's table of subresource REST objects (`controlplane.apiserver.subresources`):
every subresource the built-in resources declare is served by its own REST object, found
by group resource and never by kind, and a verb a REST object does not serve is a 405."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, cast

import pytest
from flask import Flask

from controlplane.apiserver.apiserver import APIServer
from controlplane.apiserver.authn import UserInfo
from controlplane.apiserver.requestinfo import RequestInfo
from controlplane.apiserver.served import ServedAPI
from controlplane.apiserver.strategies import Strategies
from controlplane.apiserver.subresources import SubresourceRequest, SubresourceStorage, storage
from controlplane.apiserver.subresources.generic import ScaleREST, StatusREST
from controlplane.apiserver.subresources.pod import BindingREST
from kubelab.api import errors
from kubelab.api.resources import RESOURCES, lookup

# Declared, as Kubernetes declares it, but not served yet (kubectl debug's target).
NOT_SERVED = {("pods", "ephemeralcontainers")}


def _storage() -> SubresourceStorage:
    def unused(*args: Any) -> Any:
        raise AssertionError("no request is served here")

    server = SimpleNamespace(
        registry=None,
        kubelets=None,
        authz=None,
        issuer=None,
        registry_for=unused,
        cached_list=unused,
        swap=unused,
        api=ServedAPI(),
    )
    return storage(cast(APIServer, server))


def test_every_declared_subresource_has_its_rest_object() -> None:
    table = _storage()
    missing = [
        f"{r.group_resource}/{sub}"
        for r in RESOURCES
        for sub in r.subresources
        if table.rest_for(r, sub) is None and (r.group_resource, sub) not in NOT_SERVED
    ]
    assert missing == []


def test_no_rest_object_for_a_subresource_nothing_declares() -> None:
    declared = {f"{r.group_resource}/{sub}" for r in RESOURCES for sub in r.subresources}
    assert set(_storage().own) <= declared


def test_a_custom_resource_named_like_a_core_one_gets_only_the_shared_objects() -> None:
    pods = lookup("", "v1", "pods")
    assert pods is not None
    custom = dataclasses.replace(pods, group="example.com", subresources={"status": ""})
    table = _storage()
    assert isinstance(table.rest_for(pods, "binding"), BindingREST)
    assert table.rest_for(custom, "binding") is None
    assert isinstance(table.rest_for(custom, "status"), StatusREST)
    assert isinstance(table.rest_for(custom, "scale"), ScaleREST)


def _request(plural: str, sub: str, verb: str) -> RequestInfo:
    return RequestInfo(
        verb=verb,
        path=f"/api/v1/namespaces/ns/{plural}/x/{sub}",
        is_resource=True,
        version="v1",
        namespace="ns",
        resource=plural,
        subresource=sub,
        name="x",
    )


@pytest.mark.parametrize(
    ("plural", "sub", "verb", "code", "message"),
    [
        ("pods", "status", "delete", 405, "delete is not supported on pods/status"),
        ("pods", "binding", "get", 405, "get is not supported on pods/binding"),
        ("pods", "ephemeralcontainers", "patch", 405, "patch is not supported"),
        ("pods", "scale", "get", 404, "pods has no subresource 'scale'"),
        ("configmaps", "status", "get", 404, "configmaps has no subresource 'status'"),
    ],
)
def test_what_a_subresource_does_not_serve_is_refused_before_any_read(
    plural: str, sub: str, verb: str, code: int, message: str
) -> None:
    r = lookup("", "v1", plural)
    assert r is not None
    with pytest.raises(errors.StatusError) as refused:
        _storage().serve(r, _request(plural, sub, verb), UserInfo("alice"))
    assert refused.value.code == code
    assert message in refused.value.message


@pytest.mark.parametrize("spec", [[], "3", None])
def test_a_scale_whose_spec_is_not_an_object_is_invalid_not_a_server_error(spec: Any) -> None:
    deployments = lookup("apps", "v1", "deployments")
    assert deployments is not None
    info = dataclasses.replace(
        _request("deployments", "scale", "update"), group="apps", resource="deployments"
    )
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "spec": spec}
    request = SubresourceRequest(deployments, info, UserInfo("alice"))
    with (
        Flask(__name__).test_request_context(method="PUT", json=scale),
        pytest.raises(errors.StatusError) as refused,
    ):
        ScaleREST(lambda r: cast(Any, None), Strategies()).serve(request)
    assert refused.value.code == 422
    assert "spec.replicas" in refused.value.message
