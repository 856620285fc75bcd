"""RBAC escalation prevention: nobody may create or change a Role, or bind one, granting
permissions they do not hold themselves, unless they have the ``escalate`` (for roles) or
``bind`` (for bindings) verb on it.

Always on and not selectable: in Kubernetes this is the RBAC registry's own check, not an
admission plugin; here it has the plugin shape so that the chain runs it, first among the
validating plugins.
"""

from __future__ import annotations

from kubelab.api import errors

from ..authn import UserInfo
from ..authz import MASTERS
from ..registry import Attributes
from ..requestinfo import RequestInfo
from .interfaces import ValidationInterface

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES = ("roles", "clusterroles")
"""The resources of `RBAC_GROUP` that hold rules; its other two bind them."""


class RBACEscalation(ValidationInterface):
    NAME = "RBACEscalation"
    OPERATIONS = frozenset({"CREATE", "UPDATE"})

    def validate(self, attrs: Attributes) -> None:
        r, user, obj = attrs.resource, attrs.user, attrs.object
        if r.group != RBAC_GROUP or obj is None:
            return
        if not isinstance(user, UserInfo) or MASTERS in user.groups:
            return
        ns = attrs.namespace if r.namespaced else ""
        if r.plural in ROLES:
            if self._may(user, "escalate", r.plural, ns, attrs.name):
                return
            rules = obj.get("rules") or []
        else:
            ref = obj.get("roleRef") or {}
            role_kind = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            if self._may(
                user,
                "bind",
                role_kind,
                ns if role_kind == "roles" else "",
                str(ref.get("name", "")),
            ):
                return
            role = self.lookup.get(
                role_kind, ns if role_kind == "roles" else "", str(ref.get("name", ""))
            )
            if role is None:
                raise errors.StatusError(
                    404, "NotFound", f'{role_kind}.{RBAC_GROUP} "{ref.get("name")}" not found'
                )
            rules = role.get("rules") or []
        missing = self.lookup.authorizer.uncovered(user, rules, ns)
        if missing:
            raise errors.StatusError(
                403,
                "Forbidden",
                f'{r.group_resource} "{attrs.name}" is forbidden: user "{user.name}" (groups='
                f"{list(user.groups)}) is attempting to grant RBAC permissions not currently "
                f"held: {'; '.join(missing[:20])}",
            )

    def _may(self, user: UserInfo, verb: str, plural: str, namespace: str, name: str) -> bool:
        info = RequestInfo(
            verb=verb,
            path="",
            is_resource=True,
            group=RBAC_GROUP,
            namespace=namespace,
            resource=plural,
            name=name,
        )
        return self.lookup.authorizer.authorize(user, info).allowed
