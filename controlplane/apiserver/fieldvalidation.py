"""Field validation: unknown and duplicated fields in a written object, as the
``fieldValidation`` query parameter asks (kubectl sends ``Strict`` by default).

* ``Strict``: the write is refused with a 400 naming every problem, in Kubernetes'
  words: ``ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding
  error: duplicate field "metadata.name", unknown field "dta"``.
* ``Warn`` (the default, as in Kubernetes 1.23+): the write goes on and each problem
  comes back in a ``Warning`` header, which kubectl prints (``Warning: unknown field
  "spec.containers[0].imagePullPolizy"``).
* ``Ignore``: the write goes on silently.

In every case an unknown field is dropped, never stored: a typo such as
``imagePullPolizy`` would otherwise sit in the store looking like a setting, and a
client's stray ``status`` on a ConfigMap would be served back as if it meant something.
Of a duplicated field the last value wins, as Go's decoder has it.

"Unknown" is judged against the same schemas the apiserver publishes as OpenAPI (the
official client's models, see `openapi`): an object schema with properties knows its
fields; a map (``additionalProperties``) and a schema with neither (free-form, e.g. a
kind the client has no model for) keep whatever they are given.

The directive and the problems found belong to one request; they travel in a context
variable (per greenlet under gevent, per thread elsewhere) so that the registry, which
knows nothing of HTTP, can report into it, and the app turns them into a 400 or headers.
Writes the apiserver makes itself (bootstrap) run outside any request: unknown fields
are dropped silently there.
"""

from __future__ import annotations

import contextvars
import functools
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kubelab.api import errors
from kubelab.api.resources import Resource

from . import openapi

Object = dict[str, Any]


class Directive(StrEnum):
    STRICT = "Strict"
    WARN = "Warn"
    IGNORE = "Ignore"


@dataclass
class Check:
    """One request's directive and what was found so far (in the order found)."""

    directive: Directive
    duplicates: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def warnings(self) -> list[str]:
        return [f'duplicate field "{p}"' for p in self.duplicates] + [
            f'unknown field "{p}"' for p in self.unknown
        ]


_current: contextvars.ContextVar[Check | None] = contextvars.ContextVar(
    "kubelab_field_validation", default=None
)


def begin(value: str | None) -> Check:
    """Start a request's check with the ``fieldValidation`` parameter (absent: Warn)."""
    try:
        directive = Directive(value) if value else Directive.WARN
    except ValueError:
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{value}": supported values: "Ignore", '
            '"Strict", "Warn"'
        ) from None
    check = Check(directive)
    _current.set(check)
    return check


def current() -> Check | None:
    """The request's check, if it writes."""
    return _current.get()


def end() -> None:
    """The request is over (a server reuses its thread or greenlet for the next one)."""
    _current.set(None)


def note_duplicates(data: bytes | str) -> None:
    """Record the fields a JSON body gives twice, by their paths: the body is read a
    second time keeping every key/value pair (only a body known to have duplicates, so
    the common case pays nothing)."""
    check = _current.get()
    if check is None or check.directive is Directive.IGNORE:
        return
    pairs = json.loads(data, object_pairs_hook=_Pairs)
    for path in _duplicate_paths(pairs, ""):
        if path not in check.duplicates:
            check.duplicates.append(path)


class _Pairs(list[tuple[str, Any]]):
    """An object as its key/value pairs, in order, duplicates kept."""


def _duplicate_paths(value: Any, path: str) -> list[str]:
    found: list[str] = []
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, child in value:
            child_path = f"{path}.{key}" if path else key
            if key in seen and child_path not in found:
                found.append(child_path)
            seen.add(key)
            found += _duplicate_paths(child, child_path)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += _duplicate_paths(child, f"{path}[{i}]")
    return found


class FieldSchemas:
    """The schemas one apiserver judges written objects' fields by: the built-in kinds'
    (compiled once per process from the published OpenAPI, which never changes), and those
    of the custom resources it serves, set by its CRD controller
    (`controlplane.apiserver.crds`), by group, version and kind."""

    def __init__(self) -> None:
        self._custom: dict[tuple[str, str, str], Any] = {}

    def set_custom(self, group: str, version: str, kind: str, schema: Object | None) -> None:
        """Judge objects of a custom resource's version against its structural `schema`
        (OpenAPI v3, its metadata a reference to ObjectMeta); None: no longer served."""
        if schema is None:
            self._custom.pop((group, version, kind), None)
        else:
            self._custom[group, version, kind] = _Compiler(_definitions()).node(schema)

    def prune(self, r: Resource, obj: Object) -> None:
        """Drop `obj`'s unknown fields (in place) and report them, with any duplicates the
        body had, as the request's directive says: a 400 under Strict."""
        unknown: list[str] = []
        gvk = (r.group, r.version, r.kind)
        node = self._custom.get(gvk) or _schema(*gvk)
        _walk(node, obj, "", unknown)
        check = _current.get()
        if check is None or check.directive is Directive.IGNORE:
            return
        for path in unknown:
            if path not in check.unknown:
                check.unknown.append(path)
        if check.directive is Directive.STRICT and (check.duplicates or check.unknown):
            raise errors.bad_request(
                f'{r.kind} in version "{r.version}" cannot be handled as a {r.kind}: strict '
                f"decoding error: {', '.join(check.warnings())}"
            )


# -- schemas ---------------------------------------------------------------------------
#
# A compiled schema node is one of:
#   _Obj(properties, additional): an object; `properties` None for a free-form object,
#       `additional` the schema of a map's values (None: no map entries allowed);
#   _Arr(items): an array;
#   _LEAF: anything else (a string, a number, an int-or-string...): kept as it is.


@dataclass
class _Obj:
    properties: dict[str, Any] | None
    additional: Any = None


@dataclass
class _Arr:
    items: Any


_FREE = _Obj(None)
_LEAF = object()


@functools.cache
def _definitions() -> dict[str, Any]:
    """The built-in definitions, which a custom schema's metadata refers to (read only)."""
    definitions: dict[str, Any] = openapi.openapi_v2()["definitions"]
    return definitions


@functools.cache
def _kinds() -> dict[tuple[str, str, str], str]:
    """(group, version, kind) -> the definition published for it."""
    out: dict[tuple[str, str, str], str] = {}
    for name, schema in openapi.openapi_v2()["definitions"].items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            out.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return out


@functools.cache
def _schema(group: str, version: str, kind: str) -> Any:
    name = _kinds().get((group, version, kind))
    if name is None:
        return _FREE
    return _Compiler(openapi.openapi_v2()["definitions"]).definition(name)


class _Compiler:
    def __init__(self, definitions: dict[str, Any]) -> None:
        self.definitions = definitions
        self.done: dict[str, Any] = {}

    def definition(self, name: str) -> Any:
        if name not in self.done:
            schema = self.definitions.get(name) or {}
            if schema.get("type") == "object" and "properties" in schema:
                # Registered before its properties, so a schema that refers to itself
                # (JSONSchemaProps) compiles to a cycle, not an endless recursion.
                node = _Obj({})
                self.done[name] = node
                node.properties = {k: self.node(v) for k, v in schema["properties"].items()}
            else:
                self.done[name] = self.node(schema)
        return self.done[name]

    def node(self, schema: dict[str, Any]) -> Any:
        if "$ref" in schema:
            return self.definition(schema["$ref"].rsplit("/", 1)[-1])
        if len(schema.get("allOf") or []) == 1:
            return self.node(schema["allOf"][0])
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return _FREE
        kind = schema.get("type")
        if kind == "array":
            return _Arr(self.node(schema.get("items") or {}))
        if kind == "object":
            if "properties" in schema:
                return _Obj({k: self.node(v) for k, v in schema["properties"].items()})
            if "additionalProperties" in schema:
                return _Obj({}, self.node(schema["additionalProperties"] or {}))
            return _FREE
        return _LEAF


def _walk(node: Any, value: Any, path: str, unknown: list[str]) -> None:
    if isinstance(node, _Obj):
        if node.properties is None or not isinstance(value, dict):
            return
        for key in list(value):
            child = node.properties.get(key)
            where = f"{path}.{key}" if path else key
            if child is None and node.additional is None:
                unknown.append(where)
                del value[key]
                continue
            _walk(child if child is not None else node.additional, value[key], where, unknown)
    elif isinstance(node, _Arr) and isinstance(value, list):
        for i, item in enumerate(value):
            _walk(node.items, item, f"{path}[{i}]", unknown)
