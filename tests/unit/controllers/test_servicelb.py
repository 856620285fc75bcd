"""The service load-balancer controller against the real apiserver: LoadBalancer Services
get an address of the pool in `status.loadBalancer.ingress`; the address is released
when the Service goes or changes type; a full pool leaves a Service pending with an
Event saying so and what to do, until an address is freed. The pool's own arithmetic
is a table."""

from __future__ import annotations

import argparse
import ipaddress
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controlplane.controllers.servicelb import (
    AddressPool,
    AddressRange,
    PoolExhausted,
    ServiceLBController,
    ingress_ips,
)
from kubelab.client import resource_for
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import Cluster, Harness, new_object

SERVICES = resource_for("v1", "Service")
EVENTS = resource_for("v1", "Event")
KUBECTL = str(Path(sys.executable).parent / "kubectl")


def start(harness: Harness, pool: str) -> ServiceLBController:
    harness.ctx.args = argparse.Namespace(load_balancer_ip_range=AddressRange.parse(pool))
    controller = ServiceLBController(harness.ctx)
    harness.run(controller)
    return controller


def service(cluster: Cluster, name: str, kind: str = "LoadBalancer", **spec: Any) -> None:
    port = {"port": 80, "targetPort": 8080, "protocol": "TCP"}
    body = {"type": kind, "selector": {"app": name}, "ports": [port], **spec}
    new_object(cluster, SERVICES, name, spec=body)


def address(cluster: Cluster, name: str) -> list[str]:
    return ingress_ips(cluster.get(SERVICES, "ns", name))


def events(cluster: Cluster, name: str, reason: str) -> list[str]:
    items = cluster.admin.list(EVENTS, "ns")["items"]
    return [
        e["message"] for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason
    ]


def test_a_loadbalancer_service_gets_an_address_of_the_pool(
    cluster: Cluster, harness: Harness
) -> None:
    start(harness, "10.250.254.0/30")
    service(cluster, "web")
    service(cluster, "internal", "ClusterIP")
    eventually(lambda: address(cluster, "web"))
    status = cluster.get(SERVICES, "ns", "web")["status"]["loadBalancer"]
    assert status == {"ingress": [{"ip": "10.250.254.1", "ipMode": "VIP"}]}
    eventually(lambda: events(cluster, "web", "EnsuredLoadBalancer"))
    assert events(cluster, "web", "EnsuredLoadBalancer") == [
        "Ensured load balancer with address 10.250.254.1"
    ]
    service(cluster, "api")
    eventually(lambda: address(cluster, "api") == ["10.250.254.2"])
    assert address(cluster, "internal") == []


def test_a_full_pool_leaves_the_service_pending_until_an_address_is_freed(
    cluster: Cluster, harness: Harness
) -> None:
    start(harness, "10.250.254.7")
    service(cluster, "first")
    eventually(lambda: address(cluster, "first") == ["10.250.254.7"])
    service(cluster, "second")
    eventually(lambda: events(cluster, "second", "AllocationFailed"))
    message = events(cluster, "second", "AllocationFailed")[0]
    assert "no available IPs" in message
    assert "all 1 addresses of the pool 10.250.254.7 are held" in message
    assert "delete a LoadBalancer Service or change its type" in message
    assert "networking.loadBalancerPool" in message
    assert address(cluster, "second") == []

    cluster.delete(SERVICES, "ns", "first")
    eventually(lambda: address(cluster, "second") == ["10.250.254.7"])


def test_a_type_change_releases_the_address(cluster: Cluster, harness: Harness) -> None:
    start(harness, "10.250.254.7-10.250.254.7")
    service(cluster, "web")
    eventually(lambda: address(cluster, "web") == ["10.250.254.7"])
    service(cluster, "waiting")
    eventually(lambda: events(cluster, "waiting", "AllocationFailed"))

    # The real kubectl: the apiserver drops the node ports and what only a LoadBalancer
    # may have, as Kubernetes' does, so the patch of the type alone is valid.
    patch = ["patch", "service", "web", "-n", "ns", "-p", '{"spec":{"type":"ClusterIP"}}']
    done = subprocess.run(
        [KUBECTL, f"--kubeconfig={cluster.env.kubeconfig}", *patch],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    eventually(lambda: address(cluster, "web") == [])
    assert cluster.get(SERVICES, "ns", "web")["status"]["loadBalancer"] == {}
    eventually(lambda: events(cluster, "web", "DeletedLoadBalancer"))
    eventually(lambda: address(cluster, "waiting") == ["10.250.254.7"])


def test_loadbalancer_ip_and_classes(cluster: Cluster, harness: Harness) -> None:
    start(harness, "10.250.254.0/29")
    service(cluster, "pinned", loadBalancerIP="10.250.254.5")
    eventually(lambda: address(cluster, "pinned") == ["10.250.254.5"])
    service(cluster, "outside", loadBalancerIP="192.0.2.1")
    eventually(lambda: events(cluster, "outside", "AllocationFailed"))
    assert events(cluster, "outside", "AllocationFailed") == [
        "Failed to allocate IP for ns/outside: spec.loadBalancerIP 192.0.2.1 is not in the "
        "pool 10.250.254.1-10.250.254.6; choose an address of 10.250.254.1-10.250.254.6, or "
        "remove the field"
    ]
    service(cluster, "other", loadBalancerClass="example.com/other")
    service(cluster, "after")
    eventually(lambda: address(cluster, "after"))
    assert address(cluster, "other") == []
    assert address(cluster, "outside") == []


def test_a_new_leader_keeps_the_addresses_given(cluster: Cluster, harness: Harness) -> None:
    """The statuses are the state: a restarted controller (here: a first one, finding
    addresses written by another) holds them, and gives a second claimant of one address
    another."""
    service(cluster, "a")
    service(cluster, "b")
    for name in ("a", "b"):
        body = {"status": {"loadBalancer": {"ingress": [{"ip": "10.250.254.2"}]}}}
        cluster.admin.patch(SERVICES, name, body, "ns", subresource="status")
    start(harness, "10.250.254.0/29")
    eventually(lambda: address(cluster, "b") == ["10.250.254.1"])
    assert address(cluster, "a") == ["10.250.254.2"]
    service(cluster, "c")
    eventually(lambda: address(cluster, "c") == ["10.250.254.3"])


def test_the_pool_hands_out_each_address_once_and_after_the_last_one_given() -> None:
    pool = AddressPool(AddressRange.parse("10.0.0.0/30"))
    assert pool.size == 2
    assert str(pool.allocate("a")) == "10.0.0.1"
    assert str(pool.allocate("b")) == "10.0.0.2"
    with pytest.raises(PoolExhausted, match=r"all 2 addresses of the pool 10\.0\.0\.1-10\.0\.0\.2"):
        pool.allocate("c")
    assert not pool.release("c", ipaddress.IPv4Address("10.0.0.1"))
    assert pool.release("a", ipaddress.IPv4Address("10.0.0.1"))
    assert str(pool.allocate("c")) == "10.0.0.1"
    assert pool.ours("10.0.0.3") is None and pool.ours("not an ip") is None
    assert not pool.hold("d", ipaddress.IPv4Address("10.0.0.2"))
    with pytest.raises(PoolExhausted, match="no address pool is configured"):
        AddressPool(None).allocate("a")


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        ("10.1.254.0/24", "10.1.254.1", "10.1.254.254"),
        ("10.1.254.8/31", "10.1.254.8", "10.1.254.9"),
        ("10.1.254.10 - 10.1.254.20", "10.1.254.10", "10.1.254.20"),
        ("10.1.254.10", "10.1.254.10", "10.1.254.10"),
    ],
)
def test_ranges(text: str, first: str, last: str) -> None:
    parsed = AddressRange.parse(text)
    assert (str(parsed.first), str(parsed.last)) == (first, last)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("10.1.254.20-10.1.254.10", "last address comes before its first"),
        ("ten", "is not an IPv4 range such as"),
        ("fd00::/64", "is not an IPv4 range"),
    ],
)
def test_bad_ranges(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        AddressRange.parse(text)
