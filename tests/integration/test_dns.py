"""Cluster DNS against the real apiserver: the records of ClusterIP, headless and
ExternalName Services follow the API (created, changed, deleted), SRV records name the
ports, and names outside the cluster are refused or forwarded."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from dnslib import QTYPE, RCODE, DNSRecord  # type: ignore[import-untyped]

from agents.dns.server import ClusterDNS
from kubelab.client import RestClient, resource_for
from lab.testenv import Environment
from tests.waiting import until

SERVICES = resource_for("v1", "Service")
SLICES = resource_for("discovery.k8s.io/v1", "EndpointSlice")


class Server:
    def __init__(self, dns: ClusterDNS) -> None:
        self.dns = dns

    def ask(self, name: str, qtype: str = "A", tcp: bool = False) -> DNSRecord:
        query = DNSRecord.question(name, qtype)
        return DNSRecord.parse(query.send("127.0.0.1", self.dns.port, tcp=tcp, timeout=5))

    def answers(self, name: str, qtype: str = "A") -> list[str]:
        return sorted(str(rr.rdata) for rr in self.ask(name, qtype).rr)

    def until(self, name: str, want: list[str], qtype: str = "A") -> None:
        until(lambda: self.answers(name, qtype) == want, f"{qtype} {name} = {want}")


def start(env: Environment, **kwargs: Any) -> Iterator[Server]:
    """A cluster DNS server in this process, as kube-proxy's user (system:node-proxier
    reads services and endpointslices), on a free port of 127.0.0.1."""
    stop = threading.Event()
    client = RestClient(env.client_config(user="system:kube-proxy", groups=()))
    dns = ClusterDNS(client, **kwargs)
    thread = threading.Thread(target=dns.run, args=("127.0.0.1", 0, stop), daemon=True)
    thread.start()
    until(lambda: dns.loop.syncs > 0, "the DNS server's first zone")
    try:
        yield Server(dns)
    finally:
        stop.set()
        thread.join(10)
        client.close()


@pytest.fixture(scope="module")
def dns(apiserver: Environment) -> Iterator[Server]:
    yield from start(apiserver)


@pytest.fixture(scope="module")
def admin(apiserver: Environment) -> Iterator[RestClient]:
    with RestClient(apiserver.client_config(), qps=None) as client:
        yield client


def endpoint_slice(service: str, port: str, number: int, *endpoints: dict[str, Any]) -> Any:
    return {
        "metadata": {"name": f"{service}-x", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": port, "port": number, "protocol": "TCP"}],
        "endpoints": list(endpoints),
    }


def test_a_cluster_ip_service_by_its_names_and_its_srv_record(
    admin: RestClient, namespace: str, dns: Server
) -> None:
    svc = admin.create(
        SERVICES,
        {"metadata": {"name": "web"}, "spec": {"ports": [{"name": "http", "port": 80}]}},
        namespace,
    )
    ip = svc["spec"]["clusterIP"]
    fqdn = f"web.{namespace}.svc.cluster.local"
    dns.until(fqdn, [ip])
    assert dns.answers(f"web.{namespace}") == [ip]
    assert dns.ask(fqdn, tcp=True).rr[0].rdata.toZone() == ip
    srv = dns.ask(f"_http._tcp.{fqdn}", "SRV")
    assert [str(rr.rdata) for rr in srv.rr] == [f"0 100 80 {fqdn}."]
    assert [str(rr.rdata) for rr in srv.ar] == [ip]  # the target's address comes along
    # Authoritative NODATA for a type the name has not, NXDOMAIN for a missing name.
    aaaa = dns.ask(fqdn, "AAAA")
    assert aaaa.header.rcode == RCODE.NOERROR and not aaaa.rr and aaaa.header.aa
    assert dns.ask(f"nope.{namespace}.svc.cluster.local").header.rcode == RCODE.NXDOMAIN

    admin.delete(SERVICES, "web", namespace)
    until(lambda: dns.ask(fqdn).header.rcode == RCODE.NXDOMAIN, "web's record to go after delete")


def test_a_headless_service_answers_its_ready_endpoints(
    admin: RestClient, namespace: str, dns: Server
) -> None:
    admin.create(
        SERVICES,
        {
            "metadata": {"name": "db"},
            "spec": {"clusterIP": "None", "ports": [{"name": "pg", "port": 5432}]},
        },
        namespace,
    )
    admin.create(
        SLICES,
        endpoint_slice(
            "db",
            "pg",
            5432,
            {"addresses": ["10.244.1.5"], "hostname": "db-0", "conditions": {"ready": True}},
            {"addresses": ["10.244.2.6"], "conditions": {"ready": True}},
            {"addresses": ["10.244.2.7"], "conditions": {"ready": False}},
        ),
        namespace,
    )
    fqdn = f"db.{namespace}.svc.cluster.local"
    dns.until(fqdn, ["10.244.1.5", "10.244.2.6"])
    assert dns.answers(f"db-0.{fqdn}") == ["10.244.1.5"]
    assert dns.answers(f"10-244-2-6.{fqdn}") == ["10.244.2.6"]
    assert dns.answers(f"_pg._tcp.{fqdn}", "SRV") == [
        f"0 100 5432 10-244-2-6.{fqdn}.",
        f"0 100 5432 db-0.{fqdn}.",
    ]


def test_an_external_name_is_a_cname(admin: RestClient, namespace: str, dns: Server) -> None:
    admin.create(
        SERVICES,
        {
            "metadata": {"name": "ext"},
            "spec": {"type": "ExternalName", "externalName": "db.example.org"},
        },
        namespace,
    )
    fqdn = f"ext.{namespace}.svc.cluster.local"
    until(lambda: dns.ask(fqdn).rr, "ext's CNAME")
    (rr,) = dns.ask(fqdn).rr
    assert QTYPE[rr.rtype] == "CNAME" and str(rr.rdata) == "db.example.org."


def test_pod_names_resolve_to_the_address_they_spell(dns: Server) -> None:
    assert dns.answers("10-244-1-5.default.pod.cluster.local") == ["10.244.1.5"]


def test_other_names_are_refused_without_an_upstream(dns: Server) -> None:
    assert dns.ask("example.org").header.rcode == RCODE.REFUSED


def test_other_names_go_to_the_upstream(
    apiserver: Environment, admin: RestClient, namespace: str, dns: Server
) -> None:
    # A second cluster DNS, with the first as its upstream: a name only the first
    # answers comes back through the second.
    created = admin.create(
        SERVICES,
        {"metadata": {"name": "upstream-probe"}, "spec": {"ports": [{"port": 1}]}},
        namespace,
    )
    ip = created["spec"]["clusterIP"]
    name = f"upstream-probe.{namespace}.svc.cluster.local"
    dns.until(name, [ip])
    for second in start(apiserver, domain="other.local", upstreams=[("127.0.0.1", dns.dns.port)]):
        # Retried: a forward that times out on a loaded machine answers SERVFAIL.
        second.until(name, [ip])
