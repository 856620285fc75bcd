"""Structural schemas: how a CustomResourceDefinition's OpenAPI v3 schema judges and
completes the custom objects written (the CRD flow of the apiserver, see
`controlplane.apiserver.crds`).

Kubernetes requires a CRD's schema to be *structural* (a type at every level) and then
does three things with it on every write, in this order: prune the fields the schema
does not know (unless ``x-kubernetes-preserve-unknown-fields``; done with the built-in
kinds' pruning in `controlplane.apiserver.fieldvalidation`), fill in ``default``s, and
validate. The validation here covers what manifests rely on: ``type`` (with
``nullable`` and ``x-kubernetes-int-or-string``), ``required``, ``enum``, ``minimum`` /
``maximum`` (and their exclusive forms), ``minLength`` / ``maxLength``, ``pattern``,
``minItems`` / ``maxItems``, ``minProperties`` / ``maxProperties``,
``additionalProperties`` maps, and the string ``format``s Kubernetes checks
(`kubelab.api.formats`). The messages are worded as kube-openapi's
(`spec.replicas in body must be of type integer: "string"`, `... in body should be less
than or equal to 10`), so that what a user reads matches what Kubernetes says.

`json_path` evaluates the simple paths CRDs use (``.spec.replicas``,
``.status.conditions[0].type``): additionalPrinterColumns and the scale subresource.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from kubelab.api import errors, formats
from kubelab.api.errors import FieldError

Schema = dict[str, Any]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
_PATH_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    for name in ("object", "array", "string", "integer", "number"):
        if isinstance(value, _TYPES[name]):
            return name
    return "null"


def _has_type(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return kind == "boolean"
    return isinstance(value, _TYPES.get(kind, (object,)))


def validate(schema: Schema, value: Any, path: str = "") -> list[FieldError]:
    """Every way `value` (found at `path`) breaks `schema`."""
    where = path or "<root>"
    if value is None:
        if schema.get("nullable") or not schema.get("type"):
            return []
        detail = f'{where} in body must be of type {schema["type"]}: "null"'
        return [errors.invalid(where, "null", detail)]
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            detail = f'{where} in body must be of type integer,string: "{_type_of(value)}"'
            return [errors.invalid(where, _type_of(value), detail)]
    elif kind and not _has_type(value, kind):
        # Kubernetes reports the type it found as the invalid value.
        detail = f'{where} in body must be of type {kind}: "{_type_of(value)}"'
        return [errors.invalid(where, _type_of(value), detail)]
    found: list[FieldError] = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(errors.not_supported(where, value, [str(v) for v in schema["enum"]]))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        found += _bounds(schema, value, where)
    if isinstance(value, str):
        found += _string(schema, value, where)
    if isinstance(value, list):
        found += _counted(schema, len(value), where, "Items", "items")
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                found += validate(items, item, f"{path}[{i}]")
    if isinstance(value, dict):
        found += _counted(schema, len(value), where, "Properties", "properties")
        found += _object(schema, value, path)
    return found


def _bounds(schema: Schema, value: float, where: str) -> list[FieldError]:
    found = []
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None:
        if schema.get("exclusiveMinimum") and value <= low:
            found.append(
                errors.invalid(where, value, f"{where} in body should be greater than {low}")
            )
        elif value < low:
            found.append(
                errors.invalid(
                    where, value, f"{where} in body should be greater than or equal to {low}"
                )
            )
    if high is not None:
        if schema.get("exclusiveMaximum") and value >= high:
            found.append(
                errors.invalid(where, value, f"{where} in body should be less than {high}")
            )
        elif value > high:
            found.append(
                errors.invalid(
                    where, value, f"{where} in body should be less than or equal to {high}"
                )
            )
    return found


def _string(schema: Schema, value: str, where: str) -> list[FieldError]:
    found = []
    if "minLength" in schema and len(value) < schema["minLength"]:
        detail = f"{where} in body should be at least {schema['minLength']} chars long"
        found.append(errors.invalid(where, value, detail))
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        found.append(errors.too_long(where, int(schema["maxLength"])))
    pattern = schema.get("pattern")
    if pattern and re.search(pattern, value) is None:
        found.append(errors.invalid(where, value, f"{where} in body should match '{pattern}'"))
    format_ = schema.get("format")
    if isinstance(format_, str) and not formats.valid(format_, value):
        detail = f"{where} in body must be of type {format_}: {json.dumps(value)}"
        found.append(errors.invalid(where, value, detail))
    return found


def _counted(schema: Schema, count: int, where: str, noun: str, plural: str) -> list[FieldError]:
    found = []
    if f"min{noun}" in schema and count < schema[f"min{noun}"]:
        detail = f"{where} in body should have at least {schema[f'min{noun}']} {plural}"
        found.append(errors.invalid(where, count, detail))
    if f"max{noun}" in schema and count > schema[f"max{noun}"]:
        detail = f"{where} in body should have at most {schema[f'max{noun}']} {plural}"
        found.append(errors.invalid(where, count, detail))
    return found


def _object(schema: Schema, value: dict[str, Any], path: str) -> list[FieldError]:
    found = []
    prefix = f"{path}." if path else ""
    for name in schema.get("required") or []:
        if name not in value:
            found.append(errors.required(f"{prefix}{name}", ""))
    properties: dict[str, Schema] = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for name, child in value.items():
        if name in properties:
            if path or name not in ("metadata", "apiVersion", "kind"):
                found += validate(properties[name], child, f"{prefix}{name}")
        elif isinstance(extra, dict):
            found += validate(extra, child, f"{prefix}{name}")
    return found


def default(schema: Schema, value: Any) -> None:
    """Fill in (in place) the ``default`` of every property `value` lacks, at every level
    (a default is copied, never shared between objects)."""
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties") or {}
        for name, child in properties.items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
            if name in value:
                default(child, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, child_value in value.items():
                if name not in properties:
                    default(extra, child_value)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(schema["items"], item)


def json_path(obj: Any, path: str) -> Any:
    """The value at a simple JSON path (``.spec.replicas``, ``.status.list[0].name``;
    the braces of ``{.spec.x}`` allowed), or None where the path leads nowhere."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    value = obj
    for key, index in _PATH_STEP.findall(path):
        if key:
            value = value.get(key) if isinstance(value, dict) else None
        else:
            i = int(index)
            value = value[i] if isinstance(value, list) and i < len(value) else None
        if value is None:
            return None
    return value


def set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set the value at a simple dotted path (``.spec.replicas``), creating the objects
    on the way: the scale subresource writes replicas where the CRD says they live."""
    keys = [key for key, _ in _PATH_STEP.findall(path) if key]
    target = obj
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value
