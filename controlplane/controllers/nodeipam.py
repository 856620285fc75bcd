"""Node IPAM (kube-controller-manager's node-ipam-controller with the RangeAllocator):
gives each Node a range of pod addresses, `spec.podCIDR` (and `spec.podCIDRs`), cut
from `--cluster-cidr` in blocks of `--node-cidr-mask-size` (/24 by default).

The node agents build on it: the network agent routes each node's range to that node,
and the kubelet gives its pods addresses from its own range. So two nodes must never get
the same range, and a range is reused only once its node is gone.

How ranges are kept apart. `CIDRSet` is a bitmap of the cluster range's blocks. Before
any worker runs, the informer's handlers have marked every block that a node already
holds (the workers start only once the node cache has synced), so a restarted
controller-manager, or a new leader, never hands out a range in use. A worker then
takes the next free block for a node without one and writes it with a merge patch; the
node's spec.podCIDR is immutable once set (the apiserver refuses a change), so a
second allocation for the same node fails with a 422 and its block is freed again. A
deleted node's block is freed when the delete event arrives. Blocks are searched from
just after the last one given, as Kubernetes' cidrset does, so a range freed a moment
ago is not the next one handed out, and a lingering route to the old node cannot catch
the new one's traffic.

The blocks holding LoadBalancer Services' addresses (`--load-balancer-ip-range`, which
the Docker lab takes from the pod network's range) are marked taken from the start, as
Kubernetes' range allocator takes the blocks of the service range when it lies in the
cluster range: no node's pods may get those addresses.

A full range is a Warning Event `CIDRNotAvailable` on the node ("Node x status is now:
CIDRNotAvailable", as Kubernetes words it), with what to do; the node is retried with
back-off, and at once when a deleted node frees a range.
"""

from __future__ import annotations

import argparse
import ipaddress
import threading
from dataclasses import dataclass

from kubelab.api.errors import StatusError
from kubelab.client import (
    DeletedFinalStateUnknown,
    Object,
    WorkQueue,
    resource_for,
)
from kubelab.client.record import WARNING, EventRecorder

from .base import ControllerContext, SyncError, SyncResult, Workers, controller_logger

NAME = "node-ipam-controller"

NODES = resource_for("v1", "Node")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

log = controller_logger(NAME)


class CIDRRangeFull(Exception):
    """Every block of the cluster range is given out."""


class CIDRSet:
    """The blocks of size /`mask` in `cluster`, each free or taken (module docstring).
    Not thread-safe: the controller holds a lock around it."""

    def __init__(self, cluster: IPNetwork, mask: int) -> None:
        if mask > cluster.max_prefixlen:
            raise ValueError(
                f"--node-cidr-mask-size /{mask} is not a prefix length of IPv{cluster.version} "
                f"(at most {cluster.max_prefixlen})"
            )
        if mask < cluster.prefixlen:
            raise ValueError(
                f"--node-cidr-mask-size /{mask} is larger than --cluster-cidr {cluster}: "
                f"choose a mask size of at least {cluster.prefixlen}"
            )
        if mask - cluster.prefixlen > 24:
            raise ValueError(
                f"--cluster-cidr {cluster} holds 2^{mask - cluster.prefixlen} blocks of "
                f"/{mask}, more than the 2^24 node IPAM keeps: choose a mask size of at most "
                f"{cluster.prefixlen + 24}"
            )
        self.cluster = cluster
        self.mask = mask
        self.size = 1 << (mask - cluster.prefixlen)
        self._block = 1 << (cluster.max_prefixlen - mask)
        self._taken = bytearray(self.size)
        self._next = 0
        self.used = 0

    def _index(self, cidr: IPNetwork) -> int:
        if cidr.version != self.cluster.version or not cidr.subnet_of(self.cluster):  # type: ignore[arg-type]
            raise ValueError(f"{cidr} is not inside the cluster range {self.cluster}")
        if cidr.prefixlen != self.mask:
            raise ValueError(f"{cidr} is not a /{self.mask} block")
        return (int(cidr.network_address) - int(self.cluster.network_address)) // self._block

    def _cidr(self, index: int) -> IPNetwork:
        start = int(self.cluster.network_address) + index * self._block
        return ipaddress.ip_network((start, self.mask))

    def allocate_next(self) -> IPNetwork:
        """The next free block after the last one given out, now taken."""
        for step in range(self.size):
            index = (self._next + step) % self.size
            if not self._taken[index]:
                self._taken[index] = 1
                self.used += 1
                self._next = (index + 1) % self.size
                return self._cidr(index)
        raise CIDRRangeFull(f"all {self.size} /{self.mask} ranges of {self.cluster} are in use")

    def occupy(self, cidr: IPNetwork) -> bool:
        """Mark `cidr` taken; False if it already was."""
        index = self._index(cidr)
        if self._taken[index]:
            return False
        self._taken[index] = 1
        self.used += 1
        return True

    def reserve(self, first: ipaddress.IPv4Address, last: ipaddress.IPv4Address) -> None:
        """Mark taken every block holding an address from `first` to `last`."""
        if self.cluster.version != 4:
            return
        for network in ipaddress.summarize_address_range(first, last):
            if not network.overlaps(self.cluster):
                continue
            if network.prefixlen > self.mask:
                blocks = [network.supernet(new_prefix=self.mask)]
            else:
                blocks = list(network.subnets(new_prefix=self.mask))
            for block in blocks:
                if block.subnet_of(self.cluster):
                    self.occupy(block)

    def release(self, cidr: IPNetwork) -> None:
        """Mark `cidr` free (freeing a free block does nothing)."""
        index = self._index(cidr)
        if self._taken[index]:
            self._taken[index] = 0
            self.used -= 1


@dataclass(frozen=True)
class Settings:
    """The flags of node IPAM (kube-controller-manager's)."""

    allocate_node_cidrs: bool
    cluster_cidr: IPNetwork | None
    node_cidr_mask_size: int | None
    """None: /24 for IPv4, /64 for IPv6, as Kubernetes defaults it."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        return cls(
            allocate_node_cidrs=bool(getattr(args, "allocate_node_cidrs", False)),
            cluster_cidr=getattr(args, "cluster_cidr", None),
            node_cidr_mask_size=getattr(args, "node_cidr_mask_size", None),
        )

    def cidr_set(self) -> CIDRSet:
        if self.cluster_cidr is None:
            raise ValueError(
                f"{NAME} needs --cluster-cidr (the pod network, e.g. 10.244.0.0/16) with "
                "--allocate-node-cidrs"
            )
        mask = self.node_cidr_mask_size
        if mask is None:
            mask = 24 if self.cluster_cidr.version == 4 else 64
        return CIDRSet(self.cluster_cidr, mask)


def check_settings(args: argparse.Namespace) -> bool:
    """Whether node IPAM runs (`--allocate-node-cidrs`); a ValueError if its flags do not
    make a range to allocate from."""
    settings = Settings.from_args(args)
    if settings.allocate_node_cidrs:
        settings.cidr_set()
    return settings.allocate_node_cidrs


def cluster_cidr(text: str) -> IPNetwork:
    """`--cluster-cidr`'s value (one range; kubelab's pod network is single-stack)."""
    try:
        return ipaddress.ip_network(text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"--cluster-cidr {text!r} is not a network such as 10.244.0.0/16: {exc}"
        ) from None


def node_pod_cidr(node: Object) -> str:
    return str((node.get("spec") or {}).get("podCIDR") or "")


class NodeIpamController:
    """The controller of the module docstring, keyed by node name."""

    name = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        self._tracer = ctx.tracer
        settings = Settings.from_args(ctx.args)
        self._set = settings.cidr_set()
        lb_range = getattr(ctx.args, "load_balancer_ip_range", None)
        if lb_range is not None:
            self._set.reserve(lb_range.first, lb_range.last)
        self._lock = threading.Lock()
        self._client = ctx.client_for(NAME)
        self._events = EventRecorder(self._client, "node-ipam-controller")
        self.queue: WorkQueue[str] = WorkQueue()
        self._nodes = ctx.informers.informer(NODES)
        self._nodes.add_event_handler(
            on_add=self._node_seen,
            on_update=lambda _old, new: self._node_seen(new),
            on_delete=self._node_deleted,
        )
        log.info(
            "giving nodes /%d ranges of %s (%d in all)",
            self._set.mask,
            self._set.cluster,
            self._set.size,
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._nodes).run(
                workers, stop
            )

    def _node_seen(self, node: Object) -> None:
        cidr = node_pod_cidr(node)
        name = str(node["metadata"]["name"])
        if not cidr:
            self.queue.add(name)
            return
        try:
            with self._lock:
                self._set.occupy(ipaddress.ip_network(cidr))
        except ValueError as exc:
            # Set by hand or by another allocator: not ours to keep track of.
            log.warning("node %s: its podCIDR %s is not one of ours: %s", name, cidr, exc)

    def _node_deleted(self, node: Object | DeletedFinalStateUnknown) -> None:
        last = node.obj if isinstance(node, DeletedFinalStateUnknown) else node
        cidr = node_pod_cidr(last)
        if not cidr:
            return
        try:
            network = ipaddress.ip_network(cidr)
            with self._lock:
                self._set.release(network)
        except ValueError:
            return
        log.info("node %s deleted: released its range %s", last["metadata"]["name"], cidr)
        # Nodes waiting for a range need not wait out their back-off.
        for waiting in self._nodes.indexer.list():
            if not node_pod_cidr(waiting):
                self.queue.add(str(waiting["metadata"]["name"]))

    def sync(self, name: str) -> SyncResult:
        node = self._nodes.indexer.get(name)
        if node is None or node_pod_cidr(node):
            return None
        try:
            with self._lock:
                cidr = self._set.allocate_next()
        except CIDRRangeFull as exc:
            self._events.event(
                node,
                WARNING,
                "CIDRNotAvailable",
                f"Node {name} status is now: CIDRNotAvailable ({exc}; delete a node, or "
                "restart the controller-manager with a larger --cluster-cidr or "
                "--node-cidr-mask-size)",
            )
            raise SyncError(f"node {name}: no pod range left: {exc}") from None
        patch = {"spec": {"podCIDR": str(cidr), "podCIDRs": [str(cidr)]}}
        try:
            updated = self._client.patch(NODES, name, patch)
        except StatusError as exc:
            with self._lock:
                self._set.release(cidr)
            if exc.code in (404, 422):
                # Gone, or given a range meanwhile (podCIDR is immutable once set): the
                # node's next event shows which, and marks that range taken.
                log.info("node %s: not setting podCIDR %s: %s", name, cidr, exc)
                return None
            raise
        log.info(
            "node %s (uid %s): set podCIDR %s (resourceVersion %s)",
            name,
            updated["metadata"].get("uid"),
            cidr,
            updated["metadata"].get("resourceVersion"),
        )
        return None
