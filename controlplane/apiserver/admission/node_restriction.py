"""NodeRestriction: a kubelet (``system:node:<name>``) may only write its own Node and
Lease and pods bound to it (mirror pods included); it completes the Node authorizer
(`controlplane.apiserver.authz`), which decides by verb and resource only."""

from __future__ import annotations

from kubelab.api import errors

from ..authn import UserInfo
from ..authz import NODE_PREFIX, NODES
from ..registry import Attributes
from .interfaces import WRITES, ValidationInterface


class NodeRestriction(ValidationInterface):
    NAME = "NodeRestriction"
    OPERATIONS = WRITES

    def validate(self, attrs: Attributes) -> None:
        user: UserInfo | None = attrs.user
        if user is None or NODES not in user.groups or not user.name.startswith(NODE_PREFIX):
            return
        node = user.name[len(NODE_PREFIX) :]
        kind = attrs.resource.kind
        target = attrs.object or attrs.old or {}
        if kind == "Lease" and attrs.namespace == "kube-node-lease" and attrs.name != node:
            raise errors.StatusError(
                403, "Forbidden", f'node "{node}" may only write its own lease, not "{attrs.name}"'
            )
        if kind == "Node" and attrs.name != node:
            raise errors.StatusError(
                403, "Forbidden", f'node "{node}" is not allowed to modify node "{attrs.name}"'
            )
        if kind == "Pod" and attrs.operation in ("CREATE", "DELETE", "UPDATE"):
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
