"""The admission chain: the enabled plugins, run in Kubernetes' order.

`PLUGINS` is the registry of plugin factories by name, in the order kube-apiserver runs
them whatever order ``--enable-admission-plugins`` lists them in. On a write the chain
runs every enabled mutating plugin that handles the operation (`admit`), the registry
then validates the object, and the chain runs the validating plugins (`validate`), the
always-on RBAC escalation check first.

With tracing on, each phase is an attribute of the request's span listing the plugins
that ran, in order, with the microseconds each took: `kubelab.admission.mutating` =
"NamespaceLifecycle 4us, LimitRanger 2us, ...", and `kubelab.admission.validating`. Each
admitted the object but the last when `...mutating.rejection` or `...validating.rejection`
is there: "NamespaceLifecycle: NotFound: namespaces "x" not found" (the plugin, the
reason, the message). A span per plugin cost a dozen spans per write for work of a few
microseconds each, and an attribute per plugin, or arrays of them, cost the export some
8 us an element (docs/architecture.md, "Tracing"): one string per phase carries the same.
A webhook's call carries the request's `traceparent`. With tracing off, the chain calls
the plugins and records nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from opentelemetry import trace

from kubelab import tracing
from kubelab.api import errors

from ..authz import Authorizer
from ..registry import Admission, Attributes
from .default_ingress_class import DefaultIngressClass
from .default_storage_class import DefaultStorageClass
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
from .pod_security import PodSecurity
from .priority import Priority
from .rbac_escalation import RBACEscalation
from .resource_quota import ResourceQuota
from .service_account import ServiceAccount
from .storage_protection import StorageObjectInUseProtection
from .webhooks import MutatingAdmissionWebhook, ValidatingAdmissionWebhook

PLUGINS: dict[str, Factory] = {
    plugin.NAME: plugin
    for plugin in (
        NamespaceLifecycle,
        LimitRanger,
        ServiceAccount,
        NodeRestriction,
        PodSecurity,
        Priority,
        DefaultTolerationSeconds,
        DefaultStorageClass,
        StorageObjectInUseProtection,
        DefaultIngressClass,
        MutatingAdmissionWebhook,
        ValidatingAdmissionWebhook,
        ResourceQuota,
    )
}


MUTATING = "kubelab.admission.mutating"
VALIDATING = "kubelab.admission.validating"
"""Each phase's attribute on the request's span (module docstring)."""


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
        self._run(MUTATING, self._admitters.get(attrs.operation, ()), attrs)

    def validate(self, attrs: Attributes) -> None:
        self._run(VALIDATING, self._validators.get(attrs.operation, ()), attrs)

    def _run(
        self,
        phase: str,
        plugins: Sequence[tuple[str, Callable[[Attributes], None]]],
        attrs: Attributes,
    ) -> None:
        span = trace.get_current_span() if self.tracing.enabled else trace.INVALID_SPAN
        if not span.is_recording():
            for _, plugin in plugins:
                plugin(attrs)
            return
        ran: list[str] = []
        try:
            for name, plugin in plugins:
                started = time.perf_counter()
                try:
                    plugin(attrs)
                except errors.StatusError as exc:
                    span.set_attribute(f"{phase}.rejection", f"{name}: {exc.reason}: {exc}")
                    raise
                except Exception as exc:
                    span.set_attribute(f"{phase}.rejection", f"{name}: error: {exc}")
                    raise
                finally:
                    ran.append(f"{name} {(time.perf_counter() - started) * 1e6:.0f}us")
        finally:
            span.set_attribute(phase, ", ".join(ran))
