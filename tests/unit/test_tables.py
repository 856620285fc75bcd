"""Server-side printing: the Table kubectl lays out, with Kubernetes' columns and cells."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.apiserver.tables import Printers, human_duration
from kubelab.api.errors import StatusError
from kubelab.api.resources import RESOURCES, Resource, lookup

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)

PRINTERS = Printers()


def ago(**delta: float) -> str:
    return (NOW - timedelta(**delta)).isoformat().replace("+00:00", "Z")


def _resource(group: str, plural: str, version: str = "v1") -> Resource:
    resource = lookup(group, version, plural)
    assert resource is not None
    return resource


def table(group: str, plural: str, *objects: dict[str, Any], **options: Any) -> dict[str, Any]:
    return PRINTERS.to_table(_resource(group, plural), list(objects), now=NOW, **options)


def row(group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The cells of one object, keyed by column name."""
    result = table(group, plural, obj)
    names = [column["name"] for column in result["columnDefinitions"]]
    cells = result["rows"][0]["cells"]
    assert len(cells) == len(names)
    return dict(zip(names, cells, strict=True))


def wide(group: str, plural: str) -> list[str]:
    columns = table(group, plural)["columnDefinitions"]
    return [column["name"] for column in columns if column["priority"] == 1]


def meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "default", "creationTimestamp": ago(minutes=5), **extra}


# --- durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (200, "3m20s"),
        (540, "9m"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (5 * 3600 + 30 * 60, "5h30m"),
        (8 * 3600 + 59 * 60, "8h"),
        (47 * 3600, "47h"),
        (2 * 86400 + 4 * 3600, "2d4h"),
        (7 * 86400, "7d"),
        (8 * 86400 + 5 * 3600, "8d"),
        (729 * 86400, "729d"),
        (3 * 365 * 86400 + 20 * 86400, "3y20d"),
        (9 * 365 * 86400 + 20 * 86400, "9y"),
        (-1.5, "0s"),
        (-2, "<invalid>"),
    ],
)
def test_durations_read_like_kubectl(seconds: float, text: str) -> None:
    assert human_duration(timedelta(seconds=seconds)) == text


def test_age_is_unknown_without_a_creation_time_and_invalid_in_the_future() -> None:
    assert row("", "configmaps", {"metadata": {"name": "c"}})["Age"] == "<unknown>"
    future = {"metadata": {"name": "c", "creationTimestamp": ago(seconds=-60)}}
    assert row("", "configmaps", future)["Age"] == "<invalid>"


# --- the table itself --------------------------------------------------------------------


def test_the_table_shape_and_list_metadata() -> None:
    result = table(
        "",
        "configmaps",
        {"metadata": meta("a"), "data": {"x": "1"}},
        list_meta={"resourceVersion": "42", "continue": "token", "selfLink": "/x"},
    )
    assert result["kind"] == "Table" and result["apiVersion"] == "meta.k8s.io/v1"
    assert result["metadata"] == {"resourceVersion": "42", "continue": "token"}
    assert result["columnDefinitions"][0] == {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": result["columnDefinitions"][0]["description"],
        "priority": 0,
    }
    assert result["rows"][0]["cells"] == ["a", 1, "5m"]
    assert table("", "configmaps")["rows"] == []


@pytest.mark.parametrize("include", ["Metadata", ""])
def test_rows_carry_partial_object_metadata_by_default(include: str) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a"), "data": {"k": "v"}}
    embedded = table("", "configmaps", obj, include_object=include)["rows"][0]["object"]
    assert embedded == {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": obj["metadata"],
    }


def test_rows_carry_the_whole_object_or_nothing_on_request() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a")}
    assert table("", "configmaps", obj, include_object="Object")["rows"][0]["object"] == obj
    assert table("", "configmaps", obj, include_object="None")["rows"][0]["object"] is None


def test_an_unknown_include_object_is_a_bad_request() -> None:
    with pytest.raises(StatusError) as caught:
        table("", "configmaps", include_object="Everything")
    assert caught.value.code == 400
    assert caught.value.message == (
        'Unable to convert to Table as requested: includeObject: Invalid value: "Everything": '
        "must be 'Metadata', 'Object', 'None', or empty"
    )


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda resource: resource.group_resource)
def test_every_resource_prints_one_json_cell_per_column(resource: Resource) -> None:
    result = PRINTERS.to_table(
        resource, [{}, {"metadata": {"name": "x"}, "spec": {}, "status": {}}]
    )
    json.dumps(result)
    columns = result["columnDefinitions"]
    assert all(len(row["cells"]) == len(columns) for row in result["rows"])
    name_columns = [column for column in columns if column["format"] == "name"]
    assert [column["name"] for column in name_columns] == ["Name"]
    assert all(column["priority"] in (0, 1) for column in columns)
    if resource.group_resource not in ("events", "events.events.k8s.io"):
        assert columns[0]["name"] == "Name" and columns[0]["priority"] == 0


def test_resources_without_a_printer_get_name_and_created_at() -> None:
    role = {"metadata": {"name": "admin", "creationTimestamp": "2024-04-01T08:30:00Z"}}
    result = table("rbac.authorization.k8s.io", "clusterroles", role)
    assert [(c["name"], c["type"]) for c in result["columnDefinitions"]] == [
        ("Name", "string"),
        ("Created At", "date"),
    ]
    assert result["rows"][0]["cells"] == ["admin", "2024-04-01T08:30:00Z"]
    assert row("", "limitranges", {"metadata": {"name": "l"}})["Created At"] == (
        "0001-01-01T00:00:00Z"
    )


def test_age_columns_are_strings() -> None:
    for resource in RESOURCES:
        for column in PRINTERS.to_table(resource, [])["columnDefinitions"]:
            if column["name"] == "Age":
                assert column["type"] == "string"


# --- pods --------------------------------------------------------------------------------


def pod(**status: Any) -> dict[str, Any]:
    spec = status.pop("spec", {"containers": [{"name": "app", "image": "nginx"}]})
    metadata = status.pop("metadata", meta("web"))
    return {"metadata": metadata, "spec": spec, "status": status}


def running(name: str, *, ready: bool = True, restarts: int = 0) -> dict[str, Any]:
    return {"name": name, "ready": ready, "restartCount": restarts, "state": {"running": {}}}


def test_a_running_pod() -> None:
    cells = row(
        "",
        "pods",
        pod(
            phase="Running",
            podIPs=[{"ip": "10.0.0.5"}],
            containerStatuses=[running("app")],
            spec={"containers": [{"name": "app"}], "nodeName": "node-1"},
        ),
    )
    assert cells == {
        "Name": "web",
        "Ready": "1/1",
        "Status": "Running",
        "Restarts": "0",
        "Age": "5m",
        "IP": "10.0.0.5",
        "Node": "node-1",
        "Nominated Node": "<none>",
        "Readiness Gates": "<none>",
    }


def test_a_crash_looping_container_shows_its_waiting_reason_and_last_restart() -> None:
    crashing = {
        "name": "side",
        "ready": False,
        "restartCount": 4,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(minutes=5)}},
    }
    cells = row(
        "",
        "pods",
        pod(
            phase="Running",
            spec={"containers": [{"name": "app"}, {"name": "side"}]},
            containerStatuses=[running("app", restarts=1), crashing],
        ),
    )
    assert cells["Ready"] == "1/2"
    assert cells["Status"] == "CrashLoopBackOff"
    assert cells["Restarts"] == "5 (5m ago)"


@pytest.mark.parametrize(
    ("state", "status"),
    [
        ({"terminated": {"reason": "OOMKilled", "exitCode": 137}}, "OOMKilled"),
        ({"terminated": {"exitCode": 2}}, "ExitCode:2"),
        ({"terminated": {"exitCode": 137, "signal": 9}}, "Signal:9"),
        ({"waiting": {"reason": "ImagePullBackOff"}}, "ImagePullBackOff"),
        ({"waiting": {}}, "Pending"),
    ],
)
def test_a_container_state_becomes_the_status(state: dict[str, Any], status: str) -> None:
    cells = row(
        "", "pods", pod(phase="Pending", containerStatuses=[{"name": "app", "state": state}])
    )
    assert cells["Status"] == status and cells["Ready"] == "0/1"


def test_a_pod_status_reason_wins_over_its_phase() -> None:
    assert row("", "pods", pod(phase="Failed", reason="Evicted"))["Status"] == "Evicted"
    assert row("", "pods", pod(phase="Pending"))["Status"] == "Pending"
    assert row("", "pods", pod())["Status"] == ""


def test_a_scheduling_gated_pod() -> None:
    gated = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
    assert row("", "pods", pod(phase="Pending", conditions=gated))["Status"] == "SchedulingGated"


def test_a_completed_container_among_running_ones() -> None:
    statuses = [
        running("app"),
        {"name": "job", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
    ]
    spec = {"containers": [{"name": "app"}, {"name": "job"}]}
    ready = [{"type": "Ready", "status": "True"}]
    assert row("", "pods", pod(phase="Running", spec=spec, containerStatuses=statuses))[
        "Status"
    ] == ("NotReady")
    cells = row(
        "", "pods", pod(phase="Running", spec=spec, containerStatuses=statuses, conditions=ready)
    )
    assert cells["Status"] == "Running" and cells["Ready"] == "1/2"


INIT_SPEC = {
    "initContainers": [{"name": "migrate"}, {"name": "warm"}],
    "containers": [{"name": "app"}],
}


@pytest.mark.parametrize(
    ("init_statuses", "status"),
    [
        ([], "PodInitializing"),
        ([{"name": "migrate", "state": {"running": {}}}], "Init:0/2"),
        (
            [
                {"name": "migrate", "state": {"terminated": {"exitCode": 0}}},
                {"name": "warm", "state": {"waiting": {"reason": "PodInitializing"}}},
            ],
            "Init:1/2",
        ),
        (
            [{"name": "migrate", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
            "Init:CrashLoopBackOff",
        ),
        (
            [{"name": "migrate", "state": {"terminated": {"reason": "Error", "exitCode": 1}}}],
            "Init:Error",
        ),
        ([{"name": "migrate", "state": {"terminated": {"exitCode": 3}}}], "Init:ExitCode:3"),
        (
            [{"name": "migrate", "state": {"terminated": {"exitCode": 1, "signal": 15}}}],
            "Init:Signal:15",
        ),
    ],
)
def test_init_containers_show_their_progress(
    init_statuses: list[dict[str, Any]], status: str
) -> None:
    cells = row(
        "",
        "pods",
        pod(
            phase="Pending",
            spec=INIT_SPEC,
            initContainerStatuses=init_statuses,
            containerStatuses=[
                {"name": "app", "state": {"waiting": {"reason": "PodInitializing"}}}
            ],
        ),
    )
    assert cells["Status"] == status
    assert cells["Ready"] == "0/1"


def test_init_container_restarts_count_while_initializing() -> None:
    failing = {
        "name": "migrate",
        "restartCount": 3,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(seconds=30)}},
    }
    cells = row("", "pods", pod(phase="Pending", spec=INIT_SPEC, initContainerStatuses=[failing]))
    assert cells["Restarts"] == "3 (30s ago)"


def test_a_sidecar_counts_among_the_containers_and_its_restarts_stay() -> None:
    spec = {
        "initContainers": [{"name": "proxy", "restartPolicy": "Always"}],
        "containers": [{"name": "app"}],
    }
    sidecar = {"name": "proxy", "started": True, "ready": True, "restartCount": 2}
    cells = row(
        "",
        "pods",
        pod(
            phase="Running",
            spec=spec,
            initContainerStatuses=[sidecar],
            containerStatuses=[running("app", restarts=1)],
            conditions=[{"type": "Initialized", "status": "True"}],
        ),
    )
    assert cells["Ready"] == "2/2" and cells["Status"] == "Running"
    assert cells["Restarts"] == "3"


def test_a_deleted_pod_is_terminating_unless_it_finished_or_its_node_was_lost() -> None:
    deleting = meta("web", deletionTimestamp=ago(seconds=10))
    running_pod = pod(metadata=deleting, phase="Running", containerStatuses=[running("app")])
    assert row("", "pods", running_pod)["Status"] == "Terminating"
    assert row("", "pods", pod(metadata=deleting, phase="Succeeded"))["Status"] == "Succeeded"
    lost = pod(metadata=deleting, phase="Running", reason="NodeLost")
    assert row("", "pods", lost)["Status"] == "Unknown"


def test_finished_pods_are_flagged_completed() -> None:
    succeeded = table("", "pods", pod(phase="Succeeded"))["rows"][0]
    assert succeeded["conditions"][0]["type"] == "Completed"
    assert succeeded["conditions"][0]["reason"] == "Succeeded"
    failed = table("", "pods", pod(phase="Failed"))["rows"][0]
    assert failed["conditions"][0]["reason"] == "Failed"
    assert "conditions" not in table("", "pods", pod(phase="Running"))["rows"][0]


def test_the_wide_pod_columns() -> None:
    assert wide("", "pods") == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    gates = [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]
    cells = row(
        "",
        "pods",
        pod(
            spec={"containers": [], "readinessGates": gates},
            podIP="10.0.0.9",
            nominatedNodeName="node-2",
            conditions=[
                {"type": "example.com/lb", "status": "True"},
                {"type": "example.com/dns", "status": "False"},
            ],
        ),
    )
    assert cells["IP"] == "10.0.0.9" and cells["Node"] == "<none>"
    assert cells["Nominated Node"] == "node-2" and cells["Readiness Gates"] == "1/2"


# --- nodes -------------------------------------------------------------------------------


def node(ready: str | None, **spec: Any) -> dict[str, Any]:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    return {
        "metadata": {
            "name": "node-1",
            "creationTimestamp": ago(days=2, hours=4),
            "labels": {
                "node-role.kubernetes.io/worker": "",
                "node-role.kubernetes.io/control-plane": "",
                "node-role.kubernetes.io/": "",
                "kubernetes.io/hostname": "node-1",
            },
        },
        "spec": spec,
        "status": {
            "conditions": conditions,
            "addresses": [
                {"type": "Hostname", "address": "node-1"},
                {"type": "InternalIP", "address": "192.168.56.11"},
            ],
            "nodeInfo": {"kubeletVersion": "v1.30.0", "osImage": "Debian GNU/Linux 12"},
        },
    }


def test_a_ready_node_with_roles() -> None:
    assert row("", "nodes", node("True")) == {
        "Name": "node-1",
        "Status": "Ready",
        "Roles": "control-plane,worker",
        "Age": "2d4h",
        "Version": "v1.30.0",
        "Internal-IP": "192.168.56.11",
        "External-IP": "<none>",
        "OS-Image": "Debian GNU/Linux 12",
        "Kernel-Version": "<unknown>",
        "Container-Runtime": "<unknown>",
    }
    assert wide("", "nodes") == [
        "Internal-IP",
        "External-IP",
        "OS-Image",
        "Kernel-Version",
        "Container-Runtime",
    ]


@pytest.mark.parametrize(
    ("ready", "unschedulable", "status"),
    [
        ("True", False, "Ready"),
        ("False", False, "NotReady"),
        ("Unknown", False, "NotReady"),
        (None, False, "Unknown"),
        ("True", True, "Ready,SchedulingDisabled"),
        ("False", True, "NotReady,SchedulingDisabled"),
    ],
)
def test_node_status(ready: str | None, unschedulable: bool, status: str) -> None:
    assert row("", "nodes", node(ready, unschedulable=unschedulable))["Status"] == status


def test_node_roles_from_the_legacy_label_and_none() -> None:
    legacy = {"metadata": {"name": "n", "labels": {"kubernetes.io/role": "master"}}}
    assert row("", "nodes", legacy)["Roles"] == "master"
    assert row("", "nodes", {"metadata": {"name": "n"}})["Roles"] == "<none>"


# --- services and endpoints --------------------------------------------------------------


def service(kind: str | None, **spec: Any) -> dict[str, Any]:
    status = spec.pop("status", {})
    if kind is not None:
        spec["type"] = kind
    return {"metadata": meta("svc"), "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            service(
                "ClusterIP",
                clusterIP="10.96.0.10",
                clusterIPs=["10.96.0.10"],
                ports=[{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
            ),
            ("ClusterIP", "10.96.0.10", "<none>", "53/UDP,53/TCP"),
        ),
        (
            service(None, clusterIP="None", ports=[{"port": 80}]),
            ("ClusterIP", "None", "<none>", "80/TCP"),
        ),
        (
            service("ClusterIP", clusterIP="10.96.0.11", externalIPs=["203.0.113.5"]),
            ("ClusterIP", "10.96.0.11", "203.0.113.5", "<none>"),
        ),
        (
            service(
                "NodePort",
                clusterIP="10.96.0.12",
                ports=[{"port": 80, "nodePort": 30080, "protocol": "TCP"}],
            ),
            ("NodePort", "10.96.0.12", "<none>", "80:30080/TCP"),
        ),
        (
            service(
                "LoadBalancer", clusterIP="10.96.0.13", ports=[{"port": 443, "nodePort": 31443}]
            ),
            ("LoadBalancer", "10.96.0.13", "<pending>", "443:31443/TCP"),
        ),
        (
            service(
                "LoadBalancer",
                clusterIP="10.96.0.14",
                externalIPs=["198.51.100.1"],
                status={
                    "loadBalancer": {
                        "ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}]
                    }
                },
            ),
            ("LoadBalancer", "10.96.0.14", "203.0.113.9,lb.example.com,198.51.100.1", "<none>"),
        ),
        (
            service("ExternalName", externalName="db.example.com"),
            ("ExternalName", "<none>", "db.example.com", "<none>"),
        ),
    ],
)
def test_services_of_each_type(obj: dict[str, Any], expected: tuple[str, ...]) -> None:
    cells = row("", "services", obj)
    assert (cells["Type"], cells["Cluster-IP"], cells["External-IP"], cells["Port(s)"]) == expected


def test_the_service_selector_is_wide() -> None:
    assert wide("", "services") == ["Selector"]
    selected = service("ClusterIP", selector={"tier": "fe", "app": "web"})
    assert row("", "services", selected)["Selector"] == "app=web,tier=fe"
    assert row("", "services", service("ClusterIP"))["Selector"] == "<none>"


def test_endpoints_show_three_addresses_then_a_count() -> None:
    subsets = [
        {
            "addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "fd00::3"}],
            "ports": [{"port": 8080}, {"port": 9090}],
        }
    ]
    cells = row("", "endpoints", {"metadata": meta("web"), "subsets": subsets})
    assert cells["Endpoints"] == "10.0.0.1:8080,10.0.0.2:8080,[fd00::3]:8080 + 3 more..."
    headless = {"metadata": meta("db"), "subsets": [{"addresses": [{"ip": "10.0.0.7"}]}]}
    assert row("", "endpoints", headless)["Endpoints"] == "10.0.0.7"
    assert row("", "endpoints", {"metadata": meta("none")})["Endpoints"] == "<none>"


def test_endpoint_slices() -> None:
    endpoint_slice = {
        "metadata": meta("web-abc"),
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 80}, {"name": "metrics"}, {}],
        "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}],
    }
    cells = row("discovery.k8s.io", "endpointslices", endpoint_slice)
    assert cells == {
        "Name": "web-abc",
        "AddressType": "IPv4",
        "Ports": "80,metrics,*",
        "Endpoints": "10.0.0.1,10.0.0.2",
        "Age": "5m",
    }
    empty = row("discovery.k8s.io", "endpointslices", {"metadata": meta("e")})
    assert empty["Ports"] == "<unset>" and empty["Endpoints"] == "<unset>"


def test_pod_disruption_budgets() -> None:
    budget = {
        "metadata": meta("web"),
        "spec": {"minAvailable": "50%"},
        "status": {"disruptionsAllowed": 2},
    }
    assert row("policy", "poddisruptionbudgets", budget) == {
        "Name": "web",
        "Min Available": "50%",
        "Max Unavailable": "N/A",
        "Allowed Disruptions": 2,
        "Age": "5m",
    }


# --- workloads ---------------------------------------------------------------------------

TEMPLATE = {
    "spec": {
        "containers": [
            {"name": "web", "image": "nginx:1.27"},
            {"name": "log", "image": "busybox"},
        ]
    }
}


def test_a_deployment() -> None:
    deployment = {
        "metadata": meta("web"),
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "track", "operator": "NotIn", "values": ["canary"]}],
            },
            "template": TEMPLATE,
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    assert row("apps", "deployments", deployment) == {
        "Name": "web",
        "Ready": "2/3",
        "Up-to-date": 3,
        "Available": 2,
        "Age": "5m",
        "Containers": "web,log",
        "Images": "nginx:1.27,busybox",
        "Selector": "app=web,track notin (canary)",
    }
    assert wide("apps", "deployments") == ["Containers", "Images", "Selector"]


def test_a_fresh_deployment_defaults_to_one_replica() -> None:
    cells = row("apps", "deployments", {"metadata": meta("web")})
    assert cells["Ready"] == "0/1" and cells["Up-to-date"] == 0 and cells["Selector"] == ""
    bad = {"metadata": meta("web"), "spec": {"selector": {"matchLabels": {"-x": "y"}}}}
    assert row("apps", "deployments", bad)["Selector"] == "<invalid>"


def test_replica_sets_and_replication_controllers() -> None:
    replica_set = {
        "metadata": meta("web-5d9"),
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
        "status": {"replicas": 2, "readyReplicas": 1},
    }
    cells = row("apps", "replicasets", replica_set)
    assert (cells["Desired"], cells["Current"], cells["Ready"]) == (2, 2, 1)
    assert cells["Selector"] == "app=web"
    assert row("apps", "replicasets", {"metadata": meta("x")})["Selector"] == "<none>"
    controller = {"metadata": meta("old"), "spec": {"replicas": 1, "selector": {"app": "old"}}}
    cells = row("", "replicationcontrollers", controller)
    assert cells["Selector"] == "app=old" and cells["Containers"] == ""


def test_a_daemon_set() -> None:
    daemon_set = {
        "metadata": meta("agent"),
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {**TEMPLATE, "spec": {**TEMPLATE["spec"], "nodeSelector": {"os": "linux"}}},
        },
        "status": {
            "desiredNumberScheduled": 3,
            "currentNumberScheduled": 3,
            "numberReady": 2,
            "updatedNumberScheduled": 3,
            "numberAvailable": 2,
        },
    }
    cells = row("apps", "daemonsets", daemon_set)
    assert [cells[name] for name in ("Desired", "Current", "Ready", "Up-to-date", "Available")] == [
        3,
        3,
        2,
        3,
        2,
    ]
    assert cells["Node Selector"] == "os=linux" and cells["Selector"] == "app=agent"


def test_a_stateful_set() -> None:
    stateful_set = {"metadata": meta("db"), "spec": {"replicas": 3}, "status": {"readyReplicas": 1}}
    cells = row("apps", "statefulsets", stateful_set)
    assert cells["Ready"] == "1/3" and wide("apps", "statefulsets") == ["Containers", "Images"]


@pytest.mark.parametrize(
    ("spec", "status", "completions", "duration", "state"),
    [
        ({"completions": 3}, {"succeeded": 1, "startTime": ago(minutes=2)}, "1/3", "2m", "Running"),
        ({"parallelism": 4}, {"succeeded": 2}, "2/1 of 4", "", "Running"),
        ({}, {}, "0/1", "", "Running"),
        (
            {"completions": 1},
            {
                "succeeded": 1,
                "startTime": ago(minutes=10),
                "completionTime": ago(minutes=9, seconds=15),
                "conditions": [{"type": "Complete", "status": "True"}],
            },
            "1/1",
            "45s",
            "Complete",
        ),
        ({}, {"conditions": [{"type": "Failed", "status": "True"}]}, "0/1", "", "Failed"),
        ({}, {"conditions": [{"type": "Suspended", "status": "True"}]}, "0/1", "", "Suspended"),
        (
            {},
            {"conditions": [{"type": "FailureTarget", "status": "True"}]},
            "0/1",
            "",
            "FailureTarget",
        ),
    ],
)
def test_jobs(
    spec: dict[str, Any], status: dict[str, Any], completions: str, duration: str, state: str
) -> None:
    cells = row("batch", "jobs", {"metadata": meta("job"), "spec": spec, "status": status})
    assert (cells["Status"], cells["Completions"], cells["Duration"]) == (
        state,
        completions,
        duration,
    )


def test_a_job_being_deleted_is_terminating() -> None:
    job = {"metadata": meta("job", deletionTimestamp=ago(seconds=1))}
    assert row("batch", "jobs", job)["Status"] == "Terminating"


def test_a_cron_job() -> None:
    cron_job = {
        "metadata": meta("backup"),
        "spec": {
            "schedule": "0 3 * * *",
            "jobTemplate": {"spec": {"template": TEMPLATE}},
        },
        "status": {"active": [{"name": "backup-1"}], "lastScheduleTime": ago(hours=9)},
    }
    cells = row("batch", "cronjobs", cron_job)
    assert cells["Schedule"] == "0 3 * * *" and cells["Timezone"] == "<none>"
    assert cells["Suspend"] == "False" and cells["Active"] == 1
    assert cells["Last Schedule"] == "9h" and cells["Containers"] == "web,log"
    assert row("batch", "cronjobs", {"metadata": meta("b")})["Last Schedule"] == "<none>"


def test_a_controller_revision_names_its_owner() -> None:
    revision = {
        "metadata": meta(
            "web-7c9",
            ownerReferences=[
                {"apiVersion": "v1", "kind": "Pod", "name": "other"},
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": True},
            ],
        ),
        "revision": 4,
    }
    cells = row("apps", "controllerrevisions", revision)
    assert cells["Controller"] == "statefulset.apps/web" and cells["Revision"] == 4


# --- configuration, access and storage ---------------------------------------------------


def test_config_maps_secrets_service_accounts_namespaces_and_leases() -> None:
    config_map = {"metadata": meta("cfg"), "data": {"a": "1"}, "binaryData": {"b": "AA=="}}
    assert row("", "configmaps", config_map)["Data"] == 2
    secret = {"metadata": meta("tls"), "type": "kubernetes.io/tls", "data": {"a": "", "b": ""}}
    assert row("", "secrets", secret) == {
        "Name": "tls",
        "Type": "kubernetes.io/tls",
        "Data": 2,
        "Age": "5m",
    }
    account = {"metadata": meta("default"), "secrets": [{"name": "token"}]}
    assert row("", "serviceaccounts", account)["Secrets"] == 1
    namespace = {"metadata": meta("shop"), "status": {"phase": "Terminating"}}
    assert row("", "namespaces", namespace)["Status"] == "Terminating"
    lease = {"metadata": meta("kube-scheduler"), "spec": {"holderIdentity": "cp-1_abc"}}
    assert row("coordination.k8s.io", "leases", lease)["Holder"] == "cp-1_abc"


@pytest.mark.parametrize("plural", ["rolebindings", "clusterrolebindings"])
def test_bindings_list_their_subjects_by_kind(plural: str) -> None:
    binding = {
        "metadata": meta("ops"),
        "roleRef": {"kind": "ClusterRole", "name": "admin"},
        "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "User", "name": "bob"},
            {"kind": "Group", "name": "ops"},
            {"kind": "ServiceAccount", "namespace": "ci", "name": "deployer"},
        ],
    }
    cells = row("rbac.authorization.k8s.io", plural, binding)
    assert cells["Role"] == "ClusterRole/admin"
    assert (cells["Users"], cells["Groups"], cells["ServiceAccounts"]) == (
        "alice, bob",
        "ops",
        "ci/deployer",
    )
    assert wide("rbac.authorization.k8s.io", plural) == ["Users", "Groups", "ServiceAccounts"]


@pytest.mark.parametrize(
    ("conditions", "certificate", "status"),
    [
        ([], "", "Pending"),
        (["Approved"], "", "Approved"),
        (["Approved"], "LS0t", "Approved,Issued"),
        (["Approved", "Denied"], "", "Denied"),
        (["Approved", "Failed"], "", "Approved,Failed"),
    ],
)
def test_certificate_signing_requests(conditions: list[str], certificate: str, status: str) -> None:
    csr = {
        "metadata": {"name": "csr-1", "creationTimestamp": ago(minutes=1)},
        "spec": {
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "username": "system:node:node-1",
            "expirationSeconds": 86400,
        },
        "status": {
            "conditions": [{"type": kind} for kind in conditions],
            "certificate": certificate,
        },
    }
    assert row("certificates.k8s.io", "certificatesigningrequests", csr) == {
        "Name": "csr-1",
        "Age": "60s",
        "SignerName": "kubernetes.io/kube-apiserver-client-kubelet",
        "Requestor": "system:node:node-1",
        "RequestedDuration": "24h",
        "Condition": status,
    }


def test_persistent_volumes_and_claims() -> None:
    volume = {
        "metadata": meta("pv-1", annotations={"volume.beta.kubernetes.io/storage-class": "slow"}),
        "spec": {
            "capacity": {"storage": "10240Mi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": "shop", "name": "data"},
            "storageClassName": "fast",
        },
        "status": {"phase": "Bound"},
    }
    cells = row("", "persistentvolumes", volume)
    assert cells["Capacity"] == "10Gi" and cells["Access Modes"] == "RWO,RWX"
    assert (cells["Status"], cells["Claim"], cells["StorageClass"]) == (
        "Bound",
        "shop/data",
        "slow",
    )
    assert cells["VolumeAttributesClass"] == "<unset>" and cells["VolumeMode"] == "<unset>"
    claim = {
        "metadata": meta("data", deletionTimestamp=ago(seconds=3)),
        "spec": {"volumeName": "pv-1", "storageClassName": "fast", "volumeMode": "Filesystem"},
        "status": {
            "phase": "Bound",
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
        },
    }
    cells = row("", "persistentvolumeclaims", claim)
    assert (cells["Status"], cells["Volume"], cells["Capacity"]) == ("Terminating", "pv-1", "10Gi")
    assert (cells["Access Modes"], cells["StorageClass"], cells["VolumeMode"]) == (
        "RWO",
        "fast",
        "Filesystem",
    )
    pending = row(
        "", "persistentvolumeclaims", {"metadata": meta("new"), "status": {"phase": "Pending"}}
    )
    assert (pending["Volume"], pending["Capacity"], pending["Access Modes"]) == ("", "", "")


def test_a_resource_quota_splits_requests_and_limits() -> None:
    quota = {
        "metadata": meta("compute"),
        "status": {
            "hard": {"requests.cpu": "2", "limits.memory": "2Gi", "pods": "10"},
            "used": {"requests.cpu": "500m", "limits.memory": "1024Mi"},
        },
    }
    cells = row("", "resourcequotas", quota)
    assert cells["Request"] == "pods: 0/10, requests.cpu: 500m/2"
    assert cells["Limit"] == "limits.memory: 1Gi/2Gi"


# --- events ------------------------------------------------------------------------------


def test_core_events_print_last_seen_first_and_their_name_when_wide() -> None:
    event = {
        "metadata": meta("web.17c"),
        "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
        "type": "Warning",
        "reason": "BackOff",
        "message": "Back-off restarting failed container\n",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": ago(hours=1),
        "lastTimestamp": ago(minutes=2),
        "count": 12,
    }
    result = table("", "events", event)
    assert [c["name"] for c in result["columnDefinitions"]][:4] == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
    ]
    assert wide("", "events") == ["Subobject", "Source", "First Seen", "Count", "Name"]
    assert row("", "events", event) == {
        "Last Seen": "2m",
        "Type": "Warning",
        "Reason": "BackOff",
        "Object": "pod/web",
        "Subobject": "spec.containers{app}",
        "Source": "kubelet, node-1",
        "Message": "Back-off restarting failed container",
        "First Seen": "60m",
        "Count": 12,
        "Name": "web.17c",
    }


def test_events_of_the_new_api_and_series() -> None:
    event = {
        "metadata": meta("web.18d"),
        "regarding": {"kind": "Node", "name": ""},
        "note": "Node became ready",
        "type": "Normal",
        "reason": "NodeReady",
        "reportingController": "kubelet",
        "reportingInstance": "node-1",
        "eventTime": "2024-05-01T11:59:30.000000Z",
    }
    cells = row("events.k8s.io", "events", event)
    assert (cells["Last Seen"], cells["First Seen"], cells["Count"]) == ("30s", "30s", 1)
    assert cells["Object"] == "node" and cells["Source"] == "kubelet, node-1"
    assert cells["Message"] == "Node became ready"
    series = {**event, "series": {"count": 7, "lastObservedTime": "2024-05-01T11:59:50.000000Z"}}
    cells = row("events.k8s.io", "events", series)
    assert (cells["Last Seen"], cells["Count"]) == ("10s", 7)
