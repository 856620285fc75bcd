"""OpenAPI v2/v3 documents: what kubectl looks for in them (GVK markers, fieldValidation on
PATCH, strategic-merge directives, hashed v3 URLs, protobuf v2), that they are complete
(every served resource, every reference resolvable), and, when kubectl is installed,
that the real kubectl can use them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, Response, request
from werkzeug.serving import make_server

from controlplane.apiserver import discovery, openapi
from controlplane.apiserver.openapi.schemas import SchemaBuilder
from kubelab.api.errors import StatusError
from kubelab.api.resources import BUILT_IN, RESOURCES, Resource, groups

V2_REF = "#/definitions/"
V3_REF = "#/components/schemas/"
GROUP_VERSIONS = [f"apis/{g}/{v}" if g else f"api/{v}" for g, vs in groups() for v in vs]
SERVICE = openapi.OpenAPIService()


@pytest.fixture(scope="module")
def v2() -> dict[str, Any]:
    return openapi.openapi_v2()


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method != "parameters":
                yield path, method, op


def _definition_for(doc: dict[str, Any], group: str, version: str, kind: str) -> str:
    gvk = {"group": group, "version": version, "kind": kind}
    schemas = doc.get("definitions") or doc["components"]["schemas"]
    [name] = [n for n, s in schemas.items() if gvk in s.get("x-kubernetes-group-version-kind", [])]
    return str(name)


def test_v2_is_swagger_with_resolvable_references(v2: dict[str, Any]) -> None:
    assert v2["swagger"] == "2.0"
    for ref in _refs(v2):
        assert ref.startswith(V2_REF)
        assert ref[len(V2_REF) :] in v2["definitions"], ref


def test_operation_ids_are_unique(v2: dict[str, Any]) -> None:
    ids = [op["operationId"] for _, _, op in _operations(v2)]
    assert len(ids) == len(set(ids))
    assert "listCoreV1NamespacedPod" in ids
    assert "listAppsV1DeploymentForAllNamespaces" in ids
    assert "deleteCoreV1CollectionNamespacedPod" in ids
    assert "patchAppsV1NamespacedDeploymentScale" in ids


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.group_resource)
def test_every_resource_has_a_schema_and_its_operations(
    v2: dict[str, Any], resource: Resource
) -> None:
    name = _definition_for(v2, resource.group, resource.version, resource.kind)
    schema = v2["definitions"][name]
    assert schema["type"] == "object"
    assert "metadata" in schema["properties"]

    root = f"/apis/{resource.group_version}" if resource.group else "/api/v1"
    scope = "/namespaces/{namespace}" if resource.namespaced else ""
    collection = f"{root}{scope}/{resource.plural}"
    gvk = {"group": resource.group, "version": resource.version, "kind": resource.kind}
    expected = {
        "list": (collection, "get"),
        "create": (collection, "post"),
        "deletecollection": (collection, "delete"),
        "get": (collection + "/{name}", "get"),
        "update": (collection + "/{name}", "put"),
        "patch": (collection + "/{name}", "patch"),
        "delete": (collection + "/{name}", "delete"),
    }
    for verb, (path, method) in expected.items():
        op = v2["paths"].get(path, {}).get(method)
        if verb not in resource.verbs:
            assert op is None, (verb, path)
            continue
        assert op is not None, (verb, path)
        assert op["x-kubernetes-group-version-kind"] == gvk
        assert op["x-kubernetes-action"] == {"create": "post", "update": "put"}.get(verb, verb)
    if "list" in resource.verbs:
        list_name = _definition_for(v2, resource.group, resource.version, resource.list_kind)
        items = v2["definitions"][list_name]["properties"]["items"]
        assert items["items"]["$ref"] == V2_REF + name


def test_parameters(v2: dict[str, Any]) -> None:
    pods = "/api/v1/namespaces/{namespace}/pods"
    item = v2["paths"][pods]
    assert [p["name"] for p in item["parameters"]] == ["namespace", "pretty"]
    assert item["parameters"][0] | {"required": True, "in": "path"} == item["parameters"][0]
    listed = {p["name"]: p for p in item["get"]["parameters"]}
    for name in ("labelSelector", "fieldSelector", "limit", "continue", "watch", "resourceVersion"):
        assert listed[name]["in"] == "query"
    assert listed["limit"]["type"] == "integer"
    assert listed["watch"]["type"] == "boolean"
    created = {p["name"]: p for p in item["post"]["parameters"]}
    assert created["body"]["required"] is True
    assert created["fieldValidation"]["enum"] == ["Ignore", "Warn", "Strict"]
    assert {"dryRun", "fieldManager"} <= set(created)
    named = v2["paths"][pods + "/{name}"]
    assert [p["name"] for p in named["parameters"]] == ["name", "namespace", "pretty"]
    deleted = {p["name"] for p in named["delete"]["parameters"]}
    assert {"gracePeriodSeconds", "propagationPolicy", "dryRun"} <= deleted
    log = v2["paths"][pods + "/{name}/log"]["get"]
    assert {"container", "follow", "tailLines"} <= {p["name"] for p in log["parameters"]}


def test_every_patch_supports_field_validation_and_strategic_merge(v2: dict[str, Any]) -> None:
    """kubectl checks the first PATCH operation it meets for the GVK, in no set order,
    so every one of them must say it, subresources included."""
    patches = [(path, op) for path, method, op in _operations(v2) if method == "patch"]
    assert len(patches) > 30
    for path, op in patches:
        names = [p["name"] for p in op["parameters"] if p["in"] == "query"]
        assert "fieldValidation" in names, path
        assert "application/strategic-merge-patch+json" in op["consumes"], path
        assert "application/apply-patch+yaml" in op["consumes"], path


def test_subresource_operations(v2: dict[str, Any]) -> None:
    scale = v2["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    gvk = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert {
        m: op["x-kubernetes-group-version-kind"] for m, op in scale.items() if m != "parameters"
    } == {
        "get": gvk,
        "put": gvk,
        "patch": gvk,
    }
    binding = v2["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/binding"]
    assert set(binding) == {"post", "parameters"}
    eviction = v2["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]["post"]
    assert eviction["x-kubernetes-group-version-kind"]["group"] == "policy"
    status = v2["paths"]["/api/v1/nodes/{name}/status"]
    assert set(status) == {"get", "put", "patch", "parameters"}
    assert not any(
        path.endswith(("/exec", "/attach", "/portforward", "/proxy")) for path in v2["paths"]
    )


def _prop(v2: dict[str, Any], definition: str, field: str) -> dict[str, Any]:
    return dict(v2["definitions"][definition]["properties"][field])


@pytest.mark.parametrize(
    ("definition", "field", "strategy", "key"),
    [
        ("io.k8s.api.core.v1.PodSpec", "containers", "merge", "name"),
        ("io.k8s.api.core.v1.PodSpec", "initContainers", "merge", "name"),
        ("io.k8s.api.core.v1.PodSpec", "volumes", "merge,retainKeys", "name"),
        ("io.k8s.api.core.v1.Container", "env", "merge", "name"),
        ("io.k8s.api.core.v1.Container", "ports", "merge", "containerPort"),
        ("io.k8s.api.core.v1.Container", "volumeMounts", "merge", "mountPath"),
        ("io.k8s.api.core.v1.ServiceSpec", "ports", "merge", "port"),
        ("io.k8s.api.core.v1.PodStatus", "conditions", "merge", "type"),
        ("io.k8s.api.core.v1.NodeStatus", "conditions", "merge", "type"),
        ("io.k8s.api.apps.v1.DeploymentStatus", "conditions", "merge", "type"),
        ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences", "merge", "uid"),
    ],
)
def test_patch_directives(
    v2: dict[str, Any], definition: str, field: str, strategy: str, key: str
) -> None:
    prop = _prop(v2, definition, field)
    assert prop["x-kubernetes-patch-strategy"] == strategy
    assert prop["x-kubernetes-patch-merge-key"] == key


def test_field_types_and_descriptions(v2: dict[str, Any]) -> None:
    pod_spec = v2["definitions"]["io.k8s.api.core.v1.PodSpec"]
    assert "containers" in pod_spec["required"]
    containers = pod_spec["properties"]["containers"]
    assert containers["type"] == "array"
    assert containers["items"] == {"$ref": V2_REF + "io.k8s.api.core.v1.Container"}
    assert containers["description"].startswith("List of containers")
    container = v2["definitions"]["io.k8s.api.core.v1.Container"]
    assert container["required"] == ["name"]
    image = container["properties"]["image"]
    assert set(image) == {"type", "description"} and image["type"] == "string"
    # A reference the client keeps no description for borrows the target's.
    metadata = _prop(v2, "io.k8s.api.core.v1.Pod", "metadata")
    assert metadata["$ref"] == V2_REF + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    assert metadata["description"].startswith("ObjectMeta is metadata")
    assert _prop(v2, "io.k8s.api.core.v1.ServicePort", "targetPort")["$ref"] == (
        V2_REF + openapi.INT_OR_STRING
    )
    assert _prop(v2, "io.k8s.api.apps.v1.RollingUpdateDeployment", "maxSurge")["$ref"] == (
        V2_REF + openapi.INT_OR_STRING
    )
    limits = _prop(v2, "io.k8s.api.core.v1.ResourceRequirements", "limits")
    assert limits["additionalProperties"] == {"$ref": V2_REF + openapi.QUANTITY}
    labels = _prop(v2, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "labels")
    assert labels["additionalProperties"] == {"type": "string"}
    created = _prop(v2, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "creationTimestamp")
    assert created["$ref"] == V2_REF + openapi.TIME
    # Python's reserved words are renamed in the client; the JSON names are not.
    assert (
        "continue"
        in v2["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"]["properties"]
    )
    assert "Eviction" in v2["definitions"]["io.k8s.api.policy.v1.Eviction"]["description"]


def test_metrics_kinds_are_described(v2: dict[str, Any]) -> None:
    name = _definition_for(v2, "metrics.k8s.io", "v1beta1", "PodMetrics")
    containers = v2["definitions"][name]["properties"]["containers"]["items"]["$ref"]
    usage = v2["definitions"][containers[len(V2_REF) :]]["properties"]["usage"]
    assert usage["additionalProperties"] == {"$ref": V2_REF + openapi.QUANTITY}


def test_a_kind_without_a_client_model_keeps_unknown_fields() -> None:
    builder = SchemaBuilder()
    name = builder.kind(discovery.GroupVersionKind("widgets.example.com", "v1", "Widget"))
    assert name == "io.k8s.api.widgets.v1.Widget"
    assert builder.definitions[name] == {
        "description": "Widget has no published schema.",
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-group-version-kind": [
            {"group": "widgets.example.com", "version": "v1", "kind": "Widget"}
        ],
    }


def test_openapi_v2_returns_a_copy() -> None:
    doc = openapi.openapi_v2()
    doc["paths"].clear()
    assert openapi.openapi_v2()["paths"]


# ---------------------------------------------------------------------------- v3


def test_v3_index_lists_every_group_version_with_its_hash() -> None:
    index = SERVICE.openapi_v3_index()["paths"]
    assert list(index) == GROUP_VERSIONS
    for key, entry in index.items():
        url = entry["serverRelativeURL"]
        path, _, query = url.partition("?")
        assert path == f"/openapi/v3/{key}"
        digest = query.removeprefix("hash=")
        served = SERVICE.serve_v3(key, digest)
        assert served.status == 200
        assert served.headers["ETag"] == f'"{digest}"'
        assert "immutable" in served.headers["Cache-Control"]
        assert len(digest) == 128


def test_v3_stale_hash_redirects_and_etag_revalidates() -> None:
    url = SERVICE.openapi_v3_index()["paths"]["api/v1"]["serverRelativeURL"]
    moved = SERVICE.serve_v3("api/v1", "0" * 128)
    assert moved.status == 301
    assert moved.headers["Location"] == url
    fresh = SERVICE.serve_v3("/api/v1/")
    assert fresh.status == 200 and fresh.headers["Cache-Control"] == "no-cache, private"
    assert SERVICE.serve_v3("api/v1", None, fresh.headers["ETag"]).status == 304
    with pytest.raises(StatusError) as raised:
        SERVICE.serve_v3("apis/nope/v1")
    assert raised.value.code == 404


@pytest.mark.parametrize("key", GROUP_VERSIONS)
def test_v3_documents_are_self_contained(key: str) -> None:
    doc = SERVICE.openapi_v3(key)
    assert doc is not None
    assert doc["openapi"] == "3.0.0"
    schemas = doc["components"]["schemas"]
    for ref in _refs(doc):
        assert ref.startswith(V3_REF)
        assert ref[len(V3_REF) :] in schemas, ref
    prefix = "/" + key
    assert doc["paths"] and all(p.startswith(prefix + "/") for p in doc["paths"])
    for path, method, op in _operations(doc):
        assert "x-kubernetes-group-version-kind" in op, (path, method)
        for param in op.get("parameters", []):
            assert set(param) >= {"name", "in", "schema"}
        if method == "patch":
            content = op["requestBody"]["content"]
            assert "application/strategic-merge-patch+json" in content
            assert any(
                p["name"] == "fieldValidation" and p["in"] == "query" for p in op["parameters"]
            )


def test_v3_schema_shapes() -> None:
    doc = SERVICE.openapi_v3("apis/apps/v1")
    assert doc is not None
    schemas = doc["components"]["schemas"]
    name = _definition_for(doc, "apps", "v1", "Deployment")
    assert name == "io.k8s.api.apps.v1.Deployment"
    # Scale comes along for deployments/scale.
    assert _definition_for(doc, "autoscaling", "v1", "Scale") in schemas
    assert schemas[openapi.INT_OR_STRING]["oneOf"] == [{"type": "integer"}, {"type": "string"}]
    assert "type" not in schemas[openapi.INT_OR_STRING]
    spec = schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]
    # A description of its own: a one-entry allOf, as OpenAPI 3.0 ignores $ref siblings.
    assert spec["replicas"]["type"] == "integer"
    strategy = spec["strategy"]
    assert strategy["allOf"] == [{"$ref": V3_REF + "io.k8s.api.apps.v1.DeploymentStrategy"}]
    assert strategy["x-kubernetes-patch-strategy"] == "retainKeys"
    # The target's own description is left beside the $ref.
    template = spec["template"]
    assert template["$ref"] == V3_REF + "io.k8s.api.core.v1.PodTemplateSpec"
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["items"] == {"$ref": V3_REF + "io.k8s.api.core.v1.Container"}
    assert containers["x-kubernetes-patch-merge-key"] == "name"


def test_serve_dispatches_on_the_path() -> None:
    index = SERVICE.serve("/openapi/v3", None, {})
    assert json.loads(index.body) == SERVICE.openapi_v3_index()
    url = SERVICE.openapi_v3_index()["paths"]["apis/apps/v1"]["serverRelativeURL"]
    digest = url.partition("hash=")[2]
    doc = SERVICE.serve("/openapi/v3/apis/apps/v1", "application/json", {"hash": digest})
    assert doc.status == 200 and "immutable" in doc.headers["Cache-Control"]
    assert SERVICE.serve("/openapi/v2/", "*/*", {}).headers["Content-Type"] == "application/json"
    for path in ("/openapi/v4", "/openapi/v3/apis/nope/v1"):
        with pytest.raises(StatusError) as raised:
            SERVICE.serve(path, None, {})
        assert raised.value.code == 404


# ---------------------------------------------------------------------------- v2 wire


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """A protobuf message as (field number, varint or bytes) pairs."""
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        value: int | bytes
        if key & 7 == 0:
            value, i = _varint(buf, i)
        else:
            assert key & 7 == 2, key
            size, i = _varint(buf, i)
            value, i = buf[i : i + size], i + size
        out.append((key >> 3, value))
    return out


def _one(message: bytes, number: int) -> bytes:
    [value] = [v for n, v in _fields(message) if n == number]
    assert isinstance(value, bytes)
    return value


def _named(message: bytes, number: int) -> dict[str, bytes]:
    """gnostic's repeated Named* {name = 1, value = 2} as a dict."""
    out = {}
    for n, entry in _fields(message):
        if n == number:
            assert isinstance(entry, bytes)
            out[_one(entry, 1).decode()] = _one(entry, 2)
    return out


def test_v2_protobuf_carries_the_json_document(v2: dict[str, Any]) -> None:
    served = openapi.serve_v2("application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert served.headers["Content-Type"] == openapi.PROTOBUF_V2_RESPONSE
    doc = served.body
    assert _one(doc, 1) == b"2.0"
    definitions = _named(_one(doc, 9), 1)
    assert list(definitions) == list(v2["definitions"])
    pod = definitions["io.k8s.api.core.v1.Pod"]
    extensions = _named(pod, 31)
    gvk = json.loads(_one(extensions["x-kubernetes-group-version-kind"], 2))  # Any.yaml
    assert gvk == [{"group": "", "version": "v1", "kind": "Pod"}]
    assert set(_named(_one(pod, 25), 1)) == set(
        v2["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]
    )
    paths = _named(_one(doc, 8), 2)
    assert list(paths) == list(v2["paths"])
    patch = _one(paths["/api/v1/namespaces/{namespace}/pods/{name}"], 8)
    consumes = [v for n, v in _fields(patch) if n == 7]
    assert b"application/strategic-merge-patch+json" in consumes


def test_serve_v2_negotiates() -> None:
    assert openapi.serve_v2(None).headers["Content-Type"] == "application/json"
    assert json.loads(openapi.serve_v2("application/json").body)["swagger"] == "2.0"
    pb = openapi.serve_v2("application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
    assert pb.body == openapi.openapi_v2_protobuf()
    assert openapi.serve_v2("*/*", pb.headers["ETag"]).status == 200  # JSON has its own tag
    assert openapi.serve_v2(pb.headers["Content-Type"], pb.headers["ETag"]).status == 304
    with pytest.raises(StatusError) as raised:
        openapi.serve_v2("text/html")
    assert raised.value.code == 406


# ---------------------------------------------------------------------------- kubectl


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """Discovery and OpenAPI on a Flask app in a thread; every other path is a 404."""
    app = Flask("kubectl-test")

    documents = discovery.Discovery(BUILT_IN)

    def answer(served: discovery.Served) -> Response:
        return Response(served.body, status=served.status, headers=served.headers)

    @app.errorhandler(StatusError)
    def status_error(err: StatusError) -> Response:
        return Response(json.dumps(err.status()), err.code, mimetype="application/json")

    @app.get("/version")
    def version() -> dict[str, str]:
        return {"major": "1", "minor": "37", "gitVersion": "v1.37.0"}

    @app.get("/api")
    @app.get("/apis")
    @app.get("/api/<v>")
    @app.get("/apis/<g>")
    @app.get("/apis/<g>/<v>")
    def discover(**_: str) -> Response:
        return answer(documents.serve(request.path, request.headers.get("Accept")))

    @app.get("/openapi/v2")
    def v2_doc() -> Response:
        accept, etag = request.headers.get("Accept"), request.headers.get("If-None-Match")
        return answer(openapi.serve_v2(accept, etag))

    @app.get("/openapi/v3")
    def v3_index() -> Response:
        return answer(SERVICE.serve_v3_index(request.headers.get("If-None-Match")))

    @app.get("/openapi/v3/<path:gv>")
    def v3_doc(gv: str) -> Response:
        hash_, etag = request.args.get("hash"), request.headers.get("If-None-Match")
        return answer(SERVICE.serve_v3(gv, hash_, etag))

    http = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{http.server_port}"
    finally:
        http.shutdown()
        thread.join()


Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def kubectl(server: str, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """Runs the real kubectl against `server`, with a private home and HTTP cache."""
    beside = Path(sys.executable).parent / "kubectl"
    binary = str(beside) if beside.exists() else shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not installed")
    home = tmp_path_factory.mktemp("kubectl-home")
    env = {**os.environ, "HOME": str(home), "KUBECONFIG": os.devnull}

    def run(*args: str, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [binary, "--server", server, "--cache-dir", str(home / "cache"), *args]
        done = subprocess.run(
            cmd, input=stdin, capture_output=True, text=True, env=env, timeout=60, check=False
        )
        if check:
            assert done.returncode == 0, done.stderr
        return done

    return run


def test_kubectl_api_resources(kubectl: Kubectl) -> None:
    rows = {tuple(line.split()) for line in kubectl("api-resources").stdout.splitlines()[1:]}
    assert ("deployments", "deploy", "apps/v1", "true", "Deployment") in rows
    assert ("pods", "po", "v1", "true", "Pod") in rows
    assert ("namespaces", "ns", "v1", "false", "Namespace") in rows
    assert ("secrets", "v1", "true", "Secret") in rows
    assert (
        "horizontalpodautoscalers",
        "hpa",
        "autoscaling/v2",
        "true",
        "HorizontalPodAutoscaler",
    ) in rows
    # kubectl lists each resource once, in its group's preferred version.
    assert len(rows) == len({(r.group, r.plural) for r in RESOURCES})


def test_kubectl_explain(kubectl: Kubectl) -> None:
    out = kubectl("explain", "pods.spec.containers").stdout
    assert "FIELD: containers <[]Container>" in out
    assert "name\t<string> -required-" in out
    assert "ports\t<[]ContainerPort>" in out

    out = kubectl("explain", "deployment.spec.template.spec.containers").stdout
    assert "GROUP:      apps" in out and "image\t<string>" in out

    out = kubectl("explain", "svc", "--recursive").stdout
    assert "targetPort\t<IntOrString>" in out
    out = kubectl("explain", "deploy", "--recursive").stdout
    assert "maxSurge\t<IntOrString>" in out
    assert "limits\t<map[string]Quantity>" in out


def test_kubectl_reads_the_protobuf_v2_document(kubectl: Kubectl) -> None:
    out = kubectl("explain", "svc.spec.ports", "--output", "plaintext-openapiv2").stdout
    assert "RESOURCE: ports <[]Object>" in out
    assert "targetPort\t<string>" in out

    # A List is validated on the client against v2, like kube-apiserver's document.
    items = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "bogus": 1},
    ]
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    bad = kubectl(
        "create", "--dry-run=client", "-o", "name", "-f", "-", stdin=manifest, check=False
    )
    assert 'unknown field "bogus" in io.k8s.api.core.v1.ConfigMap' in bad.stderr
    del items[0]["bogus"]
    items.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {"name": "c", "image": "nginx", "resources": {"limits": {"cpu": 1}}}
                        ]
                    },
                },
            },
        }
    )
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    good = kubectl("create", "--dry-run=client", "-o", "name", "-f", "-", stdin=manifest)
    assert good.stdout.split() == ["configmap/a", "deployment.apps/web"]
