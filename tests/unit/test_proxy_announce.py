"""Which node holds a LoadBalancer address, and what kube-proxy's announcer changes on
the node given the addresses it finds, without a kernel (the Docker lab's e2e test
reaches an address from the host)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any

from agents.proxy.announce import EXCLUDE_LABEL, Announcer, addresses_for, holder


def node(name: str, ip: str, *, ready: bool = True, control_plane: bool = False) -> dict[str, Any]:
    labels = {EXCLUDE_LABEL: ""} if control_plane else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}],
        },
    }


def load_balancer(name: str, ip: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "default", "name": name},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}], "clusterIP": "10.96.0.9"},
        "status": {"loadBalancer": {"ingress": [{"ip": ip, "ipMode": "VIP"}]}},
    }


CP = node("cp1", "10.250.255.10", control_plane=True)
W1 = node("worker1", "10.250.255.11")
W2 = node("worker2", "10.250.255.12")
ADDRESSES = [f"10.250.254.{i}" for i in range(1, 21)]


def test_addresses_spread_over_the_workers_and_move_only_from_a_failed_node() -> None:
    before = {ip: holder(ip, [CP, W1, W2]) for ip in ADDRESSES}
    assert set(before.values()) == {"worker1", "worker2"}
    failed = node("worker2", "10.250.255.12", ready=False)
    after = {ip: holder(ip, [CP, W1, failed]) for ip in ADDRESSES}
    assert set(after.values()) == {"worker1"}
    # worker1's addresses stayed where they were.
    assert all(after[ip] == "worker1" for ip, name in before.items() if name == "worker1")


def test_control_plane_nodes_hold_addresses_only_when_no_worker_is_ready() -> None:
    assert holder(ADDRESSES[0], [CP, node("worker1", "10.250.255.11", ready=False)]) == "cp1"
    assert holder(ADDRESSES[0], [node("cp1", "10.250.255.10", ready=False)]) is None


def test_each_node_knows_its_own_share() -> None:
    services = [load_balancer(f"svc{i}", ip) for i, ip in enumerate(ADDRESSES)]
    shares = [addresses_for(n, services, [CP, W1, W2]) for n in ("cp1", "worker1", "worker2")]
    assert shares[0] == set()
    assert shares[1] | shares[2] == set(ADDRESSES) and not shares[1] & shares[2]


class FakeIp:
    """`ip -json -4 addr show`, `ip addr add|del` over a table of interfaces."""

    def __init__(self) -> None:
        self.links: dict[str, list[dict[str, Any]]] = {
            "lo": [{"local": "127.0.0.1", "prefixlen": 8, "label": "lo"}],
            "eth0": [{"local": "10.250.255.11", "prefixlen": 16, "label": "eth0"}],
        }
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
        args = list(argv)
        self.calls.append(args)
        out = ""
        if args[1:] == ["-json", "-4", "addr", "show"]:
            out = json.dumps([{"ifname": k, "addr_info": v} for k, v in self.links.items()])
        elif args[1:3] == ["addr", "add"]:
            ip, dev, label = args[3].split("/")[0], args[5], args[7]
            self.links[dev].append({"local": ip, "prefixlen": 32, "label": label})
        elif args[1:3] == ["addr", "del"]:
            ip, dev = args[3].split("/")[0], args[5]
            self.links[dev] = [a for a in self.links[dev] if a["local"] != ip]
        return subprocess.CompletedProcess(args, 0, out, "")


def test_the_announcer_holds_its_share_on_the_interface_of_its_internal_ip() -> None:
    ip = FakeIp()
    announced: list[tuple[str, str]] = []
    announcer = Announcer("worker1", ip, lambda dev, address: announced.append((dev, address)))
    mine = next(a for a in ADDRESSES if holder(a, [CP, W1, W2]) == "worker1")
    theirs = next(a for a in ADDRESSES if holder(a, [CP, W1, W2]) == "worker2")
    announcer.sync([load_balancer("a", mine), load_balancer("b", theirs)], [CP, W1, W2])
    assert {"local": mine, "prefixlen": 32, "label": "eth0:lb"} in ip.links["eth0"]
    assert announced == [("eth0", mine)]
    assert announcer.held() == {mine: "eth0"}

    # Nothing changed: no process at all.
    ip.calls.clear()
    announcer.sync([load_balancer("a", mine), load_balancer("b", theirs)], [CP, W1, W2])
    assert ip.calls == []

    # The Service went: the address goes; the node's own address stays.
    announcer.sync([load_balancer("b", theirs)], [CP, W1, W2])
    assert announcer.held() == {}
    assert [a["local"] for a in ip.links["eth0"]] == ["10.250.255.11"]

    # worker2 failed: its address comes here.
    failed = node("worker2", "10.250.255.12", ready=False)
    announcer.sync([load_balancer("b", theirs)], [CP, W1, failed])
    assert announcer.held() == {theirs: "eth0"}
    announcer.cleanup()
    assert announcer.held() == {}
