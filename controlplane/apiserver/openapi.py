"""OpenAPI documents for the built-in resources: `/openapi/v2` and `/openapi/v3` (and,
in v3, for the custom resources of the CRDs served: `set_custom`).

What kubectl 1.37 fetches, and why both versions are served
-----------------------------------------------------------
* OpenAPI v3 is what kubectl reads first. `/openapi/v3` is an index of group versions,
  each with a `serverRelativeURL` carrying `?hash=<sha512 of the document>`; the client
  caches the per-group-version documents by that URL, so the hash must change whenever
  the content does. A request whose hash is stale is redirected (301) to the current URL,
  a matching one is marked immutable. kubectl uses these documents for:
    - `kubectl explain` (the default output): it finds the GVK on a path operation for
      the resource, then the component schema carrying that GVK in
      `x-kubernetes-group-version-kind` (a list), and walks `properties`, `items`,
      `additionalProperties` and single-entry `allOf` wrappers around `$ref`s;
    - field validation: kubectl looks for a PATCH operation with the object's GVK and a
      `fieldValidation` query parameter. Found, validation is left to the server and the
      client-side schema check below is skipped;
    - client-side `kubectl apply`: a PATCH operation whose request body accepts
      `application/strategic-merge-patch+json` makes kubectl compute the patch from the
      component schemas' `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key`.
* OpenAPI v2 is still fetched, as protobuf only: kubectl sends
  `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf` and feeds the body
  straight to a protobuf decoder (gnostic's `openapi.v2.Document`); it reads the
  definitions and their `x-kubernetes-group-version-kind`, and the PATCH `consumes`.
  Checked against kubectl 1.37.1, it needs v2 for:
    - client-side validation, which runs when v3 does not show `fieldValidation` for the
      object's GVK, for every `kind: List` (so `kubectl create -f` of a list, or of what
      `kubectl get -o yaml` printed) and whenever `/openapi/v3` is unavailable;
    - `kubectl explain --output plaintext-openapiv2`;
    - client-side `kubectl apply` when v3 cannot build the patch.
  There is no fallback: a JSON body fails with "proto: cannot parse invalid wire-format
  data", a 404 or 406 is reported as is, and for create/apply/replace the command stops
  with "error validating data: ...; turn validation off with --validate=false". A single
  object passes with v2 missing, because v3 hands validation to the server. So
  `/openapi/v2` answers protobuf to a client that asks for it and JSON to everyone else
  (curl, schemathesis). The response's Content-Type must be the dotted spelling
  `...spec.v2.v1.0+protobuf`: Go cannot parse the "@" form, and client-go then fails the
  request ("mime: unexpected content after media subtype").

Where the schemas come from
---------------------------
Field names, types, required flags and descriptions are read from the official
`kubernetes` Python client's generated models (`openapi_types`, `attribute_map` and the
pydantic field descriptions), walking from each served kind. What the generator lost is
restored here: definition names (`io.k8s.api.core.v1.Pod`, which explain prints as
`<Pod>`), int-or-string and quantity fields (plain `object`/`str` in the client), the
GVK markers and the strategic-merge-patch directives of the well-known lists. A kind the
client has no model for is published as an object that keeps unknown fields.

The documents are built on first use (about a second) and then kept as encoded bytes;
nothing here touches the network.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any, TypeVar

from controlplane.apiserver.protowire import length_delimited_field as _len_field
from controlplane.apiserver.protowire import varint_field
from kubelab.api.errors import StatusError
from kubelab.api.resources import RESOURCES, Resource

from .discovery import (
    SUBRESOURCE_VERBS,
    GroupVersionKind,
    Served,
    not_acceptable,
    parse_accept,
    subresource_kind,
)

JSONDict = dict[str, Any]

# What kubectl asks for. "@" is not allowed in a media type token, so Go's mime parser
# rejects it in a response header ("unexpected content after media subtype"): like
# kube-apiserver, answer with the dotted spelling, which clients also accept in requests.
PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
PROTOBUF_V2_RESPONSE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
JSON_CONTENT_TYPE = "application/json"
SPEC_VERSION = "v1.37.0"

_V2_REF = "#/definitions/"
_V3_REF = "#/components/schemas/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME = _META + "Time"
STATUS = _META + "Status"
DELETE_OPTIONS = _META + "DeleteOptions"
PATCH = _META + "Patch"
WATCH_EVENT = _META + "WatchEvent"

# apimachinery's meta/v1 types, which every group shares.
_META_KINDS = {
    "ObjectMeta",
    "ListMeta",
    "LabelSelector",
    "LabelSelectorRequirement",
    "ManagedFieldsEntry",
    "OwnerReference",
    "Status",
    "StatusDetails",
    "StatusCause",
    "DeleteOptions",
    "Preconditions",
    "Condition",
    "WatchEvent",
    "FieldSelectorRequirement",
}
# Where a group's own types are published, when not io.k8s.api.<group>.
_PACKAGES = {
    "metrics": "io.k8s.metrics.pkg.apis.metrics",
    "apiregistration": "io.k8s.kube-aggregator.pkg.apis.apiregistration",
}

# `object` in the client stands for several Go types; these field names are the
# int-or-string ones (ports by number or name, surge/availability as count or percent).
_INT_OR_STRING_FIELDS = {"port", "targetPort", "maxSurge", "maxUnavailable", "minAvailable"}

# resource.Quantity fields, which the client types as plain strings.
_QUANTITY_FIELDS: dict[str, set[str]] = {
    "ResourceRequirements": {"limits", "requests"},
    "VolumeResourceRequirements": {"limits", "requests"},
    "EmptyDirVolumeSource": {"sizeLimit"},
    "PodSpec": {"overhead"},
    "ContainerStatus": {"allocatedResources"},
    "NodeStatus": {"allocatable", "capacity"},
    "PersistentVolumeSpec": {"capacity"},
    "PersistentVolumeClaimStatus": {"allocatedResources", "capacity"},
    "ResourceQuotaSpec": {"hard"},
    "ResourceQuotaStatus": {"hard", "used"},
    "LimitRangeItem": {"default", "defaultRequest", "max", "maxLimitRequestRatio", "min"},
    "ContainerMetrics": {"usage"},
    "MetricTarget": {"value", "averageValue"},
    "MetricValueStatus": {"value", "averageValue"},
    "Overhead": {"podFixed"},
    "NodeMetrics": {"usage"},
}

# Strategic-merge-patch directives: (type, field) -> (strategy, merge key). Lists of
# `conditions` merge by `type` wherever they appear, without being listed here.
_PATCH_DIRECTIVES: dict[tuple[str, str], tuple[str, str]] = {
    ("PodSpec", "containers"): ("merge", "name"),
    ("PodSpec", "initContainers"): ("merge", "name"),
    ("PodSpec", "ephemeralContainers"): ("merge", "name"),
    ("PodSpec", "volumes"): ("merge,retainKeys", "name"),
    ("PodSpec", "imagePullSecrets"): ("merge", "name"),
    ("PodSpec", "hostAliases"): ("merge", "ip"),
    ("PodSpec", "topologySpreadConstraints"): ("merge", "topologyKey"),
    ("PodSpec", "resourceClaims"): ("merge,retainKeys", "name"),
    ("PodSpec", "schedulingGates"): ("merge", "name"),
    ("Container", "env"): ("merge", "name"),
    ("Container", "ports"): ("merge", "containerPort"),
    ("Container", "volumeMounts"): ("merge", "mountPath"),
    ("Container", "volumeDevices"): ("merge", "devicePath"),
    ("EphemeralContainer", "env"): ("merge", "name"),
    ("EphemeralContainer", "ports"): ("merge", "containerPort"),
    ("EphemeralContainer", "volumeMounts"): ("merge", "mountPath"),
    ("EphemeralContainer", "volumeDevices"): ("merge", "devicePath"),
    ("PodStatus", "podIPs"): ("merge", "ip"),
    ("PodStatus", "hostIPs"): ("merge", "ip"),
    ("NodeStatus", "addresses"): ("merge", "type"),
    ("ServiceSpec", "ports"): ("merge", "port"),
    ("ServiceAccount", "secrets"): ("merge", "name"),
    ("ObjectMeta", "ownerReferences"): ("merge", "uid"),
    ("ObjectMeta", "finalizers"): ("merge", ""),
    ("DeploymentSpec", "strategy"): ("retainKeys", ""),
    ("MutatingWebhookConfiguration", "webhooks"): ("merge", "name"),
    ("ValidatingWebhookConfiguration", "webhooks"): ("merge", "name"),
}


# --------------------------------------------------------------------------- models


@dataclass(frozen=True)
class _Field:
    name: str  # JSON name
    type: str  # the client's type expression: "str", "List[V1Container]", ...
    description: str
    required: bool = False


@dataclass(frozen=True)
class _Model:
    description: str
    fields: tuple[_Field, ...]


def _typemeta(kind: str) -> tuple[_Field, ...]:
    return (
        _Field("apiVersion", "str", "The versioned schema of this object's representation."),
        _Field("kind", "str", f"The kind of this object: {kind}."),
    )


# Kinds the Python client does not ship: the metrics API, served from the kubelets' stats.
_EXTRA_MODELS: dict[str, _Model] = {
    "V1beta1ContainerMetrics": _Model(
        "Resource usage of one container.",
        (
            _Field("name", "str", "Container name, as in the pod spec.", True),
            _Field("usage", "Dict[str, str]", "Current usage per resource (cpu, memory).", True),
        ),
    ),
    "V1beta1PodMetrics": _Model(
        "Resource usage of a pod's containers, sampled by its node's kubelet.",
        (
            *_typemeta("PodMetrics"),
            _Field("metadata", "V1ObjectMeta", "The pod's name and namespace."),
            _Field("timestamp", "datetime", "When the usage was sampled.", True),
            _Field("window", "str", "The interval the usage was averaged over.", True),
            _Field("containers", "List[V1beta1ContainerMetrics]", "Usage per container.", True),
        ),
    ),
    "V1beta1PodMetricsList": _Model(
        "A list of PodMetrics.",
        (
            *_typemeta("PodMetricsList"),
            _Field("metadata", "V1ListMeta", "List metadata."),
            _Field("items", "List[V1beta1PodMetrics]", "The metrics.", True),
        ),
    ),
    "V1beta1NodeMetrics": _Model(
        "Resource usage of a node, as its kubelet reports it.",
        (
            *_typemeta("NodeMetrics"),
            _Field("metadata", "V1ObjectMeta", "The node's name."),
            _Field("timestamp", "datetime", "When the usage was sampled.", True),
            _Field("window", "str", "The interval the usage was averaged over.", True),
            _Field("usage", "Dict[str, str]", "Current usage per resource (cpu, memory).", True),
        ),
    ),
    "V1beta1NodeMetricsList": _Model(
        "A list of NodeMetrics.",
        (
            *_typemeta("NodeMetricsList"),
            _Field("metadata", "V1ListMeta", "List metadata."),
            _Field("items", "List[V1beta1NodeMetrics]", "The metrics.", True),
        ),
    ),
}


def _class_description(cls: type) -> str:
    """The generated class docstring is the schema description followed by a boilerplate
    "Attributes:" section about the Python class itself, which is dropped."""
    text = (cls.__doc__ or "").split("Attributes:")[0]
    return " ".join(line.strip() for line in text.strip().splitlines())


@functools.cache
def _model(class_name: str) -> _Model | None:
    """The fields of a client model class, or of one of the extra models."""
    if class_name in _EXTRA_MODELS:
        return _EXTRA_MODELS[class_name]
    # Imported here, and by name, so that the apiserver does not load ~850 generated
    # modules unless a client asks for OpenAPI (they load lazily on attribute access).
    models = importlib.import_module("kubernetes.client.models")
    cls = getattr(models, class_name, None)
    types: dict[str, str] | None = getattr(cls, "openapi_types", None)
    if cls is None or types is None:
        return None
    if not hasattr(cls, "model_fields"):
        raise RuntimeError("OpenAPI schemas need the kubernetes client >= 37 (pydantic models)")
    names: dict[str, str] = cls.attribute_map
    # Descriptions and required flags sit on the pydantic fields, whose Python names differ
    # from the type table's for reserved words (var_continue vs _continue): join on JSON.
    by_json = {(f.serialization_alias or name): f for name, f in cls.model_fields.items()}
    fields = tuple(
        _Field(
            names[attr],
            type_expr,
            by_json[names[attr]].description or "",
            by_json[names[attr]].is_required(),
        )
        for attr, type_expr in types.items()
    )
    return _Model(_class_description(cls), fields)


def _version_prefix(version: str) -> str:
    return version[:1].upper() + version[1:]


def _group_prefix(group: str) -> str:
    """The client's disambiguating prefix for a group: "" -> Core, rbac.authorization -> Rbac."""
    return group.split(".")[0].capitalize() if group else "Core"


def _kind_class(gvk: GroupVersionKind) -> str | None:
    """The client class for a kind; the client prefixes the group only where two groups
    share a kind name (CoreV1Event, EventsV1Event)."""
    version = _version_prefix(gvk.version)
    for name in (f"{_group_prefix(gvk.group)}{version}{gvk.kind}", f"{version}{gvk.kind}"):
        if _model(name) is not None:
            return name
    return None


_CLASS_NAME = re.compile(r"^([A-Z][a-z]+)?(V\d+(?:alpha\d+|beta\d+)?)([A-Z]\w*)$")


def _package(group: str) -> str:
    label = group.split(".")[0] if group else "core"
    return _PACKAGES.get(label, f"io.k8s.api.{label}")


def _definition_name(class_name: str, package: str) -> str:
    """Kubernetes' definition name for a client class. The client drops the Go package, so
    a nested type takes the package of the kind it was first reached from (core kinds are
    walked first); meta/v1 types and group-prefixed classes name their own."""
    match = _CLASS_NAME.match(class_name)
    if match is None:
        return f"{package}.{class_name}"
    prefix, version, kind = match.groups()
    version = version.lower()
    if kind in _META_KINDS and version == "v1":
        return _META + kind
    if prefix:
        package = _package("" if prefix == "Core" else prefix.lower())
    return f"{package}.{version}.{kind}"


def _short(definition: str) -> str:
    return definition.rsplit(".", 1)[-1]


# --------------------------------------------------------------------------- schemas


def _ref(definition: str) -> JSONDict:
    return {"$ref": _V2_REF + definition}


class _SchemaBuilder:
    """Turns client models into Swagger 2.0 definitions, following references from the
    kinds it is asked for. v3 schemas are derived from these (see `_v3_schema`)."""

    def __init__(self) -> None:
        self.definitions: dict[str, JSONDict] = {
            TIME: {
                "description": "Time is an RFC 3339 timestamp, in UTC, to the second.",
                "type": "string",
                "format": "date-time",
            },
            INT_OR_STRING: {
                "description": "IntOrString holds either an integer or a string (a port "
                "number or name, a count or a percentage).",
                "type": "string",
                "format": "int-or-string",
            },
            QUANTITY: {
                "description": "Quantity is a fixed-point number with an optional unit "
                "suffix: 100m, 1.5, 128Mi, 2G.",
                "type": "string",
            },
            PATCH: {
                "description": "Patch is the body of a PATCH request: a JSON patch, a JSON "
                "merge patch, a strategic merge patch or an apply configuration, as the "
                "Content-Type says.",
                "type": "object",
            },
        }
        self._names: dict[str, str] = {}  # client class -> definition name
        self._classes: dict[str, str] = {}  # definition name -> client class
        self._pending: list[str] = []

    def kind(self, gvk: GroupVersionKind) -> str:
        """Definition for a served kind (building what it references), marked with its
        GVK; a kind without a client model is an object that keeps unknown fields."""
        class_name = _kind_class(gvk)
        if class_name is None:
            name = f"{_package(gvk.group)}.{gvk.version}.{gvk.kind}"
            self.definitions.setdefault(
                name,
                {
                    "description": f"{gvk.kind} has no published schema.",
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            )
        else:
            name = self._name(class_name, _package(gvk.group))
            self._drain()
        self.mark(name, gvk)
        return name

    def mark(self, name: str, gvk: GroupVersionKind) -> None:
        """Record that objects of this GVK have the (already built) schema `name`."""
        marks = self.definitions[name].setdefault("x-kubernetes-group-version-kind", [])
        if gvk.as_dict() not in marks:
            marks.append(gvk.as_dict())

    def _name(self, class_name: str, package: str) -> str:
        if class_name not in self._names:
            name = _definition_name(class_name, package)
            self._names[class_name] = name
            self._classes[name] = class_name
            self._pending.append(class_name)
        return self._names[class_name]

    def _drain(self) -> None:
        while self._pending:
            class_name = self._pending.pop()
            model = _model(class_name)
            if model is None:
                raise LookupError(f"the kubernetes client has no model {class_name}")
            name = self._names[class_name]
            self.definitions[name] = self._object(model, name)

    def _object(self, model: _Model, name: str) -> JSONDict:
        package = name.rsplit(".", 2)[0]
        owner = _short(name)
        properties: JSONDict = {}
        for f in model.fields:
            schema = self._type(f.type, package, owner, f.name)
            description = f.description or self._referenced_description(schema)
            if description:
                schema["description"] = description
            properties[f.name] = schema | self._patch_directives(owner, f.name, schema)
        node: JSONDict = {"description": model.description, "type": "object"}
        if properties:
            node["properties"] = properties
        required = [f.name for f in model.fields if f.required]
        if required:
            node["required"] = required
        return node

    def _referenced_description(self, schema: JSONDict) -> str:
        """The client keeps no description on a field that references another model; the
        model's own description is the next best thing for `kubectl explain`."""
        target = schema.get("$ref", "")[len(_V2_REF) :]
        if target in self._classes:
            # Possibly not built yet (it is queued), so ask the model itself.
            model = _model(self._classes[target])
            return model.description if model else ""
        return str(self.definitions.get(target, {}).get("description", ""))

    def _patch_directives(self, owner: str, field: str, schema: JSONDict) -> JSONDict:
        strategy, key = _PATCH_DIRECTIVES.get((owner, field), ("", ""))
        if not strategy and field == "conditions" and "items" in schema:
            strategy, key = "merge", "type"
        marks: JSONDict = {}
        if strategy:
            marks["x-kubernetes-patch-strategy"] = strategy
        if key:
            marks["x-kubernetes-patch-merge-key"] = key
        return marks

    def _type(self, expr: str, package: str, owner: str, field: str) -> JSONDict:
        """Schema for one of the client's type expressions."""
        if expr.startswith("List[") and expr.endswith("]"):
            return {"type": "array", "items": self._type(expr[5:-1], package, owner, "")}
        if expr.startswith("Dict[str, ") and expr.endswith("]"):
            values = self._type(expr[10:-1], package, owner, field)
            return {"type": "object", "additionalProperties": values}
        if field in _QUANTITY_FIELDS.get(owner, ()) and expr == "str":
            return _ref(QUANTITY)
        primitive = _PRIMITIVES.get(expr)
        if primitive is not None:
            return dict(primitive)
        if expr == "datetime":
            return _ref(TIME)
        if expr == "object":
            if field in _INT_OR_STRING_FIELDS:
                return _ref(INT_OR_STRING)
            return {"type": "object"}
        # A model: reference it now, build it when the queue is drained.
        return _ref(self._name(expr, package))


_PRIMITIVES: dict[str, JSONDict] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    "bytes": {"type": "string", "format": "byte"},
    "date": {"type": "string", "format": "date"},
}


# --------------------------------------------------------------------------- paths


def _param(name: str, where: str, type_: str, description: str, **extra: Any) -> JSONDict:
    node: JSONDict = {
        "name": name,
        "in": where,
        "description": description,
        "type": type_,
        "uniqueItems": True,
    }
    if where == "path":
        node["required"] = True
    return node | extra


def _query(name: str, type_: str, description: str, **extra: Any) -> JSONDict:
    return _param(name, "query", type_, description, **extra)


_PRETTY = _query("pretty", "string", "If 'true', the response is indented.")
_LIST_PARAMS = [
    _query("labelSelector", "string", "Only return objects whose labels match (a=b,c!=d)."),
    _query("fieldSelector", "string", "Only return objects whose fields match."),
    _query("limit", "integer", "Return at most this many objects and a continue token."),
    _query("continue", "string", "Continue a limited list from where its last page ended."),
    _query("resourceVersion", "string", "List as of, or watch from, this resource version."),
    _query(
        "resourceVersionMatch",
        "string",
        "How resourceVersion is compared for a list.",
        enum=["Exact", "NotOlderThan"],
    ),
    _query("sendInitialEvents", "boolean", "Start a watch with the current objects."),
    _query("timeoutSeconds", "integer", "End a list or watch after this many seconds."),
]
_WATCH_PARAMS = [
    *_LIST_PARAMS,
    _query("watch", "boolean", "Stream changes instead of returning a list."),
    _query("allowWatchBookmarks", "boolean", "Send BOOKMARK events during a watch."),
]
_DRY_RUN = _query("dryRun", "string", "All: run every stage but persistence.", enum=["All"])
_FIELD_MANAGER = _query("fieldManager", "string", "Name of the actor making the change.")
_FIELD_VALIDATION = _query(
    "fieldValidation",
    "string",
    "What to do with unknown or duplicate fields in the body: Ignore, Warn or Strict.",
    enum=["Ignore", "Warn", "Strict"],
)
_WRITE_PARAMS = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
_DELETE_PARAMS = [
    _DRY_RUN,
    _query("gracePeriodSeconds", "integer", "Seconds before the object is removed."),
    _query(
        "propagationPolicy",
        "string",
        "Whether and how dependents are garbage collected.",
        enum=["Orphan", "Background", "Foreground"],
    ),
    _query("orphanDependents", "boolean", "Deprecated: use propagationPolicy."),
]
_LOG_PARAMS = [
    _query("container", "string", "Container to read; may be omitted if the pod has one."),
    _query("follow", "boolean", "Stream the log as it grows."),
    _query("previous", "boolean", "Read the log of the previous, terminated container."),
    _query("sinceSeconds", "integer", "Only lines newer than this many seconds."),
    _query("tailLines", "integer", "Only this many lines from the end."),
    _query("timestamps", "boolean", "Prefix each line with its RFC 3339 timestamp."),
    _query("limitBytes", "integer", "Stop after this many bytes."),
]
_PRODUCES = ["application/json", "application/yaml"]
_WATCH_PRODUCES = [*_PRODUCES, "application/json;stream=watch"]
_CONSUMES = ["application/json", "application/yaml"]
_STRATEGIC = "application/strategic-merge-patch+json"
_PATCH_CONSUMES = [
    "application/json-patch+json",
    "application/merge-patch+json",
    _STRATEGIC,
    "application/apply-patch+yaml",
]


def _body(definition: str, required: bool = True) -> JSONDict:
    return {"name": "body", "in": "body", "required": required, "schema": _ref(definition)}


def _responses(definition: str | None, codes: Iterable[str]) -> JSONDict:
    schema = _ref(definition) if definition else {"type": "string"}
    out: JSONDict = {code: {"description": _REASONS[code], "schema": schema} for code in codes}
    out["401"] = {"description": "Unauthorized"}
    out["default"] = {"description": "Error", "schema": _ref(STATUS)}
    return out


_REASONS = {"200": "OK", "201": "Created", "202": "Accepted"}


def _camel_group(group: str) -> str:
    """apps -> Apps, rbac.authorization.k8s.io -> RbacAuthorization, "" -> Core."""
    if not group:
        return "Core"
    labels = group.removesuffix(".k8s.io").split(".")
    return "".join(label.capitalize() for label in labels)


@dataclass(frozen=True)
class _Target:
    """What a set of operations acts on: the resource, an optional subresource, and the
    definition and GVK of the body it reads and writes."""

    resource: Resource
    subresource: str
    gvk: GroupVersionKind
    definition: str

    def operation_id(self, verb: str, all_namespaces: bool = False) -> str:
        """Kubernetes' scheme: deleteCoreV1CollectionNamespacedPod,
        listAppsV1DeploymentForAllNamespaces, readAppsV1NamespacedDeploymentScale."""
        r = self.resource
        collection = ""
        if verb == "deletecollection":
            verb, collection = "delete", "Collection"
        scope = "Namespaced" if r.namespaced and not all_namespaces else ""
        tail = "ForAllNamespaces" if all_namespaces else ""
        prefix = f"{verb}{_camel_group(r.group)}{_version_prefix(r.version)}{collection}"
        return f"{prefix}{scope}{r.kind}{self.subresource.capitalize()}{tail}"

    def operation(
        self,
        verb: str,
        action: str,
        description: str,
        parameters: list[JSONDict],
        responses: JSONDict,
        *,
        consumes: list[str] | None = None,
        produces: list[str] | None = None,
        all_namespaces: bool = False,
    ) -> JSONDict:
        group = _camel_group(self.resource.group)
        return {
            "description": description,
            "operationId": self.operation_id(verb, all_namespaces),
            "tags": [f"{group[:1].lower()}{group[1:]}_{self.resource.version}"],
            "consumes": consumes or ["*/*"],
            "produces": produces or _PRODUCES,
            "schemes": ["https"],
            "parameters": parameters,
            "responses": responses,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": self.gvk.as_dict(),
        }


def _resource_paths(resource: Resource, builder: _SchemaBuilder) -> Iterator[tuple[str, JSONDict]]:
    """Path items for one resource: its collection, its objects, the all-namespaces list
    and its REST subresources. Streaming subresources (exec, attach, portforward, proxy)
    are connection upgrades that no schema describes and are left out."""
    gvk = GroupVersionKind(resource.group, resource.version, resource.kind)
    kind_def = builder.kind(gvk)
    verbs = set(resource.verbs)
    list_def = ""
    if verbs & {"list", "deletecollection"}:
        list_def = builder.kind(GroupVersionKind(gvk.group, gvk.version, resource.list_kind))
    target = _Target(resource, "", gvk, kind_def)
    kind = resource.kind

    root = f"/apis/{resource.group_version}" if resource.group else f"/api/{resource.version}"
    ns_param = _param("namespace", "path", "string", "The namespace the objects live in.")
    name_param = _param("name", "path", "string", f"Name of the {kind}.")
    scope_params = [ns_param] if resource.namespaced else []
    collection = f"{root}/namespaces/{{namespace}}/{resource.plural}"
    if not resource.namespaced:
        collection = f"{root}/{resource.plural}"

    item: JSONDict = {}
    if "list" in verbs:
        item["get"] = target.operation(
            "list",
            "list",
            f"List or watch objects of kind {kind}.",
            _WATCH_PARAMS,
            _responses(list_def, ["200"]),
            produces=_WATCH_PRODUCES,
        )
    if "create" in verbs:
        item["post"] = target.operation(
            "create",
            "post",
            f"Create a {kind}.",
            [_body(kind_def), *_WRITE_PARAMS],
            _responses(kind_def, ["200", "201", "202"]),
            consumes=_CONSUMES,
        )
    if "deletecollection" in verbs:
        item["delete"] = target.operation(
            "deletecollection",
            "deletecollection",
            f"Delete a collection of {kind} objects.",
            [_body(DELETE_OPTIONS, False), *_DELETE_PARAMS, *_LIST_PARAMS],
            _responses(STATUS, ["200"]),
            consumes=_CONSUMES,
        )
    if item:
        yield collection, {**item, "parameters": [*scope_params, _PRETTY]}

    if resource.namespaced and "list" in verbs:
        yield (
            f"{root}/{resource.plural}",
            {
                "get": target.operation(
                    "list",
                    "list",
                    f"List or watch objects of kind {kind} in every namespace.",
                    _WATCH_PARAMS,
                    _responses(list_def, ["200"]),
                    produces=_WATCH_PRODUCES,
                    all_namespaces=True,
                ),
                "parameters": [_PRETTY],
            },
        )

    object_params = [name_param, *scope_params, _PRETTY]
    item = _object_operations(target, verbs, "")
    if item:
        yield f"{collection}/{{name}}", {**item, "parameters": object_params}

    for sub in resource.subresources:
        if sub in ("exec", "attach", "portforward", "proxy"):
            continue
        sub_gvk = subresource_kind(resource, sub)
        sub_def = builder.kind(sub_gvk)
        sub_target = _Target(resource, sub, sub_gvk, sub_def)
        item = _object_operations(sub_target, set(SUBRESOURCE_VERBS[sub]), sub)
        yield f"{collection}/{{name}}/{sub}", {**item, "parameters": object_params}


def _object_operations(target: _Target, verbs: set[str], sub: str) -> JSONDict:
    """get/put/patch/delete on one object, or post for a subresource that creates."""
    what = f"{sub} of the {target.resource.kind}" if sub else f"the {target.resource.kind}"
    definition = target.definition
    ops: JSONDict = {}
    if sub == "log":
        ops["get"] = target.operation(
            "read",
            "get",
            f"Read the log of the {target.resource.kind}'s container.",
            _LOG_PARAMS,
            _responses(None, ["200"]),
            produces=["text/plain", "application/json"],
        )
        return ops
    if "get" in verbs:
        ops["get"] = target.operation(
            "read", "get", f"Read {what}.", [], _responses(definition, ["200"])
        )
    if "update" in verbs:
        ops["put"] = target.operation(
            "replace",
            "put",
            f"Replace {what}.",
            [_body(definition), *_WRITE_PARAMS],
            _responses(definition, ["200", "201"]),
            consumes=_CONSUMES,
        )
    if "patch" in verbs:
        ops["patch"] = target.operation(
            "patch",
            "patch",
            f"Partially update {what}.",
            [
                _body(PATCH),
                *_WRITE_PARAMS,
                _query("force", "boolean", "Server-side apply: take over conflicting fields."),
            ],
            _responses(definition, ["200", "201"]),
            consumes=_PATCH_CONSUMES,
        )
    if "delete" in verbs and not sub:
        ops["delete"] = target.operation(
            "delete",
            "delete",
            f"Delete {what}.",
            [_body(DELETE_OPTIONS, False), *_DELETE_PARAMS],
            _responses(STATUS, ["200", "202"]),
            consumes=_CONSUMES,
        )
    if "create" in verbs and sub:
        ops["post"] = target.operation(
            "create",
            "post",
            f"Create {what}.",
            [_body(definition), *_WRITE_PARAMS],
            _responses(definition, ["200", "201", "202"]),
            consumes=_CONSUMES,
        )
    return ops


# --------------------------------------------------------------------------- documents

_SECURITY = {
    "BearerToken": {
        "type": "apiKey",
        "name": "authorization",
        "in": "header",
        "description": "Bearer token: 'Authorization: Bearer <token>'.",
    }
}


@dataclass(frozen=True)
class _Spec:
    """The v2 document with, per path, the group version it belongs to."""

    document: JSONDict
    path_group_versions: dict[str, str]  # path -> "api/v1" | "apis/<group>/<version>"


def _gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


_lock = threading.RLock()
_T = TypeVar("_T")


def _locked(build: Callable[[], _T]) -> Callable[[], _T]:
    """Build once, under a lock: parallel first requests wait instead of each spending a
    second building the same document."""
    cached = functools.cache(build)

    @functools.wraps(build)
    def once() -> _T:
        with _lock:
            return cached()

    return once


@_locked
def _spec() -> _Spec:
    builder = _SchemaBuilder()
    paths: JSONDict = {}
    owners: dict[str, str] = {}
    for resource in RESOURCES:
        for path, item in _resource_paths(resource, builder):
            paths[path] = item
            owners[path] = _gv_key(resource.group, resource.version)
    for kind in ("Status", "DeleteOptions", "WatchEvent"):
        builder.kind(GroupVersionKind("", "v1", kind))
    # Every group version accepts meta/v1 DeleteOptions and streams meta/v1 WatchEvents,
    # and says so, as kube-apiserver does.
    for group, version in dict.fromkeys((r.group, r.version) for r in RESOURCES):
        for name in (DELETE_OPTIONS, WATCH_EVENT):
            builder.mark(name, GroupVersionKind(group, version, _short(name)))
    document = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": SPEC_VERSION},
        "paths": dict(sorted(paths.items())),
        "definitions": dict(sorted(builder.definitions.items())),
        "securityDefinitions": _SECURITY,
        "security": [{"BearerToken": []}],
    }
    return _Spec(document, owners)


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref[len(_V2_REF) :]
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
    target = schema["$ref"][len(_V2_REF) :]
    ref = {"$ref": _V3_REF + target}
    inherited = (_spec().document["definitions"].get(target) or {}).get("description")
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
    spec = _spec()
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
            "securitySchemes": _SECURITY,
        },
        "security": [{"BearerToken": []}],
    }


@dataclass(frozen=True)
class _Encoded:
    """A document as sent, with the digest that names it in URLs and ETags."""

    body: bytes
    digest: str

    @classmethod
    def of(cls, body: bytes) -> _Encoded:
        return cls(body, hashlib.sha512(body).hexdigest().upper())

    @classmethod
    def json(cls, doc: JSONDict) -> _Encoded:
        return cls.of(json.dumps(doc, separators=(",", ":")).encode())


@_locked
def _v2_json() -> _Encoded:
    return _Encoded.json(_spec().document)


@_locked
def _v2_protobuf() -> _Encoded:
    return _Encoded.of(_pb_document(_spec().document))


@_locked
def _builtin_v3_documents() -> dict[str, _Encoded]:
    """Every built-in group version's v3 document, keyed "api/v1", "apis/apps/v1", ..."""
    keys = dict.fromkeys(_gv_key(r.group, r.version) for r in RESOURCES)
    return {key: _Encoded.json(_v3_document(key)) for key in keys}


_custom_v3: dict[str, _Encoded] = {}
"""The custom resources' group versions' v3 documents (see `set_custom`)."""


def _v3_documents() -> dict[str, _Encoded]:
    return {**_builtin_v3_documents(), **_custom_v3}


def set_custom(served: Iterable[tuple[Resource, JSONDict]]) -> None:
    """Publish the custom resources served, each version with its CRD's schema (Swagger
    2.0 references, its metadata one to ObjectMeta), as v3 documents of their group
    versions: `kubectl explain` reads them, and kubectl leaves field validation to the
    server when a PATCH operation for the kind says it takes `fieldValidation`."""
    by_gv: dict[str, list[tuple[Resource, JSONDict]]] = {}
    for resource, schema in served:
        by_gv.setdefault(_gv_key(resource.group, resource.version), []).append((resource, schema))
    documents = {key: _Encoded.json(_custom_document(items)) for key, items in by_gv.items()}
    global _custom_v3
    with _lock:
        _custom_v3 = documents


def _custom_document(served: list[tuple[Resource, JSONDict]]) -> JSONDict:
    builder = _SchemaBuilder()
    paths: JSONDict = {}
    for resource, schema in served:
        paths.update(_resource_paths(resource, builder))
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
                "items": {"type": "array", "items": _ref(name)},
                "metadata": _ref(_META + "ListMeta"),
            },
            "x-kubernetes-group-version-kind": [list_gvk.as_dict()],
        }
    # A custom resource takes no strategic merge patch (its lists have no merge keys):
    # kubectl then computes a JSON merge patch for `apply`, as it does for Kubernetes.
    for item in paths.values():
        for op in item.values():
            if isinstance(op, dict) and _STRATEGIC in op.get("consumes", ()):
                op["consumes"] = [c for c in op["consumes"] if c != _STRATEGIC]
    return _v3_from(paths, {**_spec().document["definitions"], **builder.definitions})


def _v3_index() -> _Encoded:
    return _Encoded.json(
        {
            "paths": {
                key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={doc.digest}"}
                for key, doc in _v3_documents().items()
            }
        }
    )


# --------------------------------------------------------------------------- public API


def openapi_v2() -> JSONDict:
    """The Swagger 2.0 document (a fresh copy: callers may change it)."""
    return copy.deepcopy(_spec().document)


def openapi_v2_protobuf() -> bytes:
    """The same document as gnostic's `openapi.v2.Document` protobuf, which kubectl reads."""
    return _v2_protobuf().body


def openapi_v3_index() -> JSONDict:
    """`/openapi/v3`: each group version with the hashed URL of its document."""
    return dict(json.loads(_v3_index().body))


def openapi_v3(group_version_path: str) -> JSONDict | None:
    """The OpenAPI 3.0 document for "api/v1" or "apis/<group>/<version>", or None."""
    doc = _v3_documents().get(group_version_path.strip("/"))
    return None if doc is None else dict(json.loads(doc.body))


def _cached_answer(
    doc: _Encoded,
    content_type: str,
    if_none_match: str | None,
    cache: dict[str, str] | None = None,
) -> Served:
    """200, or 304 when the client's cached copy is current; kubectl keeps an HTTP cache
    of these documents and revalidates with If-None-Match. `cache` replaces the default
    "revalidate every time" caching headers."""
    etag = f'"{doc.digest}"'
    headers = {"Content-Type": content_type, "ETag": etag, "Vary": "Accept"}
    headers |= cache or {"Cache-Control": "no-cache, private"}
    if if_none_match and etag in (tag.strip() for tag in if_none_match.split(",")):
        return Served(304, b"", headers)
    return Served(200, doc.body, headers)


def serve_v2(accept: str | None, if_none_match: str | None = None) -> Served:
    """GET /openapi/v2: protobuf when the Accept header prefers it (kubectl), else JSON.

    Raises StatusError 406 when the client accepts neither."""
    for media in parse_accept(accept):
        mime = f"{media.type}/{media.subtype}"
        if mime in (PROTOBUF_V2, PROTOBUF_V2_RESPONSE):
            return _cached_answer(_v2_protobuf(), PROTOBUF_V2_RESPONSE, if_none_match)
        if media.covers("application", "json"):
            return _cached_answer(_v2_json(), JSON_CONTENT_TYPE, if_none_match)
    raise not_acceptable([JSON_CONTENT_TYPE, PROTOBUF_V2])


def serve_v3_index(if_none_match: str | None = None) -> Served:
    """GET /openapi/v3."""
    return _cached_answer(_v3_index(), JSON_CONTENT_TYPE, if_none_match)


def serve_v3(
    group_version_path: str, hash_: str | None = None, if_none_match: str | None = None
) -> Served:
    """GET /openapi/v3/<group_version_path>[?hash=...]: "api/v1" or "apis/<group>/<version>".

    With the current hash the answer may be cached for good; with a stale one it is a
    301 to the current URL, as kube-apiserver does. Raises StatusError 404 for a group
    version that is not served."""
    key = group_version_path.strip("/")
    doc = _v3_documents().get(key)
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
    return _cached_answer(doc, JSON_CONTENT_TYPE, if_none_match, cache)


def serve(
    path: str, accept: str | None, args: Mapping[str, str], if_none_match: str | None = None
) -> Served:
    """GET on any OpenAPI path: `/openapi/v2`, `/openapi/v3`, `/openapi/v3/<gv path>`
    (`args` are the query parameters, of which `hash` matters). Raises StatusError 404
    for another path or an unserved group version, 406 as `serve_v2` does."""
    path = "/" + path.strip("/")
    if path == "/openapi/v2":
        return serve_v2(accept, if_none_match)
    if path == "/openapi/v3":
        return serve_v3_index(if_none_match)
    if path.startswith("/openapi/v3/"):
        return serve_v3(path.removeprefix("/openapi/v3/"), args.get("hash"), if_none_match)
    raise _not_found()


def _not_found() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource")


# --------------------------------------------------------------------------- protobuf
# gnostic's openapi.v2 messages, encoded by hand for the fields these documents use. An
# unknown key is an error rather than silently dropped, so the JSON and protobuf forms
# cannot drift apart unnoticed. Vendor extensions travel as YAML text (JSON is YAML).


def _pb_string(number: int, value: str) -> bytes:
    return _len_field(number, value.encode())


def _pb_strings(number: int, values: list[str]) -> bytes:
    return b"".join(_pb_string(number, v) for v in values)


def _pb_bool(number: int, value: bool) -> bytes:
    return varint_field(number, int(value))


def _pb_any(number: int, value: Any) -> bytes:
    return _len_field(number, _pb_string(2, json.dumps(value)))  # Any.yaml


def _pb_named(number: int, mapping: JSONDict, encode: Callable[[Any], bytes]) -> bytes:
    """A map as gnostic spells it: repeated Named* {name = 1, value = 2}."""
    return b"".join(
        _len_field(number, _pb_string(1, name) + _len_field(2, encode(value)))
        for name, value in mapping.items()
    )


_Encoder = Callable[[int, Any], bytes]


def _pb_message(node: JSONDict, fields: dict[str, tuple[int, _Encoder]], extensions: int) -> bytes:
    out = bytearray()
    for key, value in node.items():
        if key.startswith("x-"):
            out += _len_field(extensions, _pb_string(1, key) + _pb_any(2, value))
        elif key in fields:
            number, encode = fields[key]
            out += encode(number, value)
        else:
            raise ValueError(f"no protobuf field for {key!r} in {sorted(node)}")
    return bytes(out)


def _sub(encode: Callable[[Any], bytes]) -> _Encoder:
    return lambda number, value: _len_field(number, encode(value))


def _pb_schema(schema: JSONDict) -> bytes:
    return _pb_message(schema, _SCHEMA_FIELDS, 31)


_SCHEMA_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "$ref": (1, _pb_string),
    "format": (2, _pb_string),
    "description": (4, _pb_string),
    "required": (19, _pb_strings),
    "additionalProperties": (21, _sub(lambda s: _len_field(1, _pb_schema(s)))),  # oneof
    "type": (22, _sub(lambda t: _pb_string(1, t))),  # TypeItem
    "items": (23, _sub(lambda s: _len_field(1, _pb_schema(s)))),  # ItemsItem
    "properties": (25, _sub(lambda props: _pb_named(1, props, _pb_schema))),
}

# QueryParameterSubSchema and PathParameterSubSchema number the same fields differently.
_QUERY_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "required": (1, _pb_bool),
    "in": (2, _pb_string),
    "description": (3, _pb_string),
    "name": (4, _pb_string),
    "type": (6, _pb_string),
    "uniqueItems": (20, _pb_bool),
    "enum": (21, lambda n, values: b"".join(_pb_any(n, v) for v in values)),
}
_PATH_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "required": (1, _pb_bool),
    "in": (2, _pb_string),
    "description": (3, _pb_string),
    "name": (4, _pb_string),
    "type": (5, _pb_string),
    "uniqueItems": (19, _pb_bool),
}
_BODY_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "name": (2, _pb_string),
    "in": (3, _pb_string),
    "required": (4, _pb_bool),
    "schema": (5, _sub(_pb_schema)),
}


def _pb_parameters_item(param: JSONDict) -> bytes:
    """ParametersItem{parameter = 1: Parameter{body = 1 | non_body = 2: {query = 3 |
    path = 4}}}."""
    if param["in"] == "body":
        parameter = _len_field(1, _pb_message(param, _BODY_FIELDS, 6))
    elif param["in"] == "query":
        parameter = _len_field(2, _len_field(3, _pb_message(param, _QUERY_FIELDS, 23)))
    else:
        parameter = _len_field(2, _len_field(4, _pb_message(param, _PATH_FIELDS, 22)))
    return _len_field(1, parameter)


def _pb_response(response: JSONDict) -> bytes:
    """ResponseValue{response = 1: Response{description = 1, schema = 2: SchemaItem}}."""
    out = _pb_string(1, response["description"])
    if "schema" in response:
        out += _len_field(2, _len_field(1, _pb_schema(response["schema"])))
    return _len_field(1, out)


def _pb_parameters(number: int, params: list[JSONDict]) -> bytes:
    return b"".join(_len_field(number, _pb_parameters_item(p)) for p in params)


_OPERATION_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "tags": (1, _pb_strings),
    "description": (3, _pb_string),
    "operationId": (5, _pb_string),
    "produces": (6, _pb_strings),
    "consumes": (7, _pb_strings),
    "parameters": (8, _pb_parameters),
    "responses": (9, _sub(lambda codes: _pb_named(1, codes, _pb_response))),
    "schemes": (10, _pb_strings),
}
_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def _pb_path_item(item: JSONDict) -> bytes:
    out = bytearray()
    for key, value in item.items():
        if key == "parameters":
            out += _pb_parameters(9, value)
        else:
            out += _len_field(_METHODS[key], _pb_message(value, _OPERATION_FIELDS, 13))
    return bytes(out)


def _pb_security_scheme(scheme: JSONDict) -> bytes:
    """SecurityDefinitionsItem{api_key_security = 2}: the only kind published here."""
    fields: dict[str, tuple[int, _Encoder]] = {
        "type": (1, _pb_string),
        "name": (2, _pb_string),
        "in": (3, _pb_string),
        "description": (4, _pb_string),
    }
    return _len_field(2, _pb_message(scheme, fields, 5))


def _pb_security(number: int, requirements: list[dict[str, list[str]]]) -> bytes:
    """repeated SecurityRequirement{NamedStringArray{name, StringArray{value}}}."""
    return b"".join(
        _len_field(number, _pb_named(1, req, lambda scopes: _pb_strings(1, scopes)))
        for req in requirements
    )


_DOCUMENT_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "swagger": (1, _pb_string),
    "info": (2, _sub(lambda info: _pb_string(1, info["title"]) + _pb_string(2, info["version"]))),
    "paths": (8, _sub(lambda paths: _pb_named(2, paths, _pb_path_item))),
    "definitions": (9, _sub(lambda defs: _pb_named(1, defs, _pb_schema))),
    "security": (12, _pb_security),
    "securityDefinitions": (13, _sub(lambda d: _pb_named(1, d, _pb_security_scheme))),
}


def _pb_document(document: JSONDict) -> bytes:
    return _pb_message(document, _DOCUMENT_FIELDS, 16)
