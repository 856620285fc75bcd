"""CRD conversion webhooks against the real apiserver (in-process), with the real
kubectl and the official client: a CRD stores v1 (``spec.size``) and serves v2
(``spec.dimensions.size``); the test serves the conversion webhook over HTTPS (a
certificate from a throwaway CA, given to the apiserver in ``caBundle``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lab.testenv import Environment
from tests.integration.https_server import json_over_https
from tests.integration.test_crds import kubectl

Object = dict[str, Any]


def convert(obj: Object, desired: str) -> Object:
    """The test's conversion: v1 keeps `spec.size`, v2 `spec.dimensions.size`."""
    out = json.loads(json.dumps(obj))
    spec = out.setdefault("spec", {})
    if desired.endswith("/v2") and "size" in spec:
        spec["dimensions"] = {"size": spec.pop("size")}
    elif desired.endswith("/v1") and "dimensions" in spec:
        spec["size"] = spec.pop("dimensions").get("size")
    out["apiVersion"] = desired
    out.setdefault("metadata", {}).setdefault("labels", {})["converted-to"] = desired.split("/")[1]
    return out


@dataclass
class ConversionServer:
    url: str = ""
    ca_bundle: str = ""
    fail: str = ""
    """When set, the webhook answers Failure with this message."""
    reviews: list[Object] = field(default_factory=list)


@pytest.fixture
def conversion_server(tmp_path: Path) -> Iterator[ConversionServer]:
    state = ConversionServer()

    def respond(review: Object, path: str) -> Object:
        state.reviews.append(review)
        request = review["request"]
        response: Object = {"uid": request["uid"]}
        if state.fail:
            response["result"] = {"status": "Failure", "message": state.fail}
        else:
            desired = request["desiredAPIVersion"]
            response["convertedObjects"] = [convert(o, desired) for o in request["objects"]]
            response["result"] = {"status": "Success"}
        return {"apiVersion": review["apiVersion"], "kind": review["kind"], "response": response}

    with json_over_https(tmp_path, respond) as (base, ca_bundle):
        state.url, state.ca_bundle = f"{base}/convert", ca_bundle
        yield state


def _crd(group: str, server: ConversionServer) -> Object:
    def version(name: str, spec: Object) -> Object:
        return {
            "name": name,
            "served": True,
            "storage": name == "v1",
            "schema": {
                "openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": spec}},
                }
            },
        }

    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"boxes.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "boxes", "singular": "box", "kind": "Box"},
            "versions": [
                version(
                    "v2",
                    {"dimensions": {"type": "object", "properties": {"size": {"type": "integer"}}}},
                ),
                version("v1", {"size": {"type": "integer"}}),
            ],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": server.url, "caBundle": server.ca_bundle},
                },
            },
        },
    }


def test_a_conversion_webhook_converts_between_versions(
    apiserver: Environment, namespace: str, conversion_server: ConversionServer
) -> None:
    from kubernetes import client, config

    group = f"c{uuid.uuid4().hex[:8]}.example.com"
    kubectl(apiserver, "apply", "-f", "-", stdin=json.dumps(_crd(group, conversion_server)))
    kubectl(apiserver, "wait", "--for=condition=Established", f"crd/boxes.{group}")
    try:
        box = {
            "apiVersion": f"{group}/v2",
            "kind": "Box",
            "metadata": {"name": "b"},
            "spec": {"dimensions": {"size": 3}},
        }
        created = json.loads(
            kubectl(
                apiserver, f"-n={namespace}", "create", "-f", "-", "-o", "json",
                stdin=json.dumps(box),
            )
        )  # fmt: skip
        assert created["apiVersion"] == f"{group}/v2"
        assert created["spec"] == {"dimensions": {"size": 3}}

        api = client.CustomObjectsApi(config.new_client_from_config(str(apiserver.kubeconfig)))
        stored = api.get_namespaced_custom_object(group, "v1", namespace, "boxes", "b")
        assert stored["spec"] == {"size": 3}, "stored in v1 by the webhook's conversion"
        assert stored["metadata"]["labels"] == {"converted-to": "v1"}
        assert stored["metadata"]["uid"] == created["metadata"]["uid"]

        listed = api.list_namespaced_custom_object(group, "v2", namespace, "boxes")
        assert [i["spec"] for i in listed["items"]] == [{"dimensions": {"size": 3}}]
        request = conversion_server.reviews[-1]
        assert request["apiVersion"] == "apiextensions.k8s.io/v1"
        assert request["kind"] == "ConversionReview"
        assert request["request"]["desiredAPIVersion"] == f"{group}/v2"

        conversion_server.fail = "cannot convert boxes today"
        out = kubectl(apiserver, f"-n={namespace}", "get", f"boxes.v2.{group}", "b", check=False)
        assert (
            f"conversion webhook for {group}/v1, Kind=Box failed: cannot convert boxes today"
        ) in out, out
        # The storage version needs no conversion.
        kubectl(apiserver, f"-n={namespace}", "get", f"boxes.v1.{group}", "b")
    finally:
        conversion_server.fail = ""
        kubectl(apiserver, "delete", "crd", f"boxes.{group}", "--wait=false", check=False)


def test_a_webhook_conversion_needs_its_client_config(apiserver: Environment) -> None:
    group = f"c{uuid.uuid4().hex[:8]}.example.com"
    crd = _crd(group, ConversionServer())
    del crd["spec"]["conversion"]["webhook"]
    out = kubectl(apiserver, "create", "-f", "-", stdin=json.dumps(crd), check=False)
    assert "spec.conversion.webhook.clientConfig: Required value" in out, out
