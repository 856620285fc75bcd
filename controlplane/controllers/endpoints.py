"""The Endpoints controller (kube-controller-manager's endpoints-controller): keeps, for
each Service with a selector, an Endpoints object of the same name listing the
addresses of the pods it selects, the ports they serve on, and whether each is ready.
kube-proxy and DNS read them (or the EndpointSlices of `endpointslice`, which are built
from the same facts by the helpers of this module). This is the seeds' "Endpoints
Controller: links Services to Pods".

Which pods, and where (`pod_endpoint`). A pod selected by the Service's selector, in
its namespace, counts once it has an address (status.podIP) and until it has finished
(Succeeded or Failed). A pod being deleted counts in Endpoints only when the Service
publishes not-ready addresses; EndpointSlices keep it, marked terminating, so that a
proxy can drain connections to it. A ready pod (its Ready condition True) is listed
under `addresses`, any other under `notReadyAddresses`, unless the Service sets
`publishNotReadyAddresses` (a StatefulSet's peers must find each other before they are
ready), which lists them all as ready.

Ports (`target_port`). A Service port's targetPort is a number, or the name of a
container port, which each pod resolves on its own: pods of two versions may serve
"http" on different numbers. Pods are therefore grouped by the ports they resolve to,
one subset per group. A pod that does not declare a named port is left out of that
port. A headless Service (clusterIP None) without ports lists its pods' addresses with
no ports at all, for DNS.

A Service without a selector is left alone: its Endpoints are written by whoever
manages them (the apiserver for `kubernetes`, a user for an external database). When a
Service is deleted, so are its Endpoints; Endpoints for which no Service exists are
otherwise not looked at.

Events: a Service change queues it; a pod change queues every Service of its namespace
whose selector matches the pod's labels, before or after the change. A sync rebuilds
the whole list from the caches and writes only when it differs.
"""

from __future__ import annotations

import copy
import ipaddress
import threading
from collections.abc import Iterable
from typing import Any

from kubelab.api import podutil
from kubelab.api.errors import StatusError
from kubelab.api.selectors import selector_from_set
from kubelab.client import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    Object,
    WorkQueue,
    namespace_index,
    object_key,
    resource_for,
    split_key,
)

from .base import ControllerContext, SyncResult, Workers, add_index, controller_logger

NAME = "endpoints-controller"

SERVICES = resource_for("v1", "Service")
PODS = resource_for("v1", "Pod")
ENDPOINTS = resource_for("v1", "Endpoints")

MAX_ENDPOINTS = 1000
"""Addresses an Endpoints object holds at most; beyond, it is truncated and says so."""
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
HEADLESS_LABEL = "service.kubernetes.io/headless"

log = controller_logger(NAME)


def service_selects(service: Object, pod: Object) -> bool:
    """Whether `service` has a selector and it matches `pod`'s labels."""
    selector = (service.get("spec") or {}).get("selector")
    if not selector:
        return False
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return selector_from_set(selector).matches(labels)


def headless(service: Object) -> bool:
    return (service.get("spec") or {}).get("clusterIP") == "None"


def target_port(service_port: dict[str, Any], pod: Object) -> int | None:
    """The port number `pod` serves `service_port` on (module docstring); None if the
    pod has no container port of the targetPort's name and protocol."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    protocol = service_port.get("protocol") or "TCP"
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target and (port.get("protocol") or "TCP") == protocol:
                return int(port["containerPort"])
    return None


def endpoint_ports(service: Object, pod: Object) -> list[dict[str, Any]]:
    """The ports `pod` serves `service` on, as Endpoints and EndpointSlices list them."""
    ports = []
    for port in (service.get("spec") or {}).get("ports") or []:
        number = target_port(port, pod)
        if number is None:
            continue
        entry: dict[str, Any] = {"port": number, "protocol": port.get("protocol") or "TCP"}
        if port.get("name"):
            entry["name"] = port["name"]
        if port.get("appProtocol"):
            entry["appProtocol"] = port["appProtocol"]
        ports.append(entry)
    return ports


def pod_counts(pod: Object, *, include_terminating: bool) -> bool:
    """Whether `pod` is an endpoint at all (module docstring)."""
    if not podutil.pod_ip(pod) or podutil.pod_terminal(pod):
        return False
    return include_terminating or not podutil.terminating(pod)


def pod_reference(pod: Object) -> dict[str, Any]:
    meta = pod["metadata"]
    return {
        "kind": "Pod",
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
    }


def pod_hostname(service: Object, pod: Object) -> str:
    """The pod's DNS name under a Service it names as its subdomain, else ""."""
    spec = pod.get("spec") or {}
    if spec.get("hostname") and spec.get("subdomain") == service["metadata"]["name"]:
        return str(spec["hostname"])
    return ""


def address_family(ip: str) -> str:
    return "IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4"


def _ports_key(ports: list[dict[str, Any]]) -> tuple[tuple[str, int, str], ...]:
    return tuple(sorted((p.get("name", ""), p["port"], p["protocol"]) for p in ports))


def endpoint_subsets(service: Object, pods: Iterable[Object]) -> tuple[list[dict[str, Any]], int]:
    """The `subsets` of `service`'s Endpoints for the pods it selects (module docstring),
    in a stable order, and how many addresses were left out beyond `MAX_ENDPOINTS`."""
    spec = service.get("spec") or {}
    publish = bool(spec.get("publishNotReadyAddresses"))
    groups: dict[tuple[tuple[str, int, str], ...], dict[str, Any]] = {}
    total = dropped = 0
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        if not pod_counts(pod, include_terminating=publish):
            continue
        ports = endpoint_ports(service, pod)
        if spec.get("ports") and not ports:
            continue
        if total >= MAX_ENDPOINTS:
            dropped += 1
            continue
        total += 1
        address: dict[str, Any] = {"ip": podutil.pod_ip(pod), "targetRef": pod_reference(pod)}
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            address["nodeName"] = node
        hostname = pod_hostname(service, pod)
        if hostname:
            address["hostname"] = hostname
        subset = groups.setdefault(
            _ports_key(ports), {"addresses": [], "notReadyAddresses": [], "ports": ports}
        )
        ready = publish or podutil.pod_ready(pod)
        subset["addresses" if ready else "notReadyAddresses"].append(address)
    subsets = []
    for _, subset in sorted(groups.items()):
        subsets.append({k: v for k, v in subset.items() if v})
    return subsets, dropped


class ServicePodController:
    """What the Endpoints and EndpointSlice controllers share: the Service and Pod
    informers, and handlers that queue the Services (by key) a change concerns."""

    def __init__(self, ctx: ControllerContext, name: str) -> None:
        self._tracer = ctx.tracer
        self.name = name
        self._log = controller_logger(name)
        self._client = ctx.client_for(name)
        self.queue: WorkQueue[str] = WorkQueue()
        self._services = ctx.informers.informer(SERVICES)
        self._pods = ctx.informers.informer(PODS)
        add_index(self._services, NAMESPACE_INDEX, namespace_index)
        add_index(self._pods, NAMESPACE_INDEX, namespace_index)
        self._services.add_event_handler(
            on_add=self._service_changed,
            on_update=lambda _old, new: self._service_changed(new),
            on_delete=self._service_changed,
        )
        self._pods.add_event_handler(
            on_add=self._pod_changed,
            on_update=self._pod_updated,
            on_delete=self._pod_changed,
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(
            self.name, self.queue, self.sync, self._log, tracer=self._tracer, objects=self._services
        ).run(workers, stop)

    def sync(self, key: str) -> SyncResult:
        raise NotImplementedError

    def _service_changed(self, service: Object | DeletedFinalStateUnknown) -> None:
        self.queue.add(object_key(service))

    def _services_of(self, pod: Object) -> list[str]:
        namespace = str(pod["metadata"].get("namespace", ""))
        return [
            object_key(service)
            for service in self._services.indexer.by_index(NAMESPACE_INDEX, namespace)
            if service_selects(service, pod)
        ]

    def _pod_changed(self, pod: Object | DeletedFinalStateUnknown) -> None:
        last = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        for key in self._services_of(last):
            self.queue.add(key)

    def _pod_updated(self, old: Object, new: Object) -> None:
        for key in set(self._services_of(old)) | set(self._services_of(new)):
            self.queue.add(key)

    def selected_pods(self, service: Object) -> list[Object]:
        namespace = str(service["metadata"].get("namespace", ""))
        return [
            pod
            for pod in self._pods.indexer.by_index(NAMESPACE_INDEX, namespace)
            if service_selects(service, pod)
        ]


class EndpointsController(ServicePodController):
    """The controller of the module docstring, keyed by Service "namespace/name"."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, NAME)
        self._endpoints = ctx.informers.informer(ENDPOINTS)
        # An Endpoints object changed or deleted behind the controller's back is
        # written back from the Service it belongs to; one without a Service (a user's,
        # for a Service yet to come) is none of its business.
        self._endpoints.add_event_handler(
            on_update=lambda _old, new: self._endpoints_changed(new),
            on_delete=self._endpoints_changed,
        )

    def _endpoints_changed(self, endpoints: Object | DeletedFinalStateUnknown) -> None:
        key = object_key(endpoints)
        if self._services.indexer.get(key) is not None:
            self.queue.add(key)

    def sync(self, key: str) -> SyncResult:
        namespace, name = split_key(key)
        service = self._services.indexer.get(key)
        current = self._endpoints.indexer.get(key)
        if service is None:
            if current is not None:
                self._delete(namespace, name)
            return None
        if not (service.get("spec") or {}).get("selector"):
            return None
        subsets, dropped = endpoint_subsets(service, self.selected_pods(service))
        labels = dict(service["metadata"].get("labels") or {})
        if headless(service):
            labels[HEADLESS_LABEL] = ""
        annotations = {OVER_CAPACITY: "truncated"} if dropped else {}
        if current is None:
            meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
            if annotations:
                meta["annotations"] = annotations
            body = {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta, "subsets": subsets}
            try:
                created = self._client.create(ENDPOINTS, body, namespace)
            except StatusError as exc:
                if exc.code == 409:  # the cache is behind; its event brings the key back
                    return None
                raise
            self._log.info(
                "created endpoints %s with %d addresses (resourceVersion %s)",
                key,
                _count(subsets),
                created["metadata"].get("resourceVersion"),
            )
            return None
        meta = current.get("metadata") or {}
        old_annotations = {
            k: v for k, v in (meta.get("annotations") or {}).items() if k != OVER_CAPACITY
        }
        wanted_annotations = {**old_annotations, **annotations}
        if (
            (current.get("subsets") or []) == subsets
            and (meta.get("labels") or {}) == labels
            and (meta.get("annotations") or {}) == wanted_annotations
        ):
            return None
        updated = copy.deepcopy(current)
        updated["subsets"] = subsets
        updated["metadata"]["labels"] = labels
        updated["metadata"]["annotations"] = wanted_annotations
        if dropped:
            self._log.warning(
                "endpoints %s: %d addresses left out beyond %d", key, dropped, MAX_ENDPOINTS
            )
        written = self._client.update(ENDPOINTS, updated)
        self._log.info(
            "updated endpoints %s: %d addresses (resourceVersion %s)",
            key,
            _count(subsets),
            written["metadata"].get("resourceVersion"),
        )
        return None

    def _delete(self, namespace: str, name: str) -> None:
        try:
            self._client.delete(ENDPOINTS, name, namespace)
        except StatusError as exc:
            if exc.code != 404:
                raise
        self._log.info("service %s/%s is gone: deleted its endpoints", namespace, name)


def _count(subsets: list[dict[str, Any]]) -> int:
    return sum(len(s.get("addresses", [])) + len(s.get("notReadyAddresses", [])) for s in subsets)
