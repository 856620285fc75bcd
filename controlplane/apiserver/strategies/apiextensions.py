"""The rules of apiextensions.k8s.io/v1 CustomResourceDefinitions as objects: names
defaulted, the shape the CRD controller relies on checked (`controlplane.apiserver.crds`
serves what passes; validation rules must compile, `kubelab.api.celrules`), and the
cleanup finalizer added, so that deleting a CRD first
deletes its objects."""

from __future__ import annotations

from typing import Any

from kubelab.api import celrules, errors
from kubelab.api.errors import FieldError

from .generic import StatusResetStrategy

Object = dict[str, Any]
FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


class CustomResourceDefinitionStrategy(StatusResetStrategy):
    """The CRD itself: names defaulted, the shape checked, the cleanup finalizer added."""

    def prepare_for_create(self, obj: Object, user: Any = None) -> None:
        super().prepare_for_create(obj, user)
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if FINALIZER not in finalizers:
            finalizers.append(FINALIZER)
        _default_crd(obj)

    def prepare_for_update(self, new: Object, old: Object) -> None:
        super().prepare_for_update(new, old)
        _default_crd(new)

    def validate(self, obj: Object) -> list[FieldError]:
        return super().validate(obj) + _validate_crd(obj)

    def validate_update(self, new: Object, old: Object) -> list[FieldError]:
        found = super().validate_update(new, old) + _validate_crd(new)
        for field in ("group", "scope"):
            if new.get("spec", {}).get(field) != old.get("spec", {}).get(field):
                found.append(
                    errors.invalid(f"spec.{field}", new["spec"].get(field), "field is immutable")
                )
        return found


def _default_crd(obj: Object) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("names"), dict):
        return
    names = spec["names"]
    if isinstance(names.get("kind"), str):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    spec.setdefault("conversion", {"strategy": "None"})


def _validate_crd(obj: Object) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [errors.required("spec", "")]
    found = []
    names: Object = spec["names"] if isinstance(spec.get("names"), dict) else {}
    for field in ("plural", "kind"):
        if not names.get(field):
            found.append(errors.required(f"spec.names.{field}", ""))
    group = spec.get("group")
    if not group or "." not in str(group):
        found.append(
            errors.invalid("spec.group", group, "should be a domain with at least one dot")
        )
    expected = f"{names.get('plural')}.{group}"
    name = obj.get("metadata", {}).get("name")
    if name != expected:
        found.append(
            errors.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        found.append(
            errors.not_supported("spec.scope", spec.get("scope"), ["Cluster", "Namespaced"])
        )
    found += _validate_conversion(spec.get("conversion") or {})
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        found.append(
            errors.invalid(
                "spec.versions", versions, "must have exactly one version marked as storage version"
            )
        )
        return found
    if sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
        found.append(
            errors.invalid(
                "spec.versions", versions, "must have exactly one version marked as storage version"
            )
        )
    for i, version in enumerate(versions):
        if not isinstance(version, dict) or not version.get("name"):
            found.append(errors.required(f"spec.versions[{i}].name", ""))
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if isinstance(schema, dict):
            where = f"spec.versions[{i}].schema.openAPIV3Schema"
            found += celrules.compile_errors(schema, where)
    return found


def _validate_conversion(conversion: Object) -> list[FieldError]:
    """Strategy None, or Webhook with a webhook that speaks ConversionReview v1."""
    strategy = conversion.get("strategy")
    if strategy not in ("None", "Webhook"):
        return [errors.not_supported("spec.conversion.strategy", strategy, ["None", "Webhook"])]
    webhook = conversion.get("webhook")
    if strategy == "None":
        if webhook is not None:
            return [
                errors.forbidden(
                    "spec.conversion.webhook",
                    "should not be set when strategy is not set to Webhook",
                )
            ]
        return []
    if not isinstance(webhook, dict) or not isinstance(webhook.get("clientConfig"), dict):
        return [
            errors.required(
                "spec.conversion.webhook.clientConfig", "required when strategy is set to Webhook"
            )
        ]
    found = []
    client = webhook["clientConfig"]
    if not client.get("url") and not client.get("service"):
        found.append(
            errors.required(
                "spec.conversion.webhook.clientConfig", "exactly one of url or service is required"
            )
        )
    reviews = webhook.get("conversionReviewVersions") or []
    if "v1" not in reviews:
        found.append(
            errors.invalid(
                "spec.conversion.webhook.conversionReviewVersions",
                reviews,
                "must include at least one of v1",
            )
        )
    return found
