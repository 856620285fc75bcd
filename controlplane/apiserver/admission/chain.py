"""The admission chain: the enabled plugins, run in Kubernetes' order.

`PLUGINS` is the registry of plugin factories by name, in the order kube-apiserver runs
them whatever order ``--enable-admission-plugins`` lists them in. On a write the chain
runs every enabled mutating plugin that handles the operation (`admit`), the registry
then validates the object, and the chain runs the validating plugins (`validate`), the
always-on RBAC escalation check first.

With tracing on, each plugin's work on a write is a span, `Admission.mutate <Plugin>` or
`Admission.validate <Plugin>` (the webhooks' plugins among them, each call to a webhook
inside its plugin's span); with it off, the chain calls the plugins with no span.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kubelab import tracing

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
        traced: tracing.Tracing = tracing.DISABLED,
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
        self.tracing = traced
        # Which plugins handle an operation is asked once, not on every write.
        self._admitters = {
            op: [(p.NAME, p.admit) for p in self.mutating if p.handles(op)] for op in WRITES
        }
        self._validators = {
            op: [(p.NAME, p.validate) for p in self.validating if p.handles(op)] for op in WRITES
        }

    def admit(self, attrs: Attributes) -> None:
        self._run("Admission.mutate", self._admitters.get(attrs.operation, ()), attrs)

    def validate(self, attrs: Attributes) -> None:
        self._run("Admission.validate", self._validators.get(attrs.operation, ()), attrs)

    def _run(
        self,
        phase: str,
        plugins: Sequence[tuple[str, Callable[[Attributes], None]]],
        attrs: Attributes,
    ) -> None:
        if not self.tracing.enabled:
            for _, plugin in plugins:
                plugin(attrs)
            return
        for name, plugin in plugins:
            with self.tracing.span(f"{phase} {name}", {"kubelab.admission.plugin": name}):
                plugin(attrs)
