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

_MISSING = object()
"""`value_at`'s answer for an absent field: equal only to itself."""


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


def value_at(obj: dict[str, Any], path: Path) -> Any:
    """The value at `path` in `obj` (a list element itself for a trailing ``.``, the
    value for a ``v:`` step), or `_MISSING` when absent."""
    node: Any = obj
    for step in path:
        if step == ".":
            return node
        if step.startswith("v:"):
            value = json.loads(step[2:])
            return value if isinstance(node, list) and value in node else _MISSING
        node = _child(node, step)
        if node is None:
            return _MISSING
    return node


def changes(kind: str, old: dict[str, Any], new: dict[str, Any]) -> tuple[FieldSet, FieldSet]:
    """What a write changed: the fields `new` sets with a value other than `old`'s, and
    the fields `old` set that `new` no longer does."""
    before, after = field_set(kind, old), field_set(kind, new)
    changed = {
        p
        for p in after
        if p not in before or (p[-1] != "." and value_at(old, p) != value_at(new, p))
    }
    return changed, before - after


def entry(manager: str, operation: str, api_version: str, now: str, fields: FieldSet) -> Any:
    """A ``metadata.managedFields`` entry."""
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(fields),
    }


def owned(entries: Any) -> list[tuple[dict[str, Any], FieldSet]]:
    """Each well-formed entry of ``metadata.managedFields`` with its fields."""
    out = []
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, dict) and isinstance(e.get("manager"), str):
            out.append((e, from_fields_v1(e.get("fieldsV1"))))
    return out


def without(entries: Any, taken: FieldSet, now: str, replacing: Any = None) -> list[Any]:
    """The entries with the fields in `taken` no longer theirs; an entry left with no
    field goes. `replacing` (an entry its owner is rewriting) is left out."""
    out = []
    for e, fields in owned(entries):
        if e is replacing:
            continue
        left = fields - taken
        if left == fields:
            out.append(e)
        elif left:
            out.append({**e, "time": now, "fieldsV1": to_fields_v1(left)})
    return out


def find(entries: Any, manager: str, operation: str) -> tuple[Any, FieldSet]:
    """`manager`'s entry for `operation` and its fields (None and nothing if none)."""
    for e, fields in owned(entries):
        if e["manager"] == manager and e.get("operation") == operation:
            return e, fields
    return None, set()


def record_update(
    entries: Any, manager: str, api_version: str, now: str, changed: FieldSet, removed: FieldSet
) -> list[Any]:
    """The entries after `manager` changed (or removed) fields by an update or patch: it
    owns what it changed, and nobody else owns those fields any more."""
    mine, fields = find(entries, manager, "Update")
    out = without(entries, changed | removed, now, replacing=mine)
    fields = (fields - removed) | changed
    if fields:
        out.append(entry(manager, "Update", api_version, now, fields))
    return out


def conflicts(
    entries: Any, manager: str, applied: FieldSet, config: dict[str, Any], live: dict[str, Any]
) -> dict[str, list[Path]]:
    """The fields `manager`'s applied configuration would change that other managers own:
    by manager, the paths whose applied value differs from the live one."""
    out: dict[str, list[Path]] = {}
    for e, fields in owned(entries):
        who = e["manager"]
        if who == manager and e.get("operation") == "Apply":
            continue
        clashing = sorted(
            p for p in fields & applied if p[-1] != "." and value_at(config, p) != value_at(live, p)
        )
        if clashing:
            out.setdefault(who, []).extend(clashing)
    return out


def render(path: Path) -> str:
    """A path as Kubernetes prints it: .spec.template.spec.containers[name="nginx"].image"""
    out = []
    for step in path:
        if step.startswith("f:"):
            out.append("." + step[2:])
        elif step.startswith("k:"):
            key = json.loads(step[2:])
            out.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in key.items()) + "]")
        elif step.startswith("v:"):
            out.append(f"[{step[2:]}]")
    return "".join(out)
