"""Where a pod may run: tolerations, node and pod (anti-)affinity, topology spread, and
the taints they answer to.

These rules matter before scheduling: a toleration with a misspelt effect or an affinity
term without a topology key would otherwise be accepted and silently never match, and
the user would be left wondering why a pod stays Pending.
"""

from __future__ import annotations

from typing import Any

from kubelab.api.errors import (
    FieldError,
    FieldErrorType,
    duplicate,
    invalid,
    not_supported,
    required,
)
from kubelab.api.validation import formats
from kubelab.api.validation.fields import (
    Errors,
    Path,
    dicts,
    integer,
    items,
    label_key,
    label_selector,
    mapping,
    messages,
    set_operator_values,
    text,
)

TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
_WEIGHT_RANGE = "must be in the range 1-100"


def tolerations(value: Any, path: Path) -> Errors:
    errors: Errors = []
    for i, toleration in enumerate(dicts(value)):
        at = path.item(i)
        key, operator = text(toleration.get("key")), toleration.get("operator", "")
        effect, val = toleration.get("effect", ""), text(toleration.get("value"))
        if key:
            errors += label_key(key, at.child("key"))
        if not key and operator != "Exists":
            detail = (
                "operator must be Exists when `key` is empty, which means "
                '"match all values and all keys"'
            )
            errors.append(invalid(at.child("operator"), operator, detail))
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            detail = "effect must be 'NoExecute' when `tolerationSeconds` is set"
            errors.append(invalid(at.child("effect"), effect, detail))
        if operator in ("Equal", ""):
            problems = formats.is_label_value(val)
            if problems:
                errors.append(invalid(at.child("operator"), val, ";".join(problems)))
        elif operator == "Exists":
            if val:
                detail = "value must be empty when `operator` is 'Exists'"
                errors.append(invalid(at.child("operator"), val, detail))
        else:
            errors.append(not_supported(at.child("operator"), operator, ["Equal", "Exists"]))
        if effect and effect not in TAINT_EFFECTS:
            errors.append(not_supported(at.child("effect"), effect, TAINT_EFFECTS))
    return errors


def taints(value: Any, path: Path) -> Errors:
    """A node's taints: valid keys, values and effects, unique by key and effect."""
    errors: Errors = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(dicts(value)):
        at = path.item(i)
        key, effect = text(taint.get("key")), text(taint.get("effect"))
        errors += label_key(key, at.child("key"))
        problems = formats.is_label_value(text(taint.get("value")))
        if problems:
            errors.append(invalid(at.child("value"), taint.get("value"), ";".join(problems)))
        if not effect:
            errors.append(required(at.child("effect")))
        elif effect not in TAINT_EFFECTS:
            errors.append(not_supported(at.child("effect"), effect, TAINT_EFFECTS))
        if (key, effect) in seen:
            detail = "taints must be unique by key and effect pair"
            errors.append(FieldError(FieldErrorType.DUPLICATE, at, detail, taint))
        seen.add((key, effect))
    return errors


def node_selector(value: Any, path: Path) -> Errors:
    """A required node selector: at least one term, each with valid requirements."""
    terms = dicts(mapping(value).get("nodeSelectorTerms"))
    terms_path = path.child("nodeSelectorTerms")
    if not terms:
        return [required(terms_path, "must have at least one node selector term")]
    errors: Errors = []
    for i, term in enumerate(terms):
        errors += node_selector_term(term, terms_path.item(i), check_values=True)
    return errors


def node_selector_term(term: dict[str, Any], path: Path, check_values: bool) -> Errors:
    errors: Errors = []
    for i, req in enumerate(dicts(term.get("matchExpressions"))):
        at = path.child("matchExpressions").item(i)
        operator, values = req.get("operator"), items(req.get("values"))
        checked = set_operator_values(operator, values, at)
        if checked is not None:
            errors += checked
        elif operator in ("Gt", "Lt"):
            if len(values) != 1:
                detail = "must be specified single value when `operator` is 'Lt' or 'Gt'"
                errors.append(required(at.child("values"), detail))
        else:
            errors.append(invalid(at.child("operator"), operator, "not a valid selector operator"))
        errors += label_key(text(req.get("key")), at.child("key"))
        if check_values:
            for j, val in enumerate(values):
                errors += messages(
                    at.child("values").item(j), val, formats.is_label_value(text(val))
                )
    for i, req in enumerate(dicts(term.get("matchFields"))):
        at = path.child("matchFields").item(i)
        if req.get("operator") not in ("In", "NotIn"):
            errors.append(
                invalid(at.child("operator"), req.get("operator"), "not a valid selector operator")
            )
        elif len(items(req.get("values"))) != 1:
            detail = (
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
            )
            errors.append(required(at.child("values"), detail))
        if req.get("key") != "metadata.name":
            errors.append(
                invalid(at.child("key"), req.get("key"), "not a valid field selector key")
            )
    return errors


def affinity(value: Any, path: Path) -> Errors:
    spec = mapping(value)
    errors: Errors = []
    node = mapping(spec.get("nodeAffinity"))
    node_path = path.child("nodeAffinity")
    hard = "requiredDuringSchedulingIgnoredDuringExecution"
    soft = "preferredDuringSchedulingIgnoredDuringExecution"
    if node.get(hard) is not None:
        errors += node_selector(node.get(hard), node_path.child(hard))
    for i, term in enumerate(dicts(node.get(soft))):
        at = node_path.child(soft).item(i)
        errors += _weight(term, at)
        # Preferred terms may use any label value: a node with it might exist later.
        errors += node_selector_term(mapping(term.get("preference")), at.child("preference"), False)
    for kind in ("podAffinity", "podAntiAffinity"):
        pod = mapping(spec.get(kind))
        kind_path = path.child(kind)
        for i, term in enumerate(dicts(pod.get(hard))):
            errors += _pod_affinity_term(term, kind_path.child(hard).item(i))
        for i, term in enumerate(dicts(pod.get(soft))):
            at = kind_path.child(soft).item(i)
            errors += _weight(term, at)
            errors += _pod_affinity_term(
                mapping(term.get("podAffinityTerm")), at.child("podAffinityTerm")
            )
    return errors


def _weight(term: dict[str, Any], path: Path) -> Errors:
    weight = term.get("weight")
    if isinstance(weight, int) and 1 <= weight <= 100:
        return []
    return [invalid(path.child("weight"), weight, _WEIGHT_RANGE)]


def _pod_affinity_term(term: dict[str, Any], path: Path) -> Errors:
    errors = label_selector(term.get("labelSelector"), path.child("labelSelector"))
    errors += label_selector(term.get("namespaceSelector"), path.child("namespaceSelector"))
    for name in items(term.get("namespaces")):
        errors += messages(path.child("namespace"), name, formats.is_dns1123_label(text(name)))
    topology_key = text(term.get("topologyKey"))
    if not topology_key:
        errors.append(required(path.child("topologyKey"), "can not be empty"))
    return errors + label_key(topology_key, path.child("topologyKey"))


def topology_spread(value: Any, path: Path) -> Errors:
    errors: Errors = []
    constraints = dicts(value)
    for i, constraint in enumerate(constraints):
        at = path.item(i)
        max_skew = integer(constraint, "maxSkew", at.child("maxSkew"), errors)
        if max_skew is None or max_skew <= 0:
            errors.append(invalid(at.child("maxSkew"), max_skew, "must be greater than zero"))
        key, when = text(constraint.get("topologyKey")), constraint.get("whenUnsatisfiable")
        if not key:
            errors.append(required(at.child("topologyKey"), "can not be empty"))
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            supported = ["DoNotSchedule", "ScheduleAnyway"]
            errors.append(not_supported(at.child("whenUnsatisfiable"), when, supported))
        for later in constraints[i + 1 :]:
            if later.get("topologyKey") == key and later.get("whenUnsatisfiable") == when:
                pair_path = at.child("{topologyKey, whenUnsatisfiable}")
                errors.append(duplicate(pair_path, f"{{{key}, {when}}}"))
                break
        errors += label_selector(constraint.get("labelSelector"), at.child("labelSelector"))
    return errors
