"""The cluster-scoped classes and registrations workloads refer to by name:
PriorityClasses (scheduling.k8s.io), RuntimeClasses (node.k8s.io), StorageClasses,
CSIDrivers and VolumeAttachments (storage.k8s.io), APIServices (apiregistration.k8s.io).

Pods, claims and clients look these up by name long after they were written, and their
users cannot see them, so what they promise must not change under them: a priority
class's value, a runtime class's handler, a storage class's provisioner and parameters,
a volume attachment's spec are immutable, as in Kubernetes.
"""

from __future__ import annotations

from typing import Any

from kubelab.api.errors import forbidden, invalid, not_supported, required
from kubelab.api.validation import formats
from kubelab.api.validation.compute import resource_amount
from kubelab.api.validation.fields import (
    IMMUTABLE,
    Errors,
    Path,
    integer,
    items,
    label_key,
    mapping,
    messages,
    text,
)
from kubelab.api.validation.scheduling import tolerations

SPEC = Path("spec")
ROOT = Path("")
METADATA_NAME = Path("metadata.name")

# Priorities above this are reserved for the built-in system classes.
HIGHEST_USER_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}
PREEMPTION_POLICIES = ["Never", "PreemptLowerPriority"]
RECLAIM_POLICIES = ["Delete", "Retain"]
BINDING_MODES = ["Immediate", "WaitForFirstConsumer"]
FS_GROUP_POLICIES = ["File", "None", "ReadWriteOnceWithFSType"]
LIFECYCLE_MODES = ["Ephemeral", "Persistent"]
_MAX_GROUP_PRIORITY = 20000


def _qualified(value: Any, path: Path) -> Errors:
    name = text(value)
    if not name:
        return [required(path)]
    return label_key(name, path)


def _immutable(new: Any, old: Any, path: Path, detail: str = IMMUTABLE) -> Errors:
    return [] if new == old else [invalid(path, new, detail)]


# -- scheduling.k8s.io --------------------------------------------------------------------


def validate_priority_class(obj: dict[str, Any]) -> Errors:
    name = text(mapping(obj.get("metadata")).get("name"))
    errors: Errors = []
    value = integer(obj, "value", ROOT.child("value"), errors)
    if name in SYSTEM_PRIORITY_CLASSES:
        if value != SYSTEM_PRIORITY_CLASSES[name]:
            errors.append(
                forbidden(
                    ROOT.child("value"),
                    f"value of {name} must be {SYSTEM_PRIORITY_CLASSES[name]}",
                )
            )
    elif name.startswith("system-"):
        errors.append(
            invalid(METADATA_NAME, name, "priority class names with 'system-' prefix are reserved")
        )
    elif value is not None and value > HIGHEST_USER_PRIORITY:
        errors.append(
            forbidden(
                ROOT.child("value"),
                f"maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}",
            )
        )
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in PREEMPTION_POLICIES:
        errors.append(not_supported(ROOT.child("preemptionPolicy"), policy, PREEMPTION_POLICIES))
    return errors


def validate_priority_class_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    errors: Errors = []
    if new.get("value") != old.get("value"):
        errors.append(forbidden(ROOT.child("value"), "may not be changed in an update."))
    errors += _immutable(
        new.get("preemptionPolicy"), old.get("preemptionPolicy"), ROOT.child("preemptionPolicy")
    )
    return errors


# -- node.k8s.io --------------------------------------------------------------------------


def validate_runtime_class(obj: dict[str, Any]) -> Errors:
    errors: Errors = []
    handler = text(obj.get("handler"))
    if not handler:
        errors.append(required(ROOT.child("handler")))
    else:
        errors += messages(ROOT.child("handler"), handler, formats.is_dns1123_label(handler))
    at = Path("overhead.podFixed")
    for resource, amount in mapping(mapping(obj.get("overhead")).get("podFixed")).items():
        errors += resource_amount(resource, amount, at.key(resource))
    scheduling = mapping(obj.get("scheduling"))
    for key, value in mapping(scheduling.get("nodeSelector")).items():
        errors += label_key(key, Path("scheduling.nodeSelector"))
        errors += messages(
            Path("scheduling.nodeSelector"), value, formats.is_label_value(text(value))
        )
    errors += tolerations(scheduling.get("tolerations"), Path("scheduling.tolerations"))
    return errors


def validate_runtime_class_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    return _immutable(new.get("handler"), old.get("handler"), ROOT.child("handler"))


# -- storage.k8s.io -----------------------------------------------------------------------


def validate_storage_class(obj: dict[str, Any]) -> Errors:
    errors = _qualified(obj.get("provisioner"), ROOT.child("provisioner"))
    for key, allowed in (("reclaimPolicy", RECLAIM_POLICIES), ("volumeBindingMode", BINDING_MODES)):
        value = obj.get(key)
        if value is not None and value not in allowed:
            errors.append(not_supported(ROOT.child(key), value, allowed))
    for key, value in mapping(obj.get("parameters")).items():
        if not key:
            errors.append(invalid(ROOT.child("parameters"), key, "key may not be empty"))
        if not isinstance(value, str):
            errors.append(invalid(ROOT.child("parameters").key(key), value, "must be a string"))
    return errors


def validate_storage_class_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    errors: Errors = []
    for key in ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"):
        if new.get(key) != old.get(key):
            errors.append(forbidden(ROOT.child(key), f"updates to {key} are forbidden."))
    return errors


def validate_csi_driver(obj: dict[str, Any]) -> Errors:
    errors: Errors = []
    name = text(mapping(obj.get("metadata")).get("name"))
    if name and len(name) > formats.DNS1123_LABEL_MAX:
        errors.append(
            invalid(METADATA_NAME, name, formats.max_len_error(formats.DNS1123_LABEL_MAX))
        )
    spec = mapping(obj.get("spec"))
    policy = spec.get("fsGroupPolicy")
    if policy is not None and policy not in FS_GROUP_POLICIES:
        errors.append(not_supported(SPEC.child("fsGroupPolicy"), policy, FS_GROUP_POLICIES))
    for i, mode in enumerate(items(spec.get("volumeLifecycleModes"))):
        if mode not in LIFECYCLE_MODES:
            at = SPEC.child("volumeLifecycleModes").item(i)
            errors.append(not_supported(at, mode, LIFECYCLE_MODES))
    return errors


def validate_csi_driver_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    new_spec, old_spec = mapping(new.get("spec")), mapping(old.get("spec"))
    errors: Errors = []
    for key in ("attachRequired", "podInfoOnMount", "volumeLifecycleModes", "fsGroupPolicy"):
        errors += _immutable(new_spec.get(key), old_spec.get(key), SPEC.child(key))
    return errors


def validate_volume_attachment(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors = _qualified(spec.get("attacher"), SPEC.child("attacher"))
    if not text(spec.get("nodeName")):
        errors.append(required(SPEC.child("nodeName")))
    source = mapping(spec.get("source"))
    named, inline = source.get("persistentVolumeName"), source.get("inlineVolumeSpec")
    if (named is None) == (inline is None):
        errors.append(
            required(
                SPEC.child("source"),
                "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            )
        )
    elif named is not None and not text(named):
        errors.append(
            required(
                SPEC.child("source", "persistentVolumeName"),
                "must specify non empty persistentVolumeName",
            )
        )
    return errors


def validate_volume_attachment_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    return _immutable(new.get("spec"), old.get("spec"), SPEC)


# -- apiregistration.k8s.io ---------------------------------------------------------------


def validate_api_service(obj: dict[str, Any]) -> Errors:
    name = text(mapping(obj.get("metadata")).get("name"))
    spec = mapping(obj.get("spec"))
    version, group = text(spec.get("version")), text(spec.get("group"))
    errors: Errors = []
    expected = f"{version}.{group}"  # "v1." for the core group
    if name != expected:
        errors.append(
            invalid(METADATA_NAME, name, f'must be "{expected}" (spec.version.spec.group)')
        )
    if not version:
        errors.append(required(SPEC.child("version")))
    group_priority = integer(
        spec, "groupPriorityMinimum", SPEC.child("groupPriorityMinimum"), errors
    )
    if group_priority is not None and not 0 < group_priority <= _MAX_GROUP_PRIORITY:
        errors.append(
            invalid(
                SPEC.child("groupPriorityMinimum"),
                group_priority,
                f"must be positive and less than {_MAX_GROUP_PRIORITY + 1}",
            )
        )
    version_priority = integer(spec, "versionPriority", SPEC.child("versionPriority"), errors)
    if version_priority is not None and version_priority <= 0:
        errors.append(invalid(SPEC.child("versionPriority"), version_priority, "must be positive"))
    service = spec.get("service")
    if service is not None:
        ref = mapping(service)
        for key in ("namespace", "name"):
            if not text(ref.get(key)):
                errors.append(required(SPEC.child("service", key)))
    return errors
