"""Cluster plumbing kinds: Namespaces, Nodes, Leases, Events and
CertificateSigningRequests.

These are written mostly by components (kubelets, controllers, labadm), so the checks
guard the invariants those components rely on: a node's pod CIDRs never move, a lease
always has a positive duration, a CSR carries a parseable request signed by its key.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cryptography import x509

from kubelab.api.errors import duplicate, forbidden, invalid, not_supported, required, too_long
from kubelab.api.validation import formats
from kubelab.api.validation.compute import resource_amount
from kubelab.api.validation.fields import (
    Errors,
    Path,
    integer,
    items,
    label_key,
    mapping,
    messages,
    text,
)
from kubelab.api.validation.meta import kube_finalizer_name
from kubelab.api.validation.scheduling import taints

SPEC = Path("spec")
# Kubernetes' limits for fields of the events.k8s.io shape of an Event.
_EVENT_LIMITS = {"reportingInstance": 128, "action": 128, "reason": 128}
NOTE_LIMIT = 1024
KEY_USAGES = [
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
]


def validate_namespace(obj: dict[str, Any]) -> Errors:
    errors: Errors = []
    path = SPEC.child("finalizers")
    for name in items(mapping(obj.get("spec")).get("finalizers")):
        errors += label_key(text(name), path) + kube_finalizer_name(text(name), path)
    return errors


def validate_node(obj: dict[str, Any]) -> Errors:
    spec, status = mapping(obj.get("spec")), mapping(obj.get("status"))
    errors = taints(spec.get("taints"), SPEC.child("taints"))
    for field in ("capacity", "allocatable"):
        for name, amount in mapping(status.get(field)).items():
            errors += resource_amount(name, amount, Path("status").child(field, name))
    cidrs = items(spec.get("podCIDRs"))
    at = SPEC.child("podCIDRs")
    for i, cidr in enumerate(cidrs):
        errors += messages(at.item(i), cidr, formats.is_valid_cidr(text(cidr)))
        if cidr in cidrs[:i]:
            errors.append(duplicate(at.item(i), cidr))
    if len(cidrs) > 2:
        detail = "may specify no more than one CIDR for each IP family"
        errors.append(invalid(at, cidrs, detail))
    return errors


def validate_node_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    """A node's pod CIDRs and provider ID may be set once, never changed: pods and routes
    already depend on them."""
    new_spec, old_spec = mapping(new.get("spec")), mapping(old.get("spec"))
    errors: Errors = []
    old_cidrs = items(old_spec.get("podCIDRs"))
    if old_cidrs and old_cidrs != items(new_spec.get("podCIDRs")):
        detail = 'node updates may not change podCIDR except from "" to valid'
        errors.append(forbidden(SPEC.child("podCIDRs"), detail))
    old_provider = text(old_spec.get("providerID"))
    if old_provider and old_provider != text(new_spec.get("providerID")):
        detail = 'node updates may not change providerID except from "" to valid'
        errors.append(forbidden(SPEC.child("providerID"), detail))
    return errors


def validate_lease(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors: Errors = []
    duration = integer(spec, "leaseDurationSeconds", SPEC.child("leaseDurationSeconds"), errors)
    if duration is not None and duration <= 0:
        errors.append(
            invalid(SPEC.child("leaseDurationSeconds"), duration, "must be greater than 0")
        )
    transitions = integer(spec, "leaseTransitions", SPEC.child("leaseTransitions"), errors)
    if transitions is not None and transitions < 0:
        detail = "must be greater than or equal to 0"
        errors.append(invalid(SPEC.child("leaseTransitions"), transitions, detail))
    return errors


def validate_event(obj: dict[str, Any]) -> Errors:
    """Events in either shape: core/v1 (involvedObject, message) or events.k8s.io/v1
    (regarding, note), which also requires the fields a structured event reporter sets."""
    structured = obj.get("apiVersion") == "events.k8s.io/v1"
    namespace = text(mapping(obj.get("metadata")).get("namespace"))
    involved = "regarding" if structured else "involvedObject"
    involved_namespace = text(mapping(obj.get(involved)).get("namespace"))
    # Events about cluster-scoped objects (nodes) live in "default" (or kube-system).
    allowed = {"default", "kube-system"} if structured else {"", "default"}
    errors: Errors = []
    if (involved_namespace or namespace not in allowed) and involved_namespace != namespace:
        at = Path(involved).child("namespace")
        errors.append(invalid(at, involved_namespace, "does not match event.namespace"))
    if structured or obj.get("eventTime"):
        errors += _structured_event(obj, structured)
    return errors + messages(Path("namespace"), namespace, formats.is_dns1123_subdomain(namespace))


def _structured_event(obj: dict[str, Any], structured: bool) -> Errors:
    errors: Errors = []
    controller_field = "reportingController" if structured else "reportingComponent"
    controller = text(obj.get(controller_field))
    if not controller:
        errors.append(required(Path(controller_field)))
    errors += label_key(controller, Path(controller_field))
    for field, limit in _EVENT_LIMITS.items():
        value = text(obj.get(field))
        if not value:
            errors.append(required(Path(field)))
        elif len(value) > limit:
            errors.append(invalid(Path(field), "", f"can have at most {limit} characters"))
    if structured and len(text(obj.get("note"))) > NOTE_LIMIT:
        errors.append(too_long(Path("note"), NOTE_LIMIT))
    elif len(text(obj.get("message"))) > NOTE_LIMIT:
        detail = f"can have at most {NOTE_LIMIT} characters"
        errors.append(invalid(Path("message"), "", detail))
    if structured:
        if not obj.get("eventTime"):
            errors.append(required(Path("eventTime")))
        if obj.get("type") not in ("Normal", "Warning"):
            errors.append(invalid(Path("type"), "", f"has invalid value: {text(obj.get('type'))}"))
    return errors


def validate_certificate_signing_request(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors = _csr_request(spec.get("request"))
    usages = items(spec.get("usages"))
    if not usages:
        errors.append(required(SPEC.child("usages")))
    for i, usage in enumerate(usages):
        if usage not in KEY_USAGES:
            errors.append(not_supported(SPEC.child("usages").item(i), usage, KEY_USAGES))
        elif usage in usages[:i]:
            errors.append(duplicate(SPEC.child("usages").item(i), usage))
    errors += _signer_name(text(spec.get("signerName")), SPEC.child("signerName"))
    seconds = integer(spec, "expirationSeconds", SPEC.child("expirationSeconds"), errors)
    if seconds is not None and seconds < 600:
        detail = "may not specify a duration less than 600 seconds (10 minutes)"
        errors.append(invalid(SPEC.child("expirationSeconds"), seconds, detail))
    return errors


def _csr_request(value: Any) -> Errors:
    """The PEM request (base64 in JSON) must parse and be signed by its own key: the
    signer will vouch for that key."""
    path = SPEC.child("request")
    if not value:
        return [required(path)]
    try:
        pem = base64.b64decode(text(value), validate=True)
    except (binascii.Error, ValueError):
        return [invalid(path, value, "must be base64-encoded")]
    if b"-----BEGIN CERTIFICATE REQUEST-----" not in pem:
        return [invalid(path, value, "PEM block type must be CERTIFICATE REQUEST")]
    try:
        request = x509.load_pem_x509_csr(pem)
    except ValueError as exc:
        return [invalid(path, value, str(exc))]
    if not request.is_signature_valid:
        return [invalid(path, value, "x509: signature verification failure")]
    return []


def _signer_name(name: str, path: Path) -> Errors:
    """A signer is "<domain>/<path>", e.g. kubernetes.io/kube-apiserver-client."""
    if not name:
        return [required(path)]
    domain, slash, rest = name.partition("/")
    if not slash or "/" in rest:
        detail = "must be a fully qualified domain and path of the form 'example.com/signer-name'"
        return [invalid(path, name, detail)]
    errors: Errors = []
    if len(domain) > formats.DNS1123_SUBDOMAIN_MAX:
        errors.append(too_long(path, formats.DNS1123_SUBDOMAIN_MAX))
    for label in domain.split("."):
        problems = formats.is_dns1123_label(label)
        if problems:
            errors.append(invalid(path, domain, ",".join(problems)))
    if len(domain.split(".")) < 2:
        detail = "should be a domain with at least two segments separated by dots"
        errors.append(invalid(path, domain, detail))
    for segment in rest.split("."):
        problems = formats.is_dns1123_subdomain(segment)
        if problems:
            errors.append(invalid(path, rest, ",".join(problems)))
    return errors
