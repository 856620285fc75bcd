"""Strategies of the core (``v1``) kinds whose rules differ from the default.

* Pod: a new pod is Pending with its QoS class; its deletion is graceful while it is bound
  to a node and running (the kubelet stops the containers, then confirms with a zero
  grace period), and ``deletionGracePeriodSeconds`` only ever shortens.
* Namespace: a new namespace is Active; deleting one marks it Terminating (never removes
  it at once) and it stays while ``spec.finalizers`` names anyone (the namespace
  controller empties it, then removes its finalizer through ``namespaces/finalize``).
* Service: status reset, and its writes take cluster IPs and node ports; a type change
  drops the fields only the old type allowed.
* PersistentVolume and PersistentVolumeClaim start Pending; ReplicationController's Scale
  selector is its plain label map.
"""

from __future__ import annotations

from kubelab.api.podutil import qos_class

from .generic import Object, StatusResetStrategy, Strategy


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

    def prepare_for_update(self, new: Object, old: Object) -> None:
        super().prepare_for_update(new, old)
        drop_type_dependent_fields(new, old)


NODE_PORT_TYPES = ("NodePort", "LoadBalancer")


def drop_type_dependent_fields(new: Object, old: Object) -> None:
    """A Service's type change drops the fields only its old type allowed, where the
    client left them as they were, as Kubernetes' service strategy does: so `kubectl
    patch svc web -p '{"spec":{"type":"ClusterIP"}}'` is valid (the patched object still
    holds the node ports, `allocateLoadBalancerNodePorts` and `externalTrafficPolicy`
    the apiserver filled in for a LoadBalancer). A field the client changed is its to
    keep, and validation says if the new type forbids it."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    if kind == (old_spec.get("type") or "ClusterIP"):
        return
    ports, old_ports = spec.get("ports") or [], old_spec.get("ports") or []
    if kind not in NODE_PORT_TYPES and [p.get("nodePort") for p in ports] == [
        p.get("nodePort") for p in old_ports
    ]:
        for port in ports:
            port.pop("nodePort", None)
    unchanged = [f for f in _TYPE_DEPENDENT if f in spec and spec[f] == old_spec.get(f)]
    external = kind in NODE_PORT_TYPES or bool(spec.get("externalIPs"))
    for field in unchanged:
        if kind != "LoadBalancer" and (field != "externalTrafficPolicy" or not external):
            spec.pop(field)


_TYPE_DEPENDENT = (
    "allocateLoadBalancerNodePorts",
    "loadBalancerClass",
    "healthCheckNodePort",
    "externalTrafficPolicy",
)
"""The fields a LoadBalancer Service may have that a ClusterIP one may not (and
`externalTrafficPolicy` none but an externally reachable one)."""


class PendingStrategy(Strategy):
    """PersistentVolumes and claims: Pending until the binder matches them."""

    def initial_status(self, obj: Object) -> Object | None:
        return {"phase": "Pending"}


class ReplicationControllerStrategy(StatusResetStrategy):
    def scale_labels(self, obj: Object) -> Object:
        """An RC's selector is a plain label map, not a label selector."""
        selector: Object = obj.get("spec", {}).get("selector", {}) or {}
        return selector
