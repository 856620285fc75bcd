"""StorageObjectInUseProtection: every new PersistentVolumeClaim gets the finalizer
`kubernetes.io/pvc-protection` and every new PersistentVolume `kubernetes.io/pv-protection`,
so that deleting one in use only marks it; the controller-manager's protection
controllers (`controlplane/controllers/volumeprotection.py`) let it go once no pod
mounts the claim, or the volume is no longer bound."""

from __future__ import annotations

from ..registry import Attributes
from .interfaces import MutationInterface

FINALIZERS = {
    "persistentvolumeclaims": "kubernetes.io/pvc-protection",
    "persistentvolumes": "kubernetes.io/pv-protection",
}


class StorageObjectInUseProtection(MutationInterface):
    NAME = "StorageObjectInUseProtection"
    OPERATIONS = frozenset({"CREATE"})

    def admit(self, attrs: Attributes) -> None:
        finalizer = FINALIZERS.get(attrs.resource.group_resource)
        if finalizer is None or attrs.subresource or attrs.object is None:
            return
        finalizers = attrs.object.setdefault("metadata", {}).setdefault("finalizers", [])
        if finalizer not in finalizers:
            finalizers.append(finalizer)
