"""Swagger 2.0 definitions built from the client's models (`models`), following
references from the kinds asked for, with what the generator lost restored:
int-or-string and quantity fields (plain `object`/`str` in the client) and the
strategic-merge-patch directives of the well-known lists. v3 schemas are derived from
these (`v3`).
"""

from __future__ import annotations

from typing import Any

from ..discovery import GroupVersionKind
from .models import (
    INT_OR_STRING,
    PATCH,
    QUANTITY,
    TIME,
    V2_REF,
    Model,
    definition_name,
    kind_class,
    model_of,
    package_of,
    short_name,
)

JSONDict = dict[str, Any]

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


def ref(definition: str) -> JSONDict:
    return {"$ref": V2_REF + definition}


class SchemaBuilder:
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
        class_name = kind_class(gvk)
        if class_name is None:
            name = f"{package_of(gvk.group)}.{gvk.version}.{gvk.kind}"
            self.definitions.setdefault(
                name,
                {
                    "description": f"{gvk.kind} has no published schema.",
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            )
        else:
            name = self._name(class_name, package_of(gvk.group))
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
            name = definition_name(class_name, package)
            self._names[class_name] = name
            self._classes[name] = class_name
            self._pending.append(class_name)
        return self._names[class_name]

    def _drain(self) -> None:
        while self._pending:
            class_name = self._pending.pop()
            model = model_of(class_name)
            if model is None:
                raise LookupError(f"the kubernetes client has no model {class_name}")
            name = self._names[class_name]
            self.definitions[name] = self._object(model, name)

    def _object(self, model: Model, name: str) -> JSONDict:
        package = name.rsplit(".", 2)[0]
        owner = short_name(name)
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
        target = schema.get("$ref", "")[len(V2_REF) :]
        if target in self._classes:
            # Possibly not built yet (it is queued), so ask the model itself.
            model = model_of(self._classes[target])
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
            return ref(QUANTITY)
        primitive = _PRIMITIVES.get(expr)
        if primitive is not None:
            return dict(primitive)
        if expr == "datetime":
            return ref(TIME)
        if expr == "object":
            if field in _INT_OR_STRING_FIELDS:
                return ref(INT_OR_STRING)
            return {"type": "object"}
        # A model: reference it now, build it when the queue is drained.
        return ref(self._name(expr, package))


_PRIMITIVES: dict[str, JSONDict] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    "bytes": {"type": "string", "format": "byte"},
    "date": {"type": "string", "format": "date"},
}
