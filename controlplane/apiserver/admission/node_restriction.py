"""NodeRestriction: a kubelet (``system:node:<name>``) may only write its own Node and
Lease and pods bound to it (mirror pods included); it completes the Node authorizer
(`controlplane.apiserver.authz`), which decides by verb and resource only.

Labels are part of what it guards: workloads are steered to nodes by label (a
``nodeSelector`` on ``node-restriction.kubernetes.io/pci-dss``, say), so a kubelet that
could label its own Node could attract pods meant for trusted nodes. As Kubernetes'
plugin does, a kubelet may set, change or remove only its own labels and those
outside the ``kubernetes.io`` and ``k8s.io`` namespaces, and never one under
``node-restriction.kubernetes.io/``, whose whole purpose is to be set by administrators
alone.
"""

from __future__ import annotations

from kubelab.api import errors

from ..authn import UserInfo
from ..authz import NODE_PREFIX, NODES
from ..registry import Attributes
from .interfaces import PODS, WRITES, ValidationInterface

NODE_RESOURCE = "nodes"
LEASES = "leases.coordination.k8s.io"

KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    }
)
"""The well-known labels a kubelet sets on its own Node (k8s.io/kubelet's kubeletLabels)."""

KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
"""Label namespaces (and their subdomains) a kubelet may set on its own Node."""

NODE_RESTRICTION_NAMESPACE = "node-restriction.kubernetes.io"
"""Labels under this namespace (or a subdomain) are the administrator's alone."""


def _label_namespace(key: str) -> str:
    """The prefix before the "/" of a label key ("" for an unprefixed key)."""
    prefix, slash, _ = key.partition("/")
    return prefix if slash else ""


def _in(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def is_kubelet_label(key: str) -> bool:
    """Whether a kubelet may set the label `key` on its own Node."""
    namespace = _label_namespace(key)
    return key in KUBELET_LABELS or any(_in(namespace, ns) for ns in KUBELET_LABEL_NAMESPACES)


def forbidden_labels(labels: dict[str, str], old: dict[str, str]) -> list[str]:
    """The keys added, changed or removed between `old` and `labels` that a kubelet may
    not touch, sorted: node-restriction labels, and kubernetes.io or k8s.io labels other
    than its own."""
    modified = {k for k in labels.keys() | old.keys() if labels.get(k) != old.get(k)}
    refused = set()
    for key in modified:
        namespace = _label_namespace(key)
        if _in(namespace, NODE_RESTRICTION_NAMESPACE):
            refused.add(key)
        kubernetes = _in(namespace, "kubernetes.io") or _in(namespace, "k8s.io")
        if kubernetes and not is_kubelet_label(key):
            refused.add(key)
    return sorted(refused)


def _labels(obj: dict[str, object] | None) -> dict[str, str]:
    metadata = (obj or {}).get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels if isinstance(labels, dict) else {}


class NodeRestriction(ValidationInterface):
    NAME = "NodeRestriction"
    OPERATIONS = WRITES

    def validate(self, attrs: Attributes) -> None:
        user: UserInfo | None = attrs.user
        if user is None or NODES not in user.groups or not user.name.startswith(NODE_PREFIX):
            return
        node = user.name[len(NODE_PREFIX) :]
        resource = attrs.resource.group_resource
        target = attrs.object or attrs.old or {}
        if resource == LEASES and attrs.namespace == "kube-node-lease" and attrs.name != node:
            raise errors.StatusError(
                403, "Forbidden", f'node "{node}" may only write its own lease, not "{attrs.name}"'
            )
        if resource == NODE_RESOURCE:
            self._validate_node(attrs, node)
        if resource == PODS and attrs.operation in ("CREATE", "DELETE", "UPDATE"):
            bound = target.get("spec", {}).get("nodeName")
            if bound != node:
                raise errors.StatusError(
                    403,
                    "Forbidden",
                    f'node "{node}" can only {attrs.operation.lower()} pods '
                    f'bound to itself; pod "{attrs.name}" is bound to "{bound or ""}"',
                )
            mirror = (
                target.get("metadata", {}).get("annotations", {}).get("kubernetes.io/config.mirror")
            )
            if attrs.operation == "CREATE" and not mirror:
                raise errors.StatusError(
                    403, "Forbidden", f'node "{node}" can only create mirror pods'
                )

    @staticmethod
    def _validate_node(attrs: Attributes, node: str) -> None:
        """Its own Node only, and on create or update no label a kubelet may not set;
        worded as kube-apiserver words these refusals."""
        if attrs.name != node:
            raise errors.forbidden_object(
                "nodes", attrs.name, f'node "{node}" is not allowed to modify node "{attrs.name}"'
            )
        if attrs.operation == "CREATE":
            refused = forbidden_labels(_labels(attrs.object), {})
            if refused:
                why = f'node "{node}" is not allowed to set the following labels: '
                raise errors.forbidden_object("nodes", attrs.name, why + ", ".join(refused))
        elif attrs.operation == "UPDATE":
            refused = forbidden_labels(_labels(attrs.object), _labels(attrs.old))
            if refused:
                why = "is not allowed to modify labels: " + ", ".join(refused)
                raise errors.forbidden_object("nodes", attrs.name, why)
