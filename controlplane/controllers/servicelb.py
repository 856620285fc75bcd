"""The service load-balancer controller (kube-controller-manager's
`service-lb-controller`, which a cloud provider backs; here the lab is the cloud, as
MetalLB's layer-2 mode and kind's cloud-provider-kind make one): every Service of
`type: LoadBalancer` without a `spec.loadBalancerClass` gets an address from the pool
`--load-balancer-ip-range`, written to `status.loadBalancer.ingress` (`ipMode: VIP`),
which `kubectl get service` shows as its EXTERNAL-IP.

The address is made to answer by the nodes, not by this controller: kube-proxy on every
node DNATs the Service's ingress addresses to its endpoints, as real kube-proxy does in
iptables mode, and one node, chosen by every kube-proxy alike, holds the address on its
interface so that the lab network's ARP finds it (`agents.proxy.announce`). So the
controller's whole state is which Service holds which address, and the Services' own
status is where that is kept: there is nothing outside the API to create or clean up.

How addresses are kept apart. `AddressPool` maps each address of the range to the key
of the Service holding it. The informer's handlers record every address a Service's
status shows before any worker runs (workers start once the caches have synced), so a
restarted controller-manager, or a new leader, never hands out an address in use. A
worker takes the next free address (searched from just after the last one given, as
node IPAM searches its ranges, so an address freed a moment ago is not the next one
handed out while a node may still hold it) and writes it with a merge patch of the
status subresource; an address shown by two Services stays with the first seen, and
the other gets a new one.

An address is released when its Service is deleted (the delete event), and when the
Service no longer asks for one (its type changed, or it was given a class of another
implementation): the worker then clears `status.loadBalancer` and the update event
frees the address. `spec.loadBalancerIP` (deprecated upstream, still what charts set)
asks for a particular address of the pool.

A full pool leaves the Service pending: a Warning Event `AllocationFailed` says so and
what to do, the key is retried with back-off, and every pending Service is queued at
once when an address is freed. The Events' other reasons are the service controller's
(EnsuringLoadBalancer, EnsuredLoadBalancer, DeletingLoadBalancer, DeletedLoadBalancer).
"""

from __future__ import annotations

import argparse
import ipaddress
import threading
from dataclasses import dataclass
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client import (
    DeletedFinalStateUnknown,
    Object,
    WorkQueue,
    object_key,
    resource_for,
)
from kubelab.client.record import NORMAL, WARNING, EventRecorder

from .base import ControllerContext, SyncError, SyncResult, Workers, controller_logger

NAME = "service-lb-controller"

SERVICES = resource_for("v1", "Service")

EVENT_SOURCE = "service-controller"
"""The component the Events name, as Kubernetes' service controller's do."""

HOW_TO_GROW = (
    "give the lab a larger pool (networking.loadBalancerPool in the cluster config; "
    "kube-controller-manager's --load-balancer-ip-range)"
)

log = controller_logger(NAME)


class PoolExhausted(Exception):
    """Every address of the pool is held by a Service."""


@dataclass(frozen=True)
class AddressRange:
    """The addresses the pool hands out, `first` to `last` inclusive (IPv4)."""

    first: ipaddress.IPv4Address
    last: ipaddress.IPv4Address

    @classmethod
    def parse(cls, text: str) -> AddressRange:
        """A CIDR (its network and broadcast addresses left out, as MetalLB's
        avoidBuggyIPs does, for a /30 or larger), "first-last", or one address."""
        text = text.strip()
        try:
            if "/" in text:
                network = ipaddress.IPv4Network(text, strict=False)
                if network.prefixlen >= 31:
                    return cls(network.network_address, network.broadcast_address)
                return cls(network.network_address + 1, network.broadcast_address - 1)
            first_text, _, last_text = text.partition("-")
            first = ipaddress.IPv4Address(first_text.strip())
            last = ipaddress.IPv4Address(last_text.strip()) if last_text else first
        except ValueError as exc:
            raise ValueError(
                f"{text!r} is not an IPv4 range such as 10.244.254.0/24 or "
                f"10.244.254.10-10.244.254.50: {exc}"
            ) from None
        if last < first:
            raise ValueError(f"{text!r}: the range's last address comes before its first")
        return cls(first, last)

    @property
    def size(self) -> int:
        return int(self.last) - int(self.first) + 1

    def __contains__(self, ip: object) -> bool:
        return isinstance(ip, ipaddress.IPv4Address) and self.first <= ip <= self.last

    def __str__(self) -> str:
        return f"{self.first}-{self.last}" if self.size > 1 else str(self.first)


class AddressPool:
    """Which Service (by key) holds which address of `range` (module docstring). Not
    thread-safe: the controller holds a lock around it."""

    def __init__(self, addresses: AddressRange | None) -> None:
        self.range = addresses
        self._owners: dict[ipaddress.IPv4Address, str] = {}
        self._next = 0

    @property
    def size(self) -> int:
        return self.range.size if self.range is not None else 0

    @property
    def used(self) -> int:
        return len(self._owners)

    def ours(self, ip: str) -> ipaddress.IPv4Address | None:
        """`ip` as an address of the pool, or None if it is not one."""
        try:
            address = ipaddress.IPv4Address(ip)
        except ValueError:
            return None
        return address if self.range is not None and address in self.range else None

    def owner(self, ip: ipaddress.IPv4Address) -> str | None:
        return self._owners.get(ip)

    def hold(self, key: str, ip: ipaddress.IPv4Address) -> bool:
        """Record that `key` holds `ip`; False if another Service holds it."""
        return self._owners.setdefault(ip, key) == key

    def release(self, key: str, ip: ipaddress.IPv4Address) -> bool:
        """Free `ip` if `key` holds it; whether it did."""
        if self._owners.get(ip) != key:
            return False
        del self._owners[ip]
        return True

    def allocate(self, key: str) -> ipaddress.IPv4Address:
        """The next free address after the last one given, now held by `key`."""
        if self.range is None:
            raise PoolExhausted(
                "no address pool is configured: start kube-controller-manager with "
                "--load-balancer-ip-range (labadm init --load-balancer-ip-range)"
            )
        first = int(self.range.first)
        for step in range(self.size):
            offset = (self._next + step) % self.size
            ip = ipaddress.IPv4Address(first + offset)
            if ip not in self._owners:
                self._owners[ip] = key
                self._next = (offset + 1) % self.size
                return ip
        raise PoolExhausted(
            f"all {self.size} addresses of the pool {self.range} are held by LoadBalancer Services"
        )


def address_range(text: str) -> AddressRange:
    """`--load-balancer-ip-range`'s value."""
    try:
        return AddressRange.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--load-balancer-ip-range: {exc}") from None


def wants_address(service: Object) -> bool:
    """Whether this controller gives `service` an address: type LoadBalancer and no class
    of another implementation."""
    spec = service.get("spec") or {}
    return spec.get("type") == "LoadBalancer" and spec.get("loadBalancerClass") is None


def ingress_ips(service: Object) -> list[str]:
    """The addresses `status.loadBalancer.ingress` shows."""
    status = service.get("status") or {}
    ingress = (status.get("loadBalancer") or {}).get("ingress") or []
    return [str(i["ip"]) for i in ingress if isinstance(i, dict) and i.get("ip")]


class ServiceLBController:
    """The controller of the module docstring, keyed by "namespace/name"."""

    name = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        self._tracer = ctx.tracer
        self._pool = AddressPool(getattr(ctx.args, "load_balancer_ip_range", None))
        self._lock = threading.Lock()
        self._client = ctx.client_for(NAME)
        self._events = EventRecorder(self._client, EVENT_SOURCE)
        self.queue: WorkQueue[str] = WorkQueue()
        self._services = ctx.informers.informer(SERVICES)
        self._services.add_event_handler(
            on_add=self._seen,
            on_update=self._updated,
            on_delete=self._deleted,
        )
        if self._pool.range is None:
            log.warning(
                "no --load-balancer-ip-range: LoadBalancer Services stay pending, with an Event"
            )
        else:
            log.info(
                "giving LoadBalancer Services addresses of %s (%d in all)",
                self._pool.range,
                self._pool.size,
            )

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(
                NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._services
            ).run(workers, stop)

    # Handlers: keep the pool as the Services' statuses show it, and queue the key.

    def _hold_shown(self, key: str, service: Object) -> None:
        for ip in ingress_ips(service):
            address = self._pool.ours(ip)
            if address is not None:
                with self._lock:
                    held = self._pool.hold(key, address)
                if not held:
                    log.warning(
                        "service %s shows %s, which %s holds: it gets another",
                        key,
                        ip,
                        self._pool.owner(address),
                    )

    def _release(self, key: str, ips: set[str]) -> None:
        freed = []
        for ip in ips:
            address = self._pool.ours(ip)
            if address is not None:
                with self._lock:
                    if self._pool.release(key, address):
                        freed.append(ip)
        if freed:
            log.info("service %s: released %s", key, ", ".join(sorted(freed)))
            self._queue_pending()

    def _seen(self, service: Object) -> None:
        key = object_key(service)
        self._hold_shown(key, service)
        self.queue.add(key)

    def _updated(self, old: Object, new: Object) -> None:
        key = object_key(new)
        self._hold_shown(key, new)
        self._release(key, set(ingress_ips(old)) - set(ingress_ips(new)))
        self.queue.add(key)

    def _deleted(self, service: Object | DeletedFinalStateUnknown) -> None:
        last = service.obj if isinstance(service, DeletedFinalStateUnknown) else service
        self._release(object_key(last), set(ingress_ips(last)))

    def _queue_pending(self) -> None:
        """Queue the Services waiting for an address (one was freed): they need not wait
        out their back-off."""
        for service in self._services.indexer.list():
            if wants_address(service) and not ingress_ips(service):
                self.queue.add(object_key(service))

    # The sync.

    def sync(self, key: str) -> SyncResult:
        service = self._services.indexer.get(key)
        if service is None:
            return None
        shown = ingress_ips(service)
        if not wants_address(service):
            if shown and (service.get("spec") or {}).get("loadBalancerClass") is None:
                self._clear(key, service, shown)
            return None
        with self._lock:
            held = [
                ip
                for ip in shown
                if (address := self._pool.ours(ip)) is not None and self._pool.owner(address) == key
            ]
        requested = str((service.get("spec") or {}).get("loadBalancerIP") or "")
        if len(held) == 1 and len(shown) == 1 and requested in ("", held[0]):
            return None
        # An address held before (stale, or not the one asked for) is freed by the
        # update event of the write below.
        address = self._allocate(key, service, requested)
        self._events.event(service, NORMAL, "EnsuringLoadBalancer", "Ensuring load balancer")
        try:
            updated = self._write_status(
                service, {"ingress": [{"ip": str(address), "ipMode": "VIP"}]}
            )
        except StatusError as exc:
            with self._lock:
                self._pool.release(key, address)
            if exc.code == 404:
                return None
            raise
        self._log_write(updated, f"assigned {address}")
        self._events.event(
            updated, NORMAL, "EnsuredLoadBalancer", f"Ensured load balancer with address {address}"
        )
        return None

    def _allocate(self, key: str, service: Object, requested: str) -> ipaddress.IPv4Address:
        """The address `service` gets (its `spec.loadBalancerIP` if given), now held by
        `key`; a SyncError, with a Warning Event, if there is none."""
        if requested:
            address = self._pool.ours(requested)
            if address is None:
                why = f"spec.loadBalancerIP {requested} is not in the pool {self._pool.range}"
                hint = f"choose an address of {self._pool.range}, or remove the field"
            else:
                with self._lock:
                    if self._pool.hold(key, address):
                        return address
                why = f"spec.loadBalancerIP {requested} is held by {self._pool.owner(address)}"
                hint = "choose a free address, or remove the field to get any"
            self._events.event(
                service,
                WARNING,
                "AllocationFailed",
                f"Failed to allocate IP for {key}: {why}; {hint}",
            )
            raise SyncError(f"service {key}: {why}")
        try:
            with self._lock:
                return self._pool.allocate(key)
        except PoolExhausted as exc:
            self._events.event(
                service,
                WARNING,
                "AllocationFailed",
                f"Failed to allocate IP for {key}: no available IPs ({exc}); the Service stays "
                f"pending until one is freed: delete a LoadBalancer Service or change its "
                f"type, or {HOW_TO_GROW}",
            )
            raise SyncError(f"service {key}: no address left: {exc}") from None

    def _clear(self, key: str, service: Object, shown: list[str]) -> None:
        """`service` no longer asks for an address: clear its status (the update event
        frees the address)."""
        self._events.event(service, NORMAL, "DeletingLoadBalancer", "Deleting load balancer")
        try:
            updated = self._write_status(service, {"ingress": None})
        except StatusError as exc:
            if exc.code == 404:
                return
            raise
        self._log_write(updated, f"cleared {', '.join(shown)} (type {_type(updated)})")
        self._events.event(updated, NORMAL, "DeletedLoadBalancer", "Deleted load balancer")

    def _write_status(self, service: Object, load_balancer: dict[str, Any]) -> Object:
        """Merge `load_balancer` into the Service's `status.loadBalancer`."""
        meta = service["metadata"]
        body = {"status": {"loadBalancer": load_balancer}}
        return self._client.patch(
            SERVICES, meta["name"], body, meta["namespace"], subresource="status"
        )

    @staticmethod
    def _log_write(service: Object, what: str) -> None:
        meta: dict[str, Any] = service["metadata"]
        log.info(
            "service %s/%s (uid %s): %s (resourceVersion %s)",
            meta.get("namespace"),
            meta.get("name"),
            meta.get("uid"),
            what,
            meta.get("resourceVersion"),
        )


def _type(service: Object) -> str:
    return str((service.get("spec") or {}).get("type") or "ClusterIP")
