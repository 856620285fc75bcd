"""ConfigMaps and Secrets: keys that can become file names and environment variables,
a 1 MiB size limit (one object must fit in one store value), the well-known Secret types'
required keys, and the `immutable` flag.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from kubelab.api.errors import forbidden, invalid, required, too_long
from kubelab.api.validation import formats
from kubelab.api.validation.fields import ROOT, Errors, Path, immutable, mapping, messages, text

MAX_SIZE = 1024 * 1024
DATA = Path("data")
_IMMUTABLE_SET = "field is immutable when `immutable` is set"
# Secret type -> keys its data must hold (any one of them, for basic-auth).
_REQUIRED_KEYS = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}


def _decoded_size(value: Any) -> int | None:
    """Secret and binaryData values travel base64-encoded; the limit is on the bytes."""
    if not isinstance(value, str):
        return None
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return None


def _keys(bag: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    for key in bag:
        errors += messages(path.key(key), key, formats.is_config_map_key(key))
    return errors


def _base64_values(bag: dict[str, Any], path: Path) -> tuple[int, Errors]:
    total, errors = 0, []
    for key, value in bag.items():
        size = _decoded_size(value)
        if size is None:
            errors.append(invalid(path.key(key), "<value redacted>", "must be base64-encoded"))
        else:
            total += size
    return total, errors


def validate_config_map(obj: dict[str, Any]) -> Errors:
    data, binary = mapping(obj.get("data")), mapping(obj.get("binaryData"))
    errors = _keys(data, DATA)
    for key in data:
        if key in binary:
            errors.append(invalid(DATA.key(key), key, "duplicate of key present in binaryData"))
    errors += _keys(binary, Path("binaryData"))
    binary_size, binary_errors = _base64_values(binary, Path("binaryData"))
    errors += binary_errors
    if sum(len(text(v).encode()) for v in data.values()) + binary_size > MAX_SIZE:
        errors.append(too_long(ROOT, MAX_SIZE))
    return errors


def validate_secret(obj: dict[str, Any]) -> Errors:
    data = mapping(obj.get("data"))
    errors = _keys(data, DATA)
    total, value_errors = _base64_values(data, DATA)
    errors += value_errors
    if total > MAX_SIZE:
        errors.append(too_long(DATA, MAX_SIZE))
    kind = text(obj.get("type"))
    if kind == "kubernetes.io/service-account-token":
        annotations = mapping(mapping(obj.get("metadata")).get("annotations"))
        if not text(annotations.get("kubernetes.io/service-account.name")):
            path = Path("metadata.annotations").key("kubernetes.io/service-account.name")
            errors.append(required(path))
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            errors += [required(DATA.key("username")), required(DATA.key("password"))]
    else:
        missing = [key for key in _REQUIRED_KEYS.get(kind, ()) if key not in data]
        errors += [required(DATA.key(key)) for key in missing]
        if kind in ("kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson") and not missing:
            errors += _docker_config(data, _REQUIRED_KEYS[kind][0])
    return errors


def _docker_config(data: dict[str, Any], key: str) -> Errors:
    try:
        json.loads(base64.b64decode(text(data[key])))
    except ValueError as exc:
        return [invalid(DATA.key(key), "<secret contents redacted>", str(exc))]
    return []


def validate_config_map_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    return _frozen_data(new, old)


def validate_secret_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    return immutable(new.get("type"), old.get("type"), Path("type")) + _frozen_data(new, old)


def _frozen_data(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    """Once `immutable: true`, data and the flag itself are frozen: kubelets stop
    watching such objects, so a change would never reach the pods using them."""
    if old.get("immutable") is not True:
        return []
    errors: Errors = []
    if new.get("immutable") is not True:
        errors.append(forbidden(Path("immutable"), _IMMUTABLE_SET))
    for field in ("data", "binaryData"):
        if new.get(field) != old.get(field):
            errors.append(forbidden(Path(field), _IMMUTABLE_SET))
    return errors
