"""Dynamic admission: the Mutating- and ValidatingWebhookConfigurations' webhooks, called
over HTTPS with the ``admission.k8s.io/v1`` AdmissionReview protocol.

Where it sits: the plugins MutatingAdmissionWebhook and ValidatingAdmissionWebhook
(the classes at the end) run after the other mutating plugins and before ResourceQuota,
as in kube-apiserver's plugin order. Configurations are read from the watch cache, so a new
one takes effect within the cache's lag (Kubernetes' informer has the same delay).

What a webhook is called for: every rule of it is tried against the request's
operation, group, version, resource (``pods``, ``pods/status``, ``*``, ``*/status``) and
scope; with ``matchPolicy: Equivalent`` (the default) the version need not be listed
when the resource is, as Kubernetes sends an equivalent request in a listed version
(here the object goes in its stored version either way). The ``namespaceSelector``
matches the labels of the object's namespace (of the Namespace itself for namespaces;
cluster-scoped objects always match), the ``objectSelector`` the labels of the new or
the old object. Webhook configurations are never sent to webhooks, so a broken webhook
can always be removed.

How it is called: POST of an AdmissionReview to ``clientConfig.url`` with
``?timeout=<n>s``, trusting ``caBundle`` (or the system's roots), within
``timeoutSeconds``. The answer's ``uid`` must be the request's. A denial is the error
Kubernetes gives (``admission webhook "<name>" denied the request: <message>``, its code
at least 400); a mutating webhook's ``JSONPatch`` is applied to the object. A webhook
that cannot be called, times out or answers nonsense fails the request
(``failurePolicy: Fail``, 500 "failed calling webhook") or is skipped with a log line
(``Ignore``). ``clientConfig.service`` is refused as a call failure with a message saying
so: the apiserver has no route to cluster IPs until the pod network exists.

``reinvocationPolicy: IfNeeded`` calls a mutating webhook once more when a later
webhook changed the object (built-in plugins are not run again). A webhook's
``warnings`` go to the client as ``Warning`` headers (`warning`), even with a denial, as
Kubernetes passes them on. Left out: audit annotations, and sending the object in another version
than the stored one (autoscaling/v1 HPA writes reach webhooks as autoscaling/v2).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubelab.api import errors, resources
from kubelab.api.patch import PatchError, json_patch
from kubelab.api.selectors import selector_from_label_selector

from .. import warning
from ..registry import Attributes
from ..webhookclient import CallError, post, review_response
from .interfaces import NAMESPACES, WRITES, Lookup, MutationInterface, ValidationInterface

log = logging.getLogger("kubelab.apiserver.webhooks")

Object = dict[str, Any]
ListObjects = Callable[[str, str], list[Object]]
"""(resource plural.group, namespace) -> objects from the cache."""
GetNamespace = Callable[[str], Object | None]

MUTATING = "mutatingwebhookconfigurations.admissionregistration.k8s.io"
VALIDATING = "validatingwebhookconfigurations.admissionregistration.k8s.io"
REVIEW_API_VERSION = "admission.k8s.io/v1"
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


@dataclass(frozen=True)
class _Hook:
    configuration: str
    spec: Object

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))


class Webhooks:
    def __init__(self, list_objects: ListObjects, get_namespace: GetNamespace) -> None:
        self.list_objects = list_objects
        self.get_namespace = get_namespace

    def admit(self, attrs: Attributes) -> None:
        """Call the matching mutating webhooks in turn, applying each one's patch; then,
        once, those with ``reinvocationPolicy: IfNeeded`` that a later webhook's patch
        changed the object after."""
        hooks = self._matching(MUTATING, attrs)
        last_change = -1
        for i, hook in enumerate(hooks):
            if self._mutate(hook, attrs):
                last_change = i
        for hook in hooks[:last_change]:
            if hook.spec.get("reinvocationPolicy") == "IfNeeded":
                self._mutate(hook, attrs)

    def _mutate(self, hook: _Hook, attrs: Attributes) -> bool:
        """Call a mutating webhook; whether its patch changed the object."""
        patched = self._call(hook, attrs, mutating=True)
        if patched is None or attrs.object is None or patched == attrs.object:
            return False
        attrs.object.clear()
        attrs.object.update(patched)
        return True

    def validate(self, attrs: Attributes) -> None:
        for hook in self._matching(VALIDATING, attrs):
            self._call(hook, attrs, mutating=False)

    # -- matching ------------------------------------------------------------------------

    def _matching(self, configurations: str, attrs: Attributes) -> list[_Hook]:
        if attrs.resource.group == "admissionregistration.k8s.io":
            return []
        listed = sorted(self.list_objects(configurations, ""), key=lambda c: c["metadata"]["name"])
        return [
            _Hook(config["metadata"]["name"], hook)
            for config in listed
            for hook in config.get("webhooks") or []
            if isinstance(hook, dict) and self._matches(hook, attrs)
        ]

    def _matches(self, hook: Object, attrs: Attributes) -> bool:
        equivalent = hook.get("matchPolicy", "Equivalent") == "Equivalent"
        if not any(_rule_matches(rule, attrs, equivalent) for rule in hook.get("rules") or []):
            return False
        return self._namespace_matches(hook, attrs) and _object_matches(hook, attrs)

    def _namespace_matches(self, hook: Object, attrs: Attributes) -> bool:
        selector = selector_from_label_selector(hook.get("namespaceSelector") or {})
        if selector.empty():
            return True
        if attrs.resource.group_resource == NAMESPACES and not attrs.subresource:
            obj = attrs.object or attrs.old or {}
            return selector.matches(_labels(obj))
        if not attrs.resource.namespaced:
            return True
        namespace = self.get_namespace(attrs.namespace)
        return selector.matches(_labels(namespace or {}))

    # -- calling -------------------------------------------------------------------------

    def _call(self, hook: _Hook, attrs: Attributes, mutating: bool) -> Object | None:
        """The patched object (mutating, when the webhook sent a patch), else None;
        raises the denial, or the call failure under failurePolicy Fail."""
        review = _review(attrs)
        uid = review["request"]["uid"]
        timeout = int(hook.spec.get("timeoutSeconds") or 10)
        try:
            answer = post(hook.spec.get("clientConfig") or {}, review, timeout)
            response = review_response(answer, REVIEW_API_VERSION, "AdmissionReview", uid)
            for text in _warnings(response):
                warning.add(text)
            if not response.get("allowed"):
                raise _denied(hook.name, response.get("status"))
            patched = _patched(response, attrs.object) if mutating else None
        except CallError as exc:
            if hook.spec.get("failurePolicy", "Fail") == "Ignore":
                log.warning(
                    "webhooks: %s webhook %s (configuration %s) failed for %s %s %s, "
                    "ignored (failurePolicy Ignore): %s",
                    "mutating" if mutating else "validating",
                    hook.name,
                    hook.configuration,
                    attrs.operation,
                    attrs.resource.group_resource,
                    _object_name(attrs),
                    exc,
                )
                return None
            raise errors.internal_error(f'failed calling webhook "{hook.name}": {exc}') from None
        log.info(
            "webhooks: %s webhook %s allowed %s %s %s%s",
            "mutating" if mutating else "validating",
            hook.name,
            attrs.operation,
            attrs.resource.group_resource,
            _object_name(attrs),
            " with a patch" if patched is not None else "",
        )
        return patched


def _labels(obj: Object) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, dict) else {}


def _object_name(attrs: Attributes) -> str:
    return f"{attrs.namespace}/{attrs.name}" if attrs.namespace else attrs.name


def _object_matches(hook: Object, attrs: Attributes) -> bool:
    selector = selector_from_label_selector(hook.get("objectSelector") or {})
    if selector.empty():
        return True
    return any(
        selector.matches(_labels(obj)) for obj in (attrs.object, attrs.old) if obj is not None
    )


def _rule_matches(rule: Object, attrs: Attributes, equivalent: bool) -> bool:
    r = attrs.resource
    operations = rule.get("operations") or []
    if "*" not in operations and attrs.operation not in operations:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and r.group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and r.version not in versions:
        served = {
            other.version
            for other in resources.RESOURCES
            if other.group == r.group and other.plural == r.plural
        }
        if not (equivalent and served & set(versions)):
            return False
    wanted = f"{r.plural}/{attrs.subresource}" if attrs.subresource else r.plural
    names = rule.get("resources") or []
    if not any(_resource_matches(pattern, wanted, attrs.subresource) for pattern in names):
        return False
    scope = rule.get("scope") or "*"
    if scope == "Cluster":
        return not r.namespaced
    if scope == "Namespaced":
        return r.namespaced
    return True


def _resource_matches(pattern: str, wanted: str, subresource: str) -> bool:
    if pattern in ("*/*", wanted):
        return True
    if pattern == "*":
        return not subresource
    plural, _, sub = pattern.partition("/")
    wanted_plural, _, wanted_sub = wanted.partition("/")
    if plural == "*" and sub == wanted_sub and subresource:
        return True
    return sub == "*" and plural == wanted_plural and bool(subresource)


def _review(attrs: Attributes) -> Object:
    r = attrs.resource
    kind = {"group": r.group, "version": r.version, "kind": r.kind}
    resource = {"group": r.group, "version": r.version, "resource": r.plural}
    user = attrs.user
    request: Object = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": attrs.name,
        "operation": attrs.operation,
        "userInfo": user.as_dict() if hasattr(user, "as_dict") else {"username": str(user)},
        "object": attrs.object,
        "oldObject": attrs.old,
        "dryRun": attrs.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": _OPTIONS_KIND[attrs.operation]}
        if attrs.operation in _OPTIONS_KIND
        else None,
    }
    if attrs.subresource:
        request["subResource"] = request["requestSubResource"] = attrs.subresource
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "request": request}


def _denied(name: str, status: Any) -> errors.StatusError:
    """The denial as Kubernetes words it, with the webhook's own code (at least 400) and
    reason."""
    status = status if isinstance(status, dict) else {}
    denied = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{denied}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied}: {status['reason']}"
    else:
        message = f"{denied} without explanation"
    code = status.get("code")
    code = code if isinstance(code, int) and code >= 400 else 400
    details = status.get("details")
    return errors.StatusError(
        code, str(status.get("reason") or ""), message, details if isinstance(details, dict) else {}
    )


def _warnings(response: Object) -> list[str]:
    """The warnings a webhook sends back for the client (``response.warnings``)."""
    found = response.get("warnings") or []
    if not isinstance(found, list) or not all(isinstance(w, str) for w in found):
        raise CallError("received invalid webhook response: warnings is not a list of strings")
    return found


def _patched(response: Object, obj: Object | None) -> Object | None:
    patch = response.get("patch")
    if not patch:
        return None
    if obj is None:
        raise CallError("received invalid webhook response: a patch for a request without object")
    if response.get("patchType") != "JSONPatch":
        raise CallError(
            f"received invalid webhook response: patchType {response.get('patchType')!r} "
            "is not supported (JSONPatch is)"
        )
    try:
        operations = json.loads(base64.b64decode(patch, validate=True))
        return json_patch(obj, operations)
    except (binascii.Error, ValueError) as exc:
        raise CallError(
            f"received invalid webhook response: the patch is not base64 JSON: {exc}"
        ) from None
    except PatchError as exc:
        raise CallError(
            f"received invalid webhook response: the patch does not apply: {exc}"
        ) from None


def _webhooks(lookup: Lookup) -> Webhooks:
    return Webhooks(lookup.list_objects, lambda name: lookup.find(NAMESPACES, "", name))


class MutatingAdmissionWebhook(MutationInterface):
    NAME = "MutatingAdmissionWebhook"
    OPERATIONS = WRITES

    def __init__(self, lookup: Lookup) -> None:
        super().__init__(lookup)
        self.webhooks = _webhooks(lookup)

    def admit(self, attrs: Attributes) -> None:
        self.webhooks.admit(attrs)


class ValidatingAdmissionWebhook(ValidationInterface):
    NAME = "ValidatingAdmissionWebhook"
    OPERATIONS = WRITES

    def __init__(self, lookup: Lookup) -> None:
        super().__init__(lookup)
        self.webhooks = _webhooks(lookup)

    def validate(self, attrs: Attributes) -> None:
        self.webhooks.validate(attrs)
