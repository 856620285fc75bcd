"""Node IPAM's pure part: the blocks of the cluster range, handed out once each, searched
from after the last one given, freed on release; bad flags refused with what to do."""

from __future__ import annotations

import argparse
import ipaddress

import pytest

from controlplane.controllers.nodeipam import CIDRRangeFull, CIDRSet, check_settings
from controlplane.controllers.servicelb import AddressRange


def net(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(text)


@pytest.mark.parametrize(
    ("cluster", "mask", "first_three", "size"),
    [
        ("10.244.0.0/16", 24, ["10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"], 256),
        ("10.0.0.0/8", 16, ["10.0.0.0/16", "10.1.0.0/16", "10.2.0.0/16"], 256),
        ("192.168.0.0/24", 26, ["192.168.0.0/26", "192.168.0.64/26", "192.168.0.128/26"], 4),
        ("fd00:10::/48", 64, ["fd00:10::/64", "fd00:10:0:1::/64", "fd00:10:0:2::/64"], 65536),
    ],
)
def test_blocks_are_handed_out_in_order(
    cluster: str, mask: int, first_three: list[str], size: int
) -> None:
    cidrs = CIDRSet(net(cluster), mask)
    assert cidrs.size == size
    assert [str(cidrs.allocate_next()) for _ in range(3)] == first_three
    assert cidrs.used == 3


def test_a_full_range_says_so_and_a_released_block_is_given_again() -> None:
    cidrs = CIDRSet(net("10.0.0.0/22"), 24)
    given = [cidrs.allocate_next() for _ in range(4)]
    assert len(set(given)) == 4
    with pytest.raises(CIDRRangeFull, match=r"all 4 /24 ranges of 10\.0\.0\.0/22 are in use"):
        cidrs.allocate_next()
    cidrs.release(net("10.0.1.0/24"))
    assert str(cidrs.allocate_next()) == "10.0.1.0/24"


def test_the_search_starts_after_the_last_block_given() -> None:
    cidrs = CIDRSet(net("10.0.0.0/22"), 24)
    first = cidrs.allocate_next()
    cidrs.allocate_next()
    cidrs.release(first)
    # 10.0.0.0/24 is free again, but the next two free blocks come first.
    assert [str(cidrs.allocate_next()) for _ in range(3)] == [
        "10.0.2.0/24",
        "10.0.3.0/24",
        "10.0.0.0/24",
    ]


@pytest.mark.parametrize(
    ("pool", "left"),
    [
        ("10.0.2.10-10.0.2.20", ["10.0.0.0/24", "10.0.1.0/24", "10.0.3.0/24"]),
        ("10.0.1.250-10.0.2.5", ["10.0.0.0/24", "10.0.3.0/24"]),
        ("10.0.0.0/23", ["10.0.2.0/24", "10.0.3.0/24"]),
        ("192.0.2.0/24", ["10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24"]),
    ],
)
def test_the_load_balancer_pool_is_never_a_nodes_range(pool: str, left: list[str]) -> None:
    cidrs = CIDRSet(net("10.0.0.0/22"), 24)
    addresses = AddressRange.parse(pool)
    cidrs.reserve(addresses.first, addresses.last)
    assert [str(cidrs.allocate_next()) for _ in left] == left
    with pytest.raises(CIDRRangeFull):
        cidrs.allocate_next()


def test_occupied_blocks_are_skipped_and_occupying_twice_is_noticed() -> None:
    cidrs = CIDRSet(net("10.244.0.0/16"), 24)
    assert cidrs.occupy(net("10.244.0.0/24"))
    assert cidrs.occupy(net("10.244.1.0/24"))
    assert not cidrs.occupy(net("10.244.1.0/24"))
    assert str(cidrs.allocate_next()) == "10.244.2.0/24"
    assert cidrs.used == 3


@pytest.mark.parametrize(
    ("cidr", "error"),
    [
        ("10.245.0.0/24", "not inside the cluster range 10.244.0.0/16"),
        ("10.244.0.0/25", "not a /24 block"),
        ("fd00::/64", "not inside the cluster range"),
    ],
)
def test_blocks_from_elsewhere_are_refused(cidr: str, error: str) -> None:
    cidrs = CIDRSet(net("10.244.0.0/16"), 24)
    with pytest.raises(ValueError, match=error):
        cidrs.occupy(net(cidr))


@pytest.mark.parametrize(
    ("flags", "runs", "error"),
    [
        ({}, False, None),
        ({"allocate_node_cidrs": True, "cluster_cidr": net("10.244.0.0/16")}, True, None),
        ({"allocate_node_cidrs": True}, None, "needs --cluster-cidr"),
        (
            {
                "allocate_node_cidrs": True,
                "cluster_cidr": net("10.244.0.0/16"),
                "node_cidr_mask_size": 8,
            },
            None,
            "choose a mask size of at least 16",
        ),
        (
            {
                "allocate_node_cidrs": True,
                "cluster_cidr": net("10.0.0.0/8"),
                "node_cidr_mask_size": 33,
            },
            None,
            "not a prefix length of IPv4",
        ),
        (
            {
                "allocate_node_cidrs": True,
                "cluster_cidr": net("fd00::/32"),
                "node_cidr_mask_size": 64,
            },
            None,
            "choose a mask size of at most 56",
        ),
    ],
)
def test_flags(flags: dict[str, object], runs: bool | None, error: str | None) -> None:
    args = argparse.Namespace(**flags)
    if error is None:
        assert check_settings(args) is runs
    else:
        with pytest.raises(ValueError, match=error):
            check_settings(args)
