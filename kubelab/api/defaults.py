"""Defaulting: the values the real API fills in when a client leaves a field out.

One `Defaulter` per resource (`default_pod`, `default_service`, ...) mutates a decoded
object in place; each resource's strategy names its own
(``controlplane.apiserver.strategies``), and the apiserver calls it on create and on
update, after its own server-owned fields (uid, status) and before validation, the order
the real apiserver follows. Nothing here is looked up by kind: a custom resource whose
kind is ``Service`` is never defaulted as a core Service. The values are Kubernetes' own
(core/v1, apps/v1, batch/v1, rbac/v1, networking/v1, scheduling/v1, autoscaling/v2,
storage/v1 and admissionregistration/v1 defaulting, plus the few the real registries set
on create), so `kubectl get -o yaml` shows what it shows against a real cluster:
`imagePullPolicy`, `terminationMessagePath`, `strategy.rollingUpdate.maxSurge: 25%`...

Like the real defaulters, these functions never reject anything: a field of the wrong
type is left as it is for validation to report. Where a default depends on other
fields (a target port on its port), it is computed from what the client sent.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from kubelab.api.quantity import parse_quantity
from kubelab.api.validation.volumes import SOURCES as VOLUME_SOURCES

Object = dict[str, Any]
Defaulter = Callable[[Object], None]

DEFAULT_SCHEDULER = "default-scheduler"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
DEFAULT_FILE_MODE = 0o644
CLIENT_IP_TIMEOUT = 10800  # three hours of session affinity
RBAC_GROUP = "rbac.authorization.k8s.io"
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1}
_PROBE_DEFAULTS |= {"failureThreshold": 3}


def _child(parent: Object, key: str) -> Object:
    """parent[key] as an object, created when absent. A value of the wrong type is left
    for validation to report, and a detached object is returned to default harmlessly."""
    value = parent.setdefault(key, {})
    return value if isinstance(value, dict) else {}


def _objects(value: Any) -> list[Object]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def _unset(obj: Object, key: str) -> bool:
    """Absent, null or the zero value: Go's defaulters cannot tell these apart."""
    return obj.get(key) in (None, "", 0) and obj.get(key) is not False


def _is_quantity(value: Any) -> bool:
    try:
        parse_quantity(value)
    except ValueError:
        return False
    return True


def _resource_list(value: Any) -> None:
    """Quantities in canonical form, rounded up to whole millis as the API stores them;
    malformed ones stay for validation to report."""
    if not isinstance(value, dict):
        return
    for name, amount in value.items():
        try:
            value[name] = str(parse_quantity(amount).rounded_up(-3))
        except ValueError:
            continue


# --- pods -----------------------------------------------------------------------------


def default_pod(pod: Object) -> None:
    spec = _child(pod, "spec")
    _pod_spec(spec)
    spec.setdefault("enableServiceLinks", True)
    for field in ("containers", "initContainers"):
        for container in _objects(spec.get(field)):
            _requests_from_limits(container)
            if spec.get("hostNetwork") is True:
                for port in _objects(container.get("ports")):
                    if _unset(port, "hostPort"):
                        port["hostPort"] = port.get("containerPort")


def _requests_from_limits(container: Object) -> None:
    """A limit without a request asks for exactly the limit (Pods only, not templates)."""
    resources = container.get("resources")
    if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
        return
    requests = _child(resources, "requests")
    for name, amount in resources["limits"].items():
        if _is_quantity(amount):
            requests.setdefault(name, amount)


def _pod_template(owner_spec: Object, key: str = "template") -> None:
    """The pod template of a workload: the pod-spec defaults of a Pod, but not the ones
    Kubernetes applies to Pod objects only (service links, requests from limits)."""
    _pod_spec(_child(_child(owner_spec, key), "spec"))


def _pod_spec(spec: Object) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("securityContext", {})
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for container in _objects(spec.get(field)):
            _container(container)
    for volume in _objects(spec.get("volumes")):
        _volume(volume)


def _container(container: Object) -> None:
    if not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = _pull_policy(container.get("image"))
    container.setdefault("terminationMessagePath", TERMINATION_MESSAGE_PATH)
    container.setdefault("terminationMessagePolicy", "File")
    resources = _child(container, "resources")
    _resource_list(resources.get("limits"))
    _resource_list(resources.get("requests"))
    for port in _objects(container.get("ports")):
        port.setdefault("protocol", "TCP")
    for probe in (container.get(field) for field in _PROBES):
        if isinstance(probe, dict):
            for key, value in _PROBE_DEFAULTS.items():
                if _unset(probe, key):
                    probe[key] = value
            _handler(probe)
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            if isinstance(lifecycle.get(hook), dict):
                _handler(lifecycle[hook])
    for var in _objects(container.get("env")):
        value_from = var.get("valueFrom")
        if isinstance(value_from, dict) and isinstance(value_from.get("fieldRef"), dict):
            value_from["fieldRef"].setdefault("apiVersion", "v1")


def _pull_policy(image: Any) -> str:
    """Always for ":latest" (or no tag: that is latest), IfNotPresent for a fixed tag or
    a digest, which cannot change under the same name."""
    if not isinstance(image, str):
        return "IfNotPresent"
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2] if ":" in last else ("" if digest else "latest")
    return "Always" if tag == "latest" else "IfNotPresent"


def _handler(handler: Object) -> None:
    http_get = handler.get("httpGet")
    if isinstance(http_get, dict):
        if not http_get.get("path"):
            http_get["path"] = "/"
        http_get.setdefault("scheme", "HTTP")


def _volume(volume: Object) -> None:
    if not any(volume.get(source) is not None for source in VOLUME_SOURCES):
        volume["emptyDir"] = {}
    for source in ("secret", "configMap", "downwardAPI", "projected"):
        if isinstance(volume.get(source), dict):
            volume[source].setdefault("defaultMode", DEFAULT_FILE_MODE)
    if isinstance(volume.get("hostPath"), dict):
        volume["hostPath"].setdefault("type", "")
    for item in _objects((volume.get("downwardAPI") or {}).get("items")):
        if isinstance(item.get("fieldRef"), dict):
            item["fieldRef"].setdefault("apiVersion", "v1")
    projected = volume.get("projected")
    for entry in _objects(projected.get("sources") if isinstance(projected, dict) else None):
        token = entry.get("serviceAccountToken")
        if isinstance(token, dict):
            token.setdefault("expirationSeconds", 3600)
    ephemeral = volume.get("ephemeral")
    if isinstance(ephemeral, dict) and isinstance(ephemeral.get("volumeClaimTemplate"), dict):
        _claim_spec(_child(ephemeral["volumeClaimTemplate"], "spec"))


# --- workloads ------------------------------------------------------------------------


def default_deployment(deployment: Object) -> None:
    spec = _child(deployment, "spec")
    spec.setdefault("replicas", 1)
    strategy = _child(spec, "strategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy.get("type") == "RollingUpdate":
        rolling = _child(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _pod_template(spec)


def _status_counters(obj: Object, *names: str) -> None:
    """Status counters Go serializes even at zero (no omitempty): typed clients (the
    official one among them) refuse an object whose status lacks them."""
    status = _child(obj, "status")
    for name in names:
        status.setdefault(name, 0)


def default_replica_set(replica_set: Object) -> None:
    spec = _child(replica_set, "spec")
    spec.setdefault("replicas", 1)
    _pod_template(spec)
    _status_counters(replica_set, "replicas")


def default_replication_controller(controller: Object) -> None:
    """An RC without a selector (or labels) takes its template's labels."""
    spec = _child(controller, "spec")
    spec.setdefault("replicas", 1)
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    labels = (template.get("metadata") or {}).get("labels")
    if isinstance(labels, dict) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        metadata = _child(controller, "metadata")
        if not metadata.get("labels"):
            metadata["labels"] = dict(labels)
    _pod_template(spec)
    _status_counters(controller, "replicas")


def default_daemon_set(daemon_set: Object) -> None:
    spec = _child(daemon_set, "spec")
    strategy = _child(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy.get("type") == "RollingUpdate":
        rolling = _child(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    _pod_template(spec)
    _status_counters(
        daemon_set,
        "currentNumberScheduled",
        "numberMisscheduled",
        "desiredNumberScheduled",
        "numberReady",
    )


def default_stateful_set(stateful_set: Object) -> None:
    spec = _child(stateful_set, "spec")
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = _child(spec, "updateStrategy")
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        strategy.setdefault("rollingUpdate", {})
    rolling = strategy.get("rollingUpdate")
    if strategy.get("type") == "RollingUpdate" and isinstance(rolling, dict):
        rolling.setdefault("partition", 0)
    retention = _child(spec, "persistentVolumeClaimRetentionPolicy")
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    for claim in _objects(spec.get("volumeClaimTemplates")):
        _claim_spec(_child(claim, "spec"))
        _child(claim, "status").setdefault("phase", "Pending")
    _pod_template(spec)
    _status_counters(stateful_set, "replicas")


def default_job(job: Object) -> None:
    spec = _child(job, "spec")
    _job_selector(job, spec)
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    failure_policy = spec.get("podFailurePolicy") is not None
    spec.setdefault("podReplacementPolicy", "Failed" if failure_policy else "TerminatingOrFailed")
    template_labels = (_child(spec, "template").get("metadata") or {}).get("labels")
    metadata = _child(job, "metadata")
    if isinstance(template_labels, dict) and template_labels and not metadata.get("labels"):
        metadata["labels"] = dict(template_labels)
    _pod_template(spec)


def _job_selector(job: Object, spec: Object) -> None:
    """Unless the user manages the selector, a Job selects its pods by its own uid, and
    labels its template to match (what the real registry does on create). The uid is
    the apiserver's, so it must be assigned before defaulting."""
    uid, name = (job.get("metadata") or {}).get("uid"), (job.get("metadata") or {}).get("name")
    if spec.get("manualSelector") is True or spec.get("selector") is not None or not uid:
        return
    labels = _child(_child(_child(spec, "template"), "metadata"), "labels")
    for key in ("batch.kubernetes.io/controller-uid", "controller-uid"):
        labels.setdefault(key, uid)
    for key in ("batch.kubernetes.io/job-name", "job-name"):
        labels.setdefault(key, name)
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}


def default_cron_job(cron_job: Object) -> None:
    spec = _child(cron_job, "spec")
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    _pod_template(_child(_child(spec, "jobTemplate"), "spec"))


# --- services and networking ----------------------------------------------------------


def default_service(service: Object) -> None:
    spec = _child(service, "spec")
    spec.setdefault("type", "ClusterIP")
    kind = spec.get("type")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("sessionAffinity") == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec.get("sessionAffinity") == "ClientIP":
        client_ip = _child(_child(spec, "sessionAffinityConfig"), "clientIP")
        client_ip.setdefault("timeoutSeconds", CLIENT_IP_TIMEOUT)
    for port in _objects(spec.get("ports")):
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    if kind != "ExternalName":
        _cluster_ips(spec)
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    externally_accessible = kind in ("NodePort", "LoadBalancer") or (
        kind == "ClusterIP" and bool(spec.get("externalIPs"))
    )
    if externally_accessible:
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)


def _cluster_ips(spec: Object) -> None:
    """clusterIP and clusterIPs say the same thing; an older client sets only one."""
    cluster_ip, cluster_ips = spec.get("clusterIP"), spec.get("clusterIPs")
    if cluster_ip and not cluster_ips:
        spec["clusterIPs"] = [cluster_ip]
    elif cluster_ips and isinstance(cluster_ips, list) and not cluster_ip:
        spec["clusterIP"] = cluster_ips[0]


def default_endpoints(endpoints: Object) -> None:
    for subset in _objects(endpoints.get("subsets")):
        for port in _objects(subset.get("ports")):
            port.setdefault("protocol", "TCP")


def default_endpoint_slice(endpoint_slice: Object) -> None:
    for port in _objects(endpoint_slice.get("ports")):
        port.setdefault("protocol", "TCP")
        port.setdefault("name", "")


# --- configuration, cluster and storage -----------------------------------------------


def default_secret(secret: Object) -> None:
    """Type Opaque, and stringData (write-only plain text) merged into data, base64."""
    secret.setdefault("type", "Opaque")
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = _child(secret, "data")
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def default_namespace(namespace: Object) -> None:
    metadata = _child(namespace, "metadata")
    name = metadata.get("name")
    if isinstance(name, str) and name:
        _child(metadata, "labels")["kubernetes.io/metadata.name"] = name
    _child(namespace, "spec").setdefault("finalizers", ["kubernetes"])


def default_node(node: Object) -> None:
    status = node.get("status")
    if not isinstance(status, dict):
        return
    _resource_list(status.get("capacity"))
    _resource_list(status.get("allocatable"))
    capacity = status.get("capacity")
    if isinstance(capacity, dict) and "allocatable" not in status:
        status["allocatable"] = {k: v for k, v in capacity.items() if _is_quantity(v)}


def default_persistent_volume(volume: Object) -> None:
    spec = _child(volume, "spec")
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    _resource_list(spec.get("capacity"))


def default_persistent_volume_claim(claim: Object) -> None:
    _claim_spec(_child(claim, "spec"))


def _claim_spec(spec: Object) -> None:
    spec.setdefault("volumeMode", "Filesystem")
    resources = spec.get("resources")
    if isinstance(resources, dict):
        _resource_list(resources.get("requests"))
        _resource_list(resources.get("limits"))


def default_limit_range(limit_range: Object) -> None:
    """For containers: a max is the default limit, a default limit is the default request,
    and a min is the default request when there is no default limit."""
    for limit in _objects(_child(limit_range, "spec").get("limits")):
        for bound in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            _resource_list(limit.get(bound))
        if limit.get("type") != "Container":
            continue
        default, request = _child(limit, "default"), _child(limit, "defaultRequest")
        for source, target in (("max", default), ("default", request), ("min", request)):
            values = limit.get(source)
            if isinstance(values, dict):
                for name, amount in values.items():
                    target.setdefault(name, amount)


def default_resource_quota(quota: Object) -> None:
    _resource_list(_child(quota, "spec").get("hard"))


def default_role_binding(binding: Object) -> None:
    """Users and groups belong to the RBAC API group; service accounts to the core one."""
    role_ref = binding.get("roleRef")
    if isinstance(role_ref, dict) and not role_ref.get("apiGroup"):
        role_ref["apiGroup"] = RBAC_GROUP
    for subject in _objects(binding.get("subjects")):
        if subject.get("apiGroup"):
            continue
        if subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = RBAC_GROUP
        elif subject.get("kind") == "ServiceAccount":
            subject["apiGroup"] = ""


def default_ingress(ingress: Object) -> None:
    """Go writes the empty load balancer status (a struct is never omitted), which
    controllers and `kubectl get -o yaml` show as `loadBalancer: {}`."""
    _child(_child(ingress, "status"), "loadBalancer")


def default_network_policy(policy: Object) -> None:
    """Ingress is always isolated by a policy that names no types; Egress too when the
    policy has egress rules. Ports are TCP unless they say otherwise."""
    spec = _child(policy, "spec")
    for direction in ("ingress", "egress"):
        for rule in _objects(spec.get(direction)):
            for port in _objects(rule.get("ports")):
                port.setdefault("protocol", "TCP")
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def default_priority_class(priority_class: Object) -> None:
    priority_class.setdefault("preemptionPolicy", "PreemptLowerPriority")


# autoscaling/v2's scaling behavior when a direction is left out of a given `behavior`.
_SCALE_UP = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
_SCALE_DOWN = {
    "stabilizationWindowSeconds": 300,
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}
DEFAULT_CPU_UTILIZATION = 80


def default_horizontal_pod_autoscaler(hpa: Object) -> None:
    """At least one replica; 80% CPU when no metric is given; a given behavior filled in
    direction by direction (autoscaling/v2 defaulting; v1 objects arrive converted)."""
    spec = _child(hpa, "spec")
    # desiredReplicas is never omitted (v1 and v2), currentReplicas not in v1.
    _status_counters(hpa, "currentReplicas", "desiredReplicas")
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {
                        "type": "Utilization",
                        "averageUtilization": DEFAULT_CPU_UTILIZATION,
                    },
                },
            }
        ]
    behavior = spec.get("behavior")
    if not isinstance(behavior, dict):
        return
    for direction, defaults in (("scaleUp", _SCALE_UP), ("scaleDown", _SCALE_DOWN)):
        rules = _child(behavior, direction)
        for key, value in defaults.items():
            if rules.get(key) is None:
                rules[key] = [dict(p) for p in value] if isinstance(value, list) else value


def default_storage_class(storage_class: Object) -> None:
    storage_class.setdefault("reclaimPolicy", "Delete")
    storage_class.setdefault("volumeBindingMode", "Immediate")


_CSI_DRIVER_DEFAULTS: dict[str, Any] = {
    "attachRequired": True,
    "podInfoOnMount": False,
    "requiresRepublish": False,
    "storageCapacity": False,
    "seLinuxMount": False,
    "fsGroupPolicy": "ReadWriteOnceWithFSType",
}


def default_csi_driver(driver: Object) -> None:
    spec = _child(driver, "spec")
    for key, value in _CSI_DRIVER_DEFAULTS.items():
        spec.setdefault(key, value)
    if not spec.get("volumeLifecycleModes"):
        spec["volumeLifecycleModes"] = ["Persistent"]


def _webhooks(mutating: bool) -> Defaulter:
    """admissionregistration/v1 defaults of each webhook of a configuration."""

    def default(configuration: Object) -> None:
        for hook in _objects(configuration.get("webhooks")):
            hook.setdefault("failurePolicy", "Fail")
            hook.setdefault("matchPolicy", "Equivalent")
            hook.setdefault("namespaceSelector", {})
            hook.setdefault("objectSelector", {})
            hook.setdefault("timeoutSeconds", 10)
            if mutating:
                hook.setdefault("reinvocationPolicy", "Never")
            for rule in _objects(hook.get("rules")):
                rule.setdefault("scope", "*")
            service = _child(hook, "clientConfig").get("service")
            if isinstance(service, dict):
                service.setdefault("port", 443)

    return default


default_mutating_webhook_configuration = _webhooks(mutating=True)
default_validating_webhook_configuration = _webhooks(mutating=False)
