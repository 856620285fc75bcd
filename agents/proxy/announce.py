"""Layer-2 announcement of LoadBalancer addresses: MetalLB's speaker in layer-2 mode,
here a part of kube-proxy.

The service load-balancer controller (`controlplane.controllers.servicelb`) writes a
Service's address to `status.loadBalancer.ingress`; kube-proxy's rules on every node
DNAT that address to the endpoints (`agents.proxy.rules`). What remains is that packets
for the address reach a node at all: on the lab's network (one Ethernet segment with the
machine running the lab), a sender asks by ARP who has it. So exactly one node holds
each address as a secondary address (/32, labelled `<interface>:lb`) on the interface
of its InternalIP, and its kernel answers ARP for it; on taking an address it sends a
gratuitous ARP so that neighbours drop what they cached for the previous holder.

Which node: every kube-proxy ranks the candidates alike, by sha256 of "<node>#<address>"
(MetalLB's choice: different addresses spread over the nodes, and a node coming or going
moves only its own addresses), and the first one holds the address. Candidates are the
Ready nodes without the label `node.kubernetes.io/exclude-from-external-load-balancers`
(which kubeadm, and labadm, put on control-plane nodes), or every Ready node if none
is left (a lab of one node). So a node that fails is passed over once the node
lifecycle controller marks it not Ready (`--node-monitor-grace-period`, 40 s), and the
next one in the ranking takes its addresses: that is the failover. Two kube-proxies
whose caches disagree for a moment may both hold an address; either answers correctly,
since every node's rules reach the endpoints.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import socket
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agents.proxy.rules import load_balancer_ips
from kubelab.api.podutil import condition
from kubelab.client import Object
from kubelab.iptables import Runner, run_command

log = logging.getLogger("kubelab.proxy")

EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
LABEL_SUFFIX = "lb"
"""Our addresses carry the label `<interface>:lb`: what tells them from the node's own."""


def _ready(node: Object) -> bool:
    return (condition(node, "Ready") or {}).get("status") == "True"


def internal_ip(node: Object) -> str | None:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return None


def holder(ip: str, nodes: Iterable[Object]) -> str | None:
    """The node that holds `ip` (module docstring), or None if no node is Ready."""
    ready = [n for n in nodes if _ready(n) and internal_ip(n)]
    eligible = [n for n in ready if EXCLUDE_LABEL not in (n["metadata"].get("labels") or {})]
    candidates = [str(n["metadata"]["name"]) for n in eligible or ready]
    if not candidates:
        return None
    return min(candidates, key=lambda name: hashlib.sha256(f"{name}#{ip}".encode()).digest())


def addresses_for(node_name: str, services: Iterable[Object], nodes: list[Object]) -> set[str]:
    """The LoadBalancer addresses `node_name` holds."""
    return {
        ip
        for service in services
        for ip in load_balancer_ips(service)
        if holder(ip, nodes) == node_name
    }


def gratuitous_arp(interface: str, ip: str) -> None:
    """Broadcast an ARP request for `ip` from `ip` on `interface` (RFC 5227's
    announcement): neighbours that cached another node's MAC for it update the entry."""
    mac = bytes.fromhex(
        (Path("/sys/class/net") / interface / "address").read_text().strip().replace(":", "")
    )
    address = ipaddress.IPv4Address(ip).packed
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac + address + bytes(6) + address
    frame = b"\xff" * 6 + mac + struct.pack("!H", 0x0806) + arp
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind((interface, 0))
        sock.send(frame)


@dataclass
class Announcer:
    """Holds this node's share of the LoadBalancer addresses (module docstring)."""

    node_name: str
    runner: Runner = run_command
    announce: Callable[[str, str], None] = field(default=gratuitous_arp)
    recheck: float = 30.0
    """Seconds after which the node's addresses are read again though the wanted set
    did not change (someone may have removed one): other syncs cost no process."""
    _applied: tuple[frozenset[str], float] | None = field(default=None, init=False)

    def _ip(self, *argv: str) -> str:
        done = self.runner(["ip", *argv], None)
        if done.returncode != 0:
            raise RuntimeError(f"`ip {' '.join(argv)}` failed: {done.stderr.strip()}")
        return done.stdout

    def _addresses(self) -> list[tuple[str, str, str]]:
        """(interface, address, label) of every IPv4 address of the node."""
        links = json.loads(self._ip("-json", "-4", "addr", "show") or "[]")
        return [
            (str(link["ifname"]), str(info["local"]), str(info.get("label", "")))
            for link in links
            for info in link.get("addr_info", [])
        ]

    def held(self) -> dict[str, str]:
        """The addresses of ours on the node: address -> interface."""
        return _ours(self._addresses())

    def sync(self, services: list[Object], nodes: list[Object]) -> None:
        own = next((n for n in nodes if n["metadata"]["name"] == self.node_name), None)
        node_ip = internal_ip(own) if own is not None else None
        want = addresses_for(self.node_name, services, nodes) if node_ip else set()
        now = time.monotonic()
        if self._applied is not None:
            applied, when = self._applied
            if applied == want and now - when < self.recheck:
                return
        self._apply(want, node_ip)
        self._applied = (frozenset(want), now)

    def _apply(self, want: set[str], node_ip: str | None) -> None:
        addresses = self._addresses()
        have = _ours(addresses)
        for ip in sorted(set(have) - want):
            self._ip("addr", "del", f"{ip}/32", "dev", have[ip])
            log.info(
                "announce %s: released %s (another node holds it, or it is gone)",
                self.node_name,
                ip,
            )
        if not want - set(have):
            return
        interface = next((i for i, address, _ in addresses if address == node_ip), None)
        if interface is None:
            raise RuntimeError(
                f"no interface of node {self.node_name} has its InternalIP {node_ip}"
            )
        for ip in sorted(want - set(have)):
            label = f"{interface}:{LABEL_SUFFIX}"
            self._ip("addr", "add", f"{ip}/32", "dev", interface, "label", label)
            try:
                self.announce(interface, ip)
            except OSError as exc:
                log.warning("announce %s: no gratuitous ARP for %s: %s", self.node_name, ip, exc)
            log.info("announce %s: holding %s on %s", self.node_name, ip, interface)

    def cleanup(self) -> None:
        """Release every address of ours (`kube-proxy --cleanup`, labadm reset)."""
        for ip, interface in self.held().items():
            self._ip("addr", "del", f"{ip}/32", "dev", interface)


def _ours(addresses: list[tuple[str, str, str]]) -> dict[str, str]:
    """Of the node's (interface, address, label), ours (labelled `<interface>:lb`):
    address -> interface."""
    return {
        address: interface
        for interface, address, label in addresses
        if label == f"{interface}:{LABEL_SUFFIX}"
    }
