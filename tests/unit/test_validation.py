"""Validation reports every bad field at once, at Kubernetes' paths, in Kubernetes' words."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubelab.api import validation
from kubelab.api.errors import FieldErrorType, invalid_object
from kubelab.api.validation import validate_object_meta
from kubelab.api.validation.formats import regex_error
from kubelab.api.validation.meta import name_is_dns_label
from kubelab.api.validation.schedule import parse_schedule
from tests.unit.resource_rules import apply_defaults, validate

Object = dict[str, Any]

SUBDOMAIN_ERROR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_ERROR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1035_ERROR = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def meta(name: str = "web", namespace: str | None = "default", **extra: Any) -> Object:
    out: Object = {"name": name, **extra}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def container(name: str = "app", image: str = "nginx:1.27", **extra: Any) -> Object:
    return {"name": name, "image": image, **extra}


def pod(**spec: Any) -> Object:
    return {"metadata": meta(), "spec": {"containers": [container()], **spec}}


def template(labels: Object | None = None, **spec: Any) -> Object:
    pod_spec = {"containers": [container()], **spec}
    return {"metadata": {"labels": {"app": "web"} if labels is None else labels}, "spec": pod_spec}


def workload(**spec: Any) -> Object:
    return {
        "metadata": meta(uid="uid-1"),
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template(), **spec},
    }


def problems(resource: str, obj: Object, old: Object | None = None) -> list[str]:
    """The messages of a defaulted object, as the apiserver would produce them."""
    apply_defaults(resource, obj)
    if old is not None:
        apply_defaults(resource, old)
    return [error.message() for error in validate(resource, obj, old)]


def fields(resource: str, obj: Object, old: Object | None = None) -> list[str]:
    apply_defaults(resource, obj)
    if old is not None:
        apply_defaults(resource, old)
    return [error.field for error in validate(resource, obj, old)]


# --- metadata -------------------------------------------------------------------------


def test_a_valid_pod_has_no_problems() -> None:
    assert problems("pods", pod()) == []


def test_several_bad_fields_are_all_reported_in_one_invalid_status() -> None:
    obj = pod()
    obj["metadata"]["name"] = "Box_1"
    obj["spec"]["containers"] = [container(image=""), container(ports=[{"containerPort": 70000}])]
    apply_defaults("pods", obj)
    errors = validate("pods", obj)
    assert [e.field for e in errors] == [
        "metadata.name",
        "spec.containers[0].image",
        "spec.containers[1].ports[0].containerPort",
        "spec.containers[1].name",
    ]
    status = invalid_object("Pod", "Box_1", errors)
    assert status.code == 422
    assert status.message.startswith(
        'Pod "Box_1" is invalid: [metadata.name: Invalid value: "Box_1": '
    )
    assert "spec.containers[0].image: Required value" in status.message
    assert (
        "spec.containers[1].ports[0].containerPort: Invalid value: 70000: must be between 1 and "
        "65535, inclusive" in status.message
    )
    assert 'spec.containers[1].name: Duplicate value: "app"' in status.message


def test_names_are_dns_subdomains_for_most_kinds() -> None:
    obj = pod()
    obj["metadata"]["name"] = "Web_1"
    assert problems("pods", obj) == [f'metadata.name: Invalid value: "Web_1": {SUBDOMAIN_ERROR}']
    assert validation.CONFIG_MAP.validate_name("my.config") == []


def test_namespaces_are_dns_labels_and_services_dns_1035_labels() -> None:
    assert validation.NAMESPACE.validate_name("team.a") == ["must not contain dots"]
    assert validation.NAMESPACE.validate_name("Team") == [LABEL_ERROR]
    assert validation.SERVICE.validate_name("1st") == [DNS1035_ERROR]
    assert validation.SERVICE.validate_name("a" * 64) == ["must be no more than 63 characters"]


def test_rbac_and_csr_names_only_need_to_be_url_path_segments() -> None:
    assert validation.CLUSTER_ROLE.validate_name("system:node:worker-1") == []
    assert validation.CLUSTER_ROLE_BINDING.validate_name("a/b%c") == [
        "may not contain '/'",
        "may not contain '%'",
    ]
    assert validation.ROLE.validate_name("..") == ["may not be '..'"]
    assert validation.CERTIFICATE_SIGNING_REQUEST.validate_name("csr-Node:1") == []


def test_a_name_or_generate_name_is_required_and_generate_name_may_end_in_a_dash() -> None:
    assert problems("configmaps", {"metadata": {"namespace": "default"}}) == [
        "metadata.name: Required value: name or generateName is required"
    ]
    ok = {"metadata": meta(name="web-x7k2p", generateName="web-")}
    assert problems("configmaps", ok) == []
    bad = {"metadata": meta(name="ok", generateName="Web-")}
    assert fields("configmaps", bad) == ["metadata.generateName"]


def test_namespaced_kinds_need_a_namespace_and_cluster_kinds_refuse_one() -> None:
    assert problems("configmaps", {"metadata": meta(namespace=None)}) == [
        "metadata.namespace: Required value"
    ]
    node = {"metadata": meta(name="worker-1")}
    assert problems("nodes", node) == ["metadata.namespace: Forbidden: not allowed on this type"]
    bad_ns = {"metadata": meta(namespace="Team_A")}
    assert problems("configmaps", bad_ns) == [
        f'metadata.namespace: Invalid value: "Team_A": {LABEL_ERROR}'
    ]


def test_label_keys_and_values_are_checked_at_the_labels_path() -> None:
    labels = {"app": "web", "bad key": "x", "example.com/ok": "a" * 64, "/empty": "v"}
    messages = problems("configmaps", {"metadata": meta(labels=labels)})
    assert all(m.startswith("metadata.labels: Invalid value: ") for m in messages)
    assert any(
        '"bad key": name part must consist of alphanumeric characters' in m for m in messages
    )
    assert any("must be no more than 63 characters" in m for m in messages)
    assert any('"/empty": prefix part must be non-empty' in m for m in messages)
    assert len(messages) == 3


def test_annotations_are_limited_to_256_kib_in_total() -> None:
    small = {"metadata": meta(annotations={"Example.COM/Note": "fine"})}
    assert problems("configmaps", small) == []
    big = {"metadata": meta(annotations={"a": "x" * (256 * 1024)})}
    assert problems("configmaps", big) == [
        "metadata.annotations: Too long: may not be more than 262144 bytes"
    ]


def test_finalizers_must_be_qualified_or_standard_and_not_contradict() -> None:
    ok = {"metadata": meta(finalizers=["kubernetes", "example.com/cleanup", "foregroundDeletion"])}
    assert problems("configmaps", ok) == []
    bad = {"metadata": meta(finalizers=["cleanup", "orphan", "foregroundDeletion"])}
    assert problems("configmaps", bad) == [
        'metadata.finalizers: Invalid value: ["cleanup","orphan","foregroundDeletion"]: finalizer '
        "orphan and foregroundDeletion cannot be both set",
        'metadata.finalizers[0]: Invalid value: "cleanup": name is neither a standard finalizer '
        "name nor is it fully qualified",
    ]


def test_owner_references_need_identity_and_at_most_one_controller() -> None:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "rs",
        "uid": "1",
        "controller": True,
    }
    refs = [
        owner,
        {**owner, "name": "other"},
        {"apiVersion": "apps/", "kind": "", "name": "", "uid": ""},
    ]
    messages = problems("configmaps", {"metadata": meta(ownerReferences=refs)})
    assert messages[0].endswith(
        'Only one reference can have Controller set to true. Found "true" in references for '
        "ReplicaSet/rs and ReplicaSet/other"
    )
    assert messages[1:] == [
        'metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty',
        'metadata.ownerReferences.kind: Invalid value: "": must not be empty',
        'metadata.ownerReferences.name: Invalid value: "": must not be empty',
        'metadata.ownerReferences.uid: Invalid value: "": must not be empty',
    ]


def test_validate_object_meta_can_be_called_on_its_own() -> None:
    errors = validate_object_meta({"metadata": {"name": "x", "namespace": "ns"}}, namespaced=False)
    assert [e.type for e in errors] == [FieldErrorType.FORBIDDEN]
    assert validate_object_meta({"metadata": {"name": "team-a"}}, False, name_is_dns_label) == []


def test_an_update_may_not_rename_move_or_reidentify_an_object() -> None:
    old = {"metadata": meta(uid="u-1", creationTimestamp="2024-01-01T00:00:00Z")}
    new = {"metadata": meta(name="web", namespace="other", uid="u-2")}
    assert problems("configmaps", new, old) == [
        'metadata.namespace: Invalid value: "other": field is immutable',
        'metadata.uid: Invalid value: "u-2": field is immutable',
    ]


def test_an_update_that_omits_server_set_fields_keeps_them() -> None:
    old = {"metadata": meta(uid="u-1", creationTimestamp="2024-01-01T00:00:00Z")}
    assert problems("configmaps", {"metadata": meta()}, old) == []


def test_no_finalizer_can_be_added_once_deletion_started() -> None:
    old = {"metadata": meta(deletionTimestamp="2024-01-01T00:00:00Z", finalizers=["a.io/x"])}
    new = {"metadata": meta(finalizers=["a.io/x", "b.io/y"])}
    assert problems("configmaps", new, old) == [
        "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being "
        'deleted, found new finalizers []string{"b.io/y"}'
    ]


def test_unknown_kinds_get_metadata_validation_only() -> None:
    assert problems("widgets.example.com", {"metadata": meta(), "spec": {"anything": [1, 2]}}) == []
    bad = {"metadata": {"name": "Bad_Name", "namespace": "default"}}
    assert fields("widgets.example.com", bad) == ["metadata.name"]


# --- pods -----------------------------------------------------------------------------


def test_a_pod_needs_containers() -> None:
    assert problems("pods", pod(containers=[])) == ["spec.containers: Required value"]


def test_container_names_must_be_unique_labels_and_images_present() -> None:
    obj = pod(containers=[container("web"), container("web", image=""), container("Web_2")])
    messages = problems("pods", obj)
    assert 'spec.containers[1].name: Duplicate value: "web"' in messages
    assert "spec.containers[1].image: Required value" in messages
    assert f'spec.containers[2].name: Invalid value: "Web_2": {LABEL_ERROR}' in messages


def test_container_ports_need_a_valid_number_name_and_protocol() -> None:
    ports = [
        {"containerPort": 0},
        {"containerPort": 8080, "protocol": "HTTP", "name": "Web--Port-Name-Too-Long"},
        {"containerPort": 80, "hostPort": 70000},
    ]
    messages = problems("pods", pod(containers=[container(ports=ports)]))
    at = "spec.containers[0].ports"
    assert f"{at}[0].containerPort: Required value" in messages
    assert (
        f'{at}[1].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"'
        in messages
    )
    assert (
        f'{at}[1].name: Invalid value: "Web--Port-Name-Too-Long": must be no more than 15 '
        f"characters" in messages
    )
    assert (
        f'{at}[1].name: Invalid value: "Web--Port-Name-Too-Long": must not contain consecutive '
        f"hyphens" in messages
    )
    assert (
        f"{at}[2].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive"
        in messages
    )


def test_two_containers_cannot_claim_the_same_host_port() -> None:
    ports = [{"containerPort": 80, "hostPort": 8080}]
    obj = pod(containers=[container("a", ports=ports), container("b", ports=copy.deepcopy(ports))])
    assert problems("pods", obj) == [
        'spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"'
    ]


def test_environment_variables_need_valid_names_and_one_source() -> None:
    env = [
        {"name": "1ST", "value": "x"},
        {"name": "GOOD", "valueFrom": {}},
        {"name": "BOTH", "value": "x", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "REF", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "bad key"}}},
    ]
    messages = problems("pods", pod(containers=[container(env=env)]))
    at = "spec.containers[0].env"
    assert messages[0].startswith(
        f'{at}[0].name: Invalid value: "1ST": a valid environment variable name must consist of'
    )
    assert (
        f'{at}[1].valueFrom: Invalid value: "": must specify one of: `fieldRef`, '
        f"`resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`" in messages
    )
    assert (
        f'{at}[2].valueFrom: Invalid value: "": may not be specified when `value` is not empty'
        in messages
    )
    assert any(
        m.startswith(
            f'{at}[3].valueFrom.configMapKeyRef.key: Invalid value: "bad key": a valid config key'
        )
        for m in messages
    )


def test_a_field_reference_must_name_a_supported_field() -> None:
    env = [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.hostname"}}}]
    messages = problems("pods", pod(containers=[container(env=env)]))
    assert messages == [
        "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: "
        '"spec.hostname": '
        'supported values: "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", '
        '"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", '
        '"status.podIPs"'
    ]


def test_requests_may_not_exceed_limits() -> None:
    resources = {
        "requests": {"cpu": "2", "memory": "1Gi"},
        "limits": {"cpu": "1500m", "memory": "2Gi"},
    }
    messages = problems("pods", pod(containers=[container(resources=resources)]))
    assert messages == [
        'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to '
        "cpu limit of 1500m"
    ]


def test_resource_amounts_must_parse_and_names_must_be_container_resources() -> None:
    resources = {
        "limits": {"cpu": "lots", "pods": "1", "memory": "-1Gi"},
        "requests": {"example.com/gpu": "1"},
    }
    # In a template: a Pod would also copy its limits into its requests.
    obj = workload(template=template(containers=[container(resources=resources)]))
    messages = problems("deployments.apps", obj)
    at = "spec.template.spec.containers[0].resources"
    assert messages == [
        f'{at}.limits[cpu]: Invalid value: "lots": quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        f'{at}.limits[pods]: Invalid value: "pods": must be a standard resource for containers',
        f'{at}.limits[memory]: Invalid value: "-1Gi": must be greater than or equal to 0',
        f"{at}.limits: Required value: Limit must be set for non overcommitable resources",
    ]


def test_probes_need_exactly_one_handler() -> None:
    probe_less = container(livenessProbe={"periodSeconds": 5})
    two = container("b", readinessProbe={"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}})
    bad_threshold = container(
        "c", startupProbe={"exec": {"command": ["true"]}, "successThreshold": 2}
    )
    messages = problems("pods", pod(containers=[probe_less, two, bad_threshold]))
    assert messages == [
        "spec.containers[0].livenessProbe: Required value: must specify a handler type",
        "spec.containers[1].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 "
        "handler type",
        "spec.containers[2].startupProbe.successThreshold: Invalid value: 2: must be 1",
    ]


def test_http_probes_check_their_port_and_scheme() -> None:
    probe = {"httpGet": {"port": "8080", "scheme": "FTP"}}
    messages = problems("pods", pod(containers=[container(livenessProbe=probe)]))
    at = "spec.containers[0].livenessProbe.httpGet"
    assert f'{at}.port: Invalid value: "8080": must contain at least one letter (a-z)' in messages
    assert f'{at}.scheme: Unsupported value: "FTP": supported values: "HTTP", "HTTPS"' in messages


def test_init_containers_may_only_probe_when_they_keep_running() -> None:
    plain = container("init", livenessProbe={"exec": {"command": ["true"]}})
    sidecar = container(
        "proxy", restartPolicy="Always", readinessProbe={"exec": {"command": ["true"]}}
    )
    messages = problems("pods", pod(initContainers=[plain, sidecar, container("app")]))
    assert messages == [
        "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers "
        "without restartPolicy=Always",
        'spec.initContainers[2].name: Duplicate value: "app"',
    ]


def test_restart_and_dns_policies_must_be_supported_values() -> None:
    messages = problems("pods", pod(restartPolicy="Sometimes", dnsPolicy="Google"))
    assert messages == [
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
        '"OnFailure", "Never"',
        'spec.dnsPolicy: Unsupported value: "Google": supported values: '
        '"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"',
    ]


def test_termination_grace_period_may_not_be_negative() -> None:
    assert problems("pods", pod(terminationGracePeriodSeconds=-5)) == [
        "spec.terminationGracePeriodSeconds: Invalid value: -5: must be greater than or equal to 0"
    ]


def test_volumes_are_uniquely_named_with_one_source_and_mounts_refer_to_them() -> None:
    volumes = [
        {"name": "data", "emptyDir": {}},
        {"name": "data", "emptyDir": {}},
        {"name": "two", "emptyDir": {}, "configMap": {"name": "c"}},
        {"name": "conf", "configMap": {}},
    ]
    mounts = [{"name": "data", "mountPath": "/data"}, {"name": "missing", "mountPath": "/data"}]
    messages = problems("pods", pod(volumes=volumes, containers=[container(volumeMounts=mounts)]))
    assert messages == [
        'spec.volumes[1].name: Duplicate value: "data"',
        "spec.volumes[2].configMap: Forbidden: may not specify more than 1 volume type",
        "spec.volumes[3].configMap.name: Required value",
        'spec.containers[0].volumeMounts[1].name: Not found: "missing"',
        'spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/data": must be unique',
    ]


def test_tolerations_use_known_operators_and_effects() -> None:
    tolerations = [
        {"key": "gpu", "operator": "Equals", "value": "yes"},
        {"operator": "Equal", "value": "x"},
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoSchedule",
            "tolerationSeconds": 30,
        },
        {"key": "dedicated", "operator": "Exists", "effect": "Sometimes"},
        {"operator": "Exists"},
    ]
    messages = problems("pods", pod(tolerations=tolerations))
    assert messages == [
        'spec.tolerations[0].operator: Unsupported value: "Equals": supported values: "Equal", '
        '"Exists"',
        'spec.tolerations[1].operator: Invalid value: "Equal": operator must be Exists when `key` '
        'is empty, which means "match all values and all keys"',
        "spec.tolerations[2].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' "
        "when `tolerationSeconds` is set",
        'spec.tolerations[3].effect: Unsupported value: "Sometimes": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"',
    ]


def test_node_selectors_and_affinity_terms_are_checked() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}],
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}}
            ]
        },
    }
    messages = problems("pods", pod(affinity=affinity, nodeSelector={"disk": "ssd!"}))
    hard = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    assert messages[0].startswith(
        'spec.nodeSelector: Invalid value: "ssd!": a valid label must be an empty string'
    )
    assert (
        f'{hard}.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: "Near": not a '
        f"valid selector operator" in messages
    )
    assert (
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "Invalid value: 0: must be in the range 1-100" in messages
    )
    anti = "spec.affinity.podAntiAffinity"
    topology = f"{anti}.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"
    assert f"{topology}: Required value: can not be empty" in messages
    assert f'{topology}: Invalid value: "": name part must be non-empty' in messages


def test_an_empty_required_node_selector_is_refused() -> None:
    affinity: Object = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
        }
    }
    assert problems("pods", pod(affinity=affinity)) == [
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
        "nodeSelectorTerms: "
        ""
        "Required value: must have at least one node selector term"
    ]


def test_a_pod_cannot_be_created_with_ephemeral_containers() -> None:
    obj = pod(ephemeralContainers=[container("debug")])
    assert problems("pods", obj) == ["spec.ephemeralContainers: Forbidden: cannot be set on create"]
    debugged = pod(ephemeralContainers=[container("debug")])
    assert problems("pods", debugged, copy.deepcopy(debugged)) == []


def test_a_running_pod_may_change_its_images() -> None:
    old = pod()
    new = pod(containers=[container(image="nginx:1.28")])
    assert problems("pods", new, old) == []


def test_a_running_pod_may_not_change_anything_else() -> None:
    new = pod(restartPolicy="Never")
    messages = problems("pods", new, pod())
    assert len(messages) == 1
    assert messages[0].startswith(
        "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
        "set to 1 if it was previously negative)\n"
    )
    assert 'spec.restartPolicy: "Always" -> "Never"' in messages[0]


def test_a_running_pod_may_not_add_containers_or_change_tolerations_but_may_add_some() -> None:
    grown = pod(containers=[container(), container("sidecar")])
    assert problems("pods", grown, pod()) == [
        "spec.containers: Forbidden: pod updates may not add or remove containers"
    ]
    toleration = {"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}
    old = pod(tolerations=[toleration])
    added = pod(
        tolerations=[{**toleration, "tolerationSeconds": 5}, {"key": "b", "operator": "Exists"}]
    )
    assert problems("pods", added, old) == []
    changed = pod(tolerations=[{**toleration, "key": "c"}])
    assert problems("pods", changed, pod(tolerations=[toleration])) == [
        "spec.tolerations: Forbidden: existing toleration can not be modified except its "
        "tolerationSeconds"
    ]


def test_a_running_pod_can_only_shorten_its_deadline() -> None:
    old = pod(activeDeadlineSeconds=60)
    assert problems("pods", pod(activeDeadlineSeconds=30), old) == []
    assert problems("pods", pod(activeDeadlineSeconds=90), pod(activeDeadlineSeconds=60)) == [
        "spec.activeDeadlineSeconds: Invalid value: 90: must be less than or equal to previous "
        "value"
    ]


# --- workloads ------------------------------------------------------------------------


def test_a_valid_workload_of_each_kind_has_no_problems() -> None:
    assert problems("deployments.apps", workload()) == []
    assert problems("replicasets.apps", workload()) == []
    assert problems("daemonsets.apps", workload()) == []
    claims = [
        {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    ]
    mounted = template(
        containers=[container(volumeMounts=[{"name": "data", "mountPath": "/data"}])]
    )
    assert (
        problems(
            "statefulsets.apps",
            workload(template=mounted, volumeClaimTemplates=claims, serviceName="web"),
        )
        == []
    )
    rc = {"metadata": meta(), "spec": {"selector": {"app": "web"}, "template": template()}}
    assert problems("replicationcontrollers", rc) == []


def test_the_selector_must_match_the_template_labels() -> None:
    obj = workload(template=template(labels={"app": "api"}))
    assert problems("deployments.apps", obj) == [
        'spec.template.metadata.labels: Invalid value: {"app":"api"}: `selector` does not match '
        "template `labels`"
    ]


def test_a_controller_needs_a_non_empty_selector() -> None:
    missing = workload()
    del missing["spec"]["selector"]
    assert problems("deployments.apps", missing) == ["spec.selector: Required value"]
    empty = workload(selector={})
    assert problems("replicasets.apps", empty) == [
        "spec.selector: Invalid value: {}: empty selector is invalid for deployment"
    ]
    assert problems("statefulsets.apps", workload(selector={})) == [
        "spec.selector: Invalid value: {}: empty selector is invalid for statefulset"
    ]


def test_selector_expressions_are_validated() -> None:
    selector = {
        "matchExpressions": [
            {"key": "app", "operator": "In"},
            {"key": "tier", "operator": "Exists", "values": ["x"]},
        ]
    }
    messages = problems("deployments.apps", workload(selector=selector))
    assert messages[:2] == [
        "spec.selector.matchExpressions[0].values: Required value: must be specified when "
        "`operator` is 'In' or 'NotIn'",
        "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when "
        "`operator` is 'Exists' or 'DoesNotExist'",
    ]


def test_replicas_may_not_be_negative_and_templates_restart_always() -> None:
    obj = workload(replicas=-1, template=template(restartPolicy="OnFailure"))
    assert problems("deployments.apps", obj) == [
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        'spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: '
        '"Always"',
    ]


def test_a_replicas_count_of_the_wrong_type_is_reported() -> None:
    assert problems("deployments.apps", workload(replicas="3")) == [
        'spec.replicas: Invalid value: "3": must be an integer'
    ]


def test_the_pod_template_is_validated_with_the_pod_rules() -> None:
    obj = workload(template=template(containers=[container(image="")]))
    assert problems("daemonsets.apps", obj) == [
        "spec.template.spec.containers[0].image: Required value"
    ]


def test_a_rolling_update_must_be_able_to_make_progress() -> None:
    rolling = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}}
    assert problems("deployments.apps", workload(strategy=rolling)) == [
        "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when "
        "`maxSurge` is 0"
    ]
    over = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "150%", "maxSurge": "half"},
    }
    messages = problems("deployments.apps", workload(strategy=over))
    assert messages[0].startswith(
        'spec.strategy.rollingUpdate.maxSurge: Invalid value: "half": a valid percent string'
    )
    assert (
        messages[1] == 'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "150%": '
        "must not be greater than 100%"
    )


def test_a_daemon_set_either_surges_or_takes_pods_down() -> None:
    both = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}}
    assert problems("daemonsets.apps", workload(updateStrategy=both)) == [
        "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when "
        "maxUnavailable is non-zero"
    ]


def test_a_stateful_set_pod_may_only_mount_declared_volumes_or_claims() -> None:
    mounted = template(
        containers=[container(volumeMounts=[{"name": "data", "mountPath": "/data"}])]
    )
    assert problems("statefulsets.apps", workload(template=mounted)) == [
        'spec.template.spec.containers[0].volumeMounts[0].name: Not found: "data"'
    ]
    assert problems("statefulsets.apps", workload(podManagementPolicy="Random")) == [
        "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'"
    ]


def test_controllers_keep_their_selector() -> None:
    new = workload(selector={"matchLabels": {"app": "web", "tier": "x"}})
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    for resource in ("deployments.apps", "replicasets.apps", "daemonsets.apps"):
        assert problems(resource, copy.deepcopy(new), workload()) == [
            'spec.selector: Invalid value: {"matchLabels":{"app":"web","tier":"x"}}: field is '
            "immutable"
        ]


def test_a_stateful_set_may_only_change_its_replicas_template_and_strategy() -> None:
    assert problems("statefulsets.apps", workload(replicas=5), workload()) == []
    assert problems(
        "statefulsets.apps", workload(serviceName="other"), workload(serviceName="web")
    ) == [
        "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', "
        "'ordinals', "
        "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
        "'minReadySeconds' are forbidden"
    ]


def test_a_replication_controller_selector_must_match_its_template() -> None:
    rc = {"metadata": meta(), "spec": {"selector": {"app": "api"}, "template": template()}}
    assert fields("replicationcontrollers", rc) == ["spec.template.metadata.labels"]


def job(**spec: Any) -> Object:
    return {
        "metadata": meta(name="pi", uid="uid-1"),
        "spec": {"template": template(restartPolicy="Never"), **spec},
    }


def test_a_job_gets_a_selector_matching_its_template_and_validates() -> None:
    assert problems("jobs.batch", job()) == []


def test_job_pods_must_not_restart_always() -> None:
    obj = job(template=template())
    assert problems("jobs.batch", obj) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
        '"OnFailure", "Never"'
    ]


def test_a_manual_job_selector_is_required_and_indexed_jobs_count_completions() -> None:
    manual = job(manualSelector=True, parallelism=2, completionMode="Indexed")
    assert problems("jobs.batch", manual) == [
        "spec.selector: Required value",
        "spec.completions: Required value: when completion mode is Indexed",
    ]


def test_a_job_template_never_changes() -> None:
    old = job()
    apply_defaults("jobs.batch", old)
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "perl:5"
    assert fields("jobs.batch", new, old) == ["spec.template"]
    assert problems("jobs.batch", new, old)[0].endswith(": field is immutable")


def cron_job(schedule: str = "*/5 * * * *", **spec: Any) -> Object:
    job_template = {"spec": {"template": template(restartPolicy="OnFailure")}}
    return {
        "metadata": meta(name="report"),
        "spec": {"schedule": schedule, "jobTemplate": job_template, **spec},
    }


@pytest.mark.parametrize(
    "schedule",
    [
        "*/5 * * * *",
        "0 0 * * 0",
        "@hourly",
        "@every 1h30m",
        "0 9-17 * jan-mar mon-fri",
        "15,45 */2 1 * ?",
    ],
)
def test_valid_schedules_are_accepted(schedule: str) -> None:
    assert problems("cronjobs.batch", cron_job(schedule)) == []


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("0 0 * * * *", "expected exactly 5 fields, found 6: [0 0 * * * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("TZ=UTC 0 * * * *", "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"),
    ],
)
def test_invalid_schedules_are_refused_with_the_cron_parsers_words(
    schedule: str, message: str
) -> None:
    assert problems("cronjobs.batch", cron_job(schedule)) == [
        f'spec.schedule: Invalid value: "{schedule}": {message}'
    ]


def test_schedules_parse_to_the_times_they_fire() -> None:
    parsed = parse_schedule("0 9-17/4 * * mon-fri")
    assert parsed.minutes == {0} and parsed.hours == {9, 13, 17}
    assert parsed.weekdays == {1, 2, 3, 4, 5} and parsed.days == set(range(1, 32))
    assert parse_schedule("@weekly").weekdays == {0}
    assert parse_schedule("@every 90s").every == "90s"


def test_a_cron_job_checks_its_time_zone_name_length_and_job_template() -> None:
    obj = cron_job(timeZone="Mars/Olympus", concurrencyPolicy="Sometimes")
    obj["metadata"]["name"] = "r" * 53
    obj["spec"]["jobTemplate"]["spec"]["selector"] = {"matchLabels": {"a": "b"}}
    assert problems("cronjobs.batch", obj) == [
        f'metadata.name: Invalid value: "{"r" * 53}": must be no more than 52 characters',
        'spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus',
        'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", '
        '"Forbid", "Replace"',
        'spec.jobTemplate.spec.selector: Invalid value: {"matchLabels":{"a":"b"}}: `selector` '
        "will be auto-generated",
    ]
    assert problems("cronjobs.batch", cron_job(timeZone="Europe/Paris")) == []


def test_a_controller_revision_needs_data() -> None:
    assert problems("controllerrevisions.apps", {"metadata": meta(), "revision": -1}) == [
        "data: Required value: data is mandatory",
        "revision: Invalid value: -1: must be greater than or equal to 0",
    ]


# --- services and endpoints -----------------------------------------------------------


def service(**spec: Any) -> Object:
    return {
        "metadata": meta(),
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}], **spec},
    }


def test_a_valid_service_of_each_type_has_no_problems() -> None:
    assert problems("services", service()) == []
    assert (
        problems("services", service(type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
        == []
    )
    assert problems("services", service(type="LoadBalancer")) == []
    assert problems("services", service(clusterIP="None", ports=[])) == []
    external = {
        "metadata": meta(),
        "spec": {"type": "ExternalName", "externalName": "db.example.com."},
    }
    assert problems("services", external) == []


def test_a_service_needs_ports_unless_headless_or_external() -> None:
    assert problems("services", service(ports=[])) == ["spec.ports: Required value"]
    assert problems("services", {"metadata": meta(), "spec": {"type": "ExternalName"}}) == [
        "spec.externalName: Required value"
    ]


def test_several_service_ports_need_unique_names() -> None:
    ports = [
        {"port": 80, "name": "http"},
        {"port": 443},
        {"port": 8443, "name": "http"},
        {"port": 0, "name": "x"},
    ]
    assert problems("services", service(ports=ports)) == [
        "spec.ports[1].name: Required value",
        'spec.ports[2].name: Duplicate value: "http"',
        "spec.ports[3].port: Invalid value: 0: must be between 1 and 65535, inclusive",
        # The target port defaults to the port, so it is out of range too.
        "spec.ports[3].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive",
    ]


def test_node_ports_belong_to_node_port_services_within_the_range() -> None:
    assert problems("services", service(ports=[{"port": 80, "nodePort": 30080}])) == [
        "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"
    ]
    assert problems(
        "services", service(type="NodePort", ports=[{"port": 80, "nodePort": 8080}])
    ) == [
        "spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. "
        "The range of valid ports is 30000-32767"
    ]


def test_service_type_and_affinity_must_be_supported() -> None:
    messages = problems("services", service(type="Internal"))
    assert (
        'spec.type: Unsupported value: "Internal": supported values: "ClusterIP", "ExternalName", '
        '"LoadBalancer", "NodePort"' in messages
    )
    sticky = service(
        sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 90000}}
    )
    assert problems("services", sticky) == [
        "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 90000: must be "
        "greater than 0 and less than 86400"
    ]


def test_a_headless_node_port_service_is_refused() -> None:
    assert (
        "spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort "
        "services" in problems("services", service(type="NodePort", clusterIP="None"))
    )


def test_a_service_keeps_its_cluster_ip() -> None:
    old = service(clusterIP="10.96.0.10")
    assert problems("services", service(clusterIP="10.96.0.11"), old) == [
        'spec.clusterIPs[0]: Invalid value: ["10.96.0.11"]: may not change once set'
    ]
    assert problems("services", service(), service(clusterIP="10.96.0.10")) == []


def test_endpoint_addresses_must_be_real_pod_addresses() -> None:
    endpoints = {
        "metadata": meta(),
        "subsets": [
            {
                "addresses": [{"ip": "127.0.0.1"}, {"ip": "10.0.0.300"}],
                "ports": [{"port": 80}, {"port": 81, "name": "b"}],
            },
            {"ports": [{"port": 80}]},
        ],
    }
    assert problems("endpoints", endpoints) == [
        'subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range '
        "(127.0.0.0/8, ::1/128)",
        'subsets[0].addresses[1].ip: Invalid value: "10.0.0.300": must be a valid IP address, '
        "(e.g. 10.9.8.7 or 2001:db8::ffff)",
        "subsets[0].ports[0].name: Required value",
        "subsets[1]: Required value: must specify `addresses` or `notReadyAddresses`",
    ]


def test_endpoint_slices_declare_their_address_type() -> None:
    endpoint_slice = {
        "metadata": meta(),
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["fd00::1"]}, {"addresses": []}],
    }
    assert problems("endpointslices.discovery.k8s.io", endpoint_slice) == [
        'endpoints[0].addresses[0]: Invalid value: "fd00::1": must be a valid IPv4 address',
        "endpoints[1].addresses: Required value: must contain at least 1 address",
    ]
    assert problems(
        "endpointslices.discovery.k8s.io", {"metadata": meta(), "addressType": "IPX"}
    ) == ['addressType: Unsupported value: "IPX": supported values: "FQDN", "IPv4", "IPv6"']
    old = {"metadata": meta(), "addressType": "IPv4"}
    assert problems(
        "endpointslices.discovery.k8s.io", {"metadata": meta(), "addressType": "IPv6"}, old
    ) == ['addressType: Invalid value: "IPv6": field is immutable']


# --- configuration --------------------------------------------------------------------


def test_config_keys_must_be_file_names() -> None:
    config_map = {"metadata": meta(), "data": {"good.key": "1", "bad/key": "2", "..": "3"}}
    assert problems("configmaps", config_map) == [
        'data[bad/key]: Invalid value: "bad/key": a valid config key must consist of alphanumeric '
        "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used "
        "for validation is '[-._a-zA-Z0-9]+')",
        "data[..]: Invalid value: \"..\": must not be '..'",
    ]


def test_config_maps_and_secrets_hold_at_most_one_mebibyte() -> None:
    assert problems("configmaps", {"metadata": meta(), "data": {"a": "x" * (1024 * 1024 + 1)}}) == [
        ": Too long: may not be more than 1048576 bytes"
    ]
    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    assert problems("secrets", {"metadata": meta(), "data": {"a": big}}) == [
        "data: Too long: may not be more than 1048576 bytes"
    ]


def test_typed_secrets_need_their_keys() -> None:
    tls = {"metadata": meta(), "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}}
    assert problems("secrets", tls) == ["data[tls.key]: Required value"]
    token = {"metadata": meta(), "type": "kubernetes.io/service-account-token"}
    assert problems("secrets", token) == [
        "metadata.annotations[kubernetes.io/service-account.name]: Required value"
    ]


def test_immutable_config_stays_as_it_is_and_a_secret_keeps_its_type() -> None:
    old = {"metadata": meta(), "immutable": True, "data": {"a": "1"}}
    new = {"metadata": meta(), "data": {"a": "2"}}
    assert problems("configmaps", new, old) == [
        "immutable: Forbidden: field is immutable when `immutable` is set",
        "data: Forbidden: field is immutable when `immutable` is set",
    ]
    assert problems(
        "secrets",
        {"metadata": meta(), "type": "kubernetes.io/basic-auth", "data": {"username": "eA=="}},
        {"metadata": meta()},
    ) == ['type: Invalid value: "kubernetes.io/basic-auth": field is immutable']


# --- cluster kinds --------------------------------------------------------------------


def test_namespace_finalizers_are_checked() -> None:
    namespace = {
        "metadata": meta(name="team-a", namespace=None),
        "spec": {"finalizers": ["cleanup"]},
    }
    assert problems("namespaces", namespace) == [
        'spec.finalizers: Invalid value: "cleanup": name is neither a standard finalizer name nor '
        "is it fully qualified"
    ]


def test_node_taints_quantities_and_pod_cidrs_are_checked() -> None:
    node = {
        "metadata": meta(name="worker-1", namespace=None),
        "spec": {
            "taints": [{"key": "gpu", "effect": "Never"}, {"key": "gpu", "effect": "Never"}],
            "podCIDRs": ["10.244.1.0/33"],
        },
        "status": {"capacity": {"cpu": "four"}},
    }
    assert problems("nodes", node) == [
        'spec.taints[0].effect: Unsupported value: "Never": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"',
        'spec.taints[1].effect: Unsupported value: "Never": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"',
        'spec.taints[1]: Duplicate value: {"effect":"Never","key":"gpu"}: taints must be unique '
        "by key and effect pair",
        'status.capacity.cpu: Invalid value: "four": quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        'spec.podCIDRs[0]: Invalid value: "10.244.1.0/33": must be a valid CIDR value, (e.g. '
        "10.9.8.0/24 or 2001:db8::/64)",
    ]


def test_a_node_keeps_its_pod_cidrs_once_set() -> None:
    old = {"metadata": meta(name="n", namespace=None), "spec": {"podCIDRs": ["10.244.1.0/24"]}}
    new = {"metadata": meta(name="n", namespace=None), "spec": {"podCIDRs": ["10.244.2.0/24"]}}
    assert problems("nodes", new, old) == [
        'spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid'
    ]
    assert problems("nodes", copy.deepcopy(old), {"metadata": meta(name="n", namespace=None)}) == []


def test_a_lease_lasts_a_positive_time() -> None:
    lease = {
        "metadata": meta(),
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 0, "leaseTransitions": -1},
    }
    assert problems("leases.coordination.k8s.io", lease) == [
        "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
        "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
    ]


def test_an_event_lives_in_the_namespace_of_what_it_is_about() -> None:
    event = {
        "metadata": meta(name="web.17a"),
        "involvedObject": {"kind": "Pod", "namespace": "other"},
    }
    assert problems("events", event) == [
        'involvedObject.namespace: Invalid value: "other": does not match event.namespace'
    ]
    node_event = {"metadata": meta(name="n.1"), "involvedObject": {"kind": "Node", "name": "n"}}
    assert problems("events", node_event) == []


def test_a_structured_event_names_its_reporter() -> None:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "metadata": meta(name="e.1"),
        "type": "Normal",
        "eventTime": "2024-01-01T00:00:00.000000Z",
    }
    assert problems("events", event) == [
        "reportingController: Required value",
        'reportingController: Invalid value: "": name part must be non-empty',
        'reportingController: Invalid value: "": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        "reportingInstance: Required value",
        "action: Required value",
        "reason: Required value",
    ]


def csr_request() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "system:node:worker-1")])
    request = (
        x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    )
    return base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()


def test_a_certificate_signing_request_carries_a_signed_request_for_a_signer() -> None:
    good = {
        "metadata": meta(name="node-csr-1", namespace=None),
        "spec": {
            "request": csr_request(),
            "signerName": "kubernetes.io/kubelet-serving",
            "usages": ["server auth", "digital signature"],
        },
    }
    assert problems("certificatesigningrequests.certificates.k8s.io", good) == []
    bad = {
        "metadata": meta(name="x", namespace=None),
        "spec": {"usages": ["server auth", "server auth", "flying"], "expirationSeconds": 60},
    }
    assert problems("certificatesigningrequests.certificates.k8s.io", bad)[:2] == [
        "spec.request: Required value",
        'spec.usages[1]: Duplicate value: "server auth"',
    ]
    assert problems("certificatesigningrequests.certificates.k8s.io", copy.deepcopy(bad))[3:] == [
        "spec.signerName: Required value",
        "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 "
        "seconds (10 minutes)",
    ]
    garbage = base64.b64encode(b"not a pem").decode()
    bad_request = {
        "metadata": meta(name="x", namespace=None),
        "spec": {"request": garbage, "signerName": "example.com/x", "usages": ["any"]},
    }
    assert problems("certificatesigningrequests.certificates.k8s.io", bad_request) == [
        f'spec.request: Invalid value: "{garbage}": PEM block type must be CERTIFICATE REQUEST'
    ]


# --- policy, storage, rbac ------------------------------------------------------------


def test_a_limit_range_must_be_consistent() -> None:
    limit = {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}
    messages = problems("limitranges", {"metadata": meta(), "spec": {"limits": [limit]}})
    assert (
        messages[0]
        == 'spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1'
    )
    assert problems(
        "limitranges", {"metadata": meta(), "spec": {"limits": [{"type": "Node"}]}}
    ) == [
        'spec.limits[0].type: Invalid value: "Node": must be a standard limit type or fully '
        "qualified"
    ]


def test_a_quota_counts_whole_objects_of_known_resources() -> None:
    quota = {
        "metadata": meta(),
        "spec": {
            "hard": {"pods": "1.5", "requests.cpu": "4", "gpus": "1", "count/deployments.apps": "2"}
        },
    }
    assert problems("resourcequotas", quota) == [
        'spec.hard[pods]: Invalid value: "1500m": must be an integer',
        'spec.hard[gpus]: Invalid value: "gpus": must be a standard resource type or fully '
        "qualified",
        'spec.hard[gpus]: Invalid value: "gpus": must be a standard resource for quota',
    ]


def test_quota_scopes_never_change() -> None:
    old = {"metadata": meta(), "spec": {"scopes": ["BestEffort"]}}
    new = {"metadata": meta(), "spec": {"scopes": ["NotBestEffort"]}}
    assert problems("resourcequotas", new, old) == [
        'spec.scopes: Invalid value: ["NotBestEffort"]: field is immutable'
    ]


def claim(storage: str = "1Gi", **spec: Any) -> Object:
    return {
        "metadata": meta(name="data"),
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": storage}},
            **spec,
        },
    }


def test_volumes_and_claims_need_access_modes_and_sizes() -> None:
    volume = {
        "metadata": meta(name="pv-1", namespace=None),
        "spec": {"capacity": {"storage": "0"}, "hostPath": {"path": "/srv/pv-1"}},
    }
    assert problems("persistentvolumes", volume) == [
        "spec.accessModes: Required value",
        'spec.capacity[storage]: Invalid value: "0": must be greater than zero',
    ]
    assert problems("persistentvolumeclaims", claim()) == []
    no_size = {"metadata": meta(), "spec": {"accessModes": ["ReadWriteSometimes"]}}
    assert problems("persistentvolumeclaims", no_size) == [
        'spec.accessModes: Unsupported value: "ReadWriteSometimes": supported values: '
        '"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"',
        "spec.resources[storage]: Required value",
    ]


def test_a_bound_claim_may_grow_but_never_shrink_or_change_otherwise() -> None:
    bound = claim("1Gi")
    bound["status"] = {"phase": "Bound"}
    grown = claim("2Gi")
    grown["status"] = {"phase": "Bound"}
    assert problems("persistentvolumeclaims", grown, copy.deepcopy(bound)) == []
    shrunk = claim("512Mi")
    shrunk["status"] = {"phase": "Bound"}
    assert problems("persistentvolumeclaims", shrunk, copy.deepcopy(bound)) == [
        "spec.resources.requests.storage: Forbidden: field can not be less than previous value"
    ]
    assert fields("persistentvolumeclaims", claim(storageClassName="fast"), claim()) == ["spec"]
    assert problems("persistentvolumeclaims", claim(volumeName="pv-1"), claim()) == []


def test_rbac_rules_grant_verbs_on_resources() -> None:
    role = {
        "metadata": meta(),
        "rules": [
            {"apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
        ],
    }
    assert problems("roles.rbac.authorization.k8s.io", role) == [
        "rules[0].verbs: Required value: verbs must contain at least one value",
        'rules[1].nonResourceURLs: Invalid value: ["/healthz"]: namespaced rules cannot apply to '
        "non-resource URLs",
    ]
    cluster_role = {
        "metadata": meta(name="health", namespace=None),
        "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
    }
    assert problems("clusterroles.rbac.authorization.k8s.io", cluster_role) == []


def test_bindings_refer_to_roles_and_known_subjects() -> None:
    binding = {
        "metadata": meta(name="b", namespace=None),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "view"},
        "subjects": [{"kind": "Robot", "name": "r2"}, {"kind": "ServiceAccount", "name": "bot"}],
    }
    assert problems("clusterrolebindings.rbac.authorization.k8s.io", binding) == [
        'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"',
        'subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", '
        '"User", "Group"',
        "subjects[1].namespace: Required value",
    ]


def test_a_binding_never_changes_its_role() -> None:
    def binding(name: str) -> Object:
        return {
            "metadata": meta(),
            "roleRef": {"kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "User", "name": "alice"}],
        }

    assert (
        problems("rolebindings.rbac.authorization.k8s.io", binding("view"), binding("view")) == []
    )
    assert problems(
        "rolebindings.rbac.authorization.k8s.io", binding("admin"), binding("view")
    ) == [
        "roleRef: Invalid value: "
        '{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"admin"}: cannot '
        "change roleRef"
    ]


# --- formats --------------------------------------------------------------------------


def test_regex_errors_list_examples_as_kubernetes_prints_them() -> None:
    assert (
        regex_error("bad", "x+", "a", "b")
        == "bad (e.g. 'a',  or 'b', regex used for validation is 'x+')"
    )
    assert regex_error("bad", "x+") == "bad (regex used for validation is 'x+')"


@pytest.mark.parametrize(
    ("resource", "obj"),
    [
        ("pods", {"metadata": "nope", "spec": {"containers": [None, 3]}}),
        (
            "deployments.apps",
            {"metadata": meta(), "spec": {"selector": [], "template": "t", "strategy": 5}},
        ),
        ("services", {"metadata": meta(), "spec": {"ports": [{"port": "http", "nodePort": "x"}]}}),
        ("secrets", {"metadata": meta(), "data": {"a": 5}}),
        ("cronjobs.batch", {"metadata": meta(), "spec": {"schedule": 5, "timeZone": 3}}),
    ],
)
def test_objects_of_the_wrong_shape_are_reported_never_raised(resource: str, obj: Object) -> None:
    assert validate(resource, obj)
