"""What binds a PersistentVolumeClaim to a PersistentVolume, shared by the two parts that
bind: the controller-manager's persistent-volume controller (claims that can bind at
once) and the scheduler's VolumeBinding plugin (claims of a `WaitForFirstConsumer`
class, bound once a pod using them has a node). Both must agree on which volume fits a
claim, or the scheduler would place a pod on a node whose volume the controller then
refuses.

A volume fits a claim (Kubernetes' `FindMatchingVolume`) when it is Available (no
`claimRef`) or already reserved for this very claim, has the claim's class (`""` for
none), the claim's volume mode, every access mode the claim asks for, at least the
capacity it requests, the labels its selector asks for, and (with a node) node affinity
that node satisfies. Of the volumes that fit, the smallest wins, so that a big volume
is left for a claim that needs it; a volume reserved for the claim (claimRef naming
it) wins over any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

from kubelab.api.podscheduling import node_selector_matches
from kubelab.api.quantity import parse_quantity
from kubelab.api.selectors import selector_from_label_selector

Obj = Mapping[str, Any]
V = TypeVar("V", bound=Mapping[str, Any])

# Annotations, as Kubernetes names them (k8s.io/component-helpers/storage/volume).
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"

WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
"""The provisioner of a class whose volumes are all made by hand."""


def meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def annotations_of(obj: Obj) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def claim_class(claim: Obj) -> str:
    """The claim's class name, "" for none."""
    return str((claim.get("spec") or {}).get("storageClassName") or "")


def volume_class(volume: Obj) -> str:
    return str((volume.get("spec") or {}).get("storageClassName") or "")


def claim_key(claim: Obj) -> str:
    return f"{meta(claim).get('namespace', '')}/{meta(claim).get('name', '')}"


def _bytes(amounts: Obj) -> Fraction:
    try:
        return parse_quantity(amounts.get("storage", 0)).value
    except ValueError:  # validation refuses such sizes; an old object may still have one
        return Fraction(0)


def requested_bytes(claim: Obj) -> Fraction:
    return _bytes(((claim.get("spec") or {}).get("resources") or {}).get("requests") or {})


def capacity_bytes(volume: Obj) -> Fraction:
    return _bytes((volume.get("spec") or {}).get("capacity") or {})


def is_default_class(storage_class: Obj) -> bool:
    return annotations_of(storage_class).get(DEFAULT_CLASS) == "true"


def wait_for_first_consumer(storage_class: Obj | None) -> bool:
    return (storage_class or {}).get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER


def reserved_for(volume: Obj, claim: Obj) -> bool:
    """Whether the volume's claimRef names this claim (this incarnation of it, when the
    reference carries a uid)."""
    ref = (volume.get("spec") or {}).get("claimRef")
    if not ref:
        return False
    claim_meta = meta(claim)
    return (
        ref.get("namespace") == claim_meta.get("namespace")
        and ref.get("name") == claim_meta.get("name")
        and (not ref.get("uid") or ref.get("uid") == claim_meta.get("uid"))
    )


def volume_node_fits(volume: Obj, node: Obj) -> bool:
    """Whether the volume's required node affinity (if any) admits the node."""
    required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    return not required or node_selector_matches(required, node)


def fits(volume: Obj, claim: Obj, node: Obj | None = None) -> bool:
    """Whether `volume` may be bound to `claim` (module docstring); `node`: the node
    the claim's pod goes to, whose affinity must then hold too."""
    spec = volume.get("spec") or {}
    claim_spec = claim.get("spec") or {}
    if meta(volume).get("deletionTimestamp"):
        return False
    if spec.get("claimRef") and not reserved_for(volume, claim):
        return False
    if (volume.get("status") or {}).get("phase") in ("Released", "Failed"):
        return False
    if volume_class(volume) != claim_class(claim):
        return False
    if (spec.get("volumeMode") or "Filesystem") != (claim_spec.get("volumeMode") or "Filesystem"):
        return False
    if not set(claim_spec.get("accessModes") or []) <= set(spec.get("accessModes") or []):
        return False
    if capacity_bytes(volume) < requested_bytes(claim):
        return False
    selector = claim_spec.get("selector")
    if selector is not None and not selector_from_label_selector(selector).matches(
        meta(volume).get("labels") or {}
    ):
        return False
    return node is None or volume_node_fits(volume, node)


def best_volume(volumes: Iterable[V], claim: Obj, node: Obj | None = None) -> V | None:
    """The volume to bind `claim` to: one reserved for it, else the smallest that fits."""
    fitting = [v for v in volumes if fits(v, claim, node)]
    for volume in fitting:
        if reserved_for(volume, claim):
            return volume
    return min(fitting, key=lambda v: (capacity_bytes(v), meta(v).get("name", "")), default=None)


def claim_ref(claim: Obj) -> dict[str, Any]:
    """The reference a volume keeps to the claim bound to it."""
    claim_meta = meta(claim)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": claim_meta.get("namespace", ""),
        "name": claim_meta.get("name", ""),
        "uid": claim_meta.get("uid", ""),
        "resourceVersion": claim_meta.get("resourceVersion", ""),
    }


def pod_claims(pod: Obj) -> list[str]:
    """The claim names of the pod's persistentVolumeClaim volumes (ephemeral ones are
    named `<pod>-<volume>`, as Kubernetes names their claims)."""
    names = []
    pod_name = meta(pod).get("name", "")
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if "persistentVolumeClaim" in volume:
            names.append(str(volume["persistentVolumeClaim"].get("claimName", "")))
        elif "ephemeral" in volume:
            names.append(f"{pod_name}-{volume.get('name', '')}")
    return names
