"""kube-proxy's rules as text: what `iptables-save` on a node shows for ClusterIP,
NodePort, session affinity, random balancing, hairpin, services without endpoints,
and the removal of a deleted Service's chains."""

from __future__ import annotations

from typing import Any

import pytest

from agents.proxy.rules import chain_name, generate, service_ports

CLUSTER_CIDR = "10.244.0.0/16"


def service(name: str, **spec: Any) -> dict[str, Any]:
    body = {"clusterIP": "10.96.0.20", "ports": [{"name": "http", "port": 80}], **spec}
    return {"metadata": {"namespace": "web", "name": name}, "spec": body}


def slice_(service_name: str, *endpoints: tuple[str, bool | None]) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "web",
            "name": f"{service_name}-abc",
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [ip], **({} if ready is None else {"conditions": {"ready": ready}})}
            for ip, ready in endpoints
        ],
    }


def rules_of(services: list[Any], slices: list[Any], existing: Any = None) -> list[str]:
    return generate(service_ports(services, slices), CLUSTER_CIDR, existing).render().splitlines()


def test_a_cluster_ip_balances_at_random_over_ready_endpoints_only() -> None:
    lines = rules_of(
        [service("nginx")],
        [slice_("nginx", ("10.244.0.5", True), ("10.244.1.7", None), ("10.244.2.9", False))],
    )
    svc = chain_name("KUBE-SVC-", "web/nginx:http", "TCP")
    sep5 = chain_name("KUBE-SEP-", "web/nginx:http", "TCP", "10.244.0.5:8080")
    sep7 = chain_name("KUBE-SEP-", "web/nginx:http", "TCP", "10.244.1.7:8080")
    assert (
        f'-A KUBE-SERVICES -m comment --comment "web/nginx:http cluster IP" -p tcp -m tcp '
        f"-d 10.96.0.20/32 --dport 80 -j {svc}"
    ) in lines
    # Traffic from outside the pod network is masqueraded, so replies come back here.
    assert (
        f'-A {svc} -m comment --comment "web/nginx:http cluster IP" -p tcp -m tcp '
        f"-d 10.96.0.20/32 --dport 80 ! -s {CLUSTER_CIDR} -j KUBE-MARK-MASQ"
    ) in lines
    picks = [line for line in lines if line.startswith(f"-A {svc}") and "KUBE-SEP" in line]
    assert picks == [
        f'-A {svc} -m comment --comment "web/nginx:http -> 10.244.0.5:8080" -m statistic '
        f"--mode random --probability 0.5000000000 -j {sep5}",
        f'-A {svc} -m comment --comment "web/nginx:http -> 10.244.1.7:8080" -j {sep7}',
    ]
    assert "10.244.2.9" not in "\n".join(lines)
    # Hairpin: a pod reaching itself through the Service is masqueraded.
    assert f"-A {sep5} -m comment --comment web/nginx:http -s 10.244.0.5/32 -j KUBE-MARK-MASQ" in (
        lines
    )
    assert (
        f"-A {sep5} -m comment --comment web/nginx:http -p tcp -m tcp -j DNAT "
        "--to-destination 10.244.0.5:8080"
    ) in lines


@pytest.mark.parametrize("count", [3, 4])
def test_each_of_n_endpoints_is_equally_likely(count: int) -> None:
    endpoints = [(f"10.244.0.{i + 2}", True) for i in range(count)]
    lines = rules_of([service("nginx")], [slice_("nginx", *endpoints)])
    probabilities = [
        float(line.split("--probability ")[1].split()[0]) for line in lines if "probability" in line
    ]
    chance, remaining = [], 1.0
    for p in [*probabilities, 1.0]:
        chance.append(remaining * p)
        remaining *= 1 - p
    assert chance == pytest.approx([1 / count] * count)


def test_a_node_port_is_marked_for_masquerade_and_matched_on_local_addresses() -> None:
    spec = {"type": "NodePort", "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}
    lines = rules_of([service("nginx", **spec)], [slice_("nginx", ("10.244.0.5", True))])
    svc = chain_name("KUBE-SVC-", "web/nginx:http", "TCP")
    assert lines.index(
        "-A KUBE-NODEPORTS -m comment --comment web/nginx:http -p tcp -m tcp --dport 30080 "
        "-j KUBE-MARK-MASQ"
    ) < lines.index(
        f"-A KUBE-NODEPORTS -m comment --comment web/nginx:http -p tcp -m tcp --dport 30080 "
        f"-j {svc}"
    )
    # The jump to KUBE-NODEPORTS is the last rule of KUBE-SERVICES.
    nat_services = [line for line in lines if line.startswith("-A KUBE-SERVICES")]
    assert nat_services[-1].endswith("--dst-type LOCAL -j KUBE-NODEPORTS")


def test_client_ip_affinity_sends_a_recent_client_back_to_its_endpoint() -> None:
    spec = {
        "sessionAffinity": "ClientIP",
        "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
    }
    lines = rules_of(
        [service("nginx", **spec)],
        [slice_("nginx", ("10.244.0.5", True), ("10.244.1.7", True))],
    )
    svc = chain_name("KUBE-SVC-", "web/nginx:http", "TCP")
    sep5 = chain_name("KUBE-SEP-", "web/nginx:http", "TCP", "10.244.0.5:8080")
    svc_rules = [line for line in lines if line.startswith(f"-A {svc}")]
    # The affinity checks come before the random choice.
    assert (
        f"--name {sep5} --mask 255.255.255.255 --rsource --rcheck --seconds 600 --reap"
        in (svc_rules[1])
    )
    assert "statistic" in svc_rules[3]
    assert any(f"--name {sep5}" in line and "--set" in line for line in lines)


def test_a_service_without_ready_endpoints_is_rejected_not_blackholed() -> None:
    lines = rules_of([service("nginx")], [slice_("nginx", ("10.244.0.5", False))])
    assert (
        '-A KUBE-SERVICES -m comment --comment "web/nginx:http has no endpoints" -p tcp -m tcp '
        "-d 10.96.0.20/32 --dport 80 -j REJECT --reject-with icmp-port-unreachable"
    ) in lines
    assert not any(line.startswith(":KUBE-SVC-") for line in lines)


def test_headless_and_external_name_services_get_no_rules() -> None:
    headless = service("db", clusterIP="None")
    external = service("ext", type="ExternalName", externalName="example.org", clusterIP="")
    assert service_ports([headless, external], [slice_("db", ("10.244.0.5", True))]) == []


def test_a_deleted_services_chains_are_deleted_in_the_same_transaction() -> None:
    gone = chain_name("KUBE-SVC-", "web/old:http", "TCP")
    lines = rules_of([], [], existing={"nat": [gone, "KUBE-SERVICES", "DOCKER"]})
    assert f":{gone} - [0:0]" in lines
    assert f"-X {gone}" in lines
    # Only our per-service chains: dockerd's and the fixed ones stay.
    assert "-X DOCKER" not in lines and "-X KUBE-SERVICES" not in lines


def load_balancer(name: str, *ingress: dict[str, str], **spec: Any) -> dict[str, Any]:
    ports = [{"name": "http", "port": 80, "nodePort": 30080}]
    body = service(name, type="LoadBalancer", ports=ports, **spec)
    body["status"] = {"loadBalancer": {"ingress": list(ingress)}}
    return body


def test_a_load_balancer_address_goes_through_the_external_chain_to_the_service() -> None:
    svc_object = load_balancer("nginx", {"ip": "10.250.254.1", "ipMode": "VIP"})
    lines = rules_of([svc_object], [slice_("nginx", ("10.244.0.5", True))])
    svc = chain_name("KUBE-SVC-", "web/nginx:http", "TCP")
    ext = chain_name("KUBE-EXT-", "web/nginx:http", "TCP")
    assert ext.removeprefix("KUBE-EXT-") == svc.removeprefix("KUBE-SVC-")
    to_ext = (
        '-A KUBE-SERVICES -m comment --comment "web/nginx:http loadbalancer IP" -p tcp -m tcp '
        f"-d 10.250.254.1/32 --dport 80 -j {ext}"
    )
    assert f":{ext} - [0:0]" in lines
    # Before the last rule of KUBE-SERVICES (the node ports of local addresses, which
    # the address is on the node holding it).
    nat_services = [line for line in lines if line.startswith("-A KUBE-SERVICES")]
    assert nat_services.index(to_ext) < len(nat_services) - 1
    ext_rules = [line for line in lines if line.startswith(f"-A {ext}")]
    assert ext_rules == [
        f'-A {ext} -m comment --comment "masquerade traffic for web/nginx:http external '
        'destinations" -j KUBE-MARK-MASQ',
        f"-A {ext} -j {svc}",
    ]


def test_only_vip_addresses_of_load_balancers_are_answered() -> None:
    proxied = load_balancer("proxied", {"ip": "10.250.254.2", "ipMode": "Proxy"})
    unset = load_balancer("unset", {"ip": "10.250.254.3"}, {"hostname": "lb.example.org"})
    changed = load_balancer("changed", {"ip": "10.250.254.4"})
    changed["spec"]["type"] = "ClusterIP"  # its status not cleared yet
    ports = service_ports([proxied, unset, changed], [])
    assert {p.name: p.load_balancer_ips for p in ports} == {
        "proxied": [],
        "unset": ["10.250.254.3"],
        "changed": [],
    }


def test_a_load_balancer_without_endpoints_is_rejected_on_input_too() -> None:
    lines = rules_of([load_balancer("nginx", {"ip": "10.250.254.1"})], [])
    assert (
        '-A KUBE-EXTERNAL-SERVICES -m comment --comment "web/nginx:http has no endpoints" '
        "-p tcp -m tcp -d 10.250.254.1/32 --dport 80 -j REJECT --reject-with "
        "icmp-port-unreachable"
    ) in lines
    assert not any(line.startswith(":KUBE-EXT-") for line in lines)


def test_a_stale_external_chain_is_deleted() -> None:
    gone = chain_name("KUBE-EXT-", "web/old:http", "TCP")
    assert f"-X {gone}" in rules_of([], [], existing={"nat": [gone]})
