"""Services and the endpoint lists behind them (Endpoints, EndpointSlices).

A Service's type decides which of its fields mean anything: node ports only exist for
NodePort and LoadBalancer services, an ExternalName service has no cluster IP at all, a
headless one needs no ports. These rules are checked here so kube-proxy and the DNS
server never meet a combination they cannot program.
"""

from __future__ import annotations

from typing import Any

from kubelab.api.errors import duplicate, forbidden, invalid, not_supported, required
from kubelab.api.validation import formats
from kubelab.api.validation.fields import (
    Errors,
    Path,
    dicts,
    immutable,
    integer,
    items,
    label_key,
    labels,
    mapping,
    messages,
    text,
)
from kubelab.api.validation.meta import name_is_dns_subdomain
from kubelab.api.validation.pods import PROTOCOLS, port_number_or_name, protocol

SPEC = Path("spec")
SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
NODE_PORT_RANGE = (30000, 32767)
TRAFFIC_POLICIES = ["Cluster", "Local"]
IP_FAMILY_POLICIES = ["PreferDualStack", "RequireDualStack", "SingleStack"]
ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]
MAX_AFFINITY_SECONDS = 86400


def cluster_ips(spec: dict[str, Any]) -> list[str]:
    """The allocated IPs: clusterIPs, or the single clusterIP of an older client."""
    ips = [ip for ip in items(spec.get("clusterIPs")) if isinstance(ip, str)]
    return ips or ([text(spec.get("clusterIP"))] if text(spec.get("clusterIP")) else [])


def is_headless(spec: dict[str, Any]) -> bool:
    return cluster_ips(spec) == ["None"]


def externally_accessible(spec: dict[str, Any]) -> bool:
    kind = spec.get("type")
    return kind in ("LoadBalancer", "NodePort") or (
        kind == "ClusterIP" and bool(items(spec.get("externalIPs")))
    )


def validate_service(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    kind = spec.get("type", "")
    ports = dicts(spec.get("ports"))
    errors: Errors = []
    if not ports and not is_headless(spec) and kind != "ExternalName":
        errors.append(required(SPEC.child("ports")))
    if kind in ("LoadBalancer", "NodePort") and is_headless(spec):
        detail = f"may not be set to 'None' for {kind} services"
        errors.append(invalid(SPEC.child("clusterIPs").item(0), "None", detail))
    if kind == "ExternalName":
        errors += _external_name(spec)
    errors += _ports(ports, spec)
    if spec.get("selector") is not None:
        errors += labels(spec.get("selector"), SPEC.child("selector"))
    errors += _session_affinity(spec)
    if kind != "ExternalName":
        errors += _cluster_ips(spec)
    for i, ip in enumerate(items(spec.get("externalIPs"))):
        errors += messages(SPEC.child("externalIPs").item(i), ip, formats.is_valid_ip(text(ip)))
    if kind == "":
        errors.append(required(SPEC.child("type")))
    elif kind not in SERVICE_TYPES:
        errors.append(not_supported(SPEC.child("type"), kind, SERVICE_TYPES))
    errors += _load_balancer_fields(spec)
    errors += _traffic_policies(spec)
    return errors


def _external_name(spec: dict[str, Any]) -> Errors:
    errors: Errors = []
    for field in ("clusterIPs", "ipFamilies"):
        if items(spec.get(field)):
            errors.append(forbidden(SPEC.child(field), "may not be set for ExternalName services"))
    if spec.get("ipFamilyPolicy") is not None:
        errors.append(
            forbidden(SPEC.child("ipFamilyPolicy"), "may not be set for ExternalName services")
        )
    cname = text(spec.get("externalName")).removesuffix(".")
    if not cname:
        errors.append(required(SPEC.child("externalName")))
    else:
        errors += messages(SPEC.child("externalName"), cname, formats.is_dns1123_subdomain(cname))
    return errors


def _ports(ports: list[dict[str, Any]], spec: dict[str, Any]) -> Errors:
    errors: Errors = []
    kind = spec.get("type")
    names: set[str] = set()
    node_ports: set[tuple[Any, int]] = set()
    service_ports: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        at = SPEC.child("ports").item(i)
        name = text(port.get("name"))
        if len(ports) > 1 and not name:
            errors.append(required(at.child("name")))
        elif name:
            errors += messages(at.child("name"), name, formats.is_dns1123_label(name))
            if name in names:
                errors.append(duplicate(at.child("name"), name))
            names.add(name)
        number = integer(port, "port", at.child("port"), errors) or 0
        errors += messages(at.child("port"), number, formats.is_valid_port_num(number))
        errors += protocol(port, at)
        errors += port_number_or_name(port.get("targetPort"), at.child("targetPort"))
        if port.get("appProtocol") is not None:
            app = text(port.get("appProtocol"))
            errors += messages(at.child("appProtocol"), app, formats.is_qualified_name(app))
        node_port = integer(port, "nodePort", at.child("nodePort"), errors)
        if node_port:
            errors += _node_port(node_port, kind, at.child("nodePort"))
            if (port.get("protocol"), node_port) in node_ports:
                errors.append(duplicate(at.child("nodePort"), node_port))
            node_ports.add((port.get("protocol"), node_port))
        key = (port.get("protocol"), port.get("port"))
        if key in service_ports:
            errors.append(duplicate(at, {"port": key[1], "protocol": key[0]}))
        service_ports.add(key)
    return errors


def _node_port(node_port: int, kind: Any, path: Path) -> Errors:
    """Node ports belong to NodePort and LoadBalancer services, within the node port range
    (Kubernetes' allocator enforces the range; here validation does)."""
    if kind == "ClusterIP":
        return [forbidden(path, "may not be used when `type` is 'ClusterIP'")]
    low, high = NODE_PORT_RANGE
    if kind in ("NodePort", "LoadBalancer") and not low <= node_port <= high:
        detail = (
            f"provided port is not in the valid range. The range of valid ports is {low}-{high}"
        )
        return [invalid(path, node_port, detail)]
    return []


def _session_affinity(spec: dict[str, Any]) -> Errors:
    affinity, config = spec.get("sessionAffinity", ""), spec.get("sessionAffinityConfig")
    path = SPEC.child("sessionAffinityConfig")
    if affinity == "":
        return [required(SPEC.child("sessionAffinity"))]
    if affinity not in ("ClientIP", "None"):
        return [not_supported(SPEC.child("sessionAffinity"), affinity, ["ClientIP", "None"])]
    if affinity == "None":
        detail = "must not be set when session affinity is None"
        return [forbidden(path, detail)] if config is not None else []
    when = "when session affinity type is ClientIP"
    client_ip = mapping(config).get("clientIP")
    if config is None:
        return [required(path, when)]
    if client_ip is None:
        return [required(path.child("clientIP"), when)]
    timeout = mapping(client_ip).get("timeoutSeconds")
    at = path.child("clientIP", "timeoutSeconds")
    if timeout is None:
        return [required(at, when)]
    if not isinstance(timeout, int) or not 0 < timeout <= MAX_AFFINITY_SECONDS:
        return [
            invalid(at, timeout, f"must be greater than 0 and less than {MAX_AFFINITY_SECONDS}")
        ]
    return []


def _cluster_ips(spec: dict[str, Any]) -> Errors:
    errors: Errors = []
    at = SPEC.child("clusterIPs")
    cluster_ip, ips = text(spec.get("clusterIP")), items(spec.get("clusterIPs"))
    if cluster_ip and not ips:
        errors.append(required(at))
    elif cluster_ip and ips[0] != cluster_ip:
        errors.append(invalid(at, ips, "first value must match `clusterIP`"))
    elif not cluster_ip and ips:
        errors.append(invalid(at, ips, "must be empty when `clusterIP` is not specified"))
    families = items(spec.get("ipFamilies"))
    for i, family in enumerate(families):
        if family not in ("IPv4", "IPv6"):
            errors.append(not_supported(SPEC.child("ipFamilies").item(i), family, ["IPv4", "IPv6"]))
        if family in families[:i]:
            errors.append(duplicate(SPEC.child("ipFamilies").item(i), family))
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in IP_FAMILY_POLICIES:
        errors.append(not_supported(SPEC.child("ipFamilyPolicy"), policy, IP_FAMILY_POLICIES))
    for i, ip in enumerate(ips):
        if i == 0 and ip == "None":
            if len(ips) > 1:
                errors.append(invalid(at, ips, "'None' must be the first and only value"))
            continue
        errors += messages(at.item(i), ip, formats.is_valid_ip(text(ip)))
    if len(ips) > 2:
        errors.append(invalid(at, ips, "may only hold up to 2 values"))
    return errors


def _load_balancer_fields(spec: dict[str, Any]) -> Errors:
    errors: Errors = []
    is_load_balancer = spec.get("type") == "LoadBalancer"
    only_lb = "may only be used when `type` is 'LoadBalancer'"
    ranges = items(spec.get("loadBalancerSourceRanges"))
    if ranges:
        at = SPEC.child("LoadBalancerSourceRanges")
        if not is_load_balancer:
            errors.append(forbidden(at, only_lb))
        for i, cidr in enumerate(ranges):
            value = text(cidr).strip()
            errors += messages(at.item(i), value, formats.is_valid_cidr(value))
    if spec.get("allocateLoadBalancerNodePorts") is not None and not is_load_balancer:
        errors.append(forbidden(SPEC.child("allocateLoadBalancerNodePorts"), only_lb))
    if is_load_balancer and spec.get("allocateLoadBalancerNodePorts") is None:
        errors.append(required(Path("allocateLoadBalancerNodePorts")))
    if spec.get("loadBalancerClass") is not None:
        lb_class = text(spec.get("loadBalancerClass"))
        if not is_load_balancer:
            errors.append(forbidden(SPEC.child("loadBalancerClass"), only_lb))
        else:
            errors += label_key(lb_class, SPEC.child("loadBalancerClass"))
    return errors


def _traffic_policies(spec: dict[str, Any]) -> Errors:
    errors: Errors = []
    external = spec.get("externalTrafficPolicy", "")
    at = SPEC.child("externalTrafficPolicy")
    if not externally_accessible(spec):
        if external:
            errors.append(
                invalid(at, external, "may only be set for externally-accessible services")
            )
    elif external == "":
        errors.append(required(at))
    elif external not in TRAFFIC_POLICIES:
        errors.append(not_supported(at, external, TRAFFIC_POLICIES))
    internal = spec.get("internalTrafficPolicy")
    at = SPEC.child("internalTrafficPolicy")
    if internal is None:
        if spec.get("type") in ("ClusterIP", "NodePort", "LoadBalancer"):
            errors.append(required(at))
    elif internal not in TRAFFIC_POLICIES:
        errors.append(not_supported(at, internal, TRAFFIC_POLICIES))
    return errors


def validate_service_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    """The primary cluster IP is fixed once allocated. An update that leaves the IPs out
    keeps them (the apiserver carries them over, as Kubernetes' REST layer does)."""
    new_spec, old_spec = mapping(new.get("spec")), mapping(old.get("spec"))
    if "ExternalName" in (new_spec.get("type"), old_spec.get("type")):
        return []
    new_ips, old_ips = cluster_ips(new_spec), cluster_ips(old_spec)
    if new_ips and old_ips and new_ips[0] != old_ips[0]:
        return [invalid(SPEC.child("clusterIPs").item(0), new_ips, "may not change once set")]
    return []


def validate_endpoints(obj: dict[str, Any]) -> Errors:
    errors: Errors = []
    for i, subset in enumerate(dicts(obj.get("subsets"))):
        at = Path("subsets").item(i)
        if not items(subset.get("addresses")) and not items(subset.get("notReadyAddresses")):
            errors.append(required(at, "must specify `addresses` or `notReadyAddresses`"))
        for field in ("addresses", "notReadyAddresses"):
            for j, address in enumerate(dicts(subset.get(field))):
                errors += _endpoint_address(address, at.child(field).item(j))
        ports = dicts(subset.get("ports"))
        for j, port in enumerate(ports):
            errors += _endpoint_port(port, len(ports) > 1, at.child("ports").item(j))
    return errors


def _endpoint_address(address: dict[str, Any], path: Path) -> Errors:
    ip = text(address.get("ip"))
    problems = formats.is_valid_ip(ip)
    errors = messages(path.child("ip"), ip, problems)
    if not problems:
        errors += _non_special_ip(ip, path.child("ip"))
    hostname = text(address.get("hostname"))
    if hostname:
        errors += messages(path.child("hostname"), hostname, formats.is_dns1123_label(hostname))
    node = address.get("nodeName")
    if node is not None:
        errors += messages(path.child("nodeName"), node, name_is_dns_subdomain(text(node), False))
    return errors


def _non_special_ip(value: str, path: Path) -> Errors:
    """Endpoints must be reachable pod or node addresses, never this host's own."""
    ip = formats.parse_ip(value)
    if ip is None:
        return []
    errors: Errors = []
    if ip.is_unspecified:
        errors.append(invalid(path, value, f"may not be unspecified ({value})"))
    if ip.is_loopback:
        errors.append(
            invalid(path, value, "may not be in the loopback range (127.0.0.0/8, ::1/128)")
        )
    if ip.is_link_local and not ip.is_multicast:
        errors.append(
            invalid(path, value, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")
        )
    if ip.is_multicast and (str(ip).startswith("224.0.0.") or str(ip).startswith("ff02:")):
        detail = "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"
        errors.append(invalid(path, value, detail))
    return errors


def _endpoint_port(port: dict[str, Any], name_required: bool, path: Path) -> Errors:
    errors: Errors = []
    name = text(port.get("name"))
    if name_required and not name:
        errors.append(required(path.child("name")))
    elif name:
        errors += messages(path.child("name"), name, formats.is_dns1123_label(name))
    number = integer(port, "port", path.child("port"), errors) or 0
    errors += messages(path.child("port"), number, formats.is_valid_port_num(number))
    return errors + protocol(port, path)


def validate_endpoint_slice(obj: dict[str, Any]) -> Errors:
    errors: Errors = []
    address_type = obj.get("addressType", "")
    if address_type == "":
        errors.append(required(Path("addressType")))
    elif address_type not in ADDRESS_TYPES:
        errors.append(not_supported(Path("addressType"), address_type, ADDRESS_TYPES))
    for i, endpoint in enumerate(dicts(obj.get("endpoints"))):
        at = Path("endpoints").item(i)
        addresses = items(endpoint.get("addresses"))
        if not addresses:
            errors.append(required(at.child("addresses"), "must contain at least 1 address"))
        for j, address in enumerate(addresses):
            errors += _slice_address(text(address), address_type, at.child("addresses").item(j))
        hostname = endpoint.get("hostname")
        if hostname is not None:
            errors += messages(
                at.child("hostname"), hostname, formats.is_dns1123_label(text(hostname))
            )
        node = endpoint.get("nodeName")
        if node is not None:
            errors += messages(at.child("nodeName"), node, name_is_dns_subdomain(text(node), False))
    names: set[str] = set()
    for i, port in enumerate(dicts(obj.get("ports"))):
        at = Path("ports").item(i)
        name = text(port.get("name"))
        if name:
            errors += messages(at.child("name"), name, formats.is_dns1123_label(name))
        if name in names:
            errors.append(duplicate(at.child("name"), name))
        names.add(name)
        number = integer(port, "port", at.child("port"), errors)
        if number is not None:
            errors += messages(at.child("port"), number, formats.is_valid_port_num(number))
        if port.get("protocol") is not None and port["protocol"] not in PROTOCOLS:
            errors.append(not_supported(at.child("protocol"), port["protocol"], PROTOCOLS))
    return errors


def _slice_address(address: str, address_type: Any, path: Path) -> Errors:
    ip = formats.parse_ip(address)
    if address_type == "IPv4" and (ip is None or ip.version != 4):
        return [invalid(path, address, "must be a valid IPv4 address")]
    if address_type == "IPv6" and (ip is None or ip.version != 6):
        return [invalid(path, address, "must be a valid IPv6 address")]
    if address_type == "FQDN":
        return messages(path, address, formats.is_dns1123_subdomain(address))
    return []


def validate_endpoint_slice_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    return immutable(new.get("addressType"), old.get("addressType"), Path("addressType"))
