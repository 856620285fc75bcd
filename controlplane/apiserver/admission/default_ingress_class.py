"""DefaultIngressClass: an Ingress created without `spec.ingressClassName` (and without
the older `kubernetes.io/ingress.class` annotation) gets the cluster's default class,
the IngressClass annotated `ingressclass.kubernetes.io/is-default-class: "true"` (of
several, the newest, ties broken by name, as Kubernetes picks), so that `kubectl get
ingress` shows the class that serves it, as on kind with ingress-nginx. With no default
class the Ingress is left without one."""

from __future__ import annotations

from ..registry import Attributes
from .interfaces import MutationInterface, Object

INGRESSES = "ingresses.networking.k8s.io"
INGRESS_CLASSES = "ingressclasses.networking.k8s.io"
DEFAULT_CLASS = "ingressclass.kubernetes.io/is-default-class"
CLASS_ANNOTATION = "kubernetes.io/ingress.class"


class DefaultIngressClass(MutationInterface):
    NAME = "DefaultIngressClass"
    OPERATIONS = frozenset({"CREATE"})

    def admit(self, attrs: Attributes) -> None:
        if attrs.subresource or attrs.resource.group_resource != INGRESSES or attrs.object is None:
            return
        ingress = attrs.object
        if CLASS_ANNOTATION in ((ingress.get("metadata") or {}).get("annotations") or {}):
            return
        spec = ingress.setdefault("spec", {})
        if spec.get("ingressClassName") is not None:
            return
        default = self._default_class()
        if default is not None:
            spec["ingressClassName"] = default["metadata"]["name"]

    def _default_class(self) -> Object | None:
        defaults = [
            c
            for c in self.lookup.list_objects(INGRESS_CLASSES, "")
            if ((c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS)) == "true"
        ]
        # Newest first, then by name: sort by name, then stably by time, newest first.
        defaults.sort(key=lambda c: c["metadata"]["name"])
        defaults.sort(key=lambda c: c["metadata"].get("creationTimestamp", ""), reverse=True)
        return defaults[0] if defaults else None
