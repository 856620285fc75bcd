"""The API groups charts and operators use, against the real apiserver (in-process), with
the real kubectl and the official client: networking.k8s.io, scheduling.k8s.io (and the
Priority admission plugin), autoscaling v1 and v2 over one object, storage.k8s.io,
node.k8s.io, apiregistration.k8s.io; and content negotiation (metadata-only answers,
406 for protobuf alone)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from lab.testenv import Environment

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"


def _kubectl(env: Environment, *args: str, body: object = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(env.kubeconfig), *args],
        input=None if body is None else json.dumps(body),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def _header(table: str) -> list[str]:
    return table.splitlines()[0].split()


@pytest.fixture
def api(apiserver: Environment) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(apiserver.kubeconfig)) as c:
        yield c


def _ingress(name: str, path: str = "/", port: dict[str, Any] | None = None) -> dict[str, Any]:
    port = {"number": 80} if port is None else port
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name},
        "spec": {
            "ingressClassName": "nginx",
            "tls": [{"hosts": ["web.example.com"], "secretName": "web-tls"}],
            "rules": [
                {
                    "host": "web.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": path,
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "web", "port": port}},
                            }
                        ]
                    },
                }
            ],
        },
    }


def test_ingress_ingressclass_and_networkpolicy(apiserver: Environment, namespace: str) -> None:
    _ok(_kubectl(apiserver, "create", "-n", namespace, "-f", "-", body=_ingress("web")))
    table = _ok(_kubectl(apiserver, "get", "ing", "web", "-n", namespace))
    assert _header(table) == ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    assert table.splitlines()[1].split()[:5] == ["web", "nginx", "web.example.com", "80,", "443"]

    bad = _kubectl(
        apiserver, "create", "-n", namespace, "-f", "-", body=_ingress("bad", "relative", {})
    )
    assert bad.returncode != 0
    assert (
        'spec.rules[0].http.paths[0].path: Invalid value: "relative": must be an absolute path'
        in bad.stderr
    )
    assert "spec.rules[0].http.paths[0].backend.service.port: Required value" in bad.stderr

    typo = _ingress("typo")
    typo["spec"]["rulez"] = []
    refused = _kubectl(apiserver, "create", "-n", namespace, "-f", "-", body=typo)
    assert 'strict decoding error: unknown field "spec.rulez"' in refused.stderr

    klass = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": f"nginx-{namespace}"},
        "spec": {"controller": "k8s.io/ingress-nginx"},
    }
    _ok(_kubectl(apiserver, "create", "-f", "-", body=klass))
    try:
        table = _ok(_kubectl(apiserver, "get", "ingressclass", f"nginx-{namespace}"))
        assert _header(table) == ["NAME", "CONTROLLER", "PARAMETERS", "AGE"]
        klass["spec"]["controller"] = "example.com/other"
        changed = _kubectl(apiserver, "replace", "-f", "-", body=klass)
        assert (
            "spec.controller: Invalid value" in changed.stderr
            and "field is immutable" in changed.stderr
        )
    finally:
        _kubectl(apiserver, "delete", "ingressclass", f"nginx-{namespace}")

    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "web"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 80}]}],
        },
    }
    stored = json.loads(
        _ok(_kubectl(apiserver, "create", "-n", namespace, "-f", "-", "-o", "json", body=policy))
    )
    assert stored["spec"]["policyTypes"] == ["Ingress"]
    assert stored["spec"]["ingress"][0]["ports"][0]["protocol"] == "TCP"
    table = _ok(_kubectl(apiserver, "get", "netpol", "-n", namespace))
    assert _header(table) == ["NAME", "POD-SELECTOR", "AGE"] and "app=web" in table
    policy["metadata"]["name"] = "both"
    policy["spec"]["ingress"][0]["from"] = [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]
    both = _kubectl(apiserver, "create", "-n", namespace, "-f", "-", body=policy)
    assert "may not specify both ipBlock and another peer" in both.stderr


def _pod(name: str, priority_class: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_priority_classes_and_the_priority_admission_plugin(
    apiserver: Environment, namespace: str, api: client.ApiClient
) -> None:
    scheduling = client.SchedulingV1Api(api)
    system = {pc.metadata.name: pc.value for pc in scheduling.list_priority_class().items}
    assert system["system-cluster-critical"] == 2000000000
    assert system["system-node-critical"] == 2000001000
    table = _ok(_kubectl(apiserver, "get", "pc", "system-node-critical"))
    assert _header(table) == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]

    critical = json.loads(
        _ok(
            _kubectl(
                apiserver,
                "create",
                "-n",
                namespace,
                "-f",
                "-",
                "-o",
                "json",
                body=_pod("critical", "system-node-critical"),
            )
        )
    )
    assert critical["spec"]["priority"] == 2000001000
    assert critical["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    plain = json.loads(
        _ok(
            _kubectl(
                apiserver, "create", "-n", namespace, "-f", "-", "-o", "json", body=_pod("plain")
            )
        )
    )
    assert plain["spec"]["priority"] == 0

    unknown = _kubectl(
        apiserver, "create", "-n", namespace, "-f", "-", body=_pod("lost", "no-such-class")
    )
    assert (
        'pods "lost" is forbidden: no PriorityClass with name no-such-class was found'
        in unknown.stderr
    )

    too_high = client.V1PriorityClass(
        metadata=client.V1ObjectMeta(name=f"x-{namespace}"), value=2_000_000_000
    )
    with pytest.raises(ApiException) as err:
        scheduling.create_priority_class(too_high)
    assert (
        err.value.status == 422
        and "maximum allowed value of a user defined priority is 1000000000" in err.value.body
    )

    deleted = _kubectl(apiserver, "delete", "pc", "system-cluster-critical")
    assert "is a system priority class and cannot be deleted" in deleted.stderr

    # One global default at a time; it names the class of pods that name none.
    first, second = f"default-{namespace}", f"second-{namespace}"
    created = []
    try:
        for name in (first, second):
            body = client.V1PriorityClass(
                metadata=client.V1ObjectMeta(name=name),
                value=1000,
                global_default=True,
                preemption_policy="Never",
            )
            if name == second:
                with pytest.raises(ApiException) as err:
                    scheduling.create_priority_class(body)
                assert (
                    f"PriorityClass {first} is already marked as default. "
                    "Only one default can exist" in err.value.body
                )
            else:
                scheduling.create_priority_class(body)
                created.append(name)
        defaulted = client.CoreV1Api(api).create_namespaced_pod(
            namespace,
            client.V1Pod(
                metadata=client.V1ObjectMeta(name="defaulted"),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="c", image="busybox:1.36")]
                ),
            ),
        )
        assert (
            defaulted.spec.priority_class_name,
            defaulted.spec.priority,
            defaulted.spec.preemption_policy,
        ) == (first, 1000, "Never")
    finally:
        for name in created:
            scheduling.delete_priority_class(name)


def test_a_horizontal_pod_autoscaler_is_served_in_v1_and_v2(
    apiserver: Environment, namespace: str, api: client.ApiClient
) -> None:
    v1, v2 = client.AutoscalingV1Api(api), client.AutoscalingV2Api(api)
    ref = client.V1CrossVersionObjectReference(api_version="apps/v1", kind="Deployment", name="web")
    v1.create_namespaced_horizontal_pod_autoscaler(
        namespace,
        client.V1HorizontalPodAutoscaler(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1HorizontalPodAutoscalerSpec(
                scale_target_ref=ref, max_replicas=5, target_cpu_utilization_percentage=60
            ),
        ),
    )
    modern = v2.read_namespaced_horizontal_pod_autoscaler("web", namespace)
    assert modern.spec.min_replicas == 1
    [cpu] = modern.spec.metrics
    assert (cpu.type, cpu.resource.name, cpu.resource.target.average_utilization) == (
        "Resource",
        "cpu",
        60,
    )

    # What v1 cannot say (a second metric, behavior) survives a v1 round trip.
    memory = client.V2MetricSpec(
        type="Resource",
        resource=client.V2ResourceMetricSource(
            name="memory", target=client.V2MetricTarget(type="AverageValue", average_value="512Mi")
        ),
    )
    modern.spec.metrics.append(memory)
    modern.spec.behavior = client.V2HorizontalPodAutoscalerBehavior(
        scale_down=client.V2HPAScalingRules(stabilization_window_seconds=60)
    )
    v2.replace_namespaced_horizontal_pod_autoscaler("web", namespace, modern)
    old = v1.read_namespaced_horizontal_pod_autoscaler("web", namespace)
    assert old.spec.target_cpu_utilization_percentage == 60
    assert "autoscaling.alpha.kubernetes.io/metrics" in old.metadata.annotations
    old.spec.max_replicas = 7
    v1.replace_namespaced_horizontal_pod_autoscaler("web", namespace, old)
    again = v2.read_namespaced_horizontal_pod_autoscaler("web", namespace)
    assert again.spec.max_replicas == 7
    assert [m.resource.name for m in again.spec.metrics] == ["cpu", "memory"]
    assert again.spec.behavior.scale_down.stabilization_window_seconds == 60
    assert again.spec.behavior.scale_up.select_policy == "Max", "a given behavior is defaulted"
    assert not (again.metadata.annotations or {}), "the v1 annotations are not stored"

    table = _ok(_kubectl(apiserver, "get", "hpa", "web", "-n", namespace))
    assert _header(table) == [
        "NAME",
        "REFERENCE",
        "TARGETS",
        "MINPODS",
        "MAXPODS",
        "REPLICAS",
        "AGE",
    ]
    assert "Deployment/web" in table and "cpu: <unknown>/60%, memory: <unknown>/512Mi" in table

    bad = client.V2HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="bad"),
        spec=client.V2HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V2CrossVersionObjectReference(kind="Deployment", name="web"),
            min_replicas=4,
            max_replicas=2,
        ),
    )
    with pytest.raises(ApiException) as err:
        v2.create_namespaced_horizontal_pod_autoscaler(namespace, bad)
    assert (
        "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"
        in err.value.body
    )


def test_storage_and_runtime_classes_csi_drivers_and_volume_attachments(
    apiserver: Environment, namespace: str
) -> None:
    name = f"fast-{namespace}"
    objects = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "example.com/fast",
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": f"csi.{name}"[:63]},
            "spec": {},
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": name},
            "spec": {
                "attacher": "example.com/fast",
                "nodeName": "node-1",
                "source": {"persistentVolumeName": "pv-1"},
            },
        },
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": name},
            "handler": "runc",
        },
    ]
    try:
        for obj in objects:
            _ok(_kubectl(apiserver, "create", "-f", "-", body=obj))
        sc = json.loads(_ok(_kubectl(apiserver, "get", "sc", name, "-o", "json")))
        assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")
        assert _header(_ok(_kubectl(apiserver, "get", "sc", name))) == [
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE",
        ]
        driver = json.loads(
            _ok(_kubectl(apiserver, "get", "csidriver", f"csi.{name}"[:63], "-o", "json"))
        )
        assert driver["spec"]["attachRequired"] is True and driver["spec"][
            "volumeLifecycleModes"
        ] == ["Persistent"]
        assert _header(_ok(_kubectl(apiserver, "get", "volumeattachment", name))) == [
            "NAME",
            "ATTACHER",
            "PV",
            "NODE",
            "ATTACHED",
            "AGE",
        ]
        assert _header(_ok(_kubectl(apiserver, "get", "runtimeclass", name))) == [
            "NAME",
            "HANDLER",
            "AGE",
        ]
        changed = _kubectl(
            apiserver, "patch", "sc", name, "-p", '{"provisioner": "example.com/slow"}'
        )
        assert "provisioner: Forbidden: updates to provisioner are forbidden." in changed.stderr
    finally:
        for obj in objects:
            _kubectl(apiserver, "delete", obj["kind"].lower(), obj["metadata"]["name"])


def test_api_services_list_every_local_group_version_available(api: client.ApiClient) -> None:
    services = {
        s.metadata.name: s for s in client.ApiregistrationV1Api(api).list_api_service().items
    }
    for name in (
        "v1.",
        "v1.apps",
        "v1.networking.k8s.io",
        "v2.autoscaling",
        "v1.autoscaling",
        "v1.scheduling.k8s.io",
    ):
        [available] = [c for c in services[name].status.conditions if c.type == "Available"]
        assert (available.status, available.reason) == ("True", "Local")


def test_kubectl_explains_the_new_kinds(apiserver: Environment) -> None:
    assert "averageUtilization" in _ok(
        _kubectl(apiserver, "explain", "hpa.spec.metrics.resource.target")
    )
    assert "pathType" in _ok(_kubectl(apiserver, "explain", "ingress.spec.rules.http.paths"))
    assert "globalDefault" in _ok(_kubectl(apiserver, "explain", "priorityclass"))
    assert "caBundle" in _ok(
        _kubectl(apiserver, "explain", "validatingwebhookconfiguration.webhooks.clientConfig")
    )
    resources = _ok(_kubectl(apiserver, "api-resources", "--api-group=networking.k8s.io"))
    assert {line.split()[0] for line in resources.splitlines()[1:]} == {
        "ingressclasses",
        "ingresses",
        "networkpolicies",
    }


PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
PROTOBUF = "application/vnd.kubernetes.protobuf"


def _get(api: client.ApiClient, path: str, accept: str) -> tuple[int, dict[str, Any]]:
    answer = api.call_api("GET", api.configuration.host + path, header_params={"Accept": accept})
    return answer.status, json.loads(answer.read())


def test_metadata_only_answers_and_406_for_protobuf_alone(
    api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="settings", labels={"a": "b"}),
            data={"big": "x" * 1000},
        ),
    )
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    status, one = _get(api, f"{path}/settings", PARTIAL)
    assert status == 200
    assert (one["kind"], one["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert one["metadata"]["labels"] == {"a": "b"} and "data" not in one

    status, listed = _get(
        api, path, f"{PROTOBUF};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,{PARTIAL_LIST}"
    )
    assert status == 200
    assert listed["kind"] == "PartialObjectMetadataList" and listed["metadata"]["resourceVersion"]
    assert [(i["kind"], i["metadata"]["name"]) for i in listed["items"]] == [
        ("PartialObjectMetadata", "settings")
    ]

    watched = api.call_api(
        "GET",
        f"{api.configuration.host}{path}?watch=true&timeoutSeconds=1&resourceVersion=0",
        header_params={"Accept": PARTIAL},
    )
    events = [json.loads(line) for line in watched.read().splitlines() if line.strip()]
    assert events and events[0]["type"] == "ADDED"
    assert (
        events[0]["object"]["kind"] == "PartialObjectMetadata" and "data" not in events[0]["object"]
    )

    # The official client's metadata-only shape through its own deserializer.
    status, wrong_shape = _get(api, path, PARTIAL)
    assert status == 406 and wrong_shape["reason"] == "NotAcceptable"
    status, refused = _get(api, f"{path}/settings", PROTOBUF)
    assert (status, refused["kind"], refused["reason"]) == (406, "Status", "NotAcceptable")
    assert "application/json" in refused["message"]
    status, fallback = _get(api, f"{path}/settings", f"{PROTOBUF}, application/json")
    assert status == 200 and fallback["data"]["big"].startswith("x")


def test_autoscaling_v1_manifests_apply_client_and_server_side(
    apiserver: Environment, namespace: str
) -> None:
    hpa: dict[str, Any] = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "applied"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 3,
            "targetCPUUtilizationPercentage": 50,
        },
    }
    _ok(_kubectl(apiserver, "apply", "-n", namespace, "-f", "-", body=hpa))
    hpa["spec"]["maxReplicas"] = 4
    _ok(_kubectl(apiserver, "apply", "-n", namespace, "-f", "-", body=hpa))
    hpa["metadata"]["name"] = "server-side"
    _ok(_kubectl(apiserver, "apply", "--server-side", "-n", namespace, "-f", "-", body=hpa))
    hpa["spec"]["targetCPUUtilizationPercentage"] = 65
    _ok(_kubectl(apiserver, "apply", "--server-side", "-n", namespace, "-f", "-", body=hpa))
    table = _ok(_kubectl(apiserver, "get", "hpa", "-n", namespace))
    rows = {line.split()[0]: line.split() for line in table.splitlines()[1:]}
    assert rows["applied"][2:7] == ["cpu:", "<unknown>/50%", "1", "4", "0"]
    assert rows["server-side"][2:7] == ["cpu:", "<unknown>/65%", "1", "4", "0"]
