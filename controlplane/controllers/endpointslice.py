"""The EndpointSlice controller (kube-controller-manager's endpointslice-controller):
for each Service with a selector, the pods it selects as `discovery.k8s.io/v1`
EndpointSlices, at most `--max-endpoints-per-slice` (100) endpoints each, so that a
change to one pod of a Service of thousands rewrites one small object, not one big one.

Which pods count, and on which ports, is `endpoints`' (shared with the Endpoints
controller), except that a pod being deleted stays, with its conditions saying so:
`ready` (it may get new connections: Ready and not terminating, or always with
`publishNotReadyAddresses`), `serving` (its Ready condition, whether terminating or
not) and `terminating`. kube-proxy sends new connections to ready endpoints and falls
back to serving terminating ones when none is ready.

The slices of a Service carry the label `kubernetes.io/service-name: <service>` (how
consumers find them), `endpointslice.kubernetes.io/managed-by:
endpointslice-controller.k8s.io` (slices of other managers are never touched) and the
Service's own labels, and name the Service as their controlling owner, so the garbage
collector deletes them with it. They are named `<service>-<random>` by the apiserver.

Packing (`plan_slices`). Endpoints are grouped by address family and ports (a slice
has one of each). Within a group, an endpoint stays in the slice it is in, updated in
place; new endpoints go first into slices with room, then into new slices; a slice
left empty is deleted. So a pod's change rewrites the one slice that holds it, and
slices are not repacked behind the consumers' backs (Kubernetes' reconciler makes the
same trade). A Service with no endpoints keeps one empty slice, without ports, as
Kubernetes' placeholder does, to say "known, and empty" rather than "not processed".
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubelab.api import podutil
from kubelab.api.errors import StatusError
from kubelab.client import (
    DeletedFinalStateUnknown,
    Object,
    RestClient,
    WorkQueue,
    resource_for,
    split_key,
)

from .base import CACHE_WAIT, ControllerContext, Expectations, SyncResult
from .endpoints import (
    ServicePodController,
    address_family,
    endpoint_ports,
    pod_counts,
    pod_hostname,
    pod_reference,
)

NAME = "endpointslice-controller"

SLICES = resource_for("discovery.k8s.io/v1", "EndpointSlice")
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"
MAX_ENDPOINTS_PER_SLICE = 100

GroupKey = tuple[str, tuple[tuple[str, int, str], ...]]
"""(addressType, ports) of a slice: endpoints of one group share a slice."""


def slice_endpoint(service: Object, pod: Object) -> dict[str, Any]:
    """`pod` as an endpoint of `service`'s slices (module docstring)."""
    serving = podutil.pod_ready(pod)
    is_terminating = podutil.terminating(pod)
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    endpoint: dict[str, Any] = {
        "addresses": [podutil.pod_ip(pod)],
        "conditions": {
            "ready": publish or (serving and not is_terminating),
            "serving": serving,
            "terminating": is_terminating,
        },
        "targetRef": pod_reference(pod),
    }
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        endpoint["nodeName"] = node
    hostname = pod_hostname(service, pod)
    if hostname:
        endpoint["hostname"] = hostname
    return endpoint


def _ports_key(ports: list[dict[str, Any]]) -> tuple[tuple[str, int, str], ...]:
    return tuple(sorted((p.get("name", ""), int(p["port"]), p["protocol"]) for p in ports))


def group_key(address_type: str, ports: list[dict[str, Any]]) -> GroupKey:
    return (address_type, _ports_key(ports))


PLACEHOLDER: GroupKey = ("IPv4", ())


@dataclass
class Group:
    """The endpoints one (address family, ports) group should hold."""

    ports: list[dict[str, Any]]
    endpoints: list[dict[str, Any]] = field(default_factory=list)


def desired_groups(service: Object, pods: Iterable[Object]) -> dict[GroupKey, Group]:
    """The endpoints `service`'s slices should hold, by group; the placeholder group
    (no endpoints, no ports) when there are none."""
    has_ports = bool((service.get("spec") or {}).get("ports"))
    groups: dict[GroupKey, Group] = {}
    for pod in pods:
        if not pod_counts(pod, include_terminating=True):
            continue
        ports = endpoint_ports(service, pod)
        if has_ports and not ports:
            continue
        family = address_family(podutil.pod_ip(pod))
        group = groups.setdefault(group_key(family, ports), Group(ports))
        group.endpoints.append(slice_endpoint(service, pod))
    return groups or {PLACEHOLDER: Group([])}


def _address(endpoint: dict[str, Any]) -> str:
    return str((endpoint.get("addresses") or [""])[0])


def _sorted(endpoints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(endpoints, key=_address)


def slice_group(slice_: Object) -> GroupKey:
    return group_key(str(slice_.get("addressType", "")), list(slice_.get("ports") or []))


@dataclass
class Plan:
    """What to write to make a Service's slices hold the desired endpoints."""

    create: list[Group] = field(default_factory=list)
    """New slices: the ports and endpoints of each."""
    update: list[Object] = field(default_factory=list)
    """Existing slices, with their new endpoints."""
    delete: list[Object] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.create or self.update or self.delete)


def plan_slices(existing: list[Object], desired: dict[GroupKey, Group], max_per_slice: int) -> Plan:
    """The writes that turn `existing` (a Service's slices) into slices holding
    `desired`, packed as the module docstring says."""
    plan = Plan()
    by_group: dict[GroupKey, list[Object]] = {}
    for slice_ in sorted(existing, key=lambda s: str(s["metadata"]["name"])):
        by_group.setdefault(slice_group(slice_), []).append(slice_)
    for key, slices in by_group.items():
        if key not in desired:
            plan.delete.extend(slices)
    for key, group in desired.items():
        wanted = {_address(e): e for e in group.endpoints}
        placed: set[str] = set()
        kept: list[tuple[Object, list[dict[str, Any]]]] = []
        for slice_ in by_group.get(key, []):
            endpoints = []
            for endpoint in slice_.get("endpoints") or []:
                address = _address(endpoint)
                if address in wanted and address not in placed:
                    endpoints.append(wanted[address])
                    placed.add(address)
            kept.append((slice_, endpoints))
        new = [e for a, e in sorted(wanted.items()) if a not in placed]
        for _, endpoints in kept:
            room = max_per_slice - len(endpoints)
            if room > 0 and new:
                endpoints.extend(new[:room])
                new = new[room:]
        placeholder_needed = key == PLACEHOLDER and not group.endpoints
        for slice_, endpoints in kept:
            if not endpoints and not placeholder_needed:
                plan.delete.append(slice_)
                continue
            placeholder_needed = False
            if _sorted(endpoints) != _sorted(list(slice_.get("endpoints") or [])):
                updated = copy.deepcopy(slice_)
                updated["endpoints"] = _sorted(endpoints)
                plan.update.append(updated)
        for start in range(0, len(new), max_per_slice):
            plan.create.append(Group(group.ports, new[start : start + max_per_slice]))
        if placeholder_needed:
            plan.create.append(Group([], []))
    return plan


class SliceWriter:
    """Writes the slices of Services for one manager (`managed_by`): what the
    EndpointSlice controller and the mirroring controller share. It finds a Service's
    slices of that manager in the shared slice informer, plans with `plan_slices`, and
    writes the plan, waiting for the cache to show its last writes first
    (`Expectations`). Slice events of that manager queue their Service's key."""

    def __init__(
        self,
        ctx: ControllerContext,
        client: RestClient,
        managed_by: str,
        queue: WorkQueue[str],
        log: logging.Logger,
    ) -> None:
        self._client = client
        self._managed_by = managed_by
        self._queue = queue
        self._log = log
        self._max = int(getattr(ctx.args, "max_endpoints_per_slice", MAX_ENDPOINTS_PER_SLICE))
        self._expectations = Expectations()
        self._slices = ctx.informers.informer(SLICES)
        self._slices.add_event_handler(
            on_add=self._slice_changed,
            on_update=lambda _old, new: self._slice_changed(new),
            on_delete=self._slice_changed,
        )

    def _slice_changed(self, slice_: Object | DeletedFinalStateUnknown) -> None:
        last = slice_.obj if isinstance(slice_, DeletedFinalStateUnknown) else slice_
        labels = (last.get("metadata") or {}).get("labels") or {}
        if labels.get(MANAGED_BY_LABEL) == self._managed_by and labels.get(SERVICE_NAME_LABEL):
            namespace = str(last["metadata"].get("namespace", ""))
            self._queue.add(f"{namespace}/{labels[SERVICE_NAME_LABEL]}")

    def owned(self, key: str) -> list[Object]:
        namespace, name = split_key(key)
        return [
            s
            for s in self._slices.indexer.list()
            if (s.get("metadata") or {}).get("namespace") == namespace
            and ((s["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == name)
            and ((s["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == self._managed_by)
        ]

    def forget(self, key: str) -> None:
        self._expectations.forget(key)

    def reconcile(
        self,
        key: str,
        service: Object,
        desired: dict[GroupKey, Group],
        labels: dict[str, str],
    ) -> SyncResult:
        """Make `service`'s slices hold `desired` (none: delete them all), labelled with
        `labels` and the manager's own."""
        namespace = str(service["metadata"].get("namespace", ""))
        existing = self.owned(key)
        if not self._expectations.satisfied(key, {s["metadata"]["name"]: s for s in existing}):
            return CACHE_WAIT
        plan = plan_slices(existing, desired, self._max)
        labels = {
            **labels,
            SERVICE_NAME_LABEL: str(service["metadata"]["name"]),
            MANAGED_BY_LABEL: self._managed_by,
        }
        # Existing slices whose endpoints do not change may still miss a label.
        touched = {s["metadata"]["name"] for s in plan.update + plan.delete}
        for slice_ in existing:
            if (
                slice_["metadata"]["name"] not in touched
                and slice_["metadata"].get("labels") != labels
            ):
                plan.update.append(copy.deepcopy(slice_))
        writes: dict[str, str | None] = {}
        try:
            for slice_ in plan.delete:
                writes[slice_["metadata"]["name"]] = None
                try:
                    self._client.delete(SLICES, slice_["metadata"]["name"], namespace)
                except StatusError as exc:
                    if exc.code != 404:
                        raise
            for slice_ in plan.update:
                slice_["metadata"]["labels"] = labels
                self._client.update(SLICES, slice_)
                writes[slice_["metadata"]["name"]] = slice_["metadata"].get("resourceVersion", "")
            for group in plan.create:
                created = self._client.create(SLICES, new_slice(service, labels, group), namespace)
                writes[created["metadata"]["name"]] = ""
        finally:
            self._expectations.expect(key, writes)
        if plan:
            self._log.info(
                "service %s: %d slices created, %d updated, %d deleted",
                key,
                len(plan.create),
                len(plan.update),
                len(plan.delete),
            )
        return None


def new_slice(service: Object, labels: dict[str, str], group: Group) -> Object:
    """A new slice of `service` holding `group`, owned by the Service."""
    meta = service["metadata"]
    family = address_family(_address(group.endpoints[0])) if group.endpoints else "IPv4"
    return {
        "apiVersion": SLICES.api_version,
        "kind": SLICES.kind,
        "metadata": {
            "generateName": f"{meta['name']}-",
            "namespace": meta.get("namespace", ""),
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "addressType": family,
        "endpoints": _sorted(group.endpoints),
        "ports": group.ports,
    }


class EndpointSliceController(ServicePodController):
    """The controller of the module docstring, keyed by Service "namespace/name"."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, NAME)
        self._writer = SliceWriter(ctx, self._client, MANAGED_BY, self.queue, self._log)

    def sync(self, key: str) -> SyncResult:
        service = self._services.indexer.get(key)
        if service is None or not (service.get("spec") or {}).get("selector"):
            # A deleted Service's slices go with it (the garbage collector follows their
            # owner reference); a Service without a selector has slices of its own.
            self._writer.forget(key)
            return None
        desired = desired_groups(service, self.selected_pods(service))
        return self._writer.reconcile(
            key, service, desired, dict(service["metadata"].get("labels") or {})
        )
