"""Object metadata validation: names, namespaces, labels, annotations, owner references
and finalizers, on create and on update.

Every kind shares these rules; only the name format differs (a Namespace name must be a
DNS label, a Service name a DNS-1035 label, an RBAC name only a safe URL path segment,
most others a DNS subdomain): each resource's `Validator` names its rule, so a custom
resource that shares a core kind's name keeps the default one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubelab.api.errors import FieldError, forbidden, invalid, required, too_long
from kubelab.api.validation import formats
from kubelab.api.validation.fields import (
    IMMUTABLE,
    NEGATIVE,
    Errors,
    Path,
    dicts,
    integer,
    items,
    label_key,
    labels,
    mapping,
    text,
)

NameRule = Callable[[str, bool], list[str]]

METADATA = Path("metadata")
TOTAL_ANNOTATION_SIZE = 256 * 1024
# The last is the CRD cleanup finalizer, which the apiserver sets on every CRD itself.
STANDARD_FINALIZERS = (
    "kubernetes",
    "orphan",
    "foregroundDeletion",
    "customresourcecleanup.apiextensions.k8s.io",
)


def _mask_trailing_dash(name: str) -> str:
    """A generateName prefix may end in '-': the random suffix will follow it."""
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return formats.is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return formats.is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    return formats.is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def name_is_path_segment(name: str, prefix: bool) -> list[str]:
    """The only rule every name obeys: it must be usable as one segment of a URL path."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


def validate_object_meta(
    obj: dict[str, Any], namespaced: bool, rule: NameRule = name_is_dns_subdomain
) -> Errors:
    """ValidateObjectMeta: the metadata of an object being created (or replaced), its
    name judged by the `rule` of its resource (a DNS subdomain unless the resource's
    validator says otherwise: see `kubelab.api.validation.Validator`)."""
    meta = mapping(obj.get("metadata"))
    errors: Errors = []
    generate_name = text(meta.get("generateName"))
    if generate_name:
        path = METADATA.child("generateName")
        errors += [invalid(path, generate_name, msg) for msg in rule(generate_name, True)]
    name = text(meta.get("name"))
    if not name:
        errors.append(required(METADATA.child("name"), "name or generateName is required"))
    else:
        errors += [invalid(METADATA.child("name"), name, msg) for msg in rule(name, False)]
    errors += _namespace(text(meta.get("namespace")), namespaced)
    generation = integer(meta, "generation", METADATA.child("generation"), errors)
    if generation is not None and generation < 0:
        errors.append(invalid(METADATA.child("generation"), generation, NEGATIVE))
    errors += labels(meta.get("labels"), METADATA.child("labels"))
    errors += validate_annotations(meta.get("annotations"), METADATA.child("annotations"))
    errors += _owner_references(meta.get("ownerReferences"))
    errors += _finalizers(meta.get("finalizers"))
    return errors


def validate_template_meta(meta: dict[str, Any], path: Path) -> Errors:
    """Metadata embedded in a template: only labels and annotations mean anything."""
    return labels(meta.get("labels"), path.child("labels")) + validate_annotations(
        meta.get("annotations"), path.child("annotations")
    )


def validate_object_meta_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    """ValidateObjectMetaUpdate: identity fields never change.

    uid and creationTimestamp are compared only when the update carries them: like the
    real apiserver, which copies them from the stored object when a client leaves them
    out, an update that omits them is not changing them."""
    new_meta, old_meta = mapping(new.get("metadata")), mapping(old.get("metadata"))
    errors: Errors = []
    for field in ("name", "namespace"):
        if new_meta.get(field, "") != old_meta.get(field, ""):
            errors.append(invalid(METADATA.child(field), new_meta.get(field, ""), IMMUTABLE))
    for field in ("uid", "creationTimestamp"):
        value = new_meta.get(field)
        if value is not None and value != old_meta.get(field):
            errors.append(invalid(METADATA.child(field), value, IMMUTABLE))
    if old_meta.get("deletionTimestamp"):
        added = sorted(
            set(_strings(new_meta.get("finalizers"))) - set(_strings(old_meta.get("finalizers")))
        )
        if added:
            found = "[]string{" + ", ".join(f'"{name}"' for name in added) + "}"
            detail = (
                "no new finalizers can be added if the object is being deleted, "
                f"found new finalizers {found}"
            )
            errors.append(forbidden(METADATA.child("finalizers"), detail))
    return errors


def validate_annotations(value: Any, path: Path) -> Errors:
    """Annotation keys are label keys compared case-insensitively; 256 KiB in total."""
    errors: Errors = []
    total = 0
    for key, val in mapping(value).items():
        errors += [invalid(path, key, msg) for msg in formats.is_qualified_name(key.lower())]
        total += len(key) + len(text(val))
    if total > TOTAL_ANNOTATION_SIZE:
        errors.append(too_long(path, TOTAL_ANNOTATION_SIZE))
    return errors


def _namespace(namespace: str, namespaced: bool) -> Errors:
    path = METADATA.child("namespace")
    if not namespaced:
        return [forbidden(path, "not allowed on this type")] if namespace else []
    if not namespace:
        return [required(path)]
    return [invalid(path, namespace, msg) for msg in name_is_dns_label(namespace, False)]


def _owner_references(value: Any) -> Errors:
    path = METADATA.child("ownerReferences")
    errors: Errors = []
    controller = ""
    for ref in dicts(value):
        api_version, kind = text(ref.get("apiVersion")), text(ref.get("kind"))
        if not api_version.rpartition("/")[2]:
            errors.append(
                invalid(path.child("apiVersion"), api_version, "version must not be empty")
            )
        for field in ("kind", "name", "uid"):
            if not text(ref.get(field)):
                errors.append(invalid(path.child(field), text(ref.get(field)), "must not be empty"))
        if api_version == "v1" and kind == "Event":
            errors.append(invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            this = f"{kind}/{text(ref.get('name'))}"
            if controller:
                detail = (
                    'Only one reference can have Controller set to true. Found "true" in '
                    f"references for {controller} and {this}"
                )
                errors.append(invalid(path, value, detail))
            else:
                controller = this
    return errors


def _finalizers(value: Any) -> Errors:
    path = METADATA.child("finalizers")
    names = _strings(value)
    errors: Errors = []
    for name in names:
        errors += label_key(name, path)
    if "orphan" in names and "foregroundDeletion" in names:
        detail = "finalizer orphan and foregroundDeletion cannot be both set"
        errors.append(invalid(path, names, detail))
    for i, name in enumerate(names):
        errors += kube_finalizer_name(name, path.item(i))
    return errors


def kube_finalizer_name(name: str, path: Path) -> list[FieldError]:
    """A finalizer without a domain prefix must be one of the built-in ones."""
    if "/" not in name and name not in STANDARD_FINALIZERS:
        detail = "name is neither a standard finalizer name nor is it fully qualified"
        return [invalid(path, name, detail)]
    return []


def _strings(value: Any) -> list[str]:
    return [entry for entry in items(value) if isinstance(entry, str)]
