"""The pod network agent (kindnetd's role), a service of every node.

The seeds' flows end with pods on different nodes talking to each other (a Service
reaching nginx on another node, DNS answering from a third); this agent makes every pod
IP reachable from every pod and node without NAT:

* From the Nodes it watches through the apiserver, every other node's `spec.podCIDR`
  gets a route via that node's InternalIP (`ip route replace ... proto kubelab`); a
  route of ours whose node is gone, or moved, is removed. The routes carry their own
  protocol number so that the agent recognises exactly its own.
* This node's podCIDR is the kubelet's: it makes the Docker bridge network its pods
  join (cbr0), without Docker's masquerade. The agent turns on hairpin mode on the
  bridge's ports (a pod reaching itself through its Service: the node's bridge passes
  packets through iptables, so kube-proxy's DNAT back to the sender happens at the
  bridge, which must then send the frame out of the port it came in by). dockerd does
  this itself only with its userland proxy off, which needs a writable /proc/sys. A new
  pod's port is found within `HAIRPIN_INTERVAL` by reading sysfs, which starts no
  process; only a port that lacks the mode costs a `bridge link set`.
* In the filter table, KUBELAB-FORWARD accepts packets to and from pod CIDRs (dockerd
  sets FORWARD's policy to DROP, which would stop a pod on another node reaching ours).
* In the nat table, KUBELAB-POSTROUTING masquerades what this node's pods send to an
  address that is not a pod's (the nodes, the host, anything further), so replies find
  their way back; pod-to-pod traffic keeps its source address.

Every sync computes the whole state from the cache and applies it (routes, then one
iptables-restore), so it is idempotent and repairs drift; see `kubelab.nodeagent`.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kubelab.client import Object
from kubelab.iptables import Iptables, Jump, Runner, Tables, run_command

log = logging.getLogger("kubelab.network")

# Our routes' protocol (rtnetlink's rtm_protocol): anything above 4 that no routing
# daemon on a node uses; `ip route show proto 201` lists exactly ours.
ROUTE_PROTOCOL = "201"
FORWARD_CHAIN = "KUBELAB-FORWARD"
POSTROUTING_CHAIN = "KUBELAB-POSTROUTING"
JUMPS = (
    Jump("filter", "FORWARD", FORWARD_CHAIN, comment="kubelab pod network"),
    Jump("nat", "POSTROUTING", POSTROUTING_CHAIN, comment="kubelab pod masquerade"),
)
CHAINS = {"filter": [FORWARD_CHAIN], "nat": [POSTROUTING_CHAIN]}
HAIRPIN_INTERVAL = 1.0
"""Seconds between two looks at the bridge's ports for a new pod's."""


def internal_ip(node: Object) -> str | None:
    for address in node.get("status", {}).get("addresses", []):
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return None


def pod_cidrs(node: Object) -> list[str]:
    """The node's IPv4 pod CIDRs (`podCIDRs`, or the older single `podCIDR`)."""
    spec = node.get("spec", {})
    cidrs = spec.get("podCIDRs") or ([spec["podCIDR"]] if spec.get("podCIDR") else [])
    return [c for c in cidrs if ipaddress.ip_network(c, strict=False).version == 4]


def desired_routes(nodes: Iterable[Object], self_name: str) -> dict[str, str]:
    """podCIDR -> next hop for every other node that has both."""
    routes: dict[str, str] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        via = internal_ip(node)
        if name == self_name or via is None:
            continue
        for cidr in pod_cidrs(node):
            routes[cidr] = via
    return routes


def rules(all_pod_cidrs: Iterable[str], own_pod_cidrs: Iterable[str]) -> Tables:
    """The agent's chains for this node (a pure function, tested as text)."""
    tables = Tables()
    tables.chain("filter", FORWARD_CHAIN)
    tables.chain("nat", POSTROUTING_CHAIN)
    cidrs = sorted(set(all_pod_cidrs))
    for cidr in cidrs:
        tables.add("filter", FORWARD_CHAIN, "-s", cidr, "-j", "ACCEPT")
        tables.add("filter", FORWARD_CHAIN, "-d", cidr, "-j", "ACCEPT")
    for cidr in cidrs:
        tables.add("nat", POSTROUTING_CHAIN, "-d", cidr, "-j", "RETURN")
    for cidr in sorted(set(own_pod_cidrs)):
        tables.add(
            "nat",
            POSTROUTING_CHAIN,
            "-s",
            cidr,
            "-m",
            "comment",
            "--comment",
            "pod traffic leaving the pod network",
            "-j",
            "MASQUERADE",
        )
    return tables


@dataclass
class NetworkAgent:
    """Applies `desired_routes` and `rules` to this node's network namespace."""

    node_name: str
    runner: Runner = run_command
    bridge: str = "cbr0"
    sys_class_net: Path = Path("/sys/class/net")

    def __post_init__(self) -> None:
        self.iptables = Iptables(self.runner)

    def _run(self, *argv: str) -> str:
        done = self.runner(list(argv), None)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(argv)}` failed: {done.stderr.strip()}")
        return done.stdout

    def _ip(self, *argv: str) -> str:
        return self._run("ip", *argv)

    def hairpin(self) -> None:
        """Hairpin mode on every port of the pods' bridge that lacks it. sysfs says which
        (read-only in a node container, so the change goes through netlink); a bridge the
        kubelet has not made yet has no ports."""
        ports = self.sys_class_net / self.bridge / "brif"
        for port in sorted(ports.glob("*")) if ports.is_dir() else []:
            try:
                on = (port / "hairpin_mode").read_text().strip() == "1"
            except FileNotFoundError:  # the pod went away meanwhile
                continue
            if not on:
                self._run("bridge", "link", "set", "dev", port.name, "hairpin", "on")
                log.info("network %s: hairpin on %s", self.node_name, port.name)

    def current_routes(self) -> dict[str, str]:
        routes = json.loads(self._ip("-json", "route", "show", "proto", ROUTE_PROTOCOL) or "[]")
        return {str(r["dst"]): str(r.get("gateway", "")) for r in routes}

    def sync(self, nodes: list[Object]) -> None:
        want = desired_routes(nodes, self.node_name)
        have = self.current_routes()
        for cidr, via in sorted(want.items()):
            if have.get(cidr) != via:
                self._ip("route", "replace", cidr, "via", via, "proto", ROUTE_PROTOCOL)
                log.info("network %s: route %s via %s", self.node_name, cidr, via)
        for cidr in sorted(set(have) - set(want)):
            self._ip("route", "del", cidr, "proto", ROUTE_PROTOCOL)
            log.info("network %s: removed route %s (node gone)", self.node_name, cidr)
        own = [c for n in nodes if n["metadata"]["name"] == self.node_name for c in pod_cidrs(n)]
        every = [c for n in nodes for c in pod_cidrs(n)]
        self.iptables.restore(rules(every, own))
        self.iptables.ensure_jumps(JUMPS)

    def cleanup(self) -> None:
        """Remove our routes and chains (labadm reset)."""
        for cidr in self.current_routes():
            self._ip("route", "del", cidr, "proto", ROUTE_PROTOCOL)
        self.iptables.remove(JUMPS, CHAINS)
