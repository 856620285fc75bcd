"""Admission: cluster policy applied to writes after authorization, before storage.

Each plugin is a class in a module of its own, with the shape of `interfaces` (a
``NAME``, the operations it handles, ``admit`` and/or ``validate``); `chain` holds the
registry of plugins by name and runs the enabled ones in Kubernetes' order. The plugins
kubeadm enables, in that order:

* `namespace_lifecycle`: NamespaceLifecycle (mutating on create, validating on delete).
* `limit_ranger`: LimitRanger (mutating).
* `service_account`: ServiceAccount (mutating).
* `node_restriction`: NodeRestriction (validating).
* `pod_security`: PodSecurity (validating; the Pod Security Standards' checks in
  `pod_security_standards`).
* `priority`: Priority (mutating for pods, validating for PriorityClasses).
* `default_toleration_seconds`: DefaultTolerationSeconds (mutating).
* `webhooks`: MutatingAdmissionWebhook, ValidatingAdmissionWebhook (the webhooks of the
  admissionregistration.k8s.io configurations, over HTTPS).
* `resource_quota`: ResourceQuota (validating).

Always on, ahead of them: `rbac_escalation` (as Kubernetes' RBAC registry does it).

Plugins read the cluster's state (namespaces, accounts, limit ranges, quotas) from the
watch cache through `interfaces.Lookup`; they never write it.
"""

from .chain import PLUGINS, Chain
from .interfaces import Lookup, MutationInterface, Plugin, ValidationInterface
from .namespace_lifecycle import SYSTEM_NAMESPACES

__all__ = [
    "PLUGINS",
    "SYSTEM_NAMESPACES",
    "Chain",
    "Lookup",
    "MutationInterface",
    "Plugin",
    "ValidationInterface",
]
