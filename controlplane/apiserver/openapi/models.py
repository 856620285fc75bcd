"""Kubernetes' definition names for the official Python client's generated models, and
the fields of those models: what `schemas` builds the published definitions from.

The client drops the Go package of each type and prefixes a group only where two groups
share a kind name (CoreV1Event, EventsV1Event); the names are restored here
(`io.k8s.api.core.v1.Pod`, which `kubectl explain` prints as `<Pod>`). The metrics API's
kinds, which the client does not ship, are described here too.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass

from ..discovery import GroupVersionKind

V2_REF = "#/definitions/"
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME = META + "Time"
STATUS = META + "Status"
DELETE_OPTIONS = META + "DeleteOptions"
PATCH = META + "Patch"
WATCH_EVENT = META + "WatchEvent"

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


@dataclass(frozen=True)
class Field:
    name: str  # JSON name
    type: str  # the client's type expression: "str", "List[V1Container]", ...
    description: str
    required: bool = False


@dataclass(frozen=True)
class Model:
    description: str
    fields: tuple[Field, ...]


def _typemeta(kind: str) -> tuple[Field, ...]:
    return (
        Field("apiVersion", "str", "The versioned schema of this object's representation."),
        Field("kind", "str", f"The kind of this object: {kind}."),
    )


# Kinds the Python client does not ship: the metrics API, served from the kubelets' stats.
_EXTRA_MODELS: dict[str, Model] = {
    "V1beta1ContainerMetrics": Model(
        "Resource usage of one container.",
        (
            Field("name", "str", "Container name, as in the pod spec.", True),
            Field("usage", "Dict[str, str]", "Current usage per resource (cpu, memory).", True),
        ),
    ),
    "V1beta1PodMetrics": Model(
        "Resource usage of a pod's containers, sampled by its node's kubelet.",
        (
            *_typemeta("PodMetrics"),
            Field("metadata", "V1ObjectMeta", "The pod's name and namespace."),
            Field("timestamp", "datetime", "When the usage was sampled.", True),
            Field("window", "str", "The interval the usage was averaged over.", True),
            Field("containers", "List[V1beta1ContainerMetrics]", "Usage per container.", True),
        ),
    ),
    "V1beta1PodMetricsList": Model(
        "A list of PodMetrics.",
        (
            *_typemeta("PodMetricsList"),
            Field("metadata", "V1ListMeta", "List metadata."),
            Field("items", "List[V1beta1PodMetrics]", "The metrics.", True),
        ),
    ),
    "V1beta1NodeMetrics": Model(
        "Resource usage of a node, as its kubelet reports it.",
        (
            *_typemeta("NodeMetrics"),
            Field("metadata", "V1ObjectMeta", "The node's name."),
            Field("timestamp", "datetime", "When the usage was sampled.", True),
            Field("window", "str", "The interval the usage was averaged over.", True),
            Field("usage", "Dict[str, str]", "Current usage per resource (cpu, memory).", True),
        ),
    ),
    "V1beta1NodeMetricsList": Model(
        "A list of NodeMetrics.",
        (
            *_typemeta("NodeMetricsList"),
            Field("metadata", "V1ListMeta", "List metadata."),
            Field("items", "List[V1beta1NodeMetrics]", "The metrics.", True),
        ),
    ),
}


def _class_description(cls: type) -> str:
    """The generated class docstring is the schema description followed by a boilerplate
    "Attributes:" section about the Python class itself, which is dropped."""
    text = (cls.__doc__ or "").split("Attributes:")[0]
    return " ".join(line.strip() for line in text.strip().splitlines())


@functools.cache
def model_of(class_name: str) -> Model | None:
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
        Field(
            names[attr],
            type_expr,
            by_json[names[attr]].description or "",
            by_json[names[attr]].is_required(),
        )
        for attr, type_expr in types.items()
    )
    return Model(_class_description(cls), fields)


def version_prefix(version: str) -> str:
    return version[:1].upper() + version[1:]


def _group_prefix(group: str) -> str:
    """The client's disambiguating prefix for a group: "" -> Core, rbac.authorization -> Rbac."""
    return group.split(".")[0].capitalize() if group else "Core"


def kind_class(gvk: GroupVersionKind) -> str | None:
    """The client class for a kind; the client prefixes the group only where two groups
    share a kind name (CoreV1Event, EventsV1Event)."""
    version = version_prefix(gvk.version)
    for name in (f"{_group_prefix(gvk.group)}{version}{gvk.kind}", f"{version}{gvk.kind}"):
        if model_of(name) is not None:
            return name
    return None


_CLASS_NAME = re.compile(r"^([A-Z][a-z]+)?(V\d+(?:alpha\d+|beta\d+)?)([A-Z]\w*)$")


def package_of(group: str) -> str:
    label = group.split(".")[0] if group else "core"
    return _PACKAGES.get(label, f"io.k8s.api.{label}")


def definition_name(class_name: str, package: str) -> str:
    """Kubernetes' definition name for a client class. The client drops the Go package, so
    a nested type takes the package of the kind it was first reached from (core kinds are
    walked first); meta/v1 types and group-prefixed classes name their own."""
    match = _CLASS_NAME.match(class_name)
    if match is None:
        return f"{package}.{class_name}"
    prefix, version, kind = match.groups()
    version = version.lower()
    if kind in _META_KINDS and version == "v1":
        return META + kind
    if prefix:
        package = package_of("" if prefix == "Core" else prefix.lower())
    return f"{package}.{version}.{kind}"


def short_name(definition: str) -> str:
    return definition.rsplit(".", 1)[-1]
