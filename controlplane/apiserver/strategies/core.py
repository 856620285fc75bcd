"""Strategies of the core (``v1``) kinds whose rules differ from the default.

* Pod: a new pod is Pending with its QoS class; its deletion is graceful while it is bound
  to a node and running (the kubelet stops the containers, then confirms with a zero
  grace period), and ``deletionGracePeriodSeconds`` only ever shortens.
* Namespace: a new namespace is Active; deleting one marks it Terminating (never removes
  it at once) and it stays while ``spec.finalizers`` names anyone (the namespace
  controller empties it, then removes its finalizer through ``namespaces/finalize``).
* Service: status reset, and its writes take cluster IPs and node ports.
* PersistentVolume and PersistentVolumeClaim start Pending; ReplicationController's Scale
  selector is its plain label map.
"""

from __future__ import annotations

from .generic import Object, StatusResetStrategy, Strategy


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


class PodStrategy(Strategy):
    def initial_status(self, obj: Object) -> Object | None:
        return {"phase": "Pending", "qosClass": qos_class(obj)}

    def grace_period(self, obj: Object, requested: int | None) -> int:
        """Only pods bound to a node wait: an unscheduled pod, or one that already ended,
        has nobody to wait for."""
        spec, status = obj.get("spec", {}), obj.get("status", {})
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        if requested is not None:
            return max(0, requested)
        return int(spec.get("terminationGracePeriodSeconds", 30))

    def mark_deleting(self, obj: Object, grace: int) -> bool:
        meta = obj["metadata"]
        if meta.get("deletionGracePeriodSeconds") is None or grace < int(
            meta["deletionGracePeriodSeconds"]
        ):
            meta["deletionGracePeriodSeconds"] = grace
            return True
        return False

    def holds_deletion(self, obj: Object) -> bool:
        """A pod in its grace period waits for its kubelet's confirmation."""
        return bool(obj["metadata"].get("deletionGracePeriodSeconds"))


class NamespaceStrategy(Strategy):
    immediate_delete = False

    def initial_status(self, obj: Object) -> Object | None:
        return {"phase": "Active"}

    def mark_deleting(self, obj: Object, grace: int) -> bool:
        if obj.get("status", {}).get("phase") == "Terminating":
            return False
        obj.setdefault("status", {})["phase"] = "Terminating"
        return True

    def holds_deletion(self, obj: Object) -> bool:
        return bool(obj.get("spec", {}).get("finalizers"))


class ServiceStrategy(StatusResetStrategy):
    allocates = True


class PendingStrategy(Strategy):
    """PersistentVolumes and claims: Pending until the binder matches them."""

    def initial_status(self, obj: Object) -> Object | None:
        return {"phase": "Pending"}


class ReplicationControllerStrategy(StatusResetStrategy):
    def scale_labels(self, obj: Object) -> Object:
        """An RC's selector is a plain label map, not a label selector."""
        selector: Object = obj.get("spec", {}).get("selector", {}) or {}
        return selector
