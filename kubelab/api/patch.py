"""The PATCH verb's three body formats, picked by the request's Content-Type.

- `application/merge-patch+json` (RFC 7386): objects merge key by key, `null` deletes a key,
  and any other value, lists included, replaces what was there.
- `application/json-patch+json` (RFC 6902): a list of add/remove/replace/move/copy/test
  operations on JSON pointers. The `jsonpatch` library applies them; this module only turns
  its exceptions into `PatchError`s that name the failing operation.
- `application/strategic-merge-patch+json`: Kubernetes' own format and kubectl's default
  (`kubectl apply`, `patch`, `edit`, `label`, `annotate`, `rollout restart`, `cordon`).
  It is a merge patch, except that some lists are merged element by element instead of
  replaced: `containers` are matched by `name`, a container's `ports` by `containerPort`,
  `finalizers` are a set. Which lists, and by which key, is not in the JSON: Kubernetes reads
  it from the `patchStrategy`/`patchMergeKey` tags of its Go types. Here it comes from one
  table, `_PATCH_META`, keyed by kind and field path and built from per-struct pieces
  (`_POD_SPEC`, `_CONTAINER`, ...) mounted where the Go types embed them: a pod spec under
  `spec` of a Pod, `spec.template.spec` of a Deployment, ReplicaSet, DaemonSet, StatefulSet,
  Job or ReplicationController, and `spec.jobTemplate.spec.template.spec` of a CronJob.

Strategic merge patch directives:

- `$patch: replace` in a map: the map replaces the old one instead of merging into it. As a
  list element (`{"$patch": "replace"}`): the list's other elements replace the old list.
- `$patch: delete` in a map removes that map (like `null`, as the design doc has it). As an
  element of a merged list, `{"name": "x", "$patch": "delete"}` removes the elements whose
  merge key is "x".
- `$patch: merge` states the default and changes nothing; on a list that has no merge key it
  is an error, since such a list can only be replaced.
- `$retainKeys: [...]` in a map clears the old map's keys that are not listed, then merges.
  kubectl sends it for "union" structs (a Deployment's `strategy`, a pod volume's source)
  so that switching `rollingUpdate` to `Recreate`, or `emptyDir` to `configMap`, does not
  leave the old member behind. Every key the patch sets must be listed.
- `$deleteFromPrimitiveList/<list>: [...]` removes values from a merged list of primitives
  (`finalizers`), where `$patch: delete` has no merge key to name them by.
- `$setElementOrder/<list>: [...]` gives the order of the merged list. A merged list's patch
  holds only the elements that changed, matched by key, so it cannot say where they go, and
  order matters: an env var may refer to the ones before it (`$(VAR)`), and init containers
  run in order. So `kubectl apply` sends, on every apply, the keys of all the elements its
  configuration has, in order. Elements the server has that the directive does not list
  (added by someone else, e.g. an injected sidecar) are kept and slotted in as Kubernetes
  does: one goes before a listed element only if both were in the old list and it came
  first, so new elements go ahead of them. Without the directive the patch list's own order
  is used the same way.

Strategic merge patch is refused, with `UnsupportedPatchError` (415, as Kubernetes answers),
for a kind missing from the table, i.e. custom resources: nothing says which of their lists
are keyed, and guessing would silently merge lists meant to be replaced or the reverse. A
clear refusal lets the client use a merge patch or JSON patch instead; kubectl does so on
its own for `apply`, and `kubectl patch --type=merge` does it for a patch.

Where Kubernetes' code takes a patch value verbatim (a key missing from the object, a list
that is replaced), directives inside it are processed here instead of being stored, and a
`null` in new content is dropped, having nothing to delete. Every function returns a new
object and never changes its arguments.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import jsonpatch

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
# Server-side apply: named so that the apiserver can recognise and refuse it.
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES: tuple[str, ...] = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)


class PatchError(Exception):
    """A patch that cannot be applied; the message says what is wrong and what to do.

    `code` is the HTTP status Kubernetes answers with: 400 for a body that is not a
    well-formed patch, 422 for a well-formed JSON patch whose operations fail on this object
    (a `test` that does not hold, a path that is not there).
    """

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code


class UnsupportedPatchError(PatchError):
    """A patch type this object cannot take (HTTP 415 Unsupported Media Type)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 415)


# ---------------------------------------------------------------------------------------
# Patch metadata: which lists merge, and by which key, from the Kubernetes Go types' tags.

_MERGE = "merge"
_REPLACE = "replace"
_DELETE = "delete"
_RETAIN_KEYS = "retainKeys"
_MERGE_RETAIN_KEYS = "merge,retainKeys"

_Path = tuple[str, ...]
# field path -> (patch strategy, merge key); the key is "" for a set of primitives.
_Fields = dict[_Path, tuple[str, str]]


def _at(prefix: _Path, fields: _Fields) -> _Fields:
    """`fields` of a shared struct, mounted where a kind embeds it."""
    return {prefix + path: meta for path, meta in fields.items()}


def _object(*parts: _Fields) -> _Fields:
    """A kind's fields: its `metadata`, plus the given parts."""
    fields = _at(("metadata",), _OBJECT_META)
    for part in parts:
        fields.update(part)
    return fields


# meta/v1 ObjectMeta
_OBJECT_META: _Fields = {
    ("finalizers",): (_MERGE, ""),
    ("ownerReferences",): (_MERGE, "uid"),
}
# core/v1 Container (EphemeralContainer carries the same tags)
_CONTAINER: _Fields = {
    ("ports",): (_MERGE, "containerPort"),
    ("env",): (_MERGE, "name"),
    ("volumeMounts",): (_MERGE, "mountPath"),
    ("volumeDevices",): (_MERGE, "devicePath"),
}
# core/v1 PodSpec; `tolerations`, `readinessGates`, a container's `envFrom` and a node's
# `taints` have no tags, so they are replaced as a whole.
_POD_SPEC: _Fields = {
    ("volumes",): (_MERGE_RETAIN_KEYS, "name"),
    ("initContainers",): (_MERGE, "name"),
    ("containers",): (_MERGE, "name"),
    ("ephemeralContainers",): (_MERGE, "name"),
    ("imagePullSecrets",): (_MERGE, "name"),
    ("hostAliases",): (_MERGE, "ip"),
    ("topologySpreadConstraints",): (_MERGE, "topologyKey"),
    ("schedulingGates",): (_MERGE, "name"),
    ("resourceClaims",): (_MERGE_RETAIN_KEYS, "name"),
    **_at(("initContainers",), _CONTAINER),
    **_at(("containers",), _CONTAINER),
    **_at(("ephemeralContainers",), _CONTAINER),
}
# The `conditions` of a status, merged by type (pods, nodes, workloads, namespaces, ...).
_CONDITIONS: _Fields = {("conditions",): (_MERGE, "type")}
_STATUS_CONDITIONS = _at(("status",), _CONDITIONS)
_POD_STATUS: _Fields = {
    **_CONDITIONS,
    ("podIPs",): (_MERGE, "ip"),
    ("hostIPs",): (_MERGE, "ip"),
    ("resourceClaimStatuses",): (_MERGE_RETAIN_KEYS, "name"),
}
# core/v1 PodTemplateSpec, the `template` of every workload.
_POD_TEMPLATE: _Fields = {**_at(("metadata",), _OBJECT_META), **_at(("spec",), _POD_SPEC)}
_WORKLOAD = _object(_at(("spec", "template"), _POD_TEMPLATE), _STATUS_CONDITIONS)
# batch/v1 JobSpec, also inside a CronJob's `jobTemplate`.
_JOB_SPEC = _at(("template",), _POD_TEMPLATE)

# kind -> field path -> (strategy, merge key). A kind with no tagged lists of its own is
# still listed: being here is what allows strategic merge patch on it at all.
_PATCH_META: Mapping[str, Mapping[_Path, tuple[str, str]]] = {
    # core/v1
    "Pod": _object(_at(("spec",), _POD_SPEC), _at(("status",), _POD_STATUS)),
    "Node": _object(
        {("spec", "podCIDRs"): (_MERGE, "")},
        _at(("status",), {**_CONDITIONS, ("addresses",): (_MERGE, "type")}),
    ),
    "Service": _object({("spec", "ports"): (_MERGE, "port")}, _STATUS_CONDITIONS),
    "Namespace": _object(_STATUS_CONDITIONS),
    "PersistentVolumeClaim": _object(_STATUS_CONDITIONS),
    "ReplicationController": _WORKLOAD,
    "ServiceAccount": _object({("secrets",): (_MERGE, "name")}),
    "ConfigMap": _object(),
    "Secret": _object(),
    "Endpoints": _object(),
    "Event": _object(),
    "LimitRange": _object(),
    "ResourceQuota": _object(),
    "PersistentVolume": _object(),
    # apps/v1
    "Deployment": _object(_WORKLOAD, {("spec", "strategy"): (_RETAIN_KEYS, "")}),
    "ReplicaSet": _WORKLOAD,
    "DaemonSet": _WORKLOAD,
    "StatefulSet": _WORKLOAD,
    "ControllerRevision": _object(),
    # batch/v1
    "Job": _object(_at(("spec",), _JOB_SPEC), _STATUS_CONDITIONS),
    "CronJob": _object(
        _at(("spec", "jobTemplate"), _object(_at(("spec",), _JOB_SPEC))),
    ),
    # autoscaling/v1 Scale, the body of a /scale subresource
    "Scale": _object(),
    # coordination, discovery, policy, rbac, certificates (a CSR's conditions have no tags)
    "Lease": _object(),
    "EndpointSlice": _object(),
    # policy/v1: a budget's status conditions merge by type
    "PodDisruptionBudget": _object(_STATUS_CONDITIONS),
    "Role": _object(),
    "RoleBinding": _object(),
    "ClusterRole": _object(),
    "ClusterRoleBinding": _object(),
    "CertificateSigningRequest": _object(),
    # networking, scheduling, autoscaling (v2, the stored form), storage, node,
    # admissionregistration, apiregistration
    "Ingress": _object(),
    "IngressClass": _object(),
    "NetworkPolicy": _object(),
    "PriorityClass": _object(),
    "HorizontalPodAutoscaler": _object(_STATUS_CONDITIONS),
    "StorageClass": _object(),
    "CSIDriver": _object(),
    "VolumeAttachment": _object(),
    "RuntimeClass": _object(),
    "MutatingWebhookConfiguration": _object({("webhooks",): (_MERGE, "name")}),
    "ValidatingWebhookConfiguration": _object({("webhooks",): (_MERGE, "name")}),
    "APIService": _object(_STATUS_CONDITIONS),
    # apiextensions/v1: a CRD's versions are replaced whole (no merge key)
    "CustomResourceDefinition": _object(),
}


def _fields_of(kind: str) -> Mapping[_Path, tuple[str, str]]:
    try:
        return _PATCH_META[kind]
    except KeyError:
        raise UnsupportedPatchError(
            f"strategic merge patch is not supported for kind {kind!r}: which of its lists "
            f"merge by key is only known for built-in kinds; send the patch as "
            f"{MERGE_PATCH} (kubectl patch --type=merge) or {JSON_PATCH} (--type=json)"
        ) from None


def patch_meta(kind: str, path: tuple[str, ...]) -> tuple[str, str] | None:
    """(patch strategy, merge key) of the field at `path` of a `kind` object, e.g.
    ("merge", "name") for ("spec", "containers") of a Pod, or None for a field without
    tags. Paths name fields only: a list element's fields follow the list's name, as in
    ("spec", "containers", "env"). Raises UnsupportedPatchError for a kind that strategic
    merge patch does not cover."""
    return _fields_of(kind).get(path)


# ---------------------------------------------------------------------------------------
# Entry point


def apply_patch(
    kind: str, original: dict[str, Any], patch_bytes: bytes, content_type: str
) -> dict[str, Any]:
    """Returns the patched object (a new dict; never mutate `original`). Raises PatchError
    for an unparsable / malformed / failing patch (apiserver maps to 400 BadRequest or 422),
    and UnsupportedPatchError (415) for a content type that is not one of PATCH_TYPES or a
    strategic merge patch on a kind it does not cover."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == APPLY_PATCH:
        raise UnsupportedPatchError(
            f"server-side apply ({APPLY_PATCH}) is not supported; use client-side "
            f"kubectl apply (without --server-side)"
        )
    if media_type not in PATCH_TYPES:
        raise UnsupportedPatchError(
            f"unsupported patch content type {content_type!r}; use one of " + ", ".join(PATCH_TYPES)
        )
    if media_type == STRATEGIC_MERGE_PATCH:
        _fields_of(kind)  # refused before the body is even read, as Kubernetes does
    try:
        patch = _parse(patch_bytes)
        if media_type == JSON_PATCH:
            return json_patch(original, patch)
        if not isinstance(patch, dict):
            raise PatchError(
                f"a {media_type} body must be a JSON object holding the fields to change, "
                f'e.g. {{"spec": {{"replicas": 3}}}}; got {_show(patch)}'
            )
        if media_type == MERGE_PATCH:
            return _merge_object(original, patch)
        return strategic_merge_patch(kind, original, patch)
    except RecursionError:
        raise PatchError("the patch or the object is nested too deeply to apply") from None


def _parse(body: bytes) -> Any:
    """JSON as Kubernetes reads it: NaN and Infinity are not JSON, so they are refused."""
    try:
        return json.loads(body, parse_constant=_refuse_constant)
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError both are
        raise PatchError(f"the patch body is not valid JSON: {error}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _show(value: Any, limit: int = 120) -> str:
    """`value` as JSON, cut short: error messages quote patches, which can be large."""
    text = json.dumps(value, sort_keys=True, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386)


def merge_patch(original: dict[str, Any], patch: Any) -> Any:
    """RFC 7386: a JSON object patch merges into `original` key by key (`null` deletes,
    objects recurse, anything else replaces); any other patch value replaces the document."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    return _merge_object(original, patch)


def _merge_object(original: Any, patch: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(original) if isinstance(original, dict) else {}
    _merge_into(result, patch)
    return result


def _merge_into(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            child = current if isinstance(current, dict) else {}
            _merge_into(child, value)
            target[key] = child
        else:
            target[key] = copy.deepcopy(value)


# ---------------------------------------------------------------------------------------
# JSON patch (RFC 6902)


def json_patch(original: dict[str, Any], operations: Any) -> dict[str, Any]:
    """Applies RFC 6902 `operations` to a copy of `original`. A malformed operation is a
    400; one that fails on this object (a `test` that does not hold, a missing path) is a
    422, as in Kubernetes. Operations are checked, then applied one by one so that an error
    can say which one failed."""
    if not isinstance(operations, list):
        raise PatchError(
            "a JSON patch must be a JSON array of operations, e.g. "
            '[{"op": "replace", "path": "/spec/replicas", "value": 3}]; got ' + _show(operations)
        )
    steps: list[jsonpatch.JsonPatch] = []
    for index, operation in enumerate(operations):
        try:
            steps.append(jsonpatch.JsonPatch([operation]))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
            raise PatchError(
                f"JSON patch operation {index} is malformed ({_reason(error)}): "
                f"{_show(operation)}; an operation is an object with an op (add, remove, "
                f"replace, move, copy or test) and a path that is a JSON pointer like /a/b"
            ) from None
    document: Any = copy.deepcopy(original)
    for index, (operation, step) in enumerate(zip(operations, steps, strict=True)):
        where = f"JSON patch operation {index} ({operation['op']} {operation['path']})"
        try:
            document = step.apply(document, in_place=True)
        except jsonpatch.InvalidJsonPatch as error:
            raise PatchError(f"{where} is malformed: {_reason(error)}") from None
        except jsonpatch.JsonPatchTestFailed:
            raise PatchError(
                f"{where} failed: the object does not hold {_show(operation.get('value'))} "
                f"there; re-read the object and build the patch against its current state",
                422,
            ) from None
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
            raise PatchError(f"{where} failed: {_reason(error)}", 422) from None
    if not isinstance(document, dict):
        raise PatchError(
            f"the JSON patch turned the object into {_show(document)}; "
            "the result of a patch must still be an object",
            422,
        )
    return document


def _reason(error: Exception) -> str:
    """The library's explanation, cut short: some quote the whole document."""
    text = str(error)
    return text if len(text) <= 200 else text[:197] + "..."


# ---------------------------------------------------------------------------------------
# Strategic merge patch

_PATCH = "$patch"
_RETAIN = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_FROM = "$deleteFromPrimitiveList/"

# The identity of a list element: its merge key's value, or its own value in a set of
# primitives; None for an element that has no merge key.
_KeyOf = Callable[[Any], Hashable | None]


def strategic_merge_patch(
    kind: str, original: dict[str, Any], patch: dict[str, Any]
) -> dict[str, Any]:
    """Applies a strategic merge `patch` to a copy of `original`, a `kind` object; see the
    module docstring for the format. Raises UnsupportedPatchError for a kind the metadata
    table lacks, PatchError for a malformed patch."""
    fields = _fields_of(kind)
    if not isinstance(patch, dict):
        raise PatchError(f"a strategic merge patch must be a JSON object; got {_show(patch)}")
    directive = _map_directive(patch, ())
    if directive == _DELETE:
        raise PatchError(
            "$patch: delete at the top of a patch would delete the whole object; "
            "use the DELETE verb for that"
        )
    base = copy.deepcopy(original) if directive == _MERGE else {}
    return _StrategicMerge(fields).merge_map(base, patch, ())


class _StrategicMerge:
    """Merges one patch into an object of one kind, whose field metadata it holds."""

    def __init__(self, fields: Mapping[_Path, tuple[str, str]]) -> None:
        self._fields = fields

    def merge_map(
        self, target: dict[str, Any], patch: dict[str, Any], path: _Path
    ) -> dict[str, Any]:
        """Merges `patch` into `target`, which the merge owns (a copy), and returns it. The
        caller has acted on the map's own `$patch`; the other directives are handled here."""
        values: dict[str, Any] = {}
        orders: dict[str, list[Any]] = {}
        removals: dict[str, list[Any]] = {}
        retain: list[str] | None = None
        for key, value in patch.items():
            if not key.startswith("$"):
                values[key] = value
            elif key == _RETAIN:
                retain = _string_list(value, path, key)
            elif key.startswith(_SET_ORDER):
                orders[_directive_field(key, _SET_ORDER, path)] = _list(value, path, key)
            elif key.startswith(_DELETE_FROM):
                removals[_directive_field(key, _DELETE_FROM, path)] = _list(value, path, key)
            elif key != _PATCH:
                raise PatchError(
                    f"{_where(path)}: unknown directive {key!r}; strategic merge patch has "
                    f"$patch, $retainKeys, {_SET_ORDER}<list> and {_DELETE_FROM}<list>"
                )
        if retain is not None:
            _retain(target, values, retain, path)
        for key in {**values, **orders, **removals}:
            if key not in orders and key not in removals:
                self._merge_field(target, key, values[key], (*path, key))
            elif key in values and values[key] is None:
                target.pop(key, None)  # deleting the list makes its directives moot
            else:
                self._merge_list_field(
                    target, key, values.get(key), orders.get(key), removals.get(key), path
                )
        return target

    def _merge_field(self, target: dict[str, Any], key: str, value: Any, path: _Path) -> None:
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            directive = _map_directive(value, path)
            current = target.get(key)
            if directive == _DELETE:
                target.pop(key, None)
            else:
                base = current if directive == _MERGE and isinstance(current, dict) else {}
                target[key] = self.merge_map(base, value, path)
        elif isinstance(value, list):
            target[key] = self._merge_list(target.get(key), value, None, None, path)
        else:
            target[key] = value

    def _merge_list_field(
        self,
        target: dict[str, Any],
        key: str,
        value: Any,
        order: list[Any] | None,
        removal: list[Any] | None,
        parent: _Path,
    ) -> None:
        """A list that `$setElementOrder/` or `$deleteFromPrimitiveList/` names. They may
        come without the list itself (`value` None: only reordering, or only deleting)."""
        path = (*parent, key)
        if value is not None and not isinstance(value, list):
            raise PatchError(
                f"{_where(path)} must be a list, as the patch's {_SET_ORDER}{key} or "
                f"{_DELETE_FROM}{key} says; got {_show(value)}"
            )
        merged = self._merge_list(target.get(key), value or [], order, removal, path)
        if value is not None or key in target:
            target[key] = merged

    def _merge_list(
        self,
        current: Any,
        patch: list[Any],
        order: list[Any] | None,
        removal: list[Any] | None,
        path: _Path,
    ) -> list[Any]:
        strategy, merge_key = self._fields.get(path, ("", ""))
        merging = _MERGE in strategy.split(",")
        if not merging and (order is not None or removal is not None):
            raise PatchError(
                f"{_where(path)} is replaced as a whole, not merged, so {_SET_ORDER}"
                f"{path[-1]} and {_DELETE_FROM}{path[-1]} do not apply to it; send the "
                f"whole new list instead"
            )
        if removal is not None and merge_key:
            raise PatchError(
                f"{_where(path)} is a list of objects merged by {merge_key!r}: remove an "
                f'element with {{"{merge_key}": ..., "$patch": "delete"}} in the list, '
                f"not with {_DELETE_FROM}{path[-1]}"
            )
        items, deleted, replace = _split_directives(patch, merging, merge_key, path)
        if not merging:
            return [self._fresh(item, path) for item in items]

        key_of = _merge_key_of(merge_key) if merge_key else _canonical
        result = list(current) if isinstance(current, list) and not replace else []
        positions: dict[Hashable, int] = {}
        for index, element in enumerate(result):
            identity = key_of(element)
            if identity is not None:
                positions.setdefault(identity, index)
        for value in removal or ():
            _require_primitive(value, path)
        gone = {_canonical(value) for value in removal or ()} | set(deleted)
        if gone:
            result = [element for element in result if key_of(element) not in gone]
        if merge_key:
            for item in items:
                if not isinstance(item, dict) or merge_key not in item:
                    raise PatchError(
                        f"{_where(path)} merges its elements by {merge_key!r}, so every "
                        f"element of the patch list needs that key; got {_show(item)}"
                    )
                match = next((el for el in result if key_of(el) == key_of(item)), None)
                if match is None:
                    result.append(self.merge_map({}, item, path))
                else:
                    self.merge_map(match, item, path)
        else:
            for item in items:
                _require_primitive(item, path)
            result = _unique(result + items)
        if order is not None:
            _check_order(order, items, key_of, merge_key, path)
        return _ordered(result, items if order is None else order, positions, key_of)

    def _fresh(self, value: Any, path: _Path) -> Any:
        """A patch value that has nothing to merge into, with its directives processed."""
        if isinstance(value, dict):
            return self.merge_map({}, value, path)
        if isinstance(value, list):
            return self._merge_list(None, value, None, None, path)
        return value


def _map_directive(patch: dict[str, Any], path: _Path) -> str:
    """The `$patch` of a map: merge (the default), replace or delete."""
    directive = patch.get(_PATCH, _MERGE)
    for known in (_MERGE, _REPLACE, _DELETE):
        if directive == known:
            return known
    raise PatchError(
        f"{_where(path)}: $patch must be replace, delete or merge; got {_show(directive)}"
    )


def _split_directives(
    patch: list[Any], merging: bool, merge_key: str, path: _Path
) -> tuple[list[Any], list[Hashable], bool]:
    """Separates a patch list's directive elements (those with `$patch`) from its items:
    returns the items, the merge-key identities to delete, and whether to replace."""
    items: list[Any] = []
    deleted: list[Hashable] = []
    replace = False
    for element in patch:
        if not (isinstance(element, dict) and _PATCH in element):
            items.append(element)
            continue
        directive = element[_PATCH]
        if directive == _REPLACE:
            replace = True
        elif directive == _DELETE:
            if not merge_key:
                hint = f"use {_DELETE_FROM}{path[-1]}" if merging else "send the new list"
                raise PatchError(
                    f'{_where(path)}: {{"$patch": "delete"}} removes an element by its merge '
                    f"key, and this list has none; {hint}"
                )
            if merge_key not in element:
                raise PatchError(
                    f'{_where(path)}: a {{"$patch": "delete"}} element must name the element '
                    f"to delete by {merge_key!r}; got {_show(element)}"
                )
            deleted.append(_canonical(element[merge_key]))
        elif directive != _MERGE:
            raise PatchError(
                f"{_where(path)}: $patch must be replace, delete or merge; got {_show(directive)}"
            )
        elif not merging:
            raise PatchError(
                f'{_where(path)} has no merge key, so {{"$patch": "merge"}} cannot apply: '
                f"the list is replaced as a whole"
            )
    return items, deleted, replace


def _retain(target: dict[str, Any], values: dict[str, Any], keep: list[str], path: _Path) -> None:
    """`$retainKeys`: drops the keys of `target` not in `keep`, once the patch is checked
    to set no key outside it (a null only deletes, so it may)."""
    allowed = set(keep)
    stray = sorted(key for key, value in values.items() if value is not None and key not in allowed)
    if stray:
        raise PatchError(
            f"{_where(path)}: $retainKeys {_show(keep)} must list every field the patch "
            f"sets, and it lacks {_show(stray)}"
        )
    for key in [key for key in target if key not in allowed]:
        del target[key]


def _check_order(
    order: list[Any], items: list[Any], key_of: _KeyOf, merge_key: str, path: _Path
) -> None:
    """`$setElementOrder/` must list every element of the patch list, in the same order."""
    directive = _SET_ORDER + path[-1]
    rank: dict[Hashable, int] = {}
    for index, entry in enumerate(order):
        if merge_key and not (isinstance(entry, dict) and merge_key in entry):
            raise PatchError(
                f"{_where(path)}: each entry of {directive} must be an object with the merge "
                f"key {merge_key!r}, like {{{json.dumps(merge_key)}: ...}}; got {_show(entry)}"
            )
        if not merge_key:
            _require_primitive(entry, path)
        rank.setdefault(key_of(entry), index)
    last = -1
    for item in items:
        position = rank.get(key_of(item))
        if position is None:
            raise PatchError(
                f"{_where(path)}: {directive} must list every element of the patch list, "
                f"and it lacks {_show(item)}"
            )
        if position <= last:
            raise PatchError(
                f"{_where(path)}: the patch list and {directive} order the elements "
                f"differently; list them in the same order"
            )
        last = position


def _ordered(
    elements: list[Any], wanted: list[Any], positions: dict[Hashable, int], key_of: _KeyOf
) -> list[Any]:
    """`elements`, those named in `wanted` in its order, the others (elements only the server
    has) slotted in among them as Kubernetes does: a server-only element goes before a named
    one only if both were in the old list and it came first. So a new element lands before
    the server-only ones that follow, e.g. a container added by a bare `kubectl patch`
    becomes the first one, while the named elements keep the patch's order."""
    rank: dict[Hashable, int] = {}
    for index, entry in enumerate(wanted):
        rank.setdefault(key_of(entry), index)
    named = sorted(
        (element for element in elements if key_of(element) in rank),
        key=lambda element: rank[key_of(element)],
    )
    others = [element for element in elements if key_of(element) not in rank]
    result: list[Any] = []
    i = j = 0
    while i < len(named) and j < len(others):
        was = positions.get(key_of(named[i]))
        other_was = positions.get(key_of(others[j]))
        if was is not None and other_was is not None and other_was < was:
            result.append(others[j])
            j += 1
        else:
            result.append(named[i])
            i += 1
    return result + named[i:] + others[j:]


def _canonical(value: Any) -> Hashable:
    """A hashable identity for a JSON value that keeps JSON's distinctions (true is not 1,
    "1" is not 1) while 1 and 1.0 stay the same number."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    return ("json", json.dumps(value, sort_keys=True))


def _merge_key_of(merge_key: str) -> _KeyOf:
    def key_of(element: Any) -> Hashable | None:
        if isinstance(element, dict) and merge_key in element:
            return _canonical(element[merge_key])
        return None

    return key_of


def _unique(values: list[Any]) -> list[Any]:
    """A merged list of primitives is a set: the first of equal values stays."""
    seen: set[Hashable] = set()
    unique = []
    for value in values:
        identity = _canonical(value)
        if identity not in seen:
            seen.add(identity)
            unique.append(value)
    return unique


def _require_primitive(value: Any, path: _Path) -> None:
    if value is None or isinstance(value, dict | list):
        raise PatchError(
            f"{_where(path)} is a set of strings or numbers; got the element {_show(value)}"
        )


def _list(value: Any, path: _Path, directive: str) -> list[Any]:
    if not isinstance(value, list):
        raise PatchError(f"{_where(path)}: {directive} must be a list; got {_show(value)}")
    return value


def _string_list(value: Any, path: _Path, directive: str) -> list[str]:
    values = _list(value, path, directive)
    if not all(isinstance(item, str) for item in values):
        raise PatchError(
            f"{_where(path)}: {directive} must be a list of field names; got {_show(value)}"
        )
    return values


def _directive_field(key: str, prefix: str, path: _Path) -> str:
    field = key[len(prefix) :]
    if not field:
        raise PatchError(f"{_where(path)}: {key!r} must name a list, as in {prefix}containers")
    return field


def _where(path: _Path) -> str:
    return ".".join(path) if path else "the object"
