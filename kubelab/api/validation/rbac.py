"""RBAC: Roles and ClusterRoles (rules) and their bindings (subjects and a role
reference that never changes).

A rule without verbs grants nothing and a binding to a misspelt kind binds nothing;
both are refused so that an administrator does not believe access was granted.
"""

from __future__ import annotations

from typing import Any

from kubelab.api.errors import invalid, not_supported, required
from kubelab.api.validation.fields import (
    Errors,
    Path,
    dicts,
    items,
    label_selector,
    mapping,
    messages,
    text,
)
from kubelab.api.validation.meta import name_is_dns_subdomain, name_is_path_segment

GROUP = "rbac.authorization.k8s.io"
SUBJECT_KINDS = ["ServiceAccount", "User", "Group"]


def _rules(obj: dict[str, Any], namespaced: bool) -> Errors:
    errors: Errors = []
    for i, rule in enumerate(dicts(obj.get("rules"))):
        at = Path("rules").item(i)
        if not items(rule.get("verbs")):
            errors.append(required(at.child("verbs"), "verbs must contain at least one value"))
        urls = items(rule.get("nonResourceURLs"))
        if urls:
            if namespaced:
                detail = "namespaced rules cannot apply to non-resource URLs"
                errors.append(invalid(at.child("nonResourceURLs"), urls, detail))
            if any(items(rule.get(f)) for f in ("apiGroups", "resources", "resourceNames")):
                detail = "rules cannot apply to both regular resources and non-resource URLs"
                errors.append(invalid(at.child("nonResourceURLs"), urls, detail))
            continue
        if not items(rule.get("apiGroups")):
            detail = "resource rules must supply at least one api group"
            errors.append(required(at.child("apiGroups"), detail))
        if not items(rule.get("resources")):
            errors.append(
                required(at.child("resources"), "resource rules must supply at least one resource")
            )
    return errors


def validate_role(obj: dict[str, Any]) -> Errors:
    return _rules(obj, namespaced=True)


def validate_cluster_role(obj: dict[str, Any]) -> Errors:
    errors = _rules(obj, namespaced=False)
    aggregation = obj.get("aggregationRule")
    if aggregation is not None:
        selectors = dicts(mapping(aggregation).get("clusterRoleSelectors"))
        at = Path("aggregationRule")
        if not selectors:
            detail = "at least one clusterRoleSelector required if aggregationRule is non-nil"
            errors.append(required(at, detail))
        for i, selector in enumerate(selectors):
            errors += label_selector(selector, at.child("clusterRoleSelectors").item(i))
    return errors


def validate_role_binding(obj: dict[str, Any]) -> Errors:
    return _binding(obj, ["Role", "ClusterRole"], namespaced=True)


def validate_cluster_role_binding(obj: dict[str, Any]) -> Errors:
    return _binding(obj, ["ClusterRole"], namespaced=False)


def _binding(obj: dict[str, Any], kinds: list[str], namespaced: bool) -> Errors:
    ref = mapping(obj.get("roleRef"))
    at = Path("roleRef")
    errors: Errors = []
    if ref.get("apiGroup") != GROUP:
        errors.append(not_supported(at.child("apiGroup"), ref.get("apiGroup", ""), [GROUP]))
    if ref.get("kind") not in kinds:
        errors.append(not_supported(at.child("kind"), ref.get("kind", ""), kinds))
    name = text(ref.get("name"))
    if not name:
        errors.append(required(at.child("name")))
    else:
        errors += messages(at.child("name"), name, name_is_path_segment(name, False))
    for i, subject in enumerate(dicts(obj.get("subjects"))):
        errors += _subject(subject, namespaced, Path("subjects").item(i))
    return errors


def _subject(subject: dict[str, Any], namespaced: bool, path: Path) -> Errors:
    errors: Errors = []
    name, kind, group = text(subject.get("name")), subject.get("kind"), subject.get("apiGroup", "")
    if not name:
        errors.append(required(path.child("name")))
    if kind == "ServiceAccount":
        if name:
            errors += messages(path.child("name"), name, name_is_dns_subdomain(name, False))
        if group:
            errors.append(not_supported(path.child("apiGroup"), group, [""]))
        if not namespaced and not text(subject.get("namespace")):
            errors.append(required(path.child("namespace")))
    elif kind in ("User", "Group"):
        if group != GROUP:
            errors.append(not_supported(path.child("apiGroup"), group, [GROUP]))
    else:
        errors.append(not_supported(path.child("kind"), kind, SUBJECT_KINDS))
    return errors


def validate_binding_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    """A binding's role is its identity: to grant another role, make another binding."""
    if new.get("roleRef") != old.get("roleRef"):
        return [invalid(Path("roleRef"), new.get("roleRef"), "cannot change roleRef")]
    return []
