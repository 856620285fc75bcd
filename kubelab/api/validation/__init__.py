"""Per-resource validation of API objects, as the real apiserver validates them.

A `Validator` holds one resource's rules (Kubernetes' ``ValidateX`` and
``ValidateXUpdate`` pair, and the format of its names); `Validator.validate` returns
every problem at once, as `FieldError`s with Kubernetes' field paths and wording, and the
apiserver turns a non-empty list into a 422 Invalid Status. The validators are named
after their resource (`POD`, `SERVICE`, ...) and nothing here looks one up: each
resource's strategy names its own (``controlplane.apiserver.strategies``), so a custom
resource whose kind is ``Service`` never meets the core Service's rules. Validation runs
after defaulting, like the real one, so required-but-defaulted fields are present. On
update the stored object is passed too and the resource's immutability rules apply.

Resources without rules of their own (ServiceAccounts, custom resources) get
`METADATA`: metadata validation only. The modules follow the API's own grouping:
`meta`; `pods` with `volumes`, `scheduling` and `compute`; `workloads` with `schedule`;
`services`; `config`; `cluster`; `policy`; `storage`; `rbac`; `networking`;
`autoscaling`; `classes` (priority, runtime and storage classes, CSI drivers, volume
attachments, APIServices); `admissionregistration` (webhook configurations). `formats`
and `fields` hold the string formats and field helpers they share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
from kubelab.api.validation.fields import Errors
from kubelab.api.validation.meta import (
    NameRule,
    name_is_dns1035_label,
    name_is_dns_label,
    name_is_dns_subdomain,
    name_is_path_segment,
    validate_object_meta,
    validate_object_meta_update,
)

__all__ = ["METADATA", "Validator", "validate_object_meta"]

Check = Callable[[dict[str, Any]], Errors]
UpdateCheck = Callable[[dict[str, Any], dict[str, Any]], Errors]


@dataclass(frozen=True)
class Validator:
    """The validation of one resource's objects."""

    check: Check | None = None
    """Rules of every write (create and update)."""
    on_create: Check | None = None
    """Rules for creation only: what may exist later but not be created with the object."""
    on_update: UpdateCheck | None = None
    """Rules of a change from the stored object (immutable fields)."""
    name: NameRule = name_is_dns_subdomain
    """The format of the objects' names (and generateName prefixes)."""

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None, namespaced: bool) -> Errors:
        """Every problem with `obj`, and with the change from `old` on update; `namespaced`
        is the resource's scope (a namespace is required, or forbidden)."""
        errors: Errors = []
        if old is not None:
            errors += validate_object_meta_update(obj, old)
        errors += validate_object_meta(obj, namespaced, self.name)
        if self.check is not None:
            errors += self.check(obj)
        if old is None and self.on_create is not None:
            errors += self.on_create(obj)
        if old is not None and self.on_update is not None:
            errors += self.on_update(obj, old)
        return errors

    def validate_name(self, name: str) -> list[str]:
        """Problems with `name` as an object's name, in Kubernetes' words (empty if valid)."""
        return self.name(name, False)


METADATA = Validator()
"""Metadata validation only: resources without rules of their own, custom resources."""

# core
POD = Validator(pods.validate_pod, pods.validate_pod_create, pods.validate_pod_update)
# A Service's name becomes an environment variable prefix and a DNS label.
SERVICE = Validator(
    services.validate_service,
    on_update=services.validate_service_update,
    name=name_is_dns1035_label,
)
ENDPOINTS = Validator(services.validate_endpoints)
CONFIG_MAP = Validator(config.validate_config_map, on_update=config.validate_config_map_update)
SECRET = Validator(config.validate_secret, on_update=config.validate_secret_update)
NAMESPACE = Validator(cluster.validate_namespace, name=name_is_dns_label)
NODE = Validator(cluster.validate_node, on_update=cluster.validate_node_update)
EVENT = Validator(cluster.validate_event, name=name_is_path_segment)
LIMIT_RANGE = Validator(policy.validate_limit_range)
RESOURCE_QUOTA = Validator(
    policy.validate_resource_quota, on_update=policy.validate_resource_quota_update
)
PERSISTENT_VOLUME = Validator(
    storage.validate_persistent_volume, on_update=storage.validate_persistent_volume_update
)
PERSISTENT_VOLUME_CLAIM = Validator(
    storage.validate_persistent_volume_claim,
    on_update=storage.validate_persistent_volume_claim_update,
)
REPLICATION_CONTROLLER = Validator(workloads.validate_replication_controller)
# apps, batch
DEPLOYMENT = Validator(workloads.validate_deployment, on_update=workloads.validate_selector_update)
REPLICA_SET = Validator(
    workloads.validate_replica_set, on_update=workloads.validate_selector_update
)
DAEMON_SET = Validator(workloads.validate_daemon_set, on_update=workloads.validate_selector_update)
STATEFUL_SET = Validator(
    workloads.validate_stateful_set,
    on_update=workloads.validate_stateful_set_update,
    name=name_is_dns_label,
)
CONTROLLER_REVISION = Validator(workloads.validate_controller_revision)
JOB = Validator(workloads.validate_job, on_update=workloads.validate_job_update)
CRON_JOB = Validator(workloads.validate_cron_job)
# coordination, discovery, certificates: a CSR may be named like "system:node:worker-1".
LEASE = Validator(cluster.validate_lease)
ENDPOINT_SLICE = Validator(
    services.validate_endpoint_slice, on_update=services.validate_endpoint_slice_update
)
CERTIFICATE_SIGNING_REQUEST = Validator(
    cluster.validate_certificate_signing_request, name=name_is_path_segment
)
# rbac: names like "system:node:worker-1" too
ROLE = Validator(rbac.validate_role, name=name_is_path_segment)
CLUSTER_ROLE = Validator(rbac.validate_cluster_role, name=name_is_path_segment)
ROLE_BINDING = Validator(
    rbac.validate_role_binding, on_update=rbac.validate_binding_update, name=name_is_path_segment
)
CLUSTER_ROLE_BINDING = Validator(
    rbac.validate_cluster_role_binding,
    on_update=rbac.validate_binding_update,
    name=name_is_path_segment,
)
# networking, scheduling, autoscaling, storage, node
INGRESS = Validator(networking.validate_ingress)
INGRESS_CLASS = Validator(
    networking.validate_ingress_class, on_update=networking.validate_ingress_class_update
)
NETWORK_POLICY = Validator(networking.validate_network_policy)
PRIORITY_CLASS = Validator(
    classes.validate_priority_class, on_update=classes.validate_priority_class_update
)
HORIZONTAL_POD_AUTOSCALER = Validator(autoscaling.validate_horizontal_pod_autoscaler)
STORAGE_CLASS = Validator(
    classes.validate_storage_class, on_update=classes.validate_storage_class_update
)
CSI_DRIVER = Validator(classes.validate_csi_driver, on_update=classes.validate_csi_driver_update)
VOLUME_ATTACHMENT = Validator(
    classes.validate_volume_attachment, on_update=classes.validate_volume_attachment_update
)
RUNTIME_CLASS = Validator(
    classes.validate_runtime_class, on_update=classes.validate_runtime_class_update
)
# apiregistration: named "<version>.<group>", "v1." for the core group (checked by
# validate_api_service).
API_SERVICE = Validator(classes.validate_api_service, name=name_is_path_segment)
# admissionregistration
MUTATING_WEBHOOK_CONFIGURATION = Validator(
    admissionregistration.validate_mutating_webhook_configuration
)
VALIDATING_WEBHOOK_CONFIGURATION = Validator(
    admissionregistration.validate_validating_webhook_configuration
)
