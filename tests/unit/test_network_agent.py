"""The pod network agent's decisions, without a kernel: which routes it wants, the rules
it writes in one iptables-restore, and what it changes given the routes it finds."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.network.agent import NetworkAgent, desired_routes, rules


def node(name: str, ip: str | None, cidr: str | None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name}, "spec": {}, "status": {}}
    if cidr:
        obj["spec"]["podCIDR"] = cidr
    if ip:
        obj["status"]["addresses"] = [
            {"type": "Hostname", "address": name},
            {"type": "InternalIP", "address": ip},
        ]
    return obj


NODES = [
    node("n1", "10.244.255.10", "10.244.0.0/24"),
    node("n2", "10.244.255.11", "10.244.1.0/24"),
    node("n3", None, "10.244.2.0/24"),  # not yet reporting an address
    node("n4", "10.244.255.13", None),  # no podCIDR yet
]


def test_routes_go_to_every_other_node_with_a_cidr_and_an_address() -> None:
    assert desired_routes(NODES, "n1") == {"10.244.1.0/24": "10.244.255.11"}
    assert desired_routes(NODES, "n2") == {"10.244.0.0/24": "10.244.255.10"}


def test_rules_accept_pod_traffic_and_masquerade_only_what_leaves_the_pod_network() -> None:
    text = rules(["10.244.0.0/24", "10.244.1.0/24"], ["10.244.0.0/24"]).render()
    assert text.splitlines() == [
        "*filter",
        ":KUBELAB-FORWARD - [0:0]",
        "-A KUBELAB-FORWARD -s 10.244.0.0/24 -j ACCEPT",
        "-A KUBELAB-FORWARD -d 10.244.0.0/24 -j ACCEPT",
        "-A KUBELAB-FORWARD -s 10.244.1.0/24 -j ACCEPT",
        "-A KUBELAB-FORWARD -d 10.244.1.0/24 -j ACCEPT",
        "COMMIT",
        "*nat",
        ":KUBELAB-POSTROUTING - [0:0]",
        "-A KUBELAB-POSTROUTING -d 10.244.0.0/24 -j RETURN",
        "-A KUBELAB-POSTROUTING -d 10.244.1.0/24 -j RETURN",
        '-A KUBELAB-POSTROUTING -s 10.244.0.0/24 -m comment --comment "pod traffic leaving '
        'the pod network" -j MASQUERADE',
        "COMMIT",
    ]


class FakeNode:
    """Answers `ip -json route show` with `routes` and records every command."""

    def __init__(self, routes: list[dict[str, str]]) -> None:
        self.routes = routes
        self.commands: list[list[str]] = []
        self.stdin: list[str] = []

    def __call__(
        self, argv: Sequence[str], stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(argv))
        if stdin:
            self.stdin.append(stdin)
        out = ""
        if list(argv[:3]) == ["ip", "-json", "route"]:
            out = json.dumps(self.routes)
        # -C (check) says the jump is missing, so the agent inserts it.
        code = 1 if "-C" in argv else 0
        return subprocess.CompletedProcess(list(argv), code, out, "")


def test_a_sync_replaces_a_moved_route_removes_a_stale_one_and_hooks_its_chains() -> None:
    fake = FakeNode(
        [
            {"dst": "10.244.1.0/24", "gateway": "10.244.255.99"},  # n2 moved
            {"dst": "10.244.9.0/24", "gateway": "10.244.255.19"},  # node gone
        ]
    )
    NetworkAgent("n1", runner=fake).sync(NODES)
    assert ["ip", "route", "replace", "10.244.1.0/24", "via", "10.244.255.11", "proto", "201"] in (
        fake.commands
    )
    assert ["ip", "route", "del", "10.244.9.0/24", "proto", "201"] in fake.commands
    assert len(fake.stdin) == 1  # one iptables-restore for both tables
    inserted = [c for c in fake.commands if "-I" in c]
    assert [c[c.index("-I") + 1] for c in inserted] == ["FORWARD", "POSTROUTING"]


def test_an_unchanged_route_is_left_alone() -> None:
    fake = FakeNode([{"dst": "10.244.1.0/24", "gateway": "10.244.255.11"}])
    NetworkAgent("n1", runner=fake).sync(NODES)
    assert not [c for c in fake.commands if c[:2] == ["ip", "route"] and c[2] != "show"]


def test_pod_ports_of_the_bridge_get_hairpin_mode_once(tmp_path: Path) -> None:
    for bridge, port, mode in [("cbr0", "veth1", 0), ("cbr0", "veth2", 1), ("docker0", "veth3", 0)]:
        (tmp_path / bridge / "brif" / port).mkdir(parents=True)
        (tmp_path / bridge / "brif" / port / "hairpin_mode").write_text(f"{mode}\n")
    fake = FakeNode([])
    NetworkAgent("n1", runner=fake, sys_class_net=tmp_path).hairpin()
    assert fake.commands == [["bridge", "link", "set", "dev", "veth1", "hairpin", "on"]]
    NetworkAgent("n1", runner=fake, sys_class_net=tmp_path / "none").hairpin()  # no bridge yet
    assert len(fake.commands) == 1
