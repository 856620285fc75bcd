"""DefaultStorageClass: a claim created without `storageClassName` gets the cluster's
default class (the StorageClass annotated `storageclass.kubernetes.io/is-default-class:
"true"`; of several, the newest, as Kubernetes picks since 1.26), so that a plain
`kubectl apply` of a claim is provisioned by the lab's local-path provisioner as on kind
or k3s. A claim that says `storageClassName: ""` asks for no class and keeps it; with
no default class the claim is left without one."""

from __future__ import annotations

from kubelab.api import claims

from ..registry import Attributes
from .interfaces import MutationInterface, Object

CLAIMS = "persistentvolumeclaims"
STORAGE_CLASSES = "storageclasses.storage.k8s.io"


class DefaultStorageClass(MutationInterface):
    NAME = "DefaultStorageClass"
    OPERATIONS = frozenset({"CREATE"})

    def admit(self, attrs: Attributes) -> None:
        if attrs.subresource or attrs.resource.group_resource != CLAIMS or attrs.object is None:
            return
        spec = attrs.object.setdefault("spec", {})
        if spec.get("storageClassName") is not None:
            return
        default = self._default_class()
        if default is not None:
            spec["storageClassName"] = default["metadata"]["name"]

    def _default_class(self) -> Object | None:
        defaults = [
            c for c in self.lookup.list_objects(STORAGE_CLASSES, "") if claims.is_default_class(c)
        ]
        return max(
            defaults,
            key=lambda c: (c["metadata"].get("creationTimestamp", ""), c["metadata"]["name"]),
            default=None,
        )
