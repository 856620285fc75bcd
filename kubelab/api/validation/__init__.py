"""Per-kind validation of API objects, as the real apiserver validates them.

`validate(kind, obj, old)` returns every problem at once, as `FieldError`s with
Kubernetes' field paths and wording; the apiserver turns a non-empty list into a 422
Invalid Status. It is called after `kubelab.api.defaults.apply_defaults`, like the real
validation runs after defaulting, so required-but-defaulted fields are present. On
update `old` is the stored object and the kind's immutability rules apply too.

Kinds without rules of their own (unknown kinds, ServiceAccounts, ...) get metadata
validation only. The modules follow the API's own grouping: `meta`; `pods` with
`volumes`, `scheduling` and `compute`; `workloads` with `schedule`; `services`;
`config`; `cluster`; `policy`; `storage`; `rbac`; `networking`; `autoscaling`;
`classes` (priority, runtime and storage classes, CSI drivers, volume attachments,
APIServices); `admissionregistration` (webhook configurations). `formats` and `fields` hold the
string formats and field helpers they share.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubelab.api.resources import RESOURCES
from kubelab.api.validation import (
    admissionregistration,
    autoscaling,
    classes,
    cluster,
    config,
    networking,
    pods,
    policy,
    rbac,
    services,
    storage,
    workloads,
)
from kubelab.api.validation.fields import Errors, mapping
from kubelab.api.validation.meta import (
    validate_name,
    validate_object_meta,
    validate_object_meta_update,
)

__all__ = ["validate", "validate_name", "validate_object_meta"]

Check = Callable[[dict[str, Any]], Errors]
UpdateCheck = Callable[[dict[str, Any], dict[str, Any]], Errors]

_CHECKS: dict[str, Check] = {
    "Pod": pods.validate_pod,
    "Deployment": workloads.validate_deployment,
    "ReplicaSet": workloads.validate_replica_set,
    "ReplicationController": workloads.validate_replication_controller,
    "DaemonSet": workloads.validate_daemon_set,
    "StatefulSet": workloads.validate_stateful_set,
    "ControllerRevision": workloads.validate_controller_revision,
    "Job": workloads.validate_job,
    "CronJob": workloads.validate_cron_job,
    "Service": services.validate_service,
    "Endpoints": services.validate_endpoints,
    "EndpointSlice": services.validate_endpoint_slice,
    "ConfigMap": config.validate_config_map,
    "Secret": config.validate_secret,
    "Namespace": cluster.validate_namespace,
    "Node": cluster.validate_node,
    "Lease": cluster.validate_lease,
    "Event": cluster.validate_event,
    "CertificateSigningRequest": cluster.validate_certificate_signing_request,
    "LimitRange": policy.validate_limit_range,
    "ResourceQuota": policy.validate_resource_quota,
    "PersistentVolume": storage.validate_persistent_volume,
    "PersistentVolumeClaim": storage.validate_persistent_volume_claim,
    "Role": rbac.validate_role,
    "ClusterRole": rbac.validate_cluster_role,
    "RoleBinding": rbac.validate_role_binding,
    "ClusterRoleBinding": rbac.validate_cluster_role_binding,
    "Ingress": networking.validate_ingress,
    "IngressClass": networking.validate_ingress_class,
    "NetworkPolicy": networking.validate_network_policy,
    "PriorityClass": classes.validate_priority_class,
    "HorizontalPodAutoscaler": autoscaling.validate_horizontal_pod_autoscaler,
    "StorageClass": classes.validate_storage_class,
    "CSIDriver": classes.validate_csi_driver,
    "VolumeAttachment": classes.validate_volume_attachment,
    "RuntimeClass": classes.validate_runtime_class,
    "APIService": classes.validate_api_service,
    "MutatingWebhookConfiguration": (admissionregistration.validate_mutating_webhook_configuration),
    "ValidatingWebhookConfiguration": (
        admissionregistration.validate_validating_webhook_configuration
    ),
}

# Rules for creation only: what may exist later but not be created with the object.
_CREATE_CHECKS: dict[str, Check] = {"Pod": pods.validate_pod_create}

_UPDATE_CHECKS: dict[str, UpdateCheck] = {
    "Pod": pods.validate_pod_update,
    "Deployment": workloads.validate_selector_update,
    "ReplicaSet": workloads.validate_selector_update,
    "DaemonSet": workloads.validate_selector_update,
    "StatefulSet": workloads.validate_stateful_set_update,
    "Job": workloads.validate_job_update,
    "Service": services.validate_service_update,
    "EndpointSlice": services.validate_endpoint_slice_update,
    "ConfigMap": config.validate_config_map_update,
    "Secret": config.validate_secret_update,
    "Node": cluster.validate_node_update,
    "ResourceQuota": policy.validate_resource_quota_update,
    "PersistentVolume": storage.validate_persistent_volume_update,
    "PersistentVolumeClaim": storage.validate_persistent_volume_claim_update,
    "RoleBinding": rbac.validate_binding_update,
    "ClusterRoleBinding": rbac.validate_binding_update,
    "IngressClass": networking.validate_ingress_class_update,
    "PriorityClass": classes.validate_priority_class_update,
    "StorageClass": classes.validate_storage_class_update,
    "CSIDriver": classes.validate_csi_driver_update,
    "VolumeAttachment": classes.validate_volume_attachment_update,
    "RuntimeClass": classes.validate_runtime_class_update,
}

_NAMESPACED = {resource.kind: resource.namespaced for resource in RESOURCES}


def validate(kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> Errors:
    """Every problem with `obj` (a `kind`), and with the change from `old` on update."""
    namespaced = _NAMESPACED.get(kind)
    if namespaced is None:
        # An unknown kind's scope is whatever the caller routed it as.
        namespaced = bool(mapping(obj.get("metadata")).get("namespace"))
    errors: Errors = []
    if old is not None:
        errors += validate_object_meta_update(obj, old)
    errors += validate_object_meta(obj, namespaced, kind)
    check = _CHECKS.get(kind)
    if check is not None:
        errors += check(obj)
    if old is None:
        create_check = _CREATE_CHECKS.get(kind)
        errors += create_check(obj) if create_check is not None else []
    else:
        update_check = _UPDATE_CHECKS.get(kind)
        errors += update_check(obj, old) if update_check is not None else []
    return errors
