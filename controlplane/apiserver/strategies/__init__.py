"""One strategy object per stored resource: the per-kind rules of the generic registry.

`for_resource` is the lookup the registry and the subresource handlers use; a resource
not named in `_STRATEGIES` (Node, ServiceAccount, LimitRange, the RBAC kinds,
ControllerRevision) follows the default `Strategy`. Kinds with rules of their own have a
class in the module of their API group (so far only `core` has any), as Kubernetes keeps
them in ``pkg/registry/<group>/<kind>/strategy.go``; the others share one of the two
variants in `generic`:

* `StatusResetStrategy`: Deployment, ReplicaSet, DaemonSet, StatefulSet, Job, CronJob,
  ResourceQuota, PodDisruptionBudget, Ingress, HorizontalPodAutoscaler,
  VolumeAttachment, APIService (and, in `core`, Service and ReplicationController;
  in `certificates`, CertificateSigningRequest, which also records its requester);
* `NoGenerationStrategy`: Event, Endpoints, EndpointSlice, ConfigMap, Secret, Lease.
"""

from __future__ import annotations

from kubelab.api.resources import RESOURCES, Resource

from . import apiextensions, certificates, core
from .generic import NoGenerationStrategy, StatusResetStrategy, Strategy, now_rfc3339

__all__ = ["Strategy", "for_resource", "now_rfc3339", "register", "unregister"]

_STRATEGIES: dict[str, type[Strategy]] = {
    # core
    "pods": core.PodStrategy,
    "namespaces": core.NamespaceStrategy,
    "services": core.ServiceStrategy,
    "persistentvolumes": core.PendingStrategy,
    "persistentvolumeclaims": core.PendingStrategy,
    "replicationcontrollers": core.ReplicationControllerStrategy,
    "resourcequotas": StatusResetStrategy,
    "events": NoGenerationStrategy,
    "endpoints": NoGenerationStrategy,
    "configmaps": NoGenerationStrategy,
    "secrets": NoGenerationStrategy,
    # apps, batch, certificates
    "deployments.apps": StatusResetStrategy,
    "replicasets.apps": StatusResetStrategy,
    "statefulsets.apps": StatusResetStrategy,
    "daemonsets.apps": StatusResetStrategy,
    "jobs.batch": StatusResetStrategy,
    "cronjobs.batch": StatusResetStrategy,
    "certificatesigningrequests.certificates.k8s.io": (
        certificates.CertificateSigningRequestStrategy
    ),
    # policy
    "poddisruptionbudgets.policy": StatusResetStrategy,
    # networking, autoscaling, storage, apiregistration
    "ingresses.networking.k8s.io": StatusResetStrategy,
    "horizontalpodautoscalers.autoscaling": StatusResetStrategy,
    "volumeattachments.storage.k8s.io": StatusResetStrategy,
    "apiservices.apiregistration.k8s.io": StatusResetStrategy,
    # apiextensions
    "customresourcedefinitions.apiextensions.k8s.io": (
        apiextensions.CustomResourceDefinitionStrategy
    ),
    # coordination, discovery
    "leases.coordination.k8s.io": NoGenerationStrategy,
    "endpointslices.discovery.k8s.io": NoGenerationStrategy,
}

# Keyed by group resource: a conversion view (autoscaling/v1 HPAs) is written through its
# stored resource, and shares that resource's strategy.
_BY_RESOURCE: dict[str, Strategy] = {
    r.group_resource: _STRATEGIES.get(r.group_resource, Strategy)(r)
    for r in RESOURCES
    if r.stored and not r.converted_from
}


def register(strategy: Strategy) -> None:
    """Use `strategy` for its resource from now on (a custom resource's, whose rules come
    from its CustomResourceDefinition: see `controlplane.apiserver.crds`)."""
    _BY_RESOURCE[strategy.resource.group_resource] = strategy


def unregister(group_resource: str) -> None:
    _BY_RESOURCE.pop(group_resource, None)


def for_resource(r: Resource) -> Strategy:
    """The strategy of a stored resource (the default one for a kind without rules)."""
    return _BY_RESOURCE.get(r.group_resource) or Strategy(r)
