"""NamespaceLifecycle: no new objects in a namespace that does not exist or is being
deleted (``kubectl delete ns`` while something still creates in it); the system
namespaces cannot be deleted."""

from __future__ import annotations

from kubelab.api import errors

from ..registry import Attributes
from .interfaces import NAMESPACES, MutationInterface, ValidationInterface

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class NamespaceLifecycle(MutationInterface, ValidationInterface):
    NAME = "NamespaceLifecycle"
    OPERATIONS = frozenset({"CREATE", "DELETE"})

    def admit(self, attrs: Attributes) -> None:
        if attrs.operation != "CREATE" or not attrs.resource.namespaced or attrs.subresource:
            return
        ns = self.lookup.find(NAMESPACES, "", attrs.namespace)
        if ns is None:
            raise errors.StatusError(
                404,
                "NotFound",
                f'namespaces "{attrs.namespace}" not found',
                {"name": attrs.namespace, "kind": "namespaces"},
            )
        if ns.get("status", {}).get("phase") == "Terminating":
            raise errors.StatusError(
                403,
                "Forbidden",
                f'{attrs.resource.plural} "{attrs.name}" is forbidden: unable to create new '
                f"content in namespace {attrs.namespace} because it is being terminated",
            )

    def validate(self, attrs: Attributes) -> None:
        if (
            attrs.operation == "DELETE"
            and attrs.resource.group_resource == NAMESPACES
            and attrs.name in SYSTEM_NAMESPACES
        ):
            raise errors.StatusError(
                403,
                "Forbidden",
                f'namespaces "{attrs.name}" is forbidden: this namespace may not be deleted',
            )
