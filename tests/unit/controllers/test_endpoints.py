"""The pure parts of the Endpoints and EndpointSlice controllers, as tables: which pods
count and on which ports, how readiness shows, and how endpoints are packed into slices
(kept in place, new ones filling room first, at most N a slice, empty slices deleted,
one placeholder for a Service without endpoints)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.controllers.endpoints import endpoint_subsets, target_port
from controlplane.controllers.endpointslice import (
    PLACEHOLDER,
    Group,
    desired_groups,
    group_key,
    plan_slices,
    slice_endpoint,
)
from controlplane.controllers.endpointslicemirroring import mirrored_groups, mirrors

Object = dict[str, Any]


def pod(
    name: str,
    ip: str = "10.244.0.5",
    *,
    ready: bool = True,
    phase: str = "Running",
    deleting: bool = False,
    ports: dict[str, int] | None = None,
) -> Object:
    meta: Object = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {
            "nodeName": "node-1",
            "containers": [
                {
                    "name": "c",
                    "ports": [{"name": n, "containerPort": p} for n, p in (ports or {}).items()],
                }
            ],
        },
        "status": {
            "phase": phase,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def service(ports: list[Object] | None = None, **spec: Any) -> Object:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid"},
        "spec": {"selector": {"app": "web"}, "ports": ports if ports is not None else [], **spec},
    }


HTTP_BY_NAME = [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]


@pytest.mark.parametrize(
    ("port", "pod_ports", "expected"),
    [
        ({"port": 80}, {}, 80),
        ({"port": 80, "targetPort": 8080}, {}, 8080),
        ({"port": 80, "targetPort": "8081"}, {}, 8081),
        ({"port": 80, "targetPort": "http"}, {"http": 9000}, 9000),
        ({"port": 80, "targetPort": "http"}, {"web": 9000}, None),
        ({"port": 53, "targetPort": "dns", "protocol": "UDP"}, {"dns": 5353}, None),  # TCP port
    ],
)
def test_target_port(port: Object, pod_ports: dict[str, int], expected: int | None) -> None:
    assert target_port(port, pod("a", ports=pod_ports)) == expected


def test_subsets_group_pods_by_the_ports_they_resolve_and_split_ready_from_not() -> None:
    pods = [
        pod("a", "10.0.0.1", ports={"http": 8080}),
        pod("b", "10.0.0.2", ports={"http": 9090}),
        pod("c", "10.0.0.3", ports={"http": 8080}, ready=False),
        pod("d", "", ports={"http": 8080}),  # no address yet
        pod("e", "10.0.0.5", ports={"http": 8080}, phase="Succeeded"),
        pod("f", "10.0.0.6", ports={"http": 8080}, deleting=True),
        pod("g", "10.0.0.7", ports={"web": 8080}),  # does not declare "http"
    ]
    subsets, dropped = endpoint_subsets(service(HTTP_BY_NAME), pods)
    assert dropped == 0
    assert [
        (
            [a["ip"] for a in s.get("addresses", [])],
            [a["ip"] for a in s.get("notReadyAddresses", [])],
            [p["port"] for p in s["ports"]],
        )
        for s in subsets
    ] == [(["10.0.0.1"], ["10.0.0.3"], [8080]), (["10.0.0.2"], [], [9090])]
    address = subsets[0]["addresses"][0]
    assert address["targetRef"] == {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "uid-a"}
    assert address["nodeName"] == "node-1"


def test_publish_not_ready_addresses_lists_every_pod_as_ready_terminating_ones_too() -> None:
    pods = [pod("a", "10.0.0.1", ready=False), pod("b", "10.0.0.2", deleting=True)]
    subsets, _ = endpoint_subsets(service([{"port": 80}], publishNotReadyAddresses=True), pods)
    assert [a["ip"] for a in subsets[0]["addresses"]] == ["10.0.0.1", "10.0.0.2"]
    assert "notReadyAddresses" not in subsets[0]


def test_a_headless_service_without_ports_lists_addresses_only() -> None:
    subsets, _ = endpoint_subsets(service([], clusterIP="None"), [pod("a", "10.0.0.1")])
    assert subsets == [
        {
            "addresses": [
                {
                    "ip": "10.0.0.1",
                    "nodeName": "node-1",
                    "targetRef": {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "uid-a"},
                }
            ]
        }
    ]


@pytest.mark.parametrize(
    ("ready", "deleting", "publish", "conditions"),
    [
        (True, False, False, (True, True, False)),
        (False, False, False, (False, False, False)),
        (True, True, False, (False, True, True)),
        (False, True, False, (False, False, True)),
        (False, False, True, (True, False, False)),
        (True, True, True, (True, True, True)),
    ],
)
def test_slice_endpoint_conditions(
    ready: bool, deleting: bool, publish: bool, conditions: tuple[bool, bool, bool]
) -> None:
    svc = service([{"port": 80}], publishNotReadyAddresses=publish)
    c = slice_endpoint(svc, pod("a", ready=ready, deleting=deleting))["conditions"]
    assert (c["ready"], c["serving"], c["terminating"]) == conditions


def test_slices_keep_terminating_pods_and_a_service_without_pods_gets_the_placeholder() -> None:
    svc = service([{"port": 80}])
    groups = desired_groups(svc, [pod("a", "10.0.0.1", deleting=True)])
    assert [e["addresses"] for g in groups.values() for e in g.endpoints] == [["10.0.0.1"]]
    assert desired_groups(svc, []) == {PLACEHOLDER: Group([])}
    v6 = desired_groups(svc, [pod("a", "fd00::5")])
    assert list(v6) == [group_key("IPv6", [{"port": 80, "protocol": "TCP"}])]


PORTS = [{"port": 80, "protocol": "TCP"}]
KEY = group_key("IPv4", PORTS)


def ep(i: int) -> Object:
    return {"addresses": [f"10.0.0.{i}"], "conditions": {"ready": True}}


def existing(name: str, *ips: int, ports: list[Object] = PORTS) -> Object:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": [ep(i) for i in ips],
    }


def summary(plan: Any) -> tuple[list[list[int]], dict[str, list[int]], list[str]]:
    def ips(endpoints: list[Object]) -> list[int]:
        return [int(e["addresses"][0].rsplit(".", 1)[1]) for e in endpoints]

    return (
        [ips(g.endpoints) for g in plan.create],
        {s["metadata"]["name"]: ips(s["endpoints"]) for s in plan.update},
        [s["metadata"]["name"] for s in plan.delete],
    )


@pytest.mark.parametrize(
    ("slices", "wanted", "create", "update", "delete"),
    [
        # Nothing yet: 5 endpoints in slices of 2.
        ([], [1, 2, 3, 4, 5], [[1, 2], [3, 4], [5]], {}, []),
        # Unchanged: no writes.
        ([existing("s1", 1, 2), existing("s2", 3)], [1, 2, 3], [], {}, []),
        # A new endpoint goes into the slice with room, not a new one.
        ([existing("s1", 1, 2), existing("s2", 3)], [1, 2, 3, 4], [], {"s2": [3, 4]}, []),
        # A removed endpoint rewrites only its slice; a slice left empty is deleted.
        ([existing("s1", 1, 2), existing("s2", 3)], [1, 2], [], {}, ["s2"]),
        ([existing("s1", 1, 2), existing("s2", 3)], [2, 3], [], {"s1": [2]}, []),
        # Overflow beyond the room left makes new slices.
        ([existing("s1", 1)], [1, 2, 3, 4], [[3, 4]], {"s1": [1, 2]}, []),
        # Slices of ports no longer served are deleted, the endpoints move.
        (
            [existing("old", 1, 2, ports=[{"port": 81, "protocol": "TCP"}])],
            [1, 2],
            [[1, 2]],
            {},
            ["old"],
        ),
        # No endpoints: everything goes but one placeholder.
        ([existing("s1", 1)], [], [[]], {}, ["s1"]),
    ],
)
def test_plan_slices(
    slices: list[Object],
    wanted: list[int],
    create: list[list[int]],
    update: dict[str, list[int]],
    delete: list[str],
) -> None:
    desired = {KEY: Group(PORTS, [ep(i) for i in wanted])} if wanted else {PLACEHOLDER: Group([])}
    assert summary(plan_slices(slices, desired, 2)) == (create, update, delete)


def test_the_placeholder_is_kept_not_rewritten() -> None:
    placeholder = {"metadata": {"name": "p"}, "addressType": "IPv4", "ports": [], "endpoints": []}
    assert not plan_slices([placeholder], {PLACEHOLDER: Group([])}, 100)


def test_mirrored_endpoints_keep_readiness_ports_and_references() -> None:
    endpoints = {
        "subsets": [
            {
                "addresses": [{"ip": "192.0.2.1", "nodeName": "n1"}],
                "notReadyAddresses": [{"ip": "192.0.2.2"}],
                "ports": [{"name": "pg", "port": 5432}],
            },
            {"addresses": [{"ip": "2001:db8::1"}], "ports": [{"port": 53, "protocol": "UDP"}]},
        ]
    }
    groups, dropped = mirrored_groups(endpoints)
    assert dropped == 0
    pg = groups[group_key("IPv4", [{"name": "pg", "port": 5432, "protocol": "TCP"}])]
    assert pg.endpoints == [
        {"addresses": ["192.0.2.1"], "conditions": {"ready": True}, "nodeName": "n1"},
        {"addresses": ["192.0.2.2"], "conditions": {"ready": False}},
    ]
    dns = groups[group_key("IPv6", [{"port": 53, "protocol": "UDP"}])]
    assert [e["addresses"] for e in dns.endpoints] == [["2001:db8::1"]]


@pytest.mark.parametrize(
    ("selector", "labels", "mirrored"),
    [
        (None, {}, True),
        ({"app": "web"}, {}, False),
        (None, {"endpointslice.kubernetes.io/skip-mirror": "true"}, False),
    ],
)
def test_which_endpoints_are_mirrored(
    selector: dict[str, str] | None, labels: dict[str, str], mirrored: bool
) -> None:
    svc = {"metadata": {"name": "db"}, "spec": {"selector": selector} if selector else {}}
    eps = {"metadata": {"name": "db", "labels": labels}}
    assert mirrors(svc, eps) is mirrored
    assert not mirrors(svc, None)
