"""networking.k8s.io/v1: Ingresses, IngressClasses and NetworkPolicies.

An ingress controller or a network plugin reads these objects long after the user wrote
them, and a malformed one is skipped there with nothing but a line in the controller's
log. So what Kubernetes refuses at the API is refused here, with its wording: a backend
that names no service, a path that is not absolute, a port both named and numbered, a
peer with an ipBlock and a selector.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from kubelab.api.errors import forbidden, invalid, not_supported, too_long
from kubelab.api.errors import required as required_error
from kubelab.api.validation import formats
from kubelab.api.validation.fields import (
    IMMUTABLE,
    Errors,
    Path,
    dicts,
    is_int,
    items,
    label_selector,
    mapping,
    messages,
    text,
)

SPEC = Path("spec")
PATH_TYPES = ["Exact", "ImplementationSpecific", "Prefix"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
POLICY_TYPES = ["Egress", "Ingress"]
PARAMETER_SCOPES = ["Cluster", "Namespace"]
_CONTROLLER_MAX = 250


# -- Ingress ------------------------------------------------------------------------------


def validate_ingress(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors: Errors = []
    rules = dicts(spec.get("rules"))
    if "defaultBackend" in spec:
        errors += _backend(spec.get("defaultBackend"), SPEC.child("defaultBackend"))
    elif not rules:
        errors.append(
            invalid(SPEC.child("rules"), [], "either `defaultBackend` or `rules` must be specified")
        )
    class_name = spec.get("ingressClassName")
    if class_name is not None:
        at = SPEC.child("ingressClassName")
        errors += messages(at, class_name, formats.is_dns1123_subdomain(text(class_name)))
    for i, tls in enumerate(dicts(spec.get("tls"))):
        for j, host in enumerate(items(tls.get("hosts"))):
            at = SPEC.child("tls").item(i).child("hosts").item(j)
            errors += _host(text(host), at)
    for i, rule in enumerate(rules):
        errors += _rule(rule, SPEC.child("rules").item(i))
    return errors + _ingress_status(obj)


def _host(host: str, path: Path) -> Errors:
    if formats.parse_ip(host) is not None:
        return [invalid(path, host, "must be a DNS name, not an IP address")]
    if host.startswith("*."):
        return messages(path, host, formats.is_dns1123_subdomain(host[2:]))
    return messages(path, host, formats.is_dns1123_subdomain(host))


def _rule(rule: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    host = text(rule.get("host"))
    if host:
        errors += _host(host, path.child("host"))
    if "http" not in rule:
        return errors
    http_path = path.child("http")
    paths = dicts(mapping(rule.get("http")).get("paths"))
    if not paths:
        errors.append(required_error(http_path.child("paths")))
    for i, entry in enumerate(paths):
        at = http_path.child("paths").item(i)
        errors += _http_path(entry, at)
        errors += _backend(entry.get("backend"), at.child("backend"))
    return errors


def _http_path(entry: dict[str, Any], path: Path) -> Errors:
    path_type = entry.get("pathType")
    if path_type is None:
        return [required_error(path.child("pathType"), "pathType must be specified")]
    if path_type not in PATH_TYPES:
        return [not_supported(path.child("pathType"), path_type, PATH_TYPES)]
    value = text(entry.get("path"))
    if path_type == "ImplementationSpecific" and not value:
        return []
    if not value.startswith("/"):
        return [invalid(path.child("path"), value, "must be an absolute path")]
    if path_type in ("Exact", "Prefix") and any(
        bad in value for bad in ("//", "/./", "/../", "%2f", "%2F")
    ):
        return [invalid(path.child("path"), value, "must not contain '//', '/./', '/../' or %2f")]
    return []


def _backend(value: Any, path: Path) -> Errors:
    backend = mapping(value)
    service, resource = backend.get("service"), backend.get("resource")
    if service is not None and resource is not None:
        return [invalid(path, "", "cannot set both resource and service backends")]
    if resource is not None:
        ref = mapping(resource)
        errors: Errors = []
        if not text(ref.get("kind")):
            errors.append(required_error(path.child("resource", "kind")))
        if not text(ref.get("name")):
            errors.append(required_error(path.child("resource", "name")))
        return errors
    if service is None:
        return [invalid(path, "", "resource or service backend is required")]
    return _service_backend(mapping(service), path.child("service"))


def _service_backend(service: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    name = text(service.get("name"))
    if not name:
        errors.append(required_error(path.child("name")))
    else:
        errors += messages(path.child("name"), name, formats.is_dns1035_label(name))
    port = mapping(service.get("port"))
    port_path = path.child("port")
    has_name, has_number = bool(port.get("name")), port.get("number") is not None
    if has_name and has_number:
        errors.append(invalid(port_path, "", "cannot set both port name & port number"))
    elif has_name:
        port_name = text(port.get("name"))
        errors += messages(
            port_path.child("name"), port_name, formats.is_valid_port_name(port_name)
        )
    elif has_number:
        number = port.get("number")
        problems = formats.is_valid_port_num(number) if is_int(number) else ["must be an integer"]
        errors += messages(port_path.child("number"), number, problems)
    else:
        errors.append(required_error(port_path, "port name or number is required"))
    return errors


def _ingress_status(obj: dict[str, Any]) -> Errors:
    """The load balancer addresses a controller reports must be addresses."""
    errors: Errors = []
    lb = mapping(mapping(obj.get("status")).get("loadBalancer"))
    for i, entry in enumerate(dicts(lb.get("ingress"))):
        at = Path("status.loadBalancer.ingress").item(i)
        ip = text(entry.get("ip"))
        if ip:
            errors += messages(at.child("ip"), ip, formats.is_valid_ip(ip))
    return errors


# -- IngressClass -------------------------------------------------------------------------


def validate_ingress_class(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors: Errors = []
    controller = text(spec.get("controller"))
    at = SPEC.child("controller")
    if not controller:
        errors.append(required_error(at))
    elif len(controller) > _CONTROLLER_MAX:
        errors.append(too_long(at, _CONTROLLER_MAX))
    else:
        errors += _domain_prefixed_path(controller, at)
    if "parameters" in spec:
        errors += _parameters(mapping(spec.get("parameters")), SPEC.child("parameters"))
    return errors


def _domain_prefixed_path(value: str, path: Path) -> Errors:
    domain, slash, rest = value.partition("/")
    if not slash or not rest:
        return [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    return messages(path, domain, formats.is_dns1123_subdomain(domain))


def _parameters(params: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    for key in ("kind", "name"):
        if not text(params.get(key)):
            errors.append(required_error(path.child(key)))
    scope = params.get("scope")
    namespace = params.get("namespace")
    if scope is not None and scope not in PARAMETER_SCOPES:
        errors.append(not_supported(path.child("scope"), scope, PARAMETER_SCOPES))
    if scope == "Namespace" and not namespace:
        errors.append(
            required_error(path.child("namespace"), "`parameters.scope` is set to 'Namespace'")
        )
    if scope != "Namespace" and namespace:
        errors.append(forbidden(path.child("namespace"), "`parameters.scope` is set to 'Cluster'"))
    return errors


def validate_ingress_class_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    controller = mapping(new.get("spec")).get("controller")
    if controller != mapping(old.get("spec")).get("controller"):
        return [invalid(SPEC.child("controller"), controller, IMMUTABLE)]
    return []


# -- NetworkPolicy ------------------------------------------------------------------------


def validate_network_policy(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors = label_selector(spec.get("podSelector"), SPEC.child("podSelector"))
    for direction, peers_key in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(dicts(spec.get(direction))):
            at = SPEC.child(direction).item(i)
            for j, port in enumerate(dicts(rule.get("ports"))):
                errors += _policy_port(port, at.child("ports").item(j))
            for j, peer in enumerate(dicts(rule.get(peers_key))):
                errors += _peer(peer, at.child(peers_key).item(j))
    policy_types = items(spec.get("policyTypes"))
    for i, kind in enumerate(policy_types):
        if kind not in POLICY_TYPES:
            errors.append(not_supported(SPEC.child("policyTypes").item(i), kind, POLICY_TYPES))
    if len(policy_types) > len(POLICY_TYPES):
        errors.append(
            invalid(SPEC.child("policyTypes"), policy_types, "may not specify more than two")
        )
    return errors


def _policy_port(port: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    protocol = port.get("protocol")
    if protocol is not None and protocol not in PROTOCOLS:
        errors.append(not_supported(path.child("protocol"), protocol, PROTOCOLS))
    number = port.get("port")
    if is_int(number):
        errors += messages(path.child("port"), number, formats.is_valid_port_num(number))
    elif isinstance(number, str):
        errors += messages(path.child("port"), number, formats.is_valid_port_name(number))
    end = port.get("endPort")
    if end is None:
        return errors
    if not is_int(number):
        errors.append(
            required_error(path.child("port"), "must be specified when endPort is specified")
        )
    elif not is_int(end) or end < number:
        errors.append(
            invalid(path.child("endPort"), end, "must be greater than or equal to `port`")
        )
    return errors


def _peer(peer: dict[str, Any], path: Path) -> Errors:
    selectors = [key for key in ("podSelector", "namespaceSelector") if key in peer]
    if "ipBlock" in peer:
        if selectors:
            return [forbidden(path, "may not specify both ipBlock and another peer")]
        return _ip_block(mapping(peer.get("ipBlock")), path.child("ipBlock"))
    if not selectors:
        return [required_error(path, "must specify a peer")]
    errors: Errors = []
    for key in selectors:
        errors += label_selector(peer.get(key), path.child(key))
    return errors


def _ip_block(block: dict[str, Any], path: Path) -> Errors:
    cidr = text(block.get("cidr"))
    if not cidr:
        return [required_error(path.child("cidr"))]
    errors = messages(path.child("cidr"), cidr, formats.is_valid_cidr(cidr))
    if errors:
        return errors
    network = ipaddress.ip_network(cidr, strict=False)
    for i, entry in enumerate(items(block.get("except"))):
        at = path.child("except").item(i)
        problems = formats.is_valid_cidr(text(entry))
        if problems:
            errors += messages(at, entry, problems)
            continue
        inner = ipaddress.ip_network(text(entry), strict=False)
        if inner.version != network.version or not inner.subnet_of(network):  # type: ignore[arg-type]
            errors.append(invalid(at, entry, "must be a strict subset of `cidr`"))
    return errors
