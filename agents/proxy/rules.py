"""The iptables rules of kube-proxy's iptables mode, generated from Services and
EndpointSlices as one restore input (a pure function, tested as text).

The seeds' Service flows (`kubectl expose`, a ClusterIP reached by DNS name from a pod
on another node, a NodePort from the host) end here. The chains and their roles are
kube-proxy's, so what `iptables-save` shows on a node reads as it does on a real one:

* nat `KUBE-SERVICES` (from PREROUTING and OUTPUT): one rule per service port, matching
  its ClusterIP, protocol and port, jumping to `KUBE-SVC-<hash>`; the last rule sends
  packets addressed to one of the node's own addresses to `KUBE-NODEPORTS`.
* `KUBE-SVC-<hash>`: traffic from outside the cluster CIDR is marked for masquerade;
  then one rule per ready endpoint, chosen at random: endpoint i of n is taken with
  probability 1/(n-i) (`-m statistic --mode random`), so each is equally likely. With
  `sessionAffinity: ClientIP`, a client seen recently (`-m recent --rcheck`, within
  `timeoutSeconds`) goes back to the endpoint it had.
* `KUBE-SEP-<hash>`: an endpoint: marks hairpin traffic (a pod reaching itself through
  the Service) for masquerade, records the client for affinity, and DNATs.
* `KUBE-NODEPORTS`: the service's nodePort on any local address, marked for masquerade
  (the reply must come back through this node), then to the service's chain.
* A LoadBalancer Service's ingress addresses (`status.loadBalancer.ingress[].ip`, with
  `ipMode` VIP or unset, whoever set them): a rule in `KUBE-SERVICES` per address and
  port, to `KUBE-EXT-<hash>`, which marks the packet for masquerade and goes on to the
  service's chain. So whichever node the lab network delivers the address's packets to
  (the one holding it, `agents.proxy.announce`), and a pod on any node, reaches the
  endpoints, as with real kube-proxy.
* `KUBE-MARK-MASQ` sets the mark 0x4000; `KUBE-POSTROUTING` (from POSTROUTING)
  masquerades marked packets.
* filter `KUBE-SERVICES` (from OUTPUT and FORWARD, new connections) rejects a service
  port that has no ready endpoint, as kube-proxy does, instead of letting it time out;
  filter `KUBE-EXTERNAL-SERVICES` (from INPUT and FORWARD) does it for its load-balancer
  addresses, which are local to the node holding one (INPUT, not FORWARD, sees those:
  else a port the node itself listens on, its sshd's, would answer);
  filter `KUBE-FORWARD` accepts marked packets, which dockerd's FORWARD policy would
  drop.

Chain names hash the service port (and the endpoint), as kube-proxy's do: stable across
syncs and restarts, short enough for iptables' 28 characters.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from kubelab.api import endpointslices
from kubelab.client import Object
from kubelab.iptables import Jump, Tables

MASQ_MARK = "0x4000/0x4000"
SERVICES = "KUBE-SERVICES"
NODEPORTS = "KUBE-NODEPORTS"
POSTROUTING = "KUBE-POSTROUTING"
MARK_MASQ = "KUBE-MARK-MASQ"
FORWARD = "KUBE-FORWARD"
EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
SVC_PREFIX = "KUBE-SVC-"
EXT_PREFIX = "KUBE-EXT-"
SEP_PREFIX = "KUBE-SEP-"
# Chains synced in every transaction; per-service chains come and go.
FIXED_CHAINS = {
    "nat": [SERVICES, NODEPORTS, POSTROUTING, MARK_MASQ],
    "filter": [SERVICES, EXTERNAL_SERVICES, FORWARD],
}
OWN_PREFIXES = (SVC_PREFIX, EXT_PREFIX, SEP_PREFIX)
"""The per-service chains, which come and go with their Services and endpoints."""
JUMPS = (
    Jump("nat", "PREROUTING", SERVICES, comment="kubernetes service portals"),
    Jump("nat", "OUTPUT", SERVICES, comment="kubernetes service portals"),
    Jump("nat", "POSTROUTING", POSTROUTING, comment="kubernetes postrouting rules"),
    Jump(
        "filter",
        "FORWARD",
        SERVICES,
        ("-m", "conntrack", "--ctstate", "NEW"),
        "kubernetes service portals",
    ),
    Jump(
        "filter",
        "OUTPUT",
        SERVICES,
        ("-m", "conntrack", "--ctstate", "NEW"),
        "kubernetes service portals",
    ),
    Jump("filter", "FORWARD", FORWARD, comment="kubernetes forwarding rules"),
    Jump(
        "filter",
        "INPUT",
        EXTERNAL_SERVICES,
        ("-m", "conntrack", "--ctstate", "NEW"),
        "kubernetes externally-visible service portals",
    ),
    Jump(
        "filter",
        "FORWARD",
        EXTERNAL_SERVICES,
        ("-m", "conntrack", "--ctstate", "NEW"),
        "kubernetes externally-visible service portals",
    ),
)
DEFAULT_AFFINITY_SECONDS = 10800


def chain_name(prefix: str, *parts: str) -> str:
    """prefix + 16 base32 characters of sha256(parts): kube-proxy's naming."""
    digest = hashlib.sha256("".join(parts).encode()).digest()
    return prefix + base64.b32encode(digest).decode()[:16]


@dataclass(frozen=True)
class Endpoint:
    ip: str
    port: int

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}"


@dataclass
class ServicePort:
    """One port of one Service, with the ready endpoints that serve it."""

    namespace: str
    name: str
    port_name: str
    protocol: str
    cluster_ip: str
    port: int
    node_port: int = 0
    affinity_seconds: int = 0
    load_balancer_ips: list[str] = field(default_factory=list)
    endpoints: list[Endpoint] = field(default_factory=list)

    @property
    def id(self) -> str:
        """ "ns/name:port" as kube-proxy's comments show it."""
        suffix = f":{self.port_name}" if self.port_name else ""
        return f"{self.namespace}/{self.name}{suffix}"

    @property
    def svc_chain(self) -> str:
        return chain_name(SVC_PREFIX, self.id, self.protocol)

    @property
    def ext_chain(self) -> str:
        return chain_name(EXT_PREFIX, self.id, self.protocol)

    def sep_chain(self, endpoint: Endpoint) -> str:
        return chain_name(SEP_PREFIX, self.id, self.protocol, str(endpoint))


def load_balancer_ips(service: Object) -> list[str]:
    """The IPv4 ingress addresses of a LoadBalancer Service that kube-proxy answers for:
    those whose `ipMode` is VIP (the default); `Proxy` ones are a load balancer's own to
    answer, with the node as its backend."""
    if (service.get("spec") or {}).get("type") != "LoadBalancer":
        return []
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return sorted(
        str(i["ip"])
        for i in ingress
        if i.get("ip") and ":" not in str(i["ip"]) and i.get("ipMode", "VIP") == "VIP"
    )


def service_ports(services: Iterable[Object], slices: Iterable[Object]) -> list[ServicePort]:
    """Every proxied service port with its ready endpoints, from the two caches.

    Headless Services (clusterIP None) and ExternalName ones have nothing to proxy."""
    by_service = endpointslices.by_service(slices)
    out: list[ServicePort] = []
    for svc in services:
        meta, spec = svc["metadata"], svc.get("spec", {})
        cluster_ip = spec.get("clusterIP", "")
        if spec.get("type") == "ExternalName" or cluster_ip in ("", "None"):
            continue
        affinity = 0
        if spec.get("sessionAffinity") == "ClientIP":
            config = spec.get("sessionAffinityConfig", {}).get("clientIP", {})
            affinity = int(config.get("timeoutSeconds", DEFAULT_AFFINITY_SECONDS))
        slices_of = by_service.get((meta["namespace"], meta["name"]), [])
        lb_ips = load_balancer_ips(svc)
        for port in spec.get("ports", []):
            sp = ServicePort(
                namespace=meta["namespace"],
                name=meta["name"],
                port_name=port.get("name", ""),
                protocol=port.get("protocol", "TCP"),
                cluster_ip=cluster_ip,
                port=int(port["port"]),
                node_port=int(port.get("nodePort", 0) or 0),
                affinity_seconds=affinity,
                load_balancer_ips=lb_ips,
            )
            ready = endpointslices.ready_endpoints(slices_of, sp.port_name, sp.protocol)
            sp.endpoints = [Endpoint(ip, number) for ip, number in sorted(ready)]
            out.append(sp)
    return sorted(out, key=lambda p: p.id)


def generate(
    ports: list[ServicePort], cluster_cidr: str, existing: dict[str, list[str]] | None = None
) -> Tables:
    """The restore input for `ports`; chains of ours in `existing` (table -> chain names
    present now) that no port needs any more are deleted in the same transaction."""
    t = Tables()
    for table, chains in FIXED_CHAINS.items():
        for name in chains:
            t.chain(table, name)
    t.add("nat", POSTROUTING, "-m", "mark", "!", "--mark", MASQ_MARK, "-j", "RETURN")
    t.add("nat", POSTROUTING, "-j", "MARK", "--xor-mark", "0x4000")
    t.add(
        "nat",
        POSTROUTING,
        "-m",
        "comment",
        "--comment",
        "kubernetes service traffic requiring SNAT",
        "-j",
        "MASQUERADE",
    )
    t.add("nat", MARK_MASQ, "-j", "MARK", "--or-mark", "0x4000")
    t.add("filter", FORWARD, "-m", "mark", "--mark", MASQ_MARK, "-j", "ACCEPT")
    t.add("filter", FORWARD, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
    for sp in ports:
        _service(t, sp, cluster_cidr)
    t.add(
        "nat",
        SERVICES,
        "-m",
        "comment",
        "--comment",
        "kubernetes service nodeports; NOTE: this must be the last rule in this chain",
        "-m",
        "addrtype",
        "--dst-type",
        "LOCAL",
        "-j",
        NODEPORTS,
    )
    for table, names in (existing or {}).items():
        for name in names:
            ours = name.startswith(OWN_PREFIXES)
            if ours and name not in t.chains.get(table, []):
                t.delete(table, name)
    return t


def _service(t: Tables, sp: ServicePort, cluster_cidr: str) -> None:
    proto = sp.protocol.lower()
    match = ["-p", proto, "-m", proto]
    cluster = [*match, "-d", f"{sp.cluster_ip}/32", "--dport", str(sp.port)]
    comment = ["-m", "comment", "--comment", f"{sp.id} cluster IP"]
    if not sp.endpoints:
        reject = ["-j", "REJECT", "--reject-with", "icmp-port-unreachable"]
        no_endpoints = ["-m", "comment", "--comment", f"{sp.id} has no endpoints"]
        t.add("filter", SERVICES, *no_endpoints, *cluster, *reject)
        if sp.node_port:
            nodeport = [*match, "--dport", str(sp.node_port), "-m", "addrtype", "--dst-type"]
            t.add("filter", SERVICES, *no_endpoints, *nodeport, "LOCAL", *reject)
        for ip in sp.load_balancer_ips:
            external = [*match, "-d", f"{ip}/32", "--dport", str(sp.port)]
            t.add("filter", EXTERNAL_SERVICES, *no_endpoints, *external, *reject)
        return
    svc = sp.svc_chain
    t.chain("nat", svc)
    t.add("nat", SERVICES, *comment, *cluster, "-j", svc)
    t.add("nat", svc, *comment, *cluster, "!", "-s", cluster_cidr, "-j", MARK_MASQ)
    if sp.node_port:
        port_comment = ["-m", "comment", "--comment", sp.id]
        t.add(
            "nat", NODEPORTS, *port_comment, *match, "--dport", str(sp.node_port), "-j", MARK_MASQ
        )
        t.add("nat", NODEPORTS, *port_comment, *match, "--dport", str(sp.node_port), "-j", svc)
    if sp.load_balancer_ips:
        ext = sp.ext_chain
        t.chain("nat", ext)
        lb_comment = ["-m", "comment", "--comment", f"{sp.id} loadbalancer IP"]
        for ip in sp.load_balancer_ips:
            external = [*match, "-d", f"{ip}/32", "--dport", str(sp.port)]
            t.add("nat", SERVICES, *lb_comment, *external, "-j", ext)
        masq_comment = f"masquerade traffic for {sp.id} external destinations"
        t.add("nat", ext, "-m", "comment", "--comment", masq_comment, "-j", MARK_MASQ)
        t.add("nat", ext, "-j", svc)
    seps = [(endpoint, sp.sep_chain(endpoint)) for endpoint in sp.endpoints]
    if sp.affinity_seconds:
        for endpoint, sep in seps:
            t.add(
                "nat",
                svc,
                "-m",
                "comment",
                "--comment",
                f"{sp.id} -> {endpoint}",
                "-m",
                "recent",
                "--name",
                sep,
                "--mask",
                "255.255.255.255",
                "--rsource",
                "--rcheck",
                "--seconds",
                str(sp.affinity_seconds),
                "--reap",
                "-j",
                sep,
            )
    n = len(seps)
    for i, (endpoint, sep) in enumerate(seps):
        pick = ["-m", "comment", "--comment", f"{sp.id} -> {endpoint}"]
        if i < n - 1:
            pick += ["-m", "statistic", "--mode", "random", "--probability", f"{1 / (n - i):.10f}"]
        t.add("nat", svc, *pick, "-j", sep)
    for endpoint, sep in seps:
        t.chain("nat", sep)
        sep_comment = ["-m", "comment", "--comment", sp.id]
        t.add("nat", sep, *sep_comment, "-s", f"{endpoint.ip}/32", "-j", MARK_MASQ)
        recent = (
            ["-m", "recent", "--name", sep, "--mask", "255.255.255.255", "--rsource", "--set"]
            if sp.affinity_seconds
            else []
        )
        t.add(
            "nat",
            sep,
            *sep_comment,
            *recent,
            *match,
            "-j",
            "DNAT",
            "--to-destination",
            str(endpoint),
        )
