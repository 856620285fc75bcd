"""RBAC's bootstrap policy reconciliation (`authz.reconcile`)."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.authz import AUTOUPDATE, reconcile

READ = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
WRITE = {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}
CUSTOM = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}


def _role(rules: list[Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "r"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"kind": "ClusterRole", "metadata": meta, "rules": rules}


def test_missing_rules_are_added_and_an_operators_kept() -> None:
    updated = reconcile(_role([CUSTOM, READ]), _role([READ, WRITE]))
    assert updated is not None and updated["rules"] == [CUSTOM, READ, WRITE]


def test_nothing_to_do_when_nothing_is_missing() -> None:
    assert reconcile(_role([READ, WRITE, CUSTOM]), _role([READ, WRITE])) is None


def test_autoupdate_false_is_left_alone() -> None:
    assert reconcile(_role([], {AUTOUPDATE: "false"}), _role([READ])) is None


def test_a_binding_gets_its_missing_subjects() -> None:
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
    mine = {"kind": "User", "name": "alice"}
    default = {"kind": "Group", "name": "system:authenticated"}
    existing = {"metadata": {"name": "b"}, "roleRef": ref, "subjects": [mine]}
    wanted = {"metadata": {"name": "b"}, "roleRef": ref, "subjects": [default]}
    updated = reconcile(existing, wanted)
    assert updated is not None and updated["subjects"] == [mine, default]


def test_an_aggregated_role_gets_its_selectors_and_labels_and_keeps_its_rules() -> None:
    """An older cluster's `view` (rules, no aggregationRule) becomes aggregated; the rules
    are left to the aggregation controller."""
    selector = {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}
    mine = {"matchLabels": {"example.com/view": "true"}}
    existing = {"metadata": {"name": "view", "labels": {"team": "a"}}, "rules": [READ]}
    wanted = {
        "metadata": {
            "name": "view",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"},
        },
        "rules": [],
        "aggregationRule": {"clusterRoleSelectors": [selector]},
    }
    updated = reconcile(existing, wanted)
    assert updated is not None
    assert updated["rules"] == [READ]
    assert updated["aggregationRule"] == {"clusterRoleSelectors": [selector]}
    assert updated["metadata"]["labels"] == {
        "team": "a",
        "rbac.authorization.k8s.io/aggregate-to-edit": "true",
    }
    existing = {**updated, "aggregationRule": {"clusterRoleSelectors": [mine, selector]}}
    assert reconcile(existing, wanted) is None
