"""Swagger 2.0 path items of a resource: its collection, its objects, the
all-namespaces list and its REST subresources, with Kubernetes' operation ids, the
parameters kubectl looks for (``fieldValidation`` on PATCH) and the patch types each
operation consumes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kubelab.api.resources import Resource

from ..discovery import (
    SUBRESOURCE_VERBS,
    GroupVersionKind,
    subresource_kind,
)
from .models import DELETE_OPTIONS, PATCH, STATUS, version_prefix
from .schemas import SchemaBuilder, ref

JSONDict = dict[str, Any]


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
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
_PATCH_CONSUMES = [
    "application/json-patch+json",
    "application/merge-patch+json",
    STRATEGIC_MERGE_PATCH,
    "application/apply-patch+yaml",
]


def _body(definition: str, required: bool = True) -> JSONDict:
    return {"name": "body", "in": "body", "required": required, "schema": ref(definition)}


def _responses(definition: str | None, codes: Iterable[str]) -> JSONDict:
    schema = ref(definition) if definition else {"type": "string"}
    out: JSONDict = {code: {"description": _REASONS[code], "schema": schema} for code in codes}
    out["401"] = {"description": "Unauthorized"}
    out["default"] = {"description": "Error", "schema": ref(STATUS)}
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
        prefix = f"{verb}{_camel_group(r.group)}{version_prefix(r.version)}{collection}"
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


def resource_paths(resource: Resource, builder: SchemaBuilder) -> Iterator[tuple[str, JSONDict]]:
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
