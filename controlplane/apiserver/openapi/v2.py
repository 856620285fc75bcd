"""The Swagger 2.0 document of the built-in resources (`/openapi/v2`), as JSON, or as
gnostic's protobuf for kubectl (see the package doc for why both); its paths and
definitions are also what the v3 documents are derived from.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kubelab.api.resources import RESOURCES

from ..discovery import (
    GroupVersionKind,
    Served,
    not_acceptable,
    parse_accept,
)
from .documents import JSON_CONTENT_TYPE, Encoded, cached_answer, locked
from .gnostic import encode_document
from .models import DELETE_OPTIONS, WATCH_EVENT, short_name
from .paths import resource_paths
from .schemas import SchemaBuilder

JSONDict = dict[str, Any]

# What kubectl asks for. "@" is not allowed in a media type token, so Go's mime parser
# rejects it in a response header ("unexpected content after media subtype"): like
# kube-apiserver, answer with the dotted spelling, which clients also accept in requests.
PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
PROTOBUF_V2_RESPONSE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
SPEC_VERSION = "v1.37.0"


SECURITY = {
    "BearerToken": {
        "type": "apiKey",
        "name": "authorization",
        "in": "header",
        "description": "Bearer token: 'Authorization: Bearer <token>'.",
    }
}


@dataclass(frozen=True)
class Spec:
    """The v2 document with, per path, the group version it belongs to."""

    document: JSONDict
    path_group_versions: dict[str, str]  # path -> "api/v1" | "apis/<group>/<version>"


def gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


@locked
def v2_spec() -> Spec:
    builder = SchemaBuilder()
    paths: JSONDict = {}
    owners: dict[str, str] = {}
    for resource in RESOURCES:
        for path, item in resource_paths(resource, builder):
            paths[path] = item
            owners[path] = gv_key(resource.group, resource.version)
    for kind in ("Status", "DeleteOptions", "WatchEvent"):
        builder.kind(GroupVersionKind("", "v1", kind))
    # Every group version accepts meta/v1 DeleteOptions and streams meta/v1 WatchEvents,
    # and says so, as kube-apiserver does.
    for group, version in dict.fromkeys((r.group, r.version) for r in RESOURCES):
        for name in (DELETE_OPTIONS, WATCH_EVENT):
            builder.mark(name, GroupVersionKind(group, version, short_name(name)))
    document = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": SPEC_VERSION},
        "paths": dict(sorted(paths.items())),
        "definitions": dict(sorted(builder.definitions.items())),
        "securityDefinitions": SECURITY,
        "security": [{"BearerToken": []}],
    }
    return Spec(document, owners)


@locked
def _v2_json() -> Encoded:
    return Encoded.json(v2_spec().document)


@locked
def _v2_protobuf() -> Encoded:
    return Encoded.of(encode_document(v2_spec().document))


def openapi_v2() -> JSONDict:
    """The Swagger 2.0 document (a fresh copy: callers may change it)."""
    return copy.deepcopy(v2_spec().document)


def openapi_v2_protobuf() -> bytes:
    """The same document as gnostic's `openapi.v2.Document` protobuf, which kubectl reads."""
    return _v2_protobuf().body


def serve_v2(accept: str | None, if_none_match: str | None = None) -> Served:
    """GET /openapi/v2: protobuf when the Accept header prefers it (kubectl), else JSON.

    Raises StatusError 406 when the client accepts neither."""
    for media in parse_accept(accept):
        mime = f"{media.type}/{media.subtype}"
        if mime in (PROTOBUF_V2, PROTOBUF_V2_RESPONSE):
            return cached_answer(_v2_protobuf(), PROTOBUF_V2_RESPONSE, if_none_match)
        if media.covers("application", "json"):
            return cached_answer(_v2_json(), JSON_CONTENT_TYPE, if_none_match)
    raise not_acceptable([JSON_CONTENT_TYPE, PROTOBUF_V2])
