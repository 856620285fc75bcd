"""The pod's resolv.conf as the kubelet writes it (`podspec.dns`), by dnsPolicy, against
Kubernetes' rules; the Docker twin reads it from inside a container
(test_kubelet_docker.py)."""

from __future__ import annotations

from typing import Any

from agents.kubelet import podspec

HOST = podspec.parse_resolv_conf(
    "# written by the node\nnameserver 192.168.1.1\nnameserver 192.168.1.2\n"
    "search lan example.org\noptions edns0 ndots:1\n"
)
CLUSTER_DNS = ("10.96.0.10",)


def _conf(**spec: Any) -> str:
    pod = {"metadata": {"name": "p", "namespace": "team"}, "spec": spec}
    return podspec.resolv_conf(podspec.dns(pod, CLUSTER_DNS, "cluster.local", HOST))


def test_cluster_first_names_the_cluster_dns_and_the_namespace_search_path() -> None:
    assert _conf() == (
        "nameserver 10.96.0.10\n"
        "search team.svc.cluster.local svc.cluster.local cluster.local lan example.org\n"
        "options ndots:5\n"
    )


def test_default_and_host_network_take_the_nodes_resolv_conf() -> None:
    node = "nameserver 192.168.1.1\nnameserver 192.168.1.2\nsearch lan example.org\n"
    node += "options edns0 ndots:1\n"
    assert _conf(dnsPolicy="Default") == node
    assert _conf(hostNetwork=True) == node
    assert _conf(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet").startswith(
        "nameserver 10.96.0.10\n"
    )


def test_without_cluster_dns_cluster_first_falls_back_to_the_node() -> None:
    pod = {"metadata": {"name": "p", "namespace": "team"}, "spec": {}}
    assert podspec.dns(pod, (), "cluster.local", HOST) == HOST


def test_none_is_dns_config_alone_and_dns_config_merges_into_the_others() -> None:
    config = {
        "nameservers": ["1.1.1.1", "10.96.0.10"],
        "searches": ["extra.local", "svc.cluster.local"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "single-request"}],
    }
    assert _conf(dnsPolicy="None", dnsConfig=config) == (
        "nameserver 1.1.1.1\nnameserver 10.96.0.10\n"
        "search extra.local svc.cluster.local\noptions ndots:2 single-request\n"
    )
    assert _conf(dnsConfig=config) == (
        "nameserver 10.96.0.10\nnameserver 1.1.1.1\n"
        "search team.svc.cluster.local svc.cluster.local cluster.local lan example.org "
        "extra.local\noptions ndots:2 single-request\n"
    )
