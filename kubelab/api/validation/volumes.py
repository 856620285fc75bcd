"""Pod volumes and the mounts that use them.

A volume has a name and exactly one source (emptyDir, configMap, secret, a claim...).
The sources a lab actually uses are checked in detail; the cloud and legacy ones are
recognised, so that two sources in one volume are still caught, but not inspected.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

from kubelab.api.errors import (
    FieldError,
    FieldErrorType,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from kubelab.api.validation import formats
from kubelab.api.validation.fields import (
    Errors,
    Path,
    dicts,
    integer,
    mapping,
    messages,
    quantity,
    text,
)

# In the order Kubernetes examines them, which decides which one is "the second".
SOURCES = (
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "flexVolume",
    "configMap",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
    "csi",
    "ephemeral",
    "image",
)
HOST_PATH_TYPES = [
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
]
_PROJECTIONS = ("secret", "configMap", "downwardAPI", "serviceAccountToken")
FILE_MODE_ERROR = "must be a number between 0 and 0777 (octal), both inclusive"
_DOWNWARD_FIELDS = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
]


def volumes(value: Any, path: Path) -> tuple[set[str], Errors]:
    """Validate a pod's volumes; return the names a mount may refer to."""
    valid: set[str] = set()
    errors: Errors = []
    for i, volume in enumerate(dicts(value)):
        at = path.item(i)
        name = text(volume.get("name"))
        found = _source(volume, at)
        if not name:
            found.append(required(at.child("name")))
        else:
            found += messages(at.child("name"), name, formats.is_dns1123_label(name))
        if name in valid:
            found.append(duplicate(at.child("name"), name))
        if found:
            errors += found
        else:
            valid.add(name)
    return valid, errors


def _source(volume: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    chosen = ""
    for source in SOURCES:
        if volume.get(source) is None:
            continue
        if chosen:
            errors.append(forbidden(path.child(source), "may not specify more than 1 volume type"))
            continue
        chosen = source
        check = _SOURCE_CHECKS.get(source)
        if check is not None:
            errors += check(mapping(volume[source]), path.child(source))
    if not chosen:
        errors.append(required(path, "must specify a volume type"))
    return errors


def _empty_dir(source: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    if source.get("sizeLimit") is not None:
        size = quantity(source["sizeLimit"], path.child("sizeLimit"), errors)
        if size is not None and size.value < 0:
            detail = "SizeLimit field must be a valid resource quantity"
            errors.append(forbidden(path.child("sizeLimit"), detail))
    return errors


def _host_path(source: dict[str, Any], path: Path) -> Errors:
    host_path = text(source.get("path"))
    if not host_path:
        return [required(path.child("path"))]
    errors = no_backsteps(host_path, path.child("path"))
    kind = source.get("type")
    if kind is not None and kind not in HOST_PATH_TYPES:
        errors.append(not_supported(path.child("type"), kind, HOST_PATH_TYPES))
    return errors


SourceCheck = Callable[[dict[str, Any], Path], Errors]


def _required_fields(*fields: str) -> SourceCheck:
    def check(source: dict[str, Any], path: Path) -> Errors:
        return [required(path.child(field)) for field in fields if not text(source.get(field))]

    return check


def _nfs(source: dict[str, Any], path: Path) -> Errors:
    errors = _required_fields("server", "path")(source, path)
    if not text(source.get("path")).startswith("/"):
        errors.append(
            invalid(path.child("path"), text(source.get("path")), "must be an absolute path")
        )
    return errors


def _keyed_files(name_field: str) -> SourceCheck:
    """configMap and secret volumes: a name, a default mode, and optional key->path items."""

    def check(source: dict[str, Any], path: Path) -> Errors:
        errors: Errors = []
        if not text(source.get(name_field)):
            errors.append(required(path.child(name_field)))
        errors += file_mode(source, "defaultMode", path)
        for i, item in enumerate(dicts(source.get("items"))):
            errors += key_to_path(item, path.child("items").item(i))
        return errors

    return check


def key_to_path(item: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    if not text(item.get("key")):
        errors.append(required(path.child("key")))
    target = text(item.get("path"))
    if not target:
        errors.append(required(path.child("path")))
    errors += local_non_reserved_path(target, path.child("path"))
    return errors + file_mode(item, "mode", path)


def file_mode(source: dict[str, Any], field: str, path: Path) -> Errors:
    errors: Errors = []
    mode = integer(source, field, path.child(field), errors)
    if mode is not None and not 0 <= mode <= 0o777:
        errors.append(invalid(path.child(field), mode, FILE_MODE_ERROR))
    return errors


def _downward_api(source: dict[str, Any], path: Path) -> Errors:
    errors = file_mode(source, "defaultMode", path)
    for item in dicts(source.get("items")):
        errors += _downward_file(item, path)
    return errors


def _downward_file(item: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    target = text(item.get("path"))
    if not target:
        errors.append(required(path.child("path")))
    errors += local_non_reserved_path(target, path.child("path"))
    field_ref, resource_ref = item.get("fieldRef"), item.get("resourceFieldRef")
    if field_ref is not None:
        errors += field_selector(mapping(field_ref), _DOWNWARD_FIELDS, path.child("fieldRef"))
        if resource_ref is not None:
            detail = "fieldRef and resourceFieldRef can not be specified simultaneously"
            errors.append(invalid(path, "resource", detail))
    elif resource_ref is None:
        errors.append(required(path, "one of fieldRef and resourceFieldRef is required"))
    return errors + file_mode(item, "mode", path)


def field_selector(ref: dict[str, Any], supported: list[str], path: Path) -> Errors:
    """A downward API fieldRef: a known field, or a single label or annotation."""
    if not text(ref.get("apiVersion")):
        return [required(path.child("apiVersion"))]
    field_path = text(ref.get("fieldPath"))
    if not field_path:
        return [required(path.child("fieldPath"))]
    base, bracket, rest = field_path.partition("[")
    if bracket and rest.endswith("]"):
        subscript = rest[:-1].strip("'\"")
        if base == "metadata.annotations":
            return messages(path, subscript.lower(), formats.is_qualified_name(subscript.lower()))
        if base == "metadata.labels":
            return messages(path, subscript, formats.is_qualified_name(subscript))
        return [invalid(path, base, "does not support subscript")]
    if field_path not in supported:
        return [not_supported(path.child("fieldPath"), field_path, supported)]
    return []


def _projected(source: dict[str, Any], path: Path) -> Errors:
    errors = file_mode(source, "defaultMode", path)
    for i, entry in enumerate(dicts(source.get("sources"))):
        at = path.child("sources").item(i)
        kinds = [kind for kind in _PROJECTIONS if entry.get(kind) is not None]
        if len(kinds) > 1:
            errors.append(forbidden(at, "may not specify more than 1 volume type per source"))
        for kind in ("secret", "configMap"):
            if entry.get(kind) is not None:
                projection = mapping(entry[kind])
                if not text(projection.get("name")):
                    errors.append(required(at.child(kind).child("name")))
                for j, item in enumerate(dicts(projection.get("items"))):
                    errors += key_to_path(item, at.child(kind).child("items").item(j))
        for item in dicts(mapping(entry.get("downwardAPI")).get("items")):
            errors += _downward_file(item, at.child("downwardAPI"))
        token = entry.get("serviceAccountToken")
        if token is not None:
            errors += _token_projection(mapping(token), at.child("serviceAccountToken"), path)
    return errors


def _token_projection(token: dict[str, Any], path: Path, volume_path: Path) -> Errors:
    errors: Errors = []
    seconds = integer(token, "expirationSeconds", path.child("expirationSeconds"), errors)
    if seconds is not None and seconds < 600:
        detail = "may not specify a duration less than 10 minutes"
        errors.append(invalid(path.child("expirationSeconds"), seconds, detail))
    if seconds is not None and seconds > 1 << 32:
        detail = "may not specify a duration larger than 2^32 seconds"
        errors.append(invalid(path.child("expirationSeconds"), seconds, detail))
    target = text(token.get("path"))
    if not target:
        errors.append(required(volume_path.child("path")))
    else:
        errors += local_non_reserved_path(target, volume_path.child("path"))
    return errors


def _csi(source: dict[str, Any], path: Path) -> Errors:
    driver = text(source.get("driver"))
    if not driver:
        return [required(path.child("driver"))]
    return messages(path.child("driver"), driver, formats.is_dns1123_subdomain(driver.lower()))


_SOURCE_CHECKS: dict[str, SourceCheck] = {
    "emptyDir": _empty_dir,
    "hostPath": _host_path,
    "secret": _keyed_files("secretName"),
    "configMap": _keyed_files("name"),
    "nfs": _nfs,
    "persistentVolumeClaim": _required_fields("claimName"),
    "downwardAPI": _downward_api,
    "projected": _projected,
    "csi": _csi,
    "ephemeral": _required_fields("volumeClaimTemplate"),
}


def no_backsteps(target: str, path: Path) -> Errors:
    if ".." in target.replace("\\", "/").split("/"):
        return [invalid(path, target, "must not contain '..'")]
    return []


def local_descending_path(target: str, path: Path) -> Errors:
    """A path that stays below its base directory: relative, without '..' steps."""
    errors = [invalid(path, target, "must be a relative path")] if posixpath.isabs(target) else []
    return errors + no_backsteps(target, path)


def local_non_reserved_path(target: str, path: Path) -> Errors:
    errors = local_descending_path(target, path)
    if target.startswith("..") and not target.startswith("../"):
        errors.append(invalid(path, target, "must not start with '..'"))
    return errors


def volume_mounts(value: Any, available: set[str], path: Path) -> Errors:
    """A container's mounts: each names an existing volume, at a distinct mount path."""
    errors: Errors = []
    mount_points: set[str] = set()
    for i, mount in enumerate(dicts(value)):
        at = path.item(i)
        name, mount_path = text(mount.get("name")), text(mount.get("mountPath"))
        if not name:
            errors.append(required(at.child("name")))
        if name not in available:
            errors.append(FieldError(FieldErrorType.NOT_FOUND, at.child("name"), "", name))
        if not mount_path:
            errors.append(required(at.child("mountPath")))
        if mount_path in mount_points:
            errors.append(invalid(at.child("mountPath"), mount_path, "must be unique"))
        mount_points.add(mount_path)
        sub_path, sub_path_expr = text(mount.get("subPath")), text(mount.get("subPathExpr"))
        if sub_path:
            errors += local_descending_path(sub_path, at.child("subPath"))
        if sub_path_expr:
            if sub_path:
                detail = "subPathExpr and subPath are mutually exclusive"
                errors.append(invalid(at.child("subPathExpr"), sub_path_expr, detail))
            errors += local_descending_path(sub_path_expr, at.child("subPathExpr"))
        propagation = mount.get("mountPropagation")
        if propagation is not None:
            modes = ["Bidirectional", "HostToContainer", "None"]
            if propagation not in modes:
                errors.append(not_supported(at.child("mountPropagation"), propagation, modes))
    return errors
