"""PersistentVolumes and PersistentVolumeClaims: access modes, sizes, and what may
change once a volume exists or a claim is bound.
"""

from __future__ import annotations

import copy
from typing import Any

from kubelab.api.errors import forbidden, invalid, not_supported, required
from kubelab.api.quantity import Quantity, parse_quantity
from kubelab.api.validation.fields import (
    Errors,
    Path,
    items,
    label_selector,
    mapping,
    messages,
    resource_quantity,
    text,
)
from kubelab.api.validation.meta import name_is_dns_subdomain
from kubelab.api.validation.scheduling import node_selector
from kubelab.api.validation.volumes import SOURCES, no_backsteps

SPEC = Path("spec")
ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
VOLUME_MODES = ["Block", "Filesystem"]
# A PersistentVolume has the pod volume sources that outlive a pod, plus "local".
_POD_ONLY = ("emptyDir", "secret", "configMap", "downwardAPI", "projected", "gitRepo", "image")
PV_SOURCES = (
    *(s for s in SOURCES if s not in (*_POD_ONLY, "ephemeral", "persistentVolumeClaim")),
    "local",
)


def _access_modes(spec: dict[str, Any], detail: str) -> Errors:
    modes = items(spec.get("accessModes"))
    path = SPEC.child("accessModes")
    errors = [] if modes else [required(path, detail)]
    for mode in modes:
        if mode not in ACCESS_MODES:
            errors.append(not_supported(path, mode, ACCESS_MODES))
    if "ReadWriteOncePod" in modes and any(
        m in ACCESS_MODES and m != "ReadWriteOncePod" for m in modes
    ):
        errors.append(forbidden(path, "may not use ReadWriteOncePod with other access modes"))
    return errors


def _volume_mode(spec: dict[str, Any]) -> Errors:
    mode = spec.get("volumeMode")
    if mode is not None and mode not in VOLUME_MODES:
        return [not_supported(SPEC.child("volumeMode"), mode, VOLUME_MODES)]
    return []


def _positive_storage(value: Any, path: Path) -> Errors:
    errors: Errors = []
    amount = resource_quantity(value, path, errors)
    if amount is not None and amount.value <= 0:
        errors.append(invalid(path, str(amount), "must be greater than zero"))
    return errors


def validate_persistent_volume(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors = _access_modes(spec, "")
    capacity = mapping(spec.get("capacity"))
    if not capacity:
        errors.append(required(SPEC.child("capacity")))
    if "storage" not in capacity or len(capacity) > 1:
        errors.append(not_supported(SPEC.child("capacity"), capacity, ["storage"]))
    for name, amount in capacity.items():
        errors += _positive_storage(amount, SPEC.child("capacity").key(name))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy and policy not in RECLAIM_POLICIES:
        errors.append(
            not_supported(SPEC.child("persistentVolumeReclaimPolicy"), policy, RECLAIM_POLICIES)
        )
    affinity = mapping(spec.get("nodeAffinity"))
    if spec.get("nodeAffinity") is not None:
        at = SPEC.child("nodeAffinity", "required")
        if affinity.get("required") is None:
            errors.append(required(at, "must specify required node constraints"))
        else:
            errors += node_selector(affinity["required"], at)
    errors += _pv_source(spec)
    class_name = text(spec.get("storageClassName"))
    if class_name:
        errors += messages(
            SPEC.child("storageClassName"), class_name, name_is_dns_subdomain(class_name, False)
        )
    return errors + _volume_mode(spec)


def _pv_source(spec: dict[str, Any]) -> Errors:
    chosen = [source for source in PV_SOURCES if spec.get(source) is not None]
    errors = [
        forbidden(SPEC.child(source), "may not specify more than 1 volume type")
        for source in chosen[1:]
    ]
    if not chosen:
        errors.append(required(SPEC, "must specify a volume type"))
    for source in ("hostPath", "local"):
        if source in chosen[:1]:
            target = text(mapping(spec[source]).get("path"))
            at = SPEC.child(source, "path")
            errors += no_backsteps(target, at) if target else [required(at)]
    return errors


def validate_persistent_volume_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    new_spec, old_spec = mapping(new.get("spec")), mapping(old.get("spec"))
    errors: Errors = []
    if any(new_spec.get(s) != old_spec.get(s) for s in PV_SOURCES):
        detail = "spec.persistentvolumesource is immutable after creation"
        errors.append(forbidden(SPEC.child("persistentvolumesource"), detail))
    if new_spec.get("volumeMode") != old_spec.get("volumeMode"):
        errors.append(invalid(Path("volumeMode"), new_spec.get("volumeMode"), "field is immutable"))
    return errors


def validate_persistent_volume_claim(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors = _access_modes(spec, "at least 1 access mode is required")
    if spec.get("selector") is not None:
        errors += label_selector(spec.get("selector"), SPEC.child("selector"))
    requests = mapping(mapping(spec.get("resources")).get("requests"))
    at = SPEC.child("resources").key("storage")
    if "storage" not in requests:
        errors.append(required(at))
    else:
        errors += _positive_storage(requests["storage"], at)
    class_name = text(spec.get("storageClassName"))
    if class_name:
        errors += messages(
            SPEC.child("storageClassName"), class_name, name_is_dns_subdomain(class_name, False)
        )
    return errors + _volume_mode(spec)


def validate_persistent_volume_claim_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    """A claim is fixed once created, except that the volume controller binds it once
    (volumeName) and a bound claim may grow (resources.requests.storage)."""
    new_spec, old_spec = mapping(new.get("spec")), mapping(old.get("spec"))
    munged = copy.deepcopy(new_spec)
    if not old_spec.get("volumeName"):
        munged.pop("volumeName", None)
        if "volumeName" in old_spec:
            munged["volumeName"] = old_spec["volumeName"]
    bound = mapping(new.get("status")).get("phase") == "Bound"
    old_requests = mapping(mapping(old_spec.get("resources")).get("requests"))
    new_requests = mapping(mapping(munged.get("resources")).get("requests"))
    if bound and "storage" in old_requests and "storage" in new_requests:
        new_requests["storage"] = old_requests["storage"]
    errors: Errors = []
    if munged != old_spec:
        detail = (
            "spec is immutable after creation except resources.requests and "
            "volumeAttributesClassName for bound claims"
        )
        errors.append(forbidden(SPEC, detail))
    new_size = _storage(new_spec)
    old_size = _storage(old_spec)
    if new_size is not None and old_size is not None and new_size < old_size:
        errors.append(
            forbidden(
                SPEC.child("resources", "requests", "storage"),
                "field can not be less than previous value",
            )
        )
    return errors


def _storage(spec: dict[str, Any]) -> Quantity | None:
    """The requested size, if it parses (a malformed one is reported elsewhere)."""
    value = mapping(mapping(spec.get("resources")).get("requests")).get("storage")
    try:
        return None if value is None else parse_quantity(value)
    except ValueError:
        return None
