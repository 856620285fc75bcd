"""The Docker lab's cluster config (kind-like YAML): defaults, and errors that say what
is wrong."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from lab.cluster import ClusterConfig, LabError
from lab.nodes import SUBNET_CANDIDATES, Addressing


def test_default_is_three_control_plane_nodes_and_two_workers() -> None:
    config = ClusterConfig.load(None)
    assert config.name == "kubelab" and config.control_planes == 3
    assert config.roles == ("control-plane",) * 3 + ("worker",) * 2


@pytest.mark.parametrize("count", [1, 3, 5])
def test_one_three_or_five_control_plane_nodes(count: int) -> None:
    doc = {"nodes": [{"role": "control-plane"}] * count + [{"role": "worker"}]}
    assert ClusterConfig.parse(doc).control_planes == count


def test_file(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("kind: Cluster\nname: small\nnodes:\n- role: control-plane\n")
    assert ClusterConfig.load(path) == ClusterConfig("small", ("control-plane",))


def test_tracing_is_on_unless_the_config_turns_it_off() -> None:
    assert ClusterConfig.load(None).tracing
    assert not ClusterConfig.parse({"tracing": False}).tracing


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"kind": "Pod"}, "kind: Cluster"),
        ({"name": "Big_Lab"}, "lowercase"),
        ({"nodes": [{"role": "master"}]}, "role of control-plane, worker"),
        ({"nodes": [{"role": "worker"}]}, "first node must be a control-plane node"),
        ({"networking": {"loadBalancerPool": "10.250.300.1"}}, "not an IPv4 range such as"),
        ({"networking": {"loadBalancerPool": "192.168.1.0/24"}}, "must lie in one of the lab"),
        ({"networking": {"loadBalancerPool": "10.250.255.0/28"}}, "where Docker gives the nodes"),
        ({"networking": {"loadBalancerPool": "10.250.1.0-10.251.1.0"}}, "must lie in one"),
        ({"networking": "10.250.1.0/24"}, "networking must be a mapping"),
        ({"tracing": "no"}, "tracing must be true or false"),
    ],
)
def test_bad_configs_say_what_to_fix(doc: object, message: str) -> None:
    with pytest.raises(LabError, match=message):
        ClusterConfig.parse(doc)


def test_the_load_balancer_pool_pins_the_lab_network() -> None:
    default = ClusterConfig.load(None)
    assert default.subnets == SUBNET_CANDIDATES
    assert default.pool(Addressing(ipaddress.IPv4Network("10.247.0.0/16"))) == "10.247.254.0/24"
    doc = {"networking": {"loadBalancerPool": "10.250.200.10-10.250.200.20"}}
    config = ClusterConfig.parse(doc)
    assert config.subnets == ("10.250.0.0/16",)
    assert config.pool(Addressing(ipaddress.IPv4Network("10.250.0.0/16"))) == (
        "10.250.200.10-10.250.200.20"
    )
