"""The admission chain: the enabled plugins, run in Kubernetes' order.

`PLUGINS` is the registry of plugin factories by name, in the order kube-apiserver runs
them whatever order ``--enable-admission-plugins`` lists them in. On a write the chain
runs every enabled mutating plugin that handles the operation (`admit`), the registry
then validates the object, and the chain runs the validating plugins (`validate`), the
always-on RBAC escalation check first.
"""

from __future__ import annotations

from ..authz import Authorizer
from ..registry import Admission, Attributes
from .default_toleration_seconds import DefaultTolerationSeconds
from .interfaces import (
    WRITES,
    Charge,
    Factory,
    Get,
    List,
    Lookup,
    MutationInterface,
    ValidationInterface,
)
from .limit_ranger import LimitRanger
from .namespace_lifecycle import NamespaceLifecycle
from .node_restriction import NodeRestriction
from .priority import Priority
from .rbac_escalation import RBACEscalation
from .resource_quota import ResourceQuota
from .service_account import ServiceAccount
from .webhooks import MutatingAdmissionWebhook, ValidatingAdmissionWebhook

PLUGINS: dict[str, Factory] = {
    plugin.NAME: plugin
    for plugin in (
        NamespaceLifecycle,
        LimitRanger,
        ServiceAccount,
        NodeRestriction,
        Priority,
        DefaultTolerationSeconds,
        MutatingAdmissionWebhook,
        ValidatingAdmissionWebhook,
        ResourceQuota,
    )
}


class Chain(Admission):
    """The enabled plugins; `plugins` names them as --enable-admission-plugins does."""

    ALL = tuple(PLUGINS)

    def __init__(
        self,
        get: Get,
        list_objects: List,
        authorizer: Authorizer,
        plugins: tuple[str, ...] = ALL,
        live_get: Get | None = None,
        charge: Charge | None = None,
    ) -> None:
        unknown = [p for p in plugins if p not in PLUGINS]
        if unknown:
            raise ValueError(f"unknown admission plugins {unknown}; known: {list(PLUGINS)}")
        lookup = Lookup(get, list_objects, live_get or get, authorizer, charge)
        enabled = [RBACEscalation(lookup)] + [
            factory(lookup) for name, factory in PLUGINS.items() if name in plugins
        ]
        self.mutating = [p for p in enabled if isinstance(p, MutationInterface)]
        self.validating = [p for p in enabled if isinstance(p, ValidationInterface)]
        # Which plugins handle an operation is asked once, not on every write.
        self._admitters = {op: [p.admit for p in self.mutating if p.handles(op)] for op in WRITES}
        self._validators = {
            op: [p.validate for p in self.validating if p.handles(op)] for op in WRITES
        }

    def admit(self, attrs: Attributes) -> None:
        for admit in self._admitters.get(attrs.operation, ()):
            admit(attrs)

    def validate(self, attrs: Attributes) -> None:
        for validate in self._validators.get(attrs.operation, ()):
            validate(attrs)
