"""What a Service's EndpointSlices say, read as the data plane reads them: kube-proxy's
rules, the ingress controller's upstreams and cluster DNS all send traffic to the same
ready endpoints of a Service's port, and must agree on which those are.

A slice belongs to the Service its label `kubernetes.io/service-name` names; it names
its ports by the Service port's name, with the target port's number; an endpoint whose
`conditions.ready` is missing is ready (the field's documented default)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Obj = Mapping[str, Any]

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def by_service(slices: Iterable[Obj]) -> dict[tuple[str, str], list[Obj]]:
    """The IPv4 slices by (namespace, Service name)."""
    out: dict[tuple[str, str], list[Obj]] = {}
    for eps in slices:
        meta = eps.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if owner and eps.get("addressType", "IPv4") == "IPv4":
            out.setdefault((meta.get("namespace", ""), owner), []).append(eps)
    return out


def ready(endpoint: Obj) -> bool:
    return (endpoint.get("conditions") or {}).get("ready") is not False


def ready_endpoints(slices: Iterable[Obj], port_name: str, protocol: str) -> set[tuple[str, int]]:
    """(address, port) of every ready endpoint of the Service port named `port_name`."""
    out: set[tuple[str, int]] = set()
    for eps in slices:
        numbers = [
            int(p["port"])
            for p in eps.get("ports") or []
            if (p.get("name") or "") == port_name
            and p.get("protocol", "TCP") == protocol
            and p.get("port") is not None
        ]
        for number in numbers:
            for endpoint in eps.get("endpoints") or []:
                if ready(endpoint):
                    out.update((ip, number) for ip in endpoint.get("addresses") or [])
    return out
