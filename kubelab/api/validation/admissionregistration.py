"""admissionregistration.k8s.io/v1: Mutating- and ValidatingWebhookConfigurations.

Every write in the cluster may pass through these webhooks, so a broken configuration is
refused before it can break writes: a webhook needs exactly one way to be reached
(an https `url`, or a `service`), rules that name what they match, a declared
`sideEffects` class, and a timeout the apiserver can honour (1 to 30 s).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from kubelab.api.errors import duplicate, invalid, not_supported, required
from kubelab.api.validation import formats
from kubelab.api.validation.fields import (
    Errors,
    Path,
    dicts,
    integer,
    items,
    label_selector,
    mapping,
    messages,
    text,
)

OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
SCOPES = ["*", "Cluster", "Namespaced"]
FAILURE_POLICIES = ["Fail", "Ignore"]
MATCH_POLICIES = ["Equivalent", "Exact"]
SIDE_EFFECTS = ["None", "NoneOnDryRun"]
REINVOCATION = ["IfNeeded", "Never"]
REVIEW_VERSIONS = ("v1", "v1beta1")
WEBHOOKS = Path("webhooks")


def validate_mutating_webhook_configuration(obj: dict[str, Any]) -> Errors:
    return _configuration(obj, mutating=True)


def validate_validating_webhook_configuration(obj: dict[str, Any]) -> Errors:
    return _configuration(obj, mutating=False)


def _configuration(obj: dict[str, Any], mutating: bool) -> Errors:
    errors: Errors = []
    seen: set[str] = set()
    for i, hook in enumerate(dicts(obj.get("webhooks"))):
        at = WEBHOOKS.item(i)
        name = text(hook.get("name"))
        if name in seen:
            errors.append(duplicate(at.child("name"), name))
        seen.add(name)
        errors += _webhook(hook, at, mutating)
    return errors


def _webhook(hook: dict[str, Any], path: Path, mutating: bool) -> Errors:
    errors = _webhook_name(text(hook.get("name")), path.child("name"))
    for i, rule in enumerate(dicts(hook.get("rules"))):
        errors += _rule(rule, path.child("rules").item(i))
    errors += _choice(hook, "failurePolicy", FAILURE_POLICIES, path)
    errors += _choice(hook, "matchPolicy", MATCH_POLICIES, path)
    if mutating:
        errors += _choice(hook, "reinvocationPolicy", REINVOCATION, path)
    effects = hook.get("sideEffects")
    if effects is None:
        errors.append(
            required(path.child("sideEffects"), f"must specify one of {', '.join(SIDE_EFFECTS)}")
        )
    elif effects not in SIDE_EFFECTS:
        errors.append(not_supported(path.child("sideEffects"), effects, SIDE_EFFECTS))
    versions = items(hook.get("admissionReviewVersions"))
    at = path.child("admissionReviewVersions")
    if not versions:
        errors.append(required(at, f"must specify one of {', '.join(REVIEW_VERSIONS)}"))
    elif not any(v in REVIEW_VERSIONS for v in versions):
        errors.append(
            invalid(at, versions, f"must include at least one of {', '.join(REVIEW_VERSIONS)}")
        )
    timeout = integer(hook, "timeoutSeconds", path.child("timeoutSeconds"), errors)
    if timeout is not None and not 1 <= timeout <= 30:
        errors.append(
            invalid(
                path.child("timeoutSeconds"),
                timeout,
                "the timeout value must be between 1 and 30 seconds",
            )
        )
    for key in ("namespaceSelector", "objectSelector"):
        if key in hook:
            errors += label_selector(hook.get(key), path.child(key))
    errors += _client_config(mapping(hook.get("clientConfig")), path.child("clientConfig"))
    return errors


def _webhook_name(name: str, path: Path) -> Errors:
    if not name:
        return [required(path)]
    errors = messages(path, name, formats.is_dns1123_subdomain(name))
    if not errors and name.count(".") < 2:
        errors.append(
            invalid(path, name, "should be a domain with at least three segments separated by dots")
        )
    return errors


def _choice(hook: dict[str, Any], key: str, allowed: list[str], path: Path) -> Errors:
    value = hook.get(key)
    if value is not None and value not in allowed:
        return [not_supported(path.child(key), value, allowed)]
    return []


def _rule(rule: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    operations = items(rule.get("operations"))
    if not operations:
        errors.append(required(path.child("operations")))
    for i, op in enumerate(operations):
        if op not in OPERATIONS:
            errors.append(not_supported(path.child("operations").item(i), op, OPERATIONS))
    if "*" in operations and len(operations) > 1:
        errors.append(
            invalid(
                path.child("operations"),
                operations,
                "if '*' is present, must not specify other operations",
            )
        )
    for key in ("apiGroups", "apiVersions", "resources"):
        values = items(rule.get(key))
        if not values:
            errors.append(required(path.child(key)))
        if "*" in values and len(values) > 1 and key != "resources":
            errors.append(
                invalid(path.child(key), values, "if '*' is present, must not specify other values")
            )
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        errors.append(not_supported(path.child("scope"), scope, SCOPES))
    return errors


def _client_config(config: dict[str, Any], path: Path) -> Errors:
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [required(path, "exactly one of url or service is required")]
    if url is not None:
        return _url(text(url), path.child("url"))
    ref = mapping(service)
    at = path.child("service")
    errors: Errors = []
    for key in ("namespace", "name"):
        if not text(ref.get(key)):
            errors.append(required(at.child(key), f"service {key} is required"))
    service_path = ref.get("path")
    if service_path is not None and not text(service_path).startswith("/"):
        errors.append(invalid(at.child("path"), service_path, "must start with a '/'"))
    port = integer(ref, "port", at.child("port"), errors)
    if port is not None:
        errors += messages(at.child("port"), port, formats.is_valid_port_num(port))
    return errors


def _url(url: str, path: Path) -> Errors:
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return [invalid(path, url, f"url must be a valid URL: {exc}")]
    if parts.scheme != "https":
        return [invalid(path, url, "'https' is the only allowed URL scheme")]
    if not parts.hostname:
        return [invalid(path, url, "host must be specified")]
    if parts.username or parts.password:
        return [invalid(path, url, "user information is not permitted in the URL")]
    if parts.fragment or parts.query:
        return [invalid(path, url, "fragments and query parameters are not permitted in the URL")]
    return []
