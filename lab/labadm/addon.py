"""What the add-ons `labadm init` deploys as workloads (cluster DNS, ingress-nginx)
build alike: a Deployment whose pods go on control-plane nodes (they hold the node
image already), a ClusterRoleBinding of the add-on's ServiceAccount, and a create of
each object in order that leaves those a re-run of the phase finds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubelab.api.resources import Resource
from kubelab.client import RestClient, resource_for
from lab.labadm import tokens
from lab.labadm.layout import CONTROL_PLANE_LABEL
from lab.labadm.workflow import say

NAMESPACES = resource_for("v1", "Namespace")
SERVICE_ACCOUNTS = resource_for("v1", "ServiceAccount")
SERVICES = resource_for("v1", "Service")
DEPLOYMENTS = resource_for("apps/v1", "Deployment")
CLUSTER_ROLES = resource_for("rbac.authorization.k8s.io/v1", "ClusterRole")
CLUSTER_ROLE_BINDINGS = resource_for("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")


def on_control_plane() -> dict[str, Any]:
    """A pod spec's fields that place it on control-plane nodes."""
    return {
        "nodeSelector": {CONTROL_PLANE_LABEL: ""},
        "tolerations": [{"key": CONTROL_PLANE_LABEL, "effect": "NoSchedule"}],
    }


def role_binding(role: str, account: str, namespace: str) -> tuple[Resource, dict[str, Any]]:
    """The ClusterRoleBinding `role` of ClusterRole `role` to the ServiceAccount."""
    return (
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    )


def deployment(meta: dict[str, Any], pod_spec: dict[str, Any]) -> tuple[Resource, dict[str, Any]]:
    """A one-replica Deployment of `meta` (name, namespace, labels) running `pod_spec`,
    its pods labelled and selected by `meta`'s labels."""
    labels = meta["labels"]
    return (
        DEPLOYMENTS,
        {
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        },
    )


def create(
    client: RestClient | None, objects: Sequence[tuple[Resource, dict[str, Any]]], addon: str
) -> None:
    """Create `objects` in order, leaving those that exist (a re-run of the phase); a None
    client is a dry run."""
    for resource, body in objects:
        name = body["metadata"]["name"]
        say("addons", f'Creating {resource.kind} "{name}" of the {addon} add-on')
        if client is not None:
            tokens.create_or_keep(client, resource, body)
