"""ClusterRole aggregation against the real apiserver: the default admin, edit and view
are filled from the system:aggregate-to-* roles (view inside edit inside admin); a
labelled ClusterRole's rules join view (and so edit and admin) and leave with its label;
any ClusterRole with an aggregationRule is kept; the real kubectl sees what a viewer may
do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from controlplane.controllers.clusterroleaggregation import (
    ClusterRoleAggregationController,
    aggregated_rules,
)
from kubelab.client import resource_for
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import Cluster, Harness

KUBECTL = str(Path(sys.executable).parent / "kubectl")
CLUSTER_ROLES = resource_for("rbac.authorization.k8s.io/v1", "ClusterRole")
BINDINGS = resource_for("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
# A built-in resource view does not grant (kubectl resolves the names it asks about).
WIDGETS = {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["list"]}


def rules(cluster: Cluster, name: str) -> list[Any]:
    return list(cluster.get(CLUSTER_ROLES, "", name).get("rules") or [])


def role(name: str, rules: list[Any], labels: dict[str, str] | None = None, **more: Any) -> Any:
    meta = {"name": name, "labels": labels or {}}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": meta,
        "rules": rules,
        **more,
    }


def test_the_defaults_are_aggregated_and_a_labelled_role_joins_and_leaves(
    cluster: Cluster, harness: Harness
) -> None:
    assert rules(cluster, "view") == []  # until the controller runs, as in Kubernetes
    harness.run(ClusterRoleAggregationController(harness.ctx))
    # Each role is written as its sources change: admin settles once edit has view's.
    eventually(
        lambda: all(
            r in rules(cluster, "admin") for r in rules(cluster, "system:aggregate-to-view")
        )
    )
    view, edit, admin = (rules(cluster, n) for n in ("view", "edit", "admin"))
    for rule in rules(cluster, "system:aggregate-to-view"):
        assert rule in view and rule in edit and rule in admin
    for rule in rules(cluster, "system:aggregate-to-edit"):
        assert rule not in view and rule in edit and rule in admin
    for rule in rules(cluster, "system:aggregate-to-admin"):
        assert rule not in edit and rule in admin
    assert cluster.get(CLUSTER_ROLES, "", "view")["aggregationRule"] == {
        "clusterRoleSelectors": [
            {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}
        ]
    }

    labels = {"rbac.authorization.k8s.io/aggregate-to-view": "true"}
    cluster.create(CLUSTER_ROLES, role("storage-view", [WIDGETS], labels))
    for name in ("view", "edit", "admin"):
        eventually(lambda n=name: WIDGETS in rules(cluster, n))

    # The real kubectl: a viewer may now list storage classes, and not create them.
    cluster.create(
        BINDINGS,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "jane-view"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "view",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}],
        },
    )

    def can_i(*what: str) -> str:
        argv = [KUBECTL, "--kubeconfig", str(cluster.env.kubeconfig), "auth", "can-i", *what]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()

    eventually(lambda: can_i("list", "storageclasses", "--as=jane") == "yes")
    assert can_i("create", "storageclasses", "--as=jane") == "no"

    unlabelled = cluster.get(CLUSTER_ROLES, "", "storage-view")
    unlabelled["metadata"]["labels"] = {}
    cluster.update(CLUSTER_ROLES, unlabelled)
    for name in ("view", "edit", "admin"):
        eventually(lambda n=name: WIDGETS not in rules(cluster, n))
    eventually(lambda: can_i("list", "storageclasses", "--as=jane") == "no")


def test_any_role_with_an_aggregation_rule_is_kept(cluster: Cluster, harness: Harness) -> None:
    selector = {"matchLabels": {"example.com/aggregate-to-monitoring": "true"}}
    cluster.create(
        CLUSTER_ROLES,
        role("monitoring", [WIDGETS], aggregationRule={"clusterRoleSelectors": [selector]}),
    )
    harness.run(ClusterRoleAggregationController(harness.ctx))
    eventually(lambda: rules(cluster, "monitoring") == [])  # hand-written rules go
    scrape = {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    cluster.create(
        CLUSTER_ROLES, role("scrape", [scrape], {"example.com/aggregate-to-monitoring": "true"})
    )
    eventually(lambda: rules(cluster, "monitoring") == [scrape])
    cluster.delete(CLUSTER_ROLES, "", "scrape")
    eventually(lambda: rules(cluster, "monitoring") == [])


def test_rules_are_gathered_by_selector_then_name_once_each() -> None:
    a = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
    b = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    c = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}
    aggregated = role(
        "agg",
        [],
        {"x": "1"},
        aggregationRule={
            "clusterRoleSelectors": [{"matchLabels": {"y": "1"}}, {"matchLabels": {"x": "1"}}]
        },
    )
    roles = [
        aggregated,  # matches its own second selector, never counted
        role("zeta", [b, a], {"x": "1"}),
        role("alpha", [a], {"x": "1"}),
        role("mid", [c], {"y": "1"}),
        role("other", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], {"z": "1"}),
    ]
    assert aggregated_rules(aggregated, roles) == [c, a, b]
