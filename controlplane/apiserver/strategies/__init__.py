"""One strategy object per stored resource: the rules of the generic registry, and the
one place where each resource's rules are named.

`Strategies.for_resource` is the lookup the registry and the subresource handlers use
(each apiserver has its own `Strategies`, custom resources' included). `_RULES`
names, for every stored built-in resource, keyed by group and resource as Kubernetes
keys ``pkg/registry/<group>/<resource>/strategy.go``: its strategy class, its
`Validator` (`kubelab.api.validation`) and its `Defaulter` (`kubelab.api.defaults`).
Nothing is looked up by kind, so a custom resource whose kind is a core kind's name
(Knative's ``serving.knative.dev`` Service) follows its CustomResourceDefinition's
strategy only (`controlplane.apiserver.crds`).

Kinds with rules of their own have a class in the module of their API group (`core`,
`certificates`, `apiextensions`); the others share the default `Strategy` or one of the
two variants in `generic`: `StatusResetStrategy` (a controller writes the status) and
`NoGenerationStrategy` (no desired state to count changes of).
"""

from __future__ import annotations

from typing import NamedTuple

from kubelab.api import defaults, validation
from kubelab.api.defaults import Defaulter
from kubelab.api.resources import RESOURCES, Resource
from kubelab.api.validation import METADATA, Validator

from . import apiextensions, certificates, core
from .generic import NoGenerationStrategy, StatusResetStrategy, Strategy, now_rfc3339

__all__ = ["Strategies", "Strategy", "now_rfc3339"]


class _Rules(NamedTuple):
    strategy: type[Strategy] = Strategy
    validator: Validator = METADATA
    defaulter: Defaulter | None = None

    def for_resource(self, r: Resource) -> Strategy:
        return self.strategy(r, self.validator, self.defaulter)


_V, _D = validation, defaults
_RULES: dict[str, _Rules] = {
    # core
    "pods": _Rules(core.PodStrategy, _V.POD, _D.default_pod),
    "namespaces": _Rules(core.NamespaceStrategy, _V.NAMESPACE, _D.default_namespace),
    "nodes": _Rules(Strategy, _V.NODE, _D.default_node),
    "services": _Rules(core.ServiceStrategy, _V.SERVICE, _D.default_service),
    "endpoints": _Rules(NoGenerationStrategy, _V.ENDPOINTS, _D.default_endpoints),
    "configmaps": _Rules(NoGenerationStrategy, _V.CONFIG_MAP),
    "secrets": _Rules(NoGenerationStrategy, _V.SECRET, _D.default_secret),
    "serviceaccounts": _Rules(),
    "events": _Rules(NoGenerationStrategy, _V.EVENT),
    "limitranges": _Rules(Strategy, _V.LIMIT_RANGE, _D.default_limit_range),
    "resourcequotas": _Rules(StatusResetStrategy, _V.RESOURCE_QUOTA, _D.default_resource_quota),
    "persistentvolumes": _Rules(
        core.PendingStrategy, _V.PERSISTENT_VOLUME, _D.default_persistent_volume
    ),
    "persistentvolumeclaims": _Rules(
        core.PendingStrategy, _V.PERSISTENT_VOLUME_CLAIM, _D.default_persistent_volume_claim
    ),
    "replicationcontrollers": _Rules(
        core.ReplicationControllerStrategy,
        _V.REPLICATION_CONTROLLER,
        _D.default_replication_controller,
    ),
    # apps, batch
    "deployments.apps": _Rules(StatusResetStrategy, _V.DEPLOYMENT, _D.default_deployment),
    "replicasets.apps": _Rules(StatusResetStrategy, _V.REPLICA_SET, _D.default_replica_set),
    "daemonsets.apps": _Rules(StatusResetStrategy, _V.DAEMON_SET, _D.default_daemon_set),
    "statefulsets.apps": _Rules(StatusResetStrategy, _V.STATEFUL_SET, _D.default_stateful_set),
    "controllerrevisions.apps": _Rules(Strategy, _V.CONTROLLER_REVISION),
    "jobs.batch": _Rules(StatusResetStrategy, _V.JOB, _D.default_job),
    "cronjobs.batch": _Rules(StatusResetStrategy, _V.CRON_JOB, _D.default_cron_job),
    # coordination, policy, discovery, certificates
    "leases.coordination.k8s.io": _Rules(NoGenerationStrategy, _V.LEASE),
    "poddisruptionbudgets.policy": _Rules(StatusResetStrategy),
    "endpointslices.discovery.k8s.io": _Rules(
        NoGenerationStrategy, _V.ENDPOINT_SLICE, _D.default_endpoint_slice
    ),
    "certificatesigningrequests.certificates.k8s.io": _Rules(
        certificates.CertificateSigningRequestStrategy, _V.CERTIFICATE_SIGNING_REQUEST
    ),
    # rbac
    "roles.rbac.authorization.k8s.io": _Rules(Strategy, _V.ROLE),
    "rolebindings.rbac.authorization.k8s.io": _Rules(
        Strategy, _V.ROLE_BINDING, _D.default_role_binding
    ),
    "clusterroles.rbac.authorization.k8s.io": _Rules(Strategy, _V.CLUSTER_ROLE),
    "clusterrolebindings.rbac.authorization.k8s.io": _Rules(
        Strategy, _V.CLUSTER_ROLE_BINDING, _D.default_role_binding
    ),
    # apiextensions, apiregistration
    "customresourcedefinitions.apiextensions.k8s.io": _Rules(
        apiextensions.CustomResourceDefinitionStrategy
    ),
    "apiservices.apiregistration.k8s.io": _Rules(StatusResetStrategy, _V.API_SERVICE),
    # networking, scheduling, autoscaling, storage, node
    "ingresses.networking.k8s.io": _Rules(StatusResetStrategy, _V.INGRESS, _D.default_ingress),
    "ingressclasses.networking.k8s.io": _Rules(Strategy, _V.INGRESS_CLASS),
    "networkpolicies.networking.k8s.io": _Rules(
        Strategy, _V.NETWORK_POLICY, _D.default_network_policy
    ),
    "priorityclasses.scheduling.k8s.io": _Rules(
        Strategy, _V.PRIORITY_CLASS, _D.default_priority_class
    ),
    "horizontalpodautoscalers.autoscaling": _Rules(
        StatusResetStrategy, _V.HORIZONTAL_POD_AUTOSCALER, _D.default_horizontal_pod_autoscaler
    ),
    "storageclasses.storage.k8s.io": _Rules(Strategy, _V.STORAGE_CLASS, _D.default_storage_class),
    "csidrivers.storage.k8s.io": _Rules(Strategy, _V.CSI_DRIVER, _D.default_csi_driver),
    "volumeattachments.storage.k8s.io": _Rules(StatusResetStrategy, _V.VOLUME_ATTACHMENT),
    "runtimeclasses.node.k8s.io": _Rules(Strategy, _V.RUNTIME_CLASS),
    # admissionregistration
    "mutatingwebhookconfigurations.admissionregistration.k8s.io": _Rules(
        Strategy,
        _V.MUTATING_WEBHOOK_CONFIGURATION,
        _D.default_mutating_webhook_configuration,
    ),
    "validatingwebhookconfigurations.admissionregistration.k8s.io": _Rules(
        Strategy,
        _V.VALIDATING_WEBHOOK_CONFIGURATION,
        _D.default_validating_webhook_configuration,
    ),
}


class Strategies:
    """One apiserver's strategies: one per stored built-in resource, made from `_RULES`,
    and one per custom resource it serves (`register`, by its CRD controller). Keyed by
    group resource: a conversion view (autoscaling/v1 HPAs) is written through its stored
    resource, and shares that resource's strategy."""

    def __init__(self) -> None:
        self._by_resource: dict[str, Strategy] = {
            r.group_resource: _RULES[r.group_resource].for_resource(r)
            for r in RESOURCES
            if r.stored and not r.converted_from
        }

    def register(self, strategy: Strategy) -> None:
        """Use `strategy` for its resource from now on (a custom resource's, whose rules
        come from its CustomResourceDefinition: see `controlplane.apiserver.crds`)."""
        self._by_resource[strategy.resource.group_resource] = strategy

    def unregister(self, group_resource: str) -> None:
        self._by_resource.pop(group_resource, None)

    def for_resource(self, r: Resource) -> Strategy:
        """The strategy of a stored resource (the default one for a resource without
        rules: metadata validation, no defaults)."""
        return self._by_resource.get(r.group_resource) or Strategy(r)
