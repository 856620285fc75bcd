"""Defaulting fills in what the real API fills in, and nothing a client set."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from tests.unit.resource_rules import apply_defaults

Object = dict[str, Any]


def defaulted(resource: str, obj: Object) -> Object:
    apply_defaults(resource, obj)
    return obj


def pod_spec(**extra: Any) -> Object:
    return {"containers": [{"name": "app", "image": "nginx:1.27"}], **extra}


def template(**extra: Any) -> Object:
    return {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec(**extra)}


def test_a_pod_spec_gets_the_scheduling_and_lifecycle_defaults() -> None:
    spec = defaulted("pods", {"spec": pod_spec()})["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["securityContext"] == {}
    assert spec["enableServiceLinks"] is True


def test_a_container_gets_its_termination_message_and_resources_defaults() -> None:
    container = defaulted("pods", {"spec": pod_spec()})["spec"]["containers"][0]
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
    assert container["resources"] == {}
    assert container["imagePullPolicy"] == "IfNotPresent"


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("registry.local:5000/team/app", "Always"),
        ("registry.local:5000/team/app:v2", "IfNotPresent"),
        ("nginx:1.27", "IfNotPresent"),
        ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
    ],
)
def test_image_pull_policy_is_always_only_for_latest_or_untagged_images(
    image: str, policy: str
) -> None:
    spec = defaulted("pods", {"spec": {"containers": [{"name": "c", "image": image}]}})["spec"]
    assert spec["containers"][0]["imagePullPolicy"] == policy


def test_init_containers_get_the_same_container_defaults() -> None:
    spec = pod_spec(initContainers=[{"name": "init", "image": "busybox"}])
    init = defaulted("pods", {"spec": spec})["spec"]["initContainers"][0]
    assert init["imagePullPolicy"] == "Always"
    assert init["terminationMessagePolicy"] == "File"


def test_ports_default_to_tcp_and_probes_get_their_timings() -> None:
    container = {
        "name": "c",
        "image": "x:1",
        "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}],
        "livenessProbe": {"httpGet": {"port": 80}},
        "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 3},
        "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}},
    }
    out = defaulted("pods", {"spec": {"containers": [container]}})["spec"]["containers"][0]
    assert [p["protocol"] for p in out["ports"]] == ["TCP", "UDP"]
    liveness = out["livenessProbe"]
    assert (liveness["timeoutSeconds"], liveness["periodSeconds"]) == (1, 10)
    assert (liveness["successThreshold"], liveness["failureThreshold"]) == (1, 3)
    assert liveness["httpGet"] == {"port": 80, "path": "/", "scheme": "HTTP"}
    assert out["readinessProbe"]["periodSeconds"] == 3
    assert out["lifecycle"]["preStop"]["httpGet"] == {"port": 80, "path": "/stop", "scheme": "HTTP"}


def test_a_pod_requests_what_it_limits_when_it_requests_nothing() -> None:
    container = {
        "name": "c",
        "image": "x:1",
        "resources": {"limits": {"cpu": "500m", "memory": "1.5Gi"}, "requests": {"cpu": "100m"}},
    }
    out = defaulted("pods", {"spec": {"containers": [container]}})["spec"]["containers"][0]
    assert out["resources"]["requests"] == {"cpu": "100m", "memory": "1536Mi"}


def test_resource_quantities_are_stored_in_canonical_form_rounded_to_millis() -> None:
    container = {
        "name": "c",
        "image": "x:1",
        "resources": {"limits": {"cpu": "1000m", "memory": "1024Ki"}, "requests": {"cpu": 0.0001}},
    }
    out = defaulted("pods", {"spec": {"containers": [container]}})["spec"]["containers"][0]
    assert out["resources"]["limits"] == {"cpu": "1", "memory": "1Mi"}
    assert out["resources"]["requests"]["cpu"] == "1m"


def test_a_malformed_quantity_is_left_for_validation_to_report() -> None:
    container = {"name": "c", "image": "x:1", "resources": {"limits": {"cpu": "lots"}}}
    out = defaulted("pods", {"spec": {"containers": [container]}})["spec"]["containers"][0]
    assert out["resources"]["limits"]["cpu"] == "lots"


def test_with_the_host_network_container_ports_are_host_ports() -> None:
    spec = {
        "hostNetwork": True,
        "containers": [{"name": "c", "image": "x:1", "ports": [{"containerPort": 9100}]}],
    }
    port = defaulted("pods", {"spec": spec})["spec"]["containers"][0]["ports"][0]
    assert port["hostPort"] == 9100


def test_volumes_without_a_source_are_empty_dirs_and_file_volumes_get_mode_0644() -> None:
    volumes = [
        {"name": "scratch"},
        {"name": "conf", "configMap": {"name": "app"}},
        {"name": "creds", "secret": {"secretName": "app", "defaultMode": 0o400}},
        {"name": "host", "hostPath": {"path": "/var/log"}},
        {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
        {
            "name": "info",
            "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]},
        },
    ]
    out = defaulted("pods", {"spec": pod_spec(volumes=volumes)})["spec"]["volumes"]
    assert out[0]["emptyDir"] == {}
    assert out[1]["configMap"]["defaultMode"] == 420
    assert out[2]["secret"]["defaultMode"] == 0o400
    assert out[3]["hostPath"]["type"] == ""
    assert out[4]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3600
    assert out[5]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"


def test_env_field_references_default_to_the_v1_api() -> None:
    env = [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    spec = {"containers": [{"name": "c", "image": "x:1", "env": env}]}
    out = defaulted("pods", {"spec": spec})["spec"]["containers"][0]["env"][0]
    assert out["valueFrom"]["fieldRef"]["apiVersion"] == "v1"


@pytest.mark.parametrize(
    ("resource", "spec", "template_at"),
    [
        ("deployments.apps", {"template": template()}, ("template",)),
        ("replicasets.apps", {"template": template()}, ("template",)),
        ("daemonsets.apps", {"template": template()}, ("template",)),
        ("statefulsets.apps", {"template": template()}, ("template",)),
        ("replicationcontrollers", {"template": template()}, ("template",)),
        ("jobs.batch", {"template": template(restartPolicy="Never")}, ("template",)),
        (
            "cronjobs.batch",
            {"jobTemplate": {"spec": {"template": template()}}},
            ("jobTemplate", "spec", "template"),
        ),
    ],
)
def test_every_workload_template_gets_the_pod_spec_defaults_but_not_the_pod_only_ones(
    resource: str, spec: Object, template_at: tuple[str, ...]
) -> None:
    node = defaulted(resource, {"metadata": {"name": "w", "uid": "u-1"}, "spec": spec})["spec"]
    for key in template_at:
        node = node[key]
    pod = node["spec"]
    assert pod["dnsPolicy"] == "ClusterFirst"
    assert pod["schedulerName"] == "default-scheduler"
    assert pod["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert "enableServiceLinks" not in pod


def test_a_deployment_rolls_out_25_percent_at_a_time_and_keeps_ten_revisions() -> None:
    spec = defaulted("deployments.apps", {"spec": {"template": template()}})["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600


def test_a_recreate_deployment_gets_no_rolling_update_parameters() -> None:
    spec = defaulted(
        "deployments.apps", {"spec": {"strategy": {"type": "Recreate"}, "replicas": 0}}
    )["spec"]
    assert spec["strategy"] == {"type": "Recreate"}
    assert spec["replicas"] == 0


def test_a_daemon_set_replaces_one_pod_at_a_time_without_surge() -> None:
    spec = defaulted("daemonsets.apps", {"spec": {"template": template()}})["spec"]
    assert spec["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert spec["revisionHistoryLimit"] == 10


def test_a_stateful_set_is_ordered_partitioned_and_retains_its_claims() -> None:
    claim = {"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}
    spec = defaulted(
        "statefulsets.apps", {"spec": {"template": template(), "volumeClaimTemplates": [claim]}}
    )["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    assert (spec["replicas"], spec["revisionHistoryLimit"]) == (1, 10)
    assert spec["volumeClaimTemplates"][0]["spec"]["volumeMode"] == "Filesystem"
    assert spec["volumeClaimTemplates"][0]["status"] == {"phase": "Pending"}


def test_an_on_delete_stateful_set_gets_no_partition() -> None:
    spec = defaulted("statefulsets.apps", {"spec": {"updateStrategy": {"type": "OnDelete"}}})[
        "spec"
    ]
    assert spec["updateStrategy"] == {"type": "OnDelete"}


def test_a_replica_set_and_a_replication_controller_run_one_replica() -> None:
    assert defaulted("replicasets.apps", {"spec": {}})["spec"]["replicas"] == 1
    rc = defaulted(
        "replicationcontrollers", {"metadata": {"name": "rc"}, "spec": {"template": template()}}
    )
    assert rc["spec"]["replicas"] == 1
    assert rc["spec"]["selector"] == {"app": "web"}
    assert rc["metadata"]["labels"] == {"app": "web"}


def test_a_job_runs_once_with_six_retries_and_selects_its_pods_by_uid() -> None:
    job: Object = {
        "metadata": {"name": "pi", "uid": "1234"},
        "spec": {"template": template(restartPolicy="Never")},
    }
    spec = defaulted("jobs.batch", job)["spec"]
    assert (spec["completions"], spec["parallelism"]) == (1, 1)
    assert spec["backoffLimit"] == 6
    assert spec["completionMode"] == "NonIndexed"
    assert spec["suspend"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "1234"}}
    assert spec["template"]["metadata"]["labels"] == {
        "app": "web",
        "batch.kubernetes.io/controller-uid": "1234",
        "controller-uid": "1234",
        "batch.kubernetes.io/job-name": "pi",
        "job-name": "pi",
    }
    assert job["metadata"]["labels"] == spec["template"]["metadata"]["labels"]


def test_a_parallel_job_keeps_its_completions_unset_and_a_manual_selector_is_kept() -> None:
    selector = {"matchLabels": {"app": "web"}}
    spec = {"parallelism": 3, "manualSelector": True, "selector": selector, "template": template()}
    out = defaulted("jobs.batch", {"metadata": {"name": "j", "uid": "u"}, "spec": spec})["spec"]
    assert "completions" not in out
    assert out["selector"] == {"matchLabels": {"app": "web"}}
    assert "controller-uid" not in out["template"]["metadata"]["labels"]


def test_a_cron_job_allows_overlap_and_keeps_three_successes_and_one_failure() -> None:
    spec = defaulted("cronjobs.batch", {"spec": {"schedule": "@hourly"}})["spec"]
    assert spec["concurrencyPolicy"] == "Allow"
    assert spec["suspend"] is False
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    assert "backoffLimit" not in spec["jobTemplate"]["spec"]


def test_a_service_is_a_single_stack_cluster_ip_service_with_tcp_ports() -> None:
    ports = [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]
    spec = defaulted("services", {"spec": {"ports": ports}})["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert "externalTrafficPolicy" not in spec
    assert spec["ports"] == [
        {"port": 80, "protocol": "TCP", "targetPort": 80},
        {"port": 53, "protocol": "UDP", "targetPort": "dns"},
    ]


def test_externally_reachable_services_default_their_external_traffic_policy() -> None:
    node_port = defaulted("services", {"spec": {"type": "NodePort"}})["spec"]
    assert node_port["externalTrafficPolicy"] == "Cluster"
    balancer = defaulted("services", {"spec": {"type": "LoadBalancer"}})["spec"]
    assert balancer["allocateLoadBalancerNodePorts"] is True
    external_ip = defaulted("services", {"spec": {"externalIPs": ["192.0.2.1"]}})["spec"]
    assert external_ip["externalTrafficPolicy"] == "Cluster"


def test_client_ip_affinity_sticks_for_three_hours_and_none_drops_the_config() -> None:
    sticky = defaulted("services", {"spec": {"sessionAffinity": "ClientIP"}})["spec"]
    assert sticky["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    loose = defaulted("services", {"spec": {"sessionAffinityConfig": {"clientIP": {}}}})["spec"]
    assert "sessionAffinityConfig" not in loose


def test_a_headless_service_lists_none_as_its_cluster_ips() -> None:
    spec = defaulted("services", {"spec": {"clusterIP": "None"}})["spec"]
    assert spec["clusterIPs"] == ["None"]
    from_list = defaulted("services", {"spec": {"clusterIPs": ["10.96.0.10"]}})["spec"]
    assert from_list["clusterIP"] == "10.96.0.10"


def test_an_external_name_service_gets_no_cluster_ip_fields() -> None:
    spec = defaulted(
        "services", {"spec": {"type": "ExternalName", "externalName": "db.example.com"}}
    )["spec"]
    assert "ipFamilyPolicy" not in spec and "internalTrafficPolicy" not in spec


def test_endpoint_ports_default_to_tcp() -> None:
    endpoints = defaulted("endpoints", {"subsets": [{"ports": [{"port": 80}]}]})
    assert endpoints["subsets"][0]["ports"][0]["protocol"] == "TCP"
    endpoint_slice = defaulted("endpointslices.discovery.k8s.io", {"ports": [{"port": 80}]})
    assert endpoint_slice["ports"][0] == {"port": 80, "protocol": "TCP", "name": ""}


def test_a_namespace_is_labelled_with_its_name_and_finalized_by_kubernetes() -> None:
    namespace = defaulted("namespaces", {"metadata": {"name": "team-a"}})
    assert namespace["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}
    assert namespace["spec"]["finalizers"] == ["kubernetes"]


def test_a_secret_is_opaque_and_its_string_data_is_merged_into_data() -> None:
    secret = defaulted("secrets", {"data": {"a": "eA=="}, "stringData": {"password": "s3cret"}})
    assert secret["type"] == "Opaque"
    assert "stringData" not in secret
    assert secret["data"] == {"a": "eA==", "password": base64.b64encode(b"s3cret").decode()}


def test_a_node_can_allocate_its_whole_capacity_unless_it_says_otherwise() -> None:
    node = defaulted("nodes", {"status": {"capacity": {"cpu": "4", "memory": "8388608Ki"}}})
    assert node["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi"}
    kept = defaulted(
        "nodes", {"status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3500m"}}}
    )
    assert kept["status"]["allocatable"] == {"cpu": "3500m"}


def test_volumes_are_retained_filesystems_by_default() -> None:
    volume = defaulted("persistentvolumes", {"spec": {"capacity": {"storage": "1024Mi"}}})
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["spec"]["volumeMode"] == "Filesystem"
    assert volume["spec"]["capacity"] == {"storage": "1Gi"}
    claim = defaulted(
        "persistentvolumeclaims", {"spec": {"resources": {"requests": {"storage": "1e9"}}}}
    )
    assert claim["spec"]["volumeMode"] == "Filesystem"
    assert claim["spec"]["resources"]["requests"]["storage"] == "1e9"


def test_container_limit_ranges_derive_default_limits_and_requests() -> None:
    limit = {
        "type": "Container",
        "max": {"cpu": "2"},
        "min": {"memory": "64Mi"},
        "default": {"memory": "256Mi"},
    }
    out = defaulted("limitranges", {"spec": {"limits": [limit]}})["spec"]["limits"][0]
    assert out["default"] == {"memory": "256Mi", "cpu": "2"}
    assert out["defaultRequest"] == {"memory": "256Mi", "cpu": "2"}
    pod_limit = defaulted(
        "limitranges", {"spec": {"limits": [{"type": "Pod", "max": {"cpu": "4"}}]}}
    )
    assert "default" not in pod_limit["spec"]["limits"][0]


def test_rbac_subjects_and_role_refs_get_their_api_group() -> None:
    binding = {
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "bot", "namespace": "ci"},
        ],
    }
    out = defaulted("clusterrolebindings.rbac.authorization.k8s.io", binding)
    assert out["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
    assert [s["apiGroup"] for s in out["subjects"]] == ["rbac.authorization.k8s.io"] * 2 + [""]


def test_values_a_client_set_are_never_replaced() -> None:
    spec = pod_spec(restartPolicy="Never", dnsPolicy="Default", terminationGracePeriodSeconds=0)
    spec["containers"][0]["imagePullPolicy"] = "Never"
    out = defaulted("pods", {"spec": spec})["spec"]
    assert (out["restartPolicy"], out["dnsPolicy"], out["terminationGracePeriodSeconds"]) == (
        "Never",
        "Default",
        0,
    )
    assert out["containers"][0]["imagePullPolicy"] == "Never"


def test_defaulting_twice_changes_nothing_more() -> None:
    job = {
        "metadata": {"name": "pi", "uid": "1"},
        "spec": {"template": template(restartPolicy="Never")},
    }
    once = defaulted("jobs.batch", job)
    assert defaulted("jobs.batch", copy.deepcopy(once)) == once


def test_fields_of_the_wrong_type_are_left_for_validation() -> None:
    pod = {"spec": {"containers": "nope", "volumes": [1, {"name": "v"}]}}
    out = defaulted("pods", pod)["spec"]
    assert out["containers"] == "nope"
    assert out["volumes"] == [1, {"name": "v", "emptyDir": {}}]
    assert defaulted("deployments.apps", {"spec": []})["spec"] == []


def test_kinds_without_defaults_are_left_untouched() -> None:
    obj = {"metadata": {"name": "x"}, "data": {"a": "b"}}
    assert defaulted("configmaps", copy.deepcopy(obj)) == obj
    assert defaulted("widgets.example.com", copy.deepcopy(obj)) == obj


@pytest.mark.parametrize(
    ("resource", "counters"),
    [
        ("replicasets.apps", ["replicas"]),
        ("replicationcontrollers", ["replicas"]),
        ("statefulsets.apps", ["replicas"]),
        (
            "daemonsets.apps",
            [
                "currentNumberScheduled",
                "numberMisscheduled",
                "desiredNumberScheduled",
                "numberReady",
            ],
        ),
    ],
)
def test_status_counters_go_serializes_at_zero_are_present(
    resource: str, counters: list[str]
) -> None:
    obj: dict[str, Any] = {"spec": {"template": {"spec": {"containers": []}}}}
    apply_defaults(resource, obj)
    assert obj["status"] == dict.fromkeys(counters, 0)
    obj["status"] = {counters[0]: 3}
    apply_defaults(resource, obj)
    assert obj["status"][counters[0]] == 3, "a counter the writer set is kept"
