"""Service IP and node-port allocation.

Every allocated cluster IP and node port is a key of its own in the store
(``/registry/ranges/serviceips/<ip>``, ``/registry/ranges/servicenodeports/<port>``),
created in the same transaction as the Service that holds it and deleted with it. The
store's compare (the key must not exist) makes two apiservers racing for one address
impossible without any lock or bitmap, and a crash can never leak an address between a
write of the allocation and a write of the Service.

A Service asking for a specific ``clusterIP`` or ``nodePort`` gets it if it is in range
and free; otherwise one is picked at random (the ranges are large, so a collision is rare
and simply costs a retry with another pick). The first address of the range is the
``kubernetes`` Service's, as in Kubernetes.
"""

from __future__ import annotations

import ipaddress
import random
from typing import Any

from kubelab.api import errors

from .registry import Attributes

IP_PREFIX = "/registry/ranges/serviceips/"
PORT_PREFIX = "/registry/ranges/servicenodeports/"
NODE_PORT_TYPES = ("NodePort", "LoadBalancer")

Object = dict[str, Any]


class ServiceAllocator:
    def __init__(
        self,
        cidr: str = "10.96.0.0/12",
        node_ports: tuple[int, int] = (30000, 32767),
        rng: random.Random | None = None,
    ) -> None:
        self.network = ipaddress.ip_network(cidr)
        if self.network.num_addresses < 8:
            raise ValueError(f"--service-cluster-ip-range {cidr} is too small")
        self.node_ports = node_ports
        self.rng = rng or random.Random()

    def kubernetes_ip(self) -> str:
        return str(self.network.network_address + 1)

    def __call__(self, attrs: Attributes) -> tuple[list[tuple[str, bytes]], list[str]]:
        """(keys to create, keys to release) for a write of a Service (the registry calls
        it for the kinds whose strategy `allocates`); fills in the allocated values."""
        if attrs.subresource == "status":
            return [], []
        new, old = attrs.object, attrs.old
        if attrs.operation == "DELETE":
            return [], _held(old)
        assert new is not None
        spec = new.setdefault("spec", {})
        acquire: list[tuple[str, bytes]] = []
        if spec.get("type") == "ExternalName":
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        elif old is not None and old.get("spec", {}).get("clusterIP"):
            kept = old["spec"]["clusterIP"]
            if spec.get("clusterIP", kept) != kept:
                raise errors.invalid_object(
                    "Service",
                    attrs.name,
                    [
                        errors.invalid(
                            "spec.clusterIPs[0]", spec.get("clusterIP"), "may not change once set"
                        )
                    ],
                )
            spec["clusterIP"], spec["clusterIPs"] = kept, [kept]
        elif spec.get("clusterIP") != "None":
            ip = self._cluster_ip(attrs.name, spec.get("clusterIP") or "")
            spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
            acquire.append((IP_PREFIX + ip, attrs.name.encode()))
        else:
            spec["clusterIPs"] = ["None"]
        if spec.get("clusterIP") and spec.get("clusterIP") != "None":
            spec.setdefault("ipFamilies", ["IPv4"])
        held_ports = {p.get("nodePort") for p in (old or {}).get("spec", {}).get("ports", [])}
        wants_ports = spec.get("type") in NODE_PORT_TYPES
        used: set[int] = set()
        for i, port in enumerate(spec.get("ports") or []):
            if not wants_ports:
                port.pop("nodePort", None)
                continue
            asked = port.get("nodePort")
            if asked and asked in held_ports:
                used.add(asked)
                continue
            chosen = self._node_port(attrs.name, i, asked, used)
            used.add(chosen)
            port["nodePort"] = chosen
            acquire.append((f"{PORT_PREFIX}{chosen}", attrs.name.encode()))
        release = [
            k for k in _held(old) if k not in {k for k, _ in acquire} and k not in _held(new)
        ]
        return acquire, release

    def _cluster_ip(self, name: str, asked: str) -> str:
        if asked:
            try:
                ip = ipaddress.ip_address(asked)
            except ValueError:
                raise errors.invalid_object(
                    "Service",
                    name,
                    [errors.invalid("spec.clusterIPs[0]", asked, "must be a valid IP address")],
                ) from None
            if ip not in self.network or ip in (
                self.network.network_address,
                self.network.broadcast_address,
            ):
                raise errors.invalid_object(
                    "Service",
                    name,
                    [
                        errors.invalid(
                            "spec.clusterIPs[0]",
                            asked,
                            f"provided IP is not in the valid range. The range of valid IPs is "
                            f"{self.network}",
                        )
                    ],
                ) from None
            return asked
        # Skip the network address and the kubernetes Service's first address.
        offset = self.rng.randrange(2, self.network.num_addresses - 1)
        return str(self.network.network_address + offset)

    def _node_port(self, name: str, index: int, asked: int | None, used: set[int]) -> int:
        low, high = self.node_ports
        if asked:
            if not low <= int(asked) <= high:
                raise errors.invalid_object(
                    "Service",
                    name,
                    [
                        errors.invalid(
                            f"spec.ports[{index}].nodePort",
                            asked,
                            f"provided port is not in the valid range. The range of valid ports is "
                            f"{low}-{high}",
                        )
                    ],
                )
            return int(asked)
        while True:
            port = self.rng.randint(low, high)
            if port not in used:
                return port


def _held(svc: Object | None) -> list[str]:
    """The allocation keys a stored Service holds."""
    if svc is None:
        return []
    spec = svc.get("spec", {})
    keys = []
    ip = spec.get("clusterIP")
    if ip and ip != "None":
        keys.append(IP_PREFIX + ip)
    keys += [f"{PORT_PREFIX}{p['nodePort']}" for p in spec.get("ports") or [] if p.get("nodePort")]
    return keys
