"""Per-kind rules the generic registry applies on create, update and delete.

Kubernetes calls these "strategies": what the server owns and resets (a new Deployment's
status is empty, a new Pod is Pending), what an update of the main resource may not
touch (the status, which only the status subresource writes) and the reverse, when the
generation moves (a change of anything but metadata and status), and which deletions
are graceful (a Pod bound to a node waits for its kubelet). Keeping them in one table
keeps the registry generic.
"""

from __future__ import annotations

import copy
import datetime
import secrets
import uuid
from typing import Any

from kubelab.api.resources import Resource

Object = dict[str, Any]

# Kinds whose status is written only through the status subresource, and is reset on
# create (Nodes keep theirs: the kubelet registers a node with its status).
_STATUS_RESET = {
    "Deployment",
    "ReplicaSet",
    "DaemonSet",
    "StatefulSet",
    "Job",
    "CronJob",
    "Service",
    "ReplicationController",
    "ResourceQuota",
    "CertificateSigningRequest",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "HorizontalPodAutoscaler",
    "Ingress",
    "VolumeAttachment",
    "APIService",
}
_NO_GENERATION = {"Event", "Lease", "Endpoints", "EndpointSlice", "ConfigMap", "Secret"}

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # as Kubernetes: no vowels, no look-alikes


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_name(base: str) -> str:
    """generateName + 5 random characters, the base cut so the name fits 63 chars."""
    return base[:58] + "".join(secrets.choice(_NAME_CHARS) for _ in range(5))


def has_status_subresource(resource: Resource) -> bool:
    return "status" in resource.subresources


def _spec_part(obj: Object) -> Object:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def prepare_for_create(resource: Resource, obj: Object) -> None:
    """Server-owned fields of a new object: uid, creationTimestamp, generation, status."""
    meta = obj.setdefault("metadata", {})
    for owned in (
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
        "selfLink",
    ):
        meta.pop(owned, None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_rfc3339()
    kind = resource.kind
    if kind not in _NO_GENERATION:
        meta["generation"] = 1
    if kind in _STATUS_RESET:
        obj["status"] = {}
    if kind == "Pod":
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj)}
    elif kind == "Namespace":
        obj["status"] = {"phase": "Active"}
    elif kind == "PersistentVolumeClaim" or kind == "PersistentVolume":
        obj["status"] = {"phase": "Pending"}


def prepare_for_update(resource: Resource, new: Object, old: Object) -> None:
    """An update of the main resource: status and server-owned metadata stay as stored;
    the generation moves when anything outside metadata and status changed."""
    meta, old_meta = new.setdefault("metadata", {}), old.get("metadata", {})
    for owned in (
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ):
        if owned in old_meta:
            meta[owned] = old_meta[owned]
        else:
            meta.pop(owned, None)
    if not meta.get("managedFields") and old_meta.get("managedFields"):
        # A client that sends none (most do) leaves the record of appliers as it is.
        meta["managedFields"] = old_meta["managedFields"]
    if has_status_subresource(resource) or resource.kind == "Pod":
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
    if resource.kind not in _NO_GENERATION and _spec_part(new) != _spec_part(old):
        meta["generation"] = int(old_meta.get("generation", 1)) + 1


def prepare_for_status_update(new: Object, old: Object) -> Object:
    """A status update: only the status (and nothing of the metadata a user owns) moves."""
    out = copy.deepcopy(old)
    out["status"] = new.get("status", {})
    out["metadata"]["resourceVersion"] = new.get("metadata", {}).get(
        "resourceVersion", old["metadata"].get("resourceVersion")
    )
    return out


def qos_class(pod: Object) -> str:
    """Guaranteed when every container has equal cpu and memory requests and limits,
    BestEffort when none has any, Burstable otherwise."""
    containers = pod.get("spec", {}).get("containers", []) + pod.get("spec", {}).get(
        "initContainers", []
    )
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources", {})
        req, lim = res.get("requests", {}) or {}, res.get("limits", {}) or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or req.get(r, lim[r]) != lim[r]:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def grace_period(resource: Resource, obj: Object, requested: int | None) -> int:
    """Seconds a deletion waits for someone (the kubelet) to finish; 0 deletes at once.

    Only Pods bound to a node are deleted gracefully: an unscheduled pod, or one that
    already ended, has nobody to wait for.
    """
    if resource.kind != "Pod":
        return 0
    spec, status = obj.get("spec", {}), obj.get("status", {})
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    if requested is not None:
        return max(0, requested)
    return int(spec.get("terminationGracePeriodSeconds", 30))


def to_scale(resource: Resource, obj: Object) -> Object:
    """The autoscaling/v1 Scale view of a Deployment, ReplicaSet, StatefulSet or RC."""
    meta = obj["metadata"]
    selector = obj.get("spec", {}).get("selector", {}) or {}
    labels = (
        selector.get("matchLabels", selector)
        if resource.kind != "ReplicationController"
        else selector
    )
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": {"replicas": int(obj.get("spec", {}).get("replicas", 0))},
        "status": {
            "replicas": int(obj.get("status", {}).get("replicas", 0)),
            "selector": ",".join(
                f"{k}={v}" for k, v in sorted(labels.items()) if isinstance(v, str)
            ),
        },
    }
