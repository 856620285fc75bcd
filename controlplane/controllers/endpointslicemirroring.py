"""The EndpointSlice mirroring controller (kube-controller-manager's
endpointslice-mirroring-controller): for a Service without a selector, whose Endpoints
someone else writes (a database outside the cluster, listed by hand), mirrors those
Endpoints into EndpointSlices, so that consumers of slices (kube-proxy, DNS) see them.

An Endpoints object is mirrored when a Service of its name exists, has no selector, and
the Endpoints are not labelled `endpointslice.kubernetes.io/skip-mirror: "true"` (the
apiserver labels its own `kubernetes` Endpoints so, as it writes that slice itself).
Each subset's `addresses` become ready endpoints, its `notReadyAddresses` not-ready ones,
on the subset's ports, at most 1000 per Endpoints as Kubernetes'
`--mirroring-max-endpoints-per-subset` (the rest are left out, with a warning). The
slices carry the Endpoints' labels, `kubernetes.io/service-name` and
`endpointslice.kubernetes.io/managed-by: endpointslicemirroring-controller.k8s.io`, and
are owned by the Service. They are deleted when the Endpoints go, are labelled to be
skipped, or the Service gets a selector (the EndpointSlice controller takes over then).
Packing and writing are `endpointslice`'s.
"""

from __future__ import annotations

import threading
from typing import Any

from kubelab.client import DeletedFinalStateUnknown, Object, WorkQueue, object_key, resource_for

from .base import ControllerContext, SyncResult, Workers, controller_logger
from .endpoints import address_family
from .endpointslice import Group, GroupKey, SliceWriter, group_key

NAME = "endpointslice-mirroring-controller"
MANAGED_BY = "endpointslicemirroring-controller.k8s.io"
SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
MAX_MIRRORED = 1000

SERVICES = resource_for("v1", "Service")
ENDPOINTS = resource_for("v1", "Endpoints")

log = controller_logger(NAME)


def mirrored_groups(endpoints: Object) -> tuple[dict[GroupKey, Group], int]:
    """The slice groups mirroring `endpoints` (module docstring), and how many addresses
    were left out beyond MAX_MIRRORED."""
    groups: dict[GroupKey, Group] = {}
    count = dropped = 0
    for subset in endpoints.get("subsets") or []:
        ports = [
            {k: v for k, v in p.items() if k in ("name", "port", "protocol", "appProtocol")}
            for p in subset.get("ports") or []
        ]
        for p in ports:
            p.setdefault("protocol", "TCP")
        for field, ready in (("addresses", True), ("notReadyAddresses", False)):
            for address in subset.get(field) or []:
                if count >= MAX_MIRRORED:
                    dropped += 1
                    continue
                count += 1
                endpoint: dict[str, Any] = {
                    "addresses": [address["ip"]],
                    "conditions": {"ready": ready},
                }
                for source, target in (
                    ("nodeName", "nodeName"),
                    ("hostname", "hostname"),
                    ("targetRef", "targetRef"),
                ):
                    if address.get(source):
                        endpoint[target] = address[source]
                family = address_family(address["ip"])
                group = groups.setdefault(group_key(family, ports), Group(ports))
                group.endpoints.append(endpoint)
    return groups, dropped


def mirrors(service: Object | None, endpoints: Object | None) -> bool:
    """Whether `endpoints` are to be mirrored (module docstring)."""
    if service is None or endpoints is None:
        return False
    if (service.get("spec") or {}).get("selector"):
        return False
    labels = (endpoints.get("metadata") or {}).get("labels") or {}
    return labels.get(SKIP_MIRROR) != "true"


class EndpointSliceMirroringController:
    """The controller of the module docstring, keyed by Service "namespace/name"."""

    name = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        self._tracer = ctx.tracer
        self._client = ctx.client_for(NAME)
        self.queue: WorkQueue[str] = WorkQueue()
        self._services = ctx.informers.informer(SERVICES)
        self._endpoints = ctx.informers.informer(ENDPOINTS)
        self._writer = SliceWriter(ctx, self._client, MANAGED_BY, self.queue, log)
        for informer in (self._services, self._endpoints):
            informer.add_event_handler(
                on_add=self._changed,
                on_update=lambda _old, new: self._changed(new),
                on_delete=self._changed,
            )

    def _changed(self, obj: Object | DeletedFinalStateUnknown) -> None:
        self.queue.add(object_key(obj))

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._endpoints).run(
            workers, stop
        )

    def sync(self, key: str) -> SyncResult:
        service = self._services.indexer.get(key)
        if service is None:
            self._writer.forget(key)
            return None  # the garbage collector deletes slices owned by a deleted Service
        endpoints = self._endpoints.indexer.get(key)
        if not mirrors(service, endpoints) or endpoints is None:
            if not self._writer.owned(key):
                return None
            return self._writer.reconcile(key, service, {}, {})
        groups, dropped = mirrored_groups(endpoints)
        if dropped:
            log.warning(
                "endpoints %s: %d addresses beyond %d not mirrored", key, dropped, MAX_MIRRORED
            )
        labels = {
            k: v
            for k, v in ((endpoints.get("metadata") or {}).get("labels") or {}).items()
            if k != SKIP_MIRROR
        }
        return self._writer.reconcile(key, service, groups, labels)
