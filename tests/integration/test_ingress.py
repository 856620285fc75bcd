"""The ingress controller against the real apiserver: nginx.conf follows Ingresses,
Services and EndpointSlices, each Ingress shows the controller's LoadBalancer address,
and a rule naming a missing Service answers 503 and records an Event; the syncs that
changes caused are spans naming the changed objects, the status writes inside them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from agents.ingress.controller import IngressController
from kubelab import tracing
from kubelab.client import RestClient, resource_for
from lab.testenv import Environment
from tests.waiting import until

SERVICES = resource_for("v1", "Service")
SLICES = resource_for("discovery.k8s.io/v1", "EndpointSlice")
INGRESSES = resource_for("networking.k8s.io/v1", "Ingress")
EVENTS = resource_for("v1", "Event")

ADDRESS = "172.30.255.200"


@pytest.fixture(scope="module")
def admin(apiserver: Environment) -> Iterator[RestClient]:
    with RestClient(apiserver.client_config(), qps=None) as client:
        yield client


def service(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"ports": [{"name": "http", "port": 80}]}}


def endpoint_slice(service: str, ip: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{service}-x", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
    }


def backend(name: str) -> dict[str, Any]:
    return {"service": {"name": name, "port": {"number": 80}}}


def test_an_ingress_is_rendered_published_and_its_missing_service_reported(
    apiserver: Environment, admin: RestClient, namespace: str, tmp_path: Path
) -> None:
    lb = admin.create(
        SERVICES,
        {
            "metadata": {"name": "ingress-nginx-controller"},
            "spec": {**service("x")["spec"], "type": "LoadBalancer"},
        },
        namespace,
    )
    admin.patch(
        SERVICES,
        lb["metadata"]["name"],
        {"status": {"loadBalancer": {"ingress": [{"ip": ADDRESS, "ipMode": "VIP"}]}}},
        namespace,
        subresource="status",
    )
    admin.create(SERVICES, service("web"), namespace)
    admin.create(SLICES, endpoint_slice("web", "10.244.1.5"), namespace)
    reloads: list[str] = []
    stop = threading.Event()
    exporter = InMemorySpanExporter()
    traced = tracing.setup("ingress-nginx", "cp1", CollectorRegistry(), exporter=exporter)
    client = RestClient(apiserver.client_config(), qps=None, tracer=traced.tracer)
    controller = IngressController(
        client,
        tracer=traced.tracer,
        conf_dir=tmp_path,
        reload=lambda: reloads.append((tmp_path / "nginx.conf").read_text()),
        publish_service=f"{namespace}/ingress-nginx-controller",
    )
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    thread.start()
    try:
        until(lambda: reloads, "the first nginx.conf")
        ingress = admin.create(
            INGRESSES,
            {
                "metadata": {"name": "web"},
                "spec": {
                    "rules": [
                        {
                            "host": "web.example",
                            "http": {
                                "paths": [
                                    {"path": "/", "pathType": "Prefix", "backend": backend("web")},
                                    {
                                        "path": "/gone",
                                        "pathType": "Exact",
                                        "backend": backend("nothere"),
                                    },
                                ]
                            },
                        }
                    ]
                },
            },
            namespace,
        )
        upstream = f"upstream {namespace}-web-http {{\n    server 10.244.1.5:8080;"
        until(lambda: upstream in reloads[-1], "web's endpoints in nginx.conf")
        gone = "location = /gone {\n      return 503;"
        assert gone in reloads[-1]

        def shown() -> Any:
            current = admin.get(INGRESSES, "web", namespace)
            return current.get("status", {}).get("loadBalancer", {}).get("ingress")

        until(lambda: shown() == [{"ip": ADDRESS}], "the Ingress's status.loadBalancer")

        def warnings() -> list[str]:
            events = admin.list(EVENTS, namespace)["items"]
            return [
                e["message"]
                for e in events
                if e["involvedObject"].get("uid") == ingress["metadata"]["uid"]
                and e["reason"] == "ServiceNotFound"
            ]

        until(lambda: warnings(), "a ServiceNotFound Event on the Ingress")
        assert f"service {namespace}/nothere does not exist" in warnings()[0]

        admin.create(SERVICES, service("nothere"), namespace)
        admin.create(SLICES, endpoint_slice("nothere", "10.244.2.9"), namespace)
        # The slice and the Service come by two informers: the 503 goes once both are in.
        # (Only /gone's: other tests' Ingresses in the shared apiserver may answer 503.)
        until(
            lambda: "server 10.244.2.9:8080;" in reloads[-1] and gone not in reloads[-1],
            "the new Service and its endpoints served",
        )
    finally:
        stop.set()
        thread.join(10)
        client.close()
        traced.shutdown()
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    updates = [
        s
        for s in spans
        if s.name == "IngressNginx.updateConfig"
        and (s.attributes or {}).get(tracing.OBJECT_UID) == ingress["metadata"]["uid"]
        and (s.attributes or {}).get(tracing.OBJECT_KIND) == "Ingress"
    ]
    syncs = [by_id[s.parent.span_id] for s in updates if s.parent and s.parent.span_id in by_id]
    assert syncs and {s.name for s in syncs} == {"IngressNginx.sync"}
    # The sync that answered the create wrote the Ingress's status, inside its span.
    patches = [
        s
        for s in spans
        if s.name.startswith("Client.")
        and s.parent
        and s.parent.span_id == syncs[0].context.span_id
    ]
    assert patches, [s.name for s in spans]
