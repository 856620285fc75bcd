"""Cluster DNS records from Services and EndpointSlices, as Kubernetes' DNS
specification lays them out (what CoreDNS's kubernetes plugin answers):

* `<svc>.<ns>.svc.<domain>` A: the ClusterIP; for a headless Service (clusterIP None)
  the IPs of its ready endpoints.
* `<svc>.<ns>` A: the same, for a query that did not go through the search path.
* `<host>.<svc>.<ns>.svc.<domain>` A: a headless Service's endpoint, by its `hostname`
  or, without one, its address with dashes (10-244-1-5).
* `_<port>._<proto>.<svc>.<ns>.svc.<domain>` SRV for each named port: the Service's
  name (or, headless, each endpoint's name) and the port number.
* ExternalName Services: a CNAME to `externalName`.
* `<a-b-c-d>.<ns>.pod.<domain>` A: the address in the name (kube-dns' pod records).

A `Zone` is an immutable snapshot built from the caches; the server swaps in a new one
after each change, so a query never sees half of an update.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

from kubelab.client import Object


@dataclass(frozen=True)
class Srv:
    port: int
    target: str


@dataclass
class Zone:
    """Names (lower case, no trailing dot) to their records; see the module docstring."""

    domain: str
    a: dict[str, list[str]] = field(default_factory=dict)
    srv: dict[str, list[Srv]] = field(default_factory=dict)
    cname: dict[str, str] = field(default_factory=dict)
    # Names that exist without records of their own (`<ns>.svc.<domain>`, `svc.<domain>`):
    # a query for them is NODATA, not NXDOMAIN.
    names: set[str] = field(default_factory=set)

    def in_zone(self, name: str) -> bool:
        return name == self.domain or name.endswith("." + self.domain)

    def exists(self, name: str) -> bool:
        return name in self.a or name in self.srv or name in self.cname or name in self.names

    def pod_address(self, name: str) -> str | None:
        """`1-2-3-4.<ns>.pod.<domain>` -> 1.2.3.4 (any namespace, as kube-dns answers)."""
        suffix = ".pod." + self.domain
        if not name.endswith(suffix):
            return None
        labels = name[: -len(suffix)].split(".")
        if len(labels) != 2:
            return None
        try:
            return str(ipaddress.IPv4Address(labels[0].replace("-", ".")))
        except ValueError:
            return None


def _ready_addresses(slices: Iterable[Object]) -> list[tuple[str, str, Object]]:
    """(ip, hostname-or-dashed-ip, endpoint) of every ready IPv4 endpoint."""
    out: list[tuple[str, str, Object]] = []
    for eps in slices:
        if eps.get("addressType", "IPv4") != "IPv4":
            continue
        for endpoint in eps.get("endpoints") or []:
            if endpoint.get("conditions", {}).get("ready") is False:
                continue
            for ip in endpoint.get("addresses", []):
                out.append((ip, endpoint.get("hostname") or ip.replace(".", "-"), endpoint))
    return sorted(out, key=lambda item: item[0])


def build_zone(services: Iterable[Object], slices: Iterable[Object], domain: str) -> Zone:
    domain = domain.strip(".").lower()
    zone = Zone(domain)
    zone.names.update({domain, f"svc.{domain}", f"pod.{domain}"})
    by_service: dict[tuple[str, str], list[Object]] = {}
    for eps in slices:
        meta = eps.get("metadata", {})
        owner = meta.get("labels", {}).get("kubernetes.io/service-name")
        if owner:
            by_service.setdefault((meta.get("namespace", ""), owner), []).append(eps)
    for svc in services:
        meta, spec = svc["metadata"], svc.get("spec", {})
        ns, name = meta["namespace"].lower(), meta["name"].lower()
        fqdn = f"{name}.{ns}.svc.{domain}"
        zone.names.add(f"{ns}.svc.{domain}")
        if spec.get("type") == "ExternalName":
            target = spec.get("externalName", "").strip(".").lower()
            if target:
                zone.cname[fqdn] = zone.cname[f"{name}.{ns}"] = target
            continue
        cluster_ip = spec.get("clusterIP", "")
        endpoints = _ready_addresses(by_service.get((meta["namespace"], meta["name"]), []))
        headless = cluster_ip == "None"
        if headless:
            addresses = [ip for ip, _, _ in endpoints]
            for ip, host, _ in endpoints:
                zone.a.setdefault(f"{host}.{fqdn}", []).append(ip)
        else:
            addresses = [cluster_ip] if cluster_ip else []
        zone.names.add(fqdn)
        if addresses:
            zone.a[fqdn] = zone.a[f"{name}.{ns}"] = addresses
        for port in spec.get("ports", []):
            port_name = port.get("name")
            if not port_name:
                continue  # only named ports have SRV records
            proto = port.get("protocol", "TCP").lower()
            srv_name = f"_{port_name}._{proto}.{fqdn}"
            if headless:
                records = [
                    Srv(_endpoint_port(by_service, meta, port_name, port), f"{host}.{fqdn}")
                    for _, host, _ in endpoints
                ]
            else:
                records = [Srv(int(port["port"]), fqdn)]
            if records:
                zone.srv[srv_name] = records
                zone.names.add(f"_{proto}.{fqdn}")
    return zone


def _endpoint_port(
    by_service: dict[tuple[str, str], list[Object]],
    meta: Object,
    port_name: str,
    service_port: Object,
) -> int:
    """A headless Service's SRV port is the endpoints' port of that name."""
    for eps in by_service.get((meta["namespace"], meta["name"]), []):
        for port in eps.get("ports") or []:
            if port.get("name") == port_name and port.get("port"):
                return int(port["port"])
    return int(service_port.get("targetPort") or service_port["port"])
