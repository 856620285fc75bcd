"""OpenAPI v3: one document per group version, derived from the v2 paths and
definitions (`v2`), for the built-in resources and, per apiserver (`OpenAPIService`),
the custom resources it serves, with the index of hashed URLs kubectl caches them by
(`/openapi/v3`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from email.utils import formatdate
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.api.resources import RESOURCES, Resource

from ..discovery import (
    GroupVersionKind,
    Served,
)
from .documents import JSON_CONTENT_TYPE, Encoded, cached_answer, locked
from .models import INT_OR_STRING, META, QUANTITY, V2_REF
from .paths import STRATEGIC_MERGE_PATCH, resource_paths
from .schemas import SchemaBuilder, ref
from .v2 import SECURITY, SPEC_VERSION, gv_key, serve_v2, v2_spec

JSONDict = dict[str, Any]
_V3_REF = "#/components/schemas/"


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref[len(V2_REF) :]
        for value in node.values():
            yield from _references(value)
    elif isinstance(node, list):
        for value in node:
            yield from _references(value)


def _closure(roots: Iterable[str], definitions: JSONDict) -> list[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_references(definitions[name]))
    return sorted(seen)


def _v3_schema(schema: JSONDict) -> JSONDict:
    """A Swagger 2.0 schema in OpenAPI 3.0 terms: references move to components and, as
    3.0 ignores a `$ref`'s siblings, a reference with its own description or patch
    directives becomes a one-entry allOf, which `kubectl explain` unwraps.

    A description that merely repeats the target's (see `_referenced_description`) stays
    beside the `$ref`: explain shows it in field lists, and prints the target's once when
    describing the field, where an allOf would print it twice."""
    out: JSONDict = {}
    for key, value in schema.items():
        if key == "$ref":
            continue
        if key == "properties":
            out[key] = {name: _v3_schema(prop) for name, prop in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _v3_schema(value)
        else:
            out[key] = value
    if "$ref" not in schema:
        return out
    target = schema["$ref"][len(V2_REF) :]
    ref = {"$ref": _V3_REF + target}
    inherited = (v2_spec().document["definitions"].get(target) or {}).get("description")
    if not out or out == {"description": inherited}:
        return ref | out
    return out | {"allOf": [ref]}


# OpenAPI 3 can say "integer or string", which Swagger 2.0 could not; explain then shows
# the definition's own name (<IntOrString>, <Quantity>) as it does for Kubernetes.
_V3_OVERRIDES: dict[str, JSONDict] = {
    INT_OR_STRING: {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]},
    QUANTITY: {"oneOf": [{"type": "string"}, {"type": "number"}]},
}


def _v3_definition(name: str, schema: JSONDict) -> JSONDict:
    if name in _V3_OVERRIDES:
        rest = {k: v for k, v in schema.items() if k not in ("type", "format")}
        return rest | _V3_OVERRIDES[name]
    return _v3_schema(schema)


def _v3_operation(op: JSONDict) -> JSONDict:
    out: JSONDict = {
        k: v
        for k, v in op.items()
        if k not in ("consumes", "produces", "schemes", "parameters", "responses")
    }
    parameters = []
    for param in op["parameters"]:
        if param["in"] == "body":
            content = {mt: {"schema": _v3_schema(param["schema"])} for mt in op["consumes"]}
            out["requestBody"] = {"content": content, "required": param["required"]}
        else:
            parameters.append(_v3_parameter(param))
    if parameters:
        out["parameters"] = parameters
    responses: JSONDict = {}
    for code, response in op["responses"].items():
        entry: JSONDict = {"description": response["description"]}
        if "schema" in response:
            schema = _v3_schema(response["schema"])
            entry["content"] = {mt: {"schema": schema} for mt in op["produces"]}
        responses[code] = entry
    out["responses"] = responses
    return out


def _v3_parameter(param: JSONDict) -> JSONDict:
    schema_keys = ("type", "format", "uniqueItems", "enum")
    out = {k: v for k, v in param.items() if k not in schema_keys}
    out["schema"] = {k: param[k] for k in schema_keys if k in param}
    return out


def _v3_path_item(item: JSONDict) -> JSONDict:
    out: JSONDict = {}
    for key, value in item.items():
        if key == "parameters":
            out[key] = [_v3_parameter(p) for p in value]
        else:
            out[key] = _v3_operation(value)
    return out


def _v3_document(gv: str) -> JSONDict:
    spec = v2_spec()
    v2_paths = spec.document["paths"]
    paths = {p: item for p, item in v2_paths.items() if spec.path_group_versions[p] == gv}
    return _v3_from(paths, spec.document["definitions"])


def _v3_from(paths: JSONDict, definitions: JSONDict) -> JSONDict:
    """The v3 document of Swagger 2.0 `paths`, with the `definitions` they reach."""
    names = _closure(_references(paths), definitions)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SPEC_VERSION},
        "paths": {p: _v3_path_item(item) for p, item in paths.items()},
        "components": {
            "schemas": {n: _v3_definition(n, definitions[n]) for n in names},
            "securitySchemes": SECURITY,
        },
        "security": [{"BearerToken": []}],
    }


@locked
def _builtin_v3_documents() -> dict[str, Encoded]:
    """Every built-in group version's v3 document, keyed "api/v1", "apis/apps/v1", ..."""
    keys = dict.fromkeys(gv_key(r.group, r.version) for r in RESOURCES)
    return {key: Encoded.json(_v3_document(key)) for key in keys}


def _custom_document(served: list[tuple[Resource, JSONDict]]) -> JSONDict:
    builder = SchemaBuilder()
    paths: JSONDict = {}
    for resource, schema in served:
        paths.update(resource_paths(resource, builder))
        gvk = GroupVersionKind(resource.group, resource.version, resource.kind)
        name = builder.kind(gvk)
        builder.definitions[name] = schema | {"x-kubernetes-group-version-kind": [gvk.as_dict()]}
        list_gvk = GroupVersionKind(resource.group, resource.version, resource.list_kind)
        builder.definitions[builder.kind(list_gvk)] = {
            "description": f"{resource.list_kind} is a list of {resource.kind}.",
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "items": {"type": "array", "items": ref(name)},
                "metadata": ref(META + "ListMeta"),
            },
            "x-kubernetes-group-version-kind": [list_gvk.as_dict()],
        }
    # A custom resource takes no strategic merge patch (its lists have no merge keys):
    # kubectl then computes a JSON merge patch for `apply`, as it does for Kubernetes.
    for item in paths.values():
        for op in item.values():
            if isinstance(op, dict) and STRATEGIC_MERGE_PATCH in op.get("consumes", ()):
                op["consumes"] = [c for c in op["consumes"] if c != STRATEGIC_MERGE_PATCH]
    return _v3_from(paths, {**v2_spec().document["definitions"], **builder.definitions})


class OpenAPIService:
    """One apiserver's OpenAPI: the built-in documents (built once per process: they never
    change) and the v3 documents of the custom resources it serves, which its CRD
    controller publishes (`set_custom`, `controlplane.apiserver.crds`)."""

    def __init__(self) -> None:
        self._custom_v3: dict[str, Encoded] = {}
        """The custom resources' group versions' v3 documents, by "apis/<group>/<version>"."""

    def set_custom(self, served: Iterable[tuple[Resource, JSONDict]]) -> None:
        """Publish the custom resources served, each version with its CRD's schema
        (Swagger 2.0 references, its metadata one to ObjectMeta), as v3 documents of their
        group versions: `kubectl explain` reads them, and kubectl leaves field validation
        to the server when a PATCH operation for the kind says it takes
        `fieldValidation`."""
        by_gv: dict[str, list[tuple[Resource, JSONDict]]] = {}
        for resource, schema in served:
            key = gv_key(resource.group, resource.version)
            by_gv.setdefault(key, []).append((resource, schema))
        documents = {key: Encoded.json(_custom_document(items)) for key, items in by_gv.items()}
        self._custom_v3 = documents  # one assignment: readers see the old or the new set

    def _v3_documents(self) -> dict[str, Encoded]:
        return {**_builtin_v3_documents(), **self._custom_v3}

    def _v3_index(self) -> Encoded:
        return Encoded.json(
            {
                "paths": {
                    key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={doc.digest}"}
                    for key, doc in self._v3_documents().items()
                }
            }
        )

    def openapi_v3_index(self) -> JSONDict:
        """`/openapi/v3`: each group version with the hashed URL of its document."""
        return dict(json.loads(self._v3_index().body))

    def openapi_v3(self, group_version_path: str) -> JSONDict | None:
        """The OpenAPI 3.0 document for "api/v1" or "apis/<group>/<version>", or None."""
        doc = self._v3_documents().get(group_version_path.strip("/"))
        return None if doc is None else dict(json.loads(doc.body))

    def serve_v3_index(self, if_none_match: str | None = None) -> Served:
        """GET /openapi/v3."""
        return cached_answer(self._v3_index(), JSON_CONTENT_TYPE, if_none_match)

    def serve_v3(
        self, group_version_path: str, hash_: str | None = None, if_none_match: str | None = None
    ) -> Served:
        """GET /openapi/v3/<group_version_path>[?hash=...]: "api/v1" or
        "apis/<group>/<version>".

        With the current hash the answer may be cached for good; with a stale one it is a
        301 to the current URL, as kube-apiserver does. Raises StatusError 404 for a group
        version that is not served."""
        key = group_version_path.strip("/")
        doc = self._v3_documents().get(key)
        if doc is None:
            raise _not_found()
        if hash_ and hash_ != doc.digest:
            location = f"/openapi/v3/{key}?hash={doc.digest}"
            return Served(301, b"", {"Location": location, "Cache-Control": "no-cache"})
        cache = None
        if hash_:
            year = 365 * 24 * 3600
            cache = {
                "Cache-Control": f"public, immutable, max-age={year}",
                "Expires": formatdate(time.time() + year, usegmt=True),
            }
        return cached_answer(doc, JSON_CONTENT_TYPE, if_none_match, cache)

    def serve(
        self,
        path: str,
        accept: str | None,
        args: Mapping[str, str],
        if_none_match: str | None = None,
    ) -> Served:
        """GET on any OpenAPI path: `/openapi/v2`, `/openapi/v3`, `/openapi/v3/<gv path>`
        (`args` are the query parameters, of which `hash` matters). Raises StatusError 404
        for another path or an unserved group version, 406 as `serve_v2` does."""
        path = "/" + path.strip("/")
        if path == "/openapi/v2":
            return serve_v2(accept, if_none_match)
        if path == "/openapi/v3":
            return self.serve_v3_index(if_none_match)
        if path.startswith("/openapi/v3/"):
            key = path.removeprefix("/openapi/v3/")
            return self.serve_v3(key, args.get("hash"), if_none_match)
        raise _not_found()


def _not_found() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource")
