"""Field sets for server-side apply: which fields an applied configuration sets, in
Kubernetes' ``FieldsV1`` form (``metadata.managedFields[].fieldsV1``).

A field set is kept here as a set of leaf paths; each step is a FieldsV1 key:
``f:<field>`` for a field of an object, ``k:<json>`` for the element of a list merged by
key (``k:{"name":"nginx"}``), ``v:<json>`` for a value of a list of scalars merged as a
set, and ``.`` for a list element itself. A list without merge metadata is atomic: the
list is one leaf. So ``spec.containers[name=nginx].image`` is
``("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"nginx"}', "f:image")``.

Which lists merge by which key comes from the strategic merge metadata
(`kubelab.api.patch.patch_meta`), as the real API takes it from the same struct tags.
"""

from __future__ import annotations

import json
from typing import Any

from kubelab.api import patch

Path = tuple[str, ...]
FieldSet = set[Path]

_SERVER_METADATA = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)
"""Metadata the server owns (or that names the object): never part of a field set."""


def field_set(kind: str, obj: dict[str, Any]) -> FieldSet:
    """The fields `obj` sets, as a configuration applied to a `kind` object (status and
    the server's metadata left out)."""
    out: FieldSet = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata" and isinstance(value, dict):
            for mkey, mvalue in value.items():
                if mkey not in _SERVER_METADATA:
                    _walk(kind, mvalue, ("f:metadata", f"f:{mkey}"), ("metadata", mkey), out)
            continue
        _walk(kind, value, (f"f:{key}",), (key,), out)
    return out


def _walk(kind: str, value: Any, path: Path, names: tuple[str, ...], out: FieldSet) -> None:
    """Add the leaves under `value`, found at `path` (`names`: the same path by field
    names only, as strategic merge metadata is keyed)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _walk(kind, item, (*path, f"f:{key}"), (*names, key), out)
        return
    if isinstance(value, list) and value:
        strategy, merge_key = _list_meta(kind, names)
        if merge_key and all(isinstance(i, dict) and merge_key in i for i in value):
            for item in value:
                element = (*path, _key_step(merge_key, item[merge_key]))
                out.add((*element, "."))
                for key, field in item.items():
                    _walk(kind, field, (*element, f"f:{key}"), (*names, key), out)
            return
        if "merge" in strategy and all(not isinstance(i, dict | list) for i in value):
            out.update((*path, _value_step(i)) for i in value)
            return
    out.add(path)


def _list_meta(kind: str, names: tuple[str, ...]) -> tuple[str, str]:
    try:
        meta = patch.patch_meta(kind, names)
    except patch.UnsupportedPatchError:
        return "", ""
    return meta if meta is not None else ("", "")


def _key_step(merge_key: str, value: Any) -> str:
    return "k:" + json.dumps({merge_key: value}, separators=(",", ":"))


def _value_step(value: Any) -> str:
    return "v:" + json.dumps(value, separators=(",", ":"))


def to_fields_v1(fields: FieldSet) -> dict[str, Any]:
    """The FieldsV1 JSON of `fields` (nested objects, ``{}`` at each leaf)."""
    root: dict[str, Any] = {}
    for path in sorted(fields):
        node = root
        for step in path:
            node = node.setdefault(step, {})
    return root


def from_fields_v1(doc: Any) -> FieldSet:
    """The leaf paths of a FieldsV1 document (anything malformed contributes nothing)."""
    out: FieldSet = set()

    def walk(node: Any, path: Path) -> None:
        if not isinstance(node, dict):
            return
        if not node and path:
            out.add(path)
        for step, child in node.items():
            walk(child, (*path, str(step)))

    walk(doc, ())
    return out


def remove(obj: dict[str, Any], path: Path) -> None:
    """Delete the field (or list element, or set value) at `path` from `obj`, if there."""
    if path and path[-1] == ".":
        path = path[:-1]
    *parents, last = path
    node: Any = obj
    for step in parents:
        node = _child(node, step)
        if node is None:
            return
    if isinstance(node, dict) and last.startswith("f:"):
        node.pop(last[2:], None)
    elif isinstance(node, list) and last.startswith("k:"):
        wanted = json.loads(last[2:])
        node[:] = [i for i in node if not _matches(i, wanted)]
    elif isinstance(node, list) and last.startswith("v:"):
        value = json.loads(last[2:])
        node[:] = [i for i in node if i != value]


def _child(node: Any, step: str) -> Any:
    if isinstance(node, dict) and step.startswith("f:"):
        return node.get(step[2:])
    if isinstance(node, list) and step.startswith("k:"):
        wanted = json.loads(step[2:])
        return next((i for i in node if _matches(i, wanted)), None)
    return None


def _matches(item: Any, key: dict[str, Any]) -> bool:
    return isinstance(item, dict) and all(item.get(k) == v for k, v in key.items())
