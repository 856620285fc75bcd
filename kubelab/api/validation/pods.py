"""Pod specs: the one validator used for Pods and for the pod template of every
workload (Deployment, ReplicaSet, DaemonSet, StatefulSet, Job, CronJob,
ReplicationController), plus the rules for updating a running Pod.

Workload controllers copy their template into the Pods they create, so an invalid
template would only surface later as a controller failing to create pods. Checking the
template with exactly the Pod rules moves the error to the moment the user applies it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubelab.api.errors import (
    FieldError,
    FieldErrorType,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from kubelab.api.validation import formats, scheduling
from kubelab.api.validation.compute import resource_requirements
from kubelab.api.validation.fields import (
    NEGATIVE,
    Errors,
    Path,
    dicts,
    integer,
    is_int,
    items,
    labels,
    mapping,
    messages,
    non_negative,
    text,
)
from kubelab.api.validation.meta import name_is_dns_subdomain, validate_template_meta
from kubelab.api.validation.volumes import field_selector, volume_mounts, volumes

SPEC = Path("spec")
RESTART_POLICIES = ["Always", "OnFailure", "Never"]
DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
MAX_INT32 = 2**31 - 1
MAX_ID = 2**32 - 1
_ENV_FIELDS = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
]
_RESOURCE_FIELDS = [
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
]
_UPDATABLE = ",".join(
    [
        "`spec.containers[*].image`",
        "`spec.initContainers[*].image`",
        "`spec.activeDeadlineSeconds`",
        "`spec.tolerations` (only additions to existing tolerations)",
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
        "negative)",
    ]
)


def validate_pod(pod: dict[str, Any]) -> Errors:
    spec = mapping(pod.get("spec"))
    errors = pod_spec(spec, SPEC, in_pod=True)
    for field in ("containers", "initContainers"):
        for i, container in enumerate(dicts(spec.get(field))):
            image = text(container.get("image"))
            if image != image.strip():
                detail = "must not have leading or trailing whitespace"
                errors.append(invalid(SPEC.child(field).item(i).child("image"), image, detail))
    return errors


def validate_pod_create(pod: dict[str, Any]) -> Errors:
    """Debugging containers are added to a running Pod (ephemeralcontainers
    subresource), never created with it."""
    if items(mapping(pod.get("spec")).get("ephemeralContainers")):
        return [forbidden(SPEC.child("ephemeralContainers"), "cannot be set on create")]
    return []


def pod_template(
    template: dict[str, Any], path: Path, extra_volumes: frozenset[str] = frozenset()
) -> Errors:
    """ValidatePodTemplateSpec: template metadata and the pod spec it stamps out.

    `extra_volumes` names volumes the owner adds to each pod (a StatefulSet's claim
    templates), which mounts may refer to."""
    errors = validate_template_meta(mapping(template.get("metadata")), path.child("metadata"))
    spec = mapping(template.get("spec"))
    errors += pod_spec(spec, path.child("spec"), in_pod=False, extra_volumes=extra_volumes)
    if items(spec.get("ephemeralContainers")):
        detail = "ephemeral containers not allowed in pod template"
        errors.append(forbidden(path.child("spec", "ephemeralContainers"), detail))
    return errors


def pod_spec(
    spec: dict[str, Any],
    path: Path,
    *,
    in_pod: bool,
    extra_volumes: frozenset[str] = frozenset(),
) -> Errors:
    """ValidatePodSpec. `in_pod` is false for a template, which may leave a host-network
    container's hostPort out: it is filled in when the Pod itself is created."""
    errors: Errors = []
    grace = integer(
        spec, "terminationGracePeriodSeconds", path.child("terminationGracePeriodSeconds"), errors
    )
    if "terminationGracePeriodSeconds" not in spec:
        errors.append(required(path.child("terminationGracePeriodSeconds")))
    elif grace is not None and grace < 0:
        errors.append(invalid(path.child("terminationGracePeriodSeconds"), grace, NEGATIVE))
    available, volume_errors = volumes(spec.get("volumes"), path.child("volumes"))
    errors += volume_errors
    available |= extra_volumes
    containers, init_containers = dicts(spec.get("containers")), dicts(spec.get("initContainers"))
    errors += _containers(containers, available, grace, path.child("containers"))
    errors += _init_containers(
        init_containers, containers, available, grace, path.child("initContainers")
    )
    if spec.get("hostNetwork") is True:
        errors += _host_network_ports(containers, path.child("containers"), in_pod)
    errors += _choice(spec, "restartPolicy", RESTART_POLICIES, path)
    errors += _choice(spec, "dnsPolicy", DNS_POLICIES, path)
    errors += labels(spec.get("nodeSelector"), path.child("nodeSelector"))
    errors += _pod_security_context(
        mapping(spec.get("securityContext")), path.child("securityContext")
    )
    for i, secret in enumerate(items(spec.get("imagePullSecrets"))):
        if not isinstance(secret, dict) or set(secret) - {"name"}:
            errors.append(
                invalid(path.child("imagePullSecrets").item(i), secret, "only name may be set")
            )
    errors += scheduling.affinity(spec.get("affinity"), path.child("affinity"))
    errors += _dns_config(spec, path.child("dnsConfig"))
    for i, gate in enumerate(dicts(spec.get("readinessGates"))):
        condition = text(gate.get("conditionType"))
        at = path.child("readinessGates").item(i).child("conditionType")
        errors += messages(at, condition, formats.is_qualified_name(condition))
    errors += scheduling.topology_spread(
        spec.get("topologySpreadConstraints"), path.child("topologySpreadConstraints")
    )
    for field in ("serviceAccountName", "nodeName", "priorityClassName"):
        name = text(spec.get(field))
        if name:
            errors += messages(path.child(field), name, name_is_dns_subdomain(name, False))
    deadline = integer(spec, "activeDeadlineSeconds", path.child("activeDeadlineSeconds"), errors)
    if deadline is not None and not 1 <= deadline <= MAX_INT32:
        detail = formats.inclusive_range_error(1, MAX_INT32)
        errors.append(invalid(path.child("activeDeadlineSeconds"), deadline, detail))
    for field in ("hostname", "subdomain"):
        name = text(spec.get(field))
        if name:
            errors += messages(path.child(field), name, formats.is_dns1123_label(name))
    errors += scheduling.tolerations(spec.get("tolerations"), path.child("tolerations"))
    for i, alias in enumerate(dicts(spec.get("hostAliases"))):
        at = path.child("hostAliases").item(i)
        errors += messages(
            at.child("ip"), text(alias.get("ip")), formats.is_valid_ip(text(alias.get("ip")))
        )
        for j, host in enumerate(items(alias.get("hostnames"))):
            errors += messages(
                at.child("hostnames").item(j), host, formats.is_dns1123_subdomain(text(host))
            )
    return errors


def _choice(spec: dict[str, Any], field: str, supported: list[str], path: Path) -> Errors:
    value = spec.get(field, "")
    if value == "":
        return [required(path.child(field))]
    if value not in supported:
        return [not_supported(path.child(field), value, supported)]
    return []


def _host_network_ports(containers: list[dict[str, Any]], path: Path, in_pod: bool) -> Errors:
    """With the host's network a container port is a host port: the two must agree. A
    template may leave hostPort out; it is filled in when the Pod is created."""
    errors: Errors = []
    for i, container in enumerate(containers):
        for j, port in enumerate(dicts(container.get("ports"))):
            host, own = port.get("hostPort", 0), port.get("containerPort", 0)
            if (in_pod or host != 0) and host != own:
                at = path.item(i).child("ports").item(j).child("hostPort")
                errors.append(
                    invalid(at, host, "must match `containerPort` when `hostNetwork` is true")
                )
    return errors


def _containers(
    containers: list[dict[str, Any]], available: set[str], grace: int | None, path: Path
) -> Errors:
    if not containers:
        return [required(path)]
    errors: Errors = []
    seen: set[str] = set()
    for i, container in enumerate(containers):
        at = path.item(i)
        errors += _container_common(container, available, at)
        name = text(container.get("name"))
        if name in seen:
            errors.append(duplicate(at.child("name"), name))
        seen.add(name)
        errors += _lifecycle(container.get("lifecycle"), grace, at.child("lifecycle"))
        errors += _probes(container, at)
        if container.get("restartPolicy") is not None:
            errors.append(
                forbidden(at.child("restartPolicy"), "may not be set for non-init containers")
            )
    return errors + _host_port_conflicts(containers, path)


def _init_containers(
    containers: list[dict[str, Any]],
    regular: list[dict[str, Any]],
    available: set[str],
    grace: int | None,
    path: Path,
) -> Errors:
    """Init containers run one at a time before the others; only those that keep running
    (restartPolicy Always, "sidecars") may have probes and lifecycle hooks."""
    errors: Errors = []
    seen = {text(c.get("name")) for c in regular}
    for i, container in enumerate(containers):
        at = path.item(i)
        errors += _container_common(container, available, at)
        restart = container.get("restartPolicy")
        if restart is not None and restart != "Always":
            errors.append(not_supported(at.child("restartPolicy"), restart, ["Always"]))
        name = text(container.get("name"))
        if name in seen:
            errors.append(duplicate(at.child("name"), name))
        elif name:
            seen.add(name)
        errors += _host_port_conflicts([container], path)
        if restart == "Always":
            errors += _lifecycle(container.get("lifecycle"), grace, at.child("lifecycle"))
            errors += _probes(container, at)
            continue
        for field in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
            if container.get(field) is not None:
                detail = "may not be set for init containers without restartPolicy=Always"
                errors.append(forbidden(at.child(field), detail))
    return errors


def _container_common(container: dict[str, Any], available: set[str], path: Path) -> Errors:
    errors: Errors = []
    name = text(container.get("name"))
    if not name:
        errors.append(required(path.child("name")))
    else:
        errors += messages(path.child("name"), name, formats.is_dns1123_label(name))
    if not text(container.get("image")):
        errors.append(required(path.child("image")))
    errors += _choice(
        container, "terminationMessagePolicy", ["File", "FallbackToLogsOnError"], path
    )
    errors += _container_ports(container.get("ports"), path.child("ports"))
    errors += _env(container.get("env"), path.child("env"))
    errors += _env_from(container.get("envFrom"), path.child("envFrom"))
    errors += volume_mounts(container.get("volumeMounts"), available, path.child("volumeMounts"))
    errors += _choice(container, "imagePullPolicy", PULL_POLICIES, path)
    errors += resource_requirements(container.get("resources"), path.child("resources"))
    return errors + _security_context(
        mapping(container.get("securityContext")), path.child("securityContext")
    )


def _container_ports(value: Any, path: Path) -> Errors:
    errors: Errors = []
    seen: set[str] = set()
    for i, port in enumerate(dicts(value)):
        at = path.item(i)
        name = text(port.get("name"))
        if name:
            problems = formats.is_valid_port_name(name)
            if problems:
                errors += messages(at.child("name"), name, problems)
            elif name in seen:
                errors.append(duplicate(at.child("name"), name))
            seen.add(name)
        number = integer(port, "containerPort", at.child("containerPort"), errors)
        if not number:
            errors.append(required(at.child("containerPort")))
        else:
            errors += messages(at.child("containerPort"), number, formats.is_valid_port_num(number))
        host = integer(port, "hostPort", at.child("hostPort"), errors)
        if host:
            errors += messages(at.child("hostPort"), host, formats.is_valid_port_num(host))
        errors += protocol(port, at)
    return errors


def protocol(port: dict[str, Any], path: Path) -> Errors:
    value = port.get("protocol", "")
    if value == "":
        return [required(path.child("protocol"))]
    if value not in PROTOCOLS:
        return [not_supported(path.child("protocol"), value, PROTOCOLS)]
    return []


def _host_port_conflicts(containers: list[dict[str, Any]], path: Path) -> Errors:
    """Two ports of a pod cannot claim the same host port, protocol and address."""
    errors: Errors = []
    seen: set[str] = set()
    for i, container in enumerate(containers):
        for j, port in enumerate(dicts(container.get("ports"))):
            host = port.get("hostPort")
            if not host:
                continue
            claim = f"{port.get('protocol', '')}/{port.get('hostIP', '')}/{host}"
            if claim in seen:
                errors.append(
                    duplicate(path.item(i).child("ports").item(j).child("hostPort"), claim)
                )
            seen.add(claim)
    return errors


def _env(value: Any, path: Path) -> Errors:
    errors: Errors = []
    for i, var in enumerate(dicts(value)):
        at = path.item(i)
        name = text(var.get("name"))
        if not name:
            errors.append(required(at.child("name")))
        else:
            errors += messages(at.child("name"), name, formats.is_env_var_name(name))
        if var.get("valueFrom") is not None:
            errors += _value_from(
                mapping(var["valueFrom"]), bool(text(var.get("value"))), at.child("valueFrom")
            )
    return errors


def _value_from(source: dict[str, Any], has_value: bool, path: Path) -> Errors:
    errors: Errors = []
    kinds = [
        k
        for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
        if source.get(k) is not None
    ]
    if "fieldRef" in kinds:
        errors += field_selector(mapping(source["fieldRef"]), _ENV_FIELDS, path.child("fieldRef"))
    if "resourceFieldRef" in kinds:
        ref = mapping(source["resourceFieldRef"])
        resource = text(ref.get("resource"))
        if not resource:
            errors.append(required(path.child("resourceFieldRef", "resource")))
        elif resource not in _RESOURCE_FIELDS and not resource.split(".", 1)[-1].startswith(
            "hugepages-"
        ):
            errors.append(
                not_supported(
                    path.child("resourceFieldRef", "resource"), resource, _RESOURCE_FIELDS
                )
            )
    for kind in ("configMapKeyRef", "secretKeyRef"):
        if kind in kinds:
            errors += _key_selector(mapping(source[kind]), path.child(kind))
    if not kinds:
        detail = (
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or "
            "`secretKeyRef`"
        )
        errors.append(invalid(path, "", detail))
    elif has_value:
        errors.append(invalid(path, "", "may not be specified when `value` is not empty"))
    elif len(kinds) > 1:
        errors.append(invalid(path, "", "may not have more than one field specified at a time"))
    return errors


def _key_selector(ref: dict[str, Any], path: Path) -> Errors:
    name, key = text(ref.get("name")), text(ref.get("key"))
    errors = messages(path.child("name"), name, name_is_dns_subdomain(name, False))
    if not key:
        errors.append(required(path.child("key")))
    else:
        errors += messages(path.child("key"), key, formats.is_config_map_key(key))
    return errors


def _env_from(value: Any, path: Path) -> Errors:
    errors: Errors = []
    for i, source in enumerate(dicts(value)):
        at = path.item(i)
        prefix = text(source.get("prefix"))
        if prefix:
            errors += messages(at.child("prefix"), prefix, formats.is_env_var_name(prefix))
        kinds = [k for k in ("configMapRef", "secretRef") if source.get(k) is not None]
        for kind in kinds:
            name = text(mapping(source[kind]).get("name"))
            if not name:
                errors.append(required(at.child(kind, "name")))
            else:
                errors += messages(at.child(kind, "name"), name, name_is_dns_subdomain(name, True))
        if not kinds:
            errors.append(invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif len(kinds) > 1:
            errors.append(invalid(path, "", "may not have more than one field specified at a time"))
    return errors


def _probes(container: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    for field in ("livenessProbe", "readinessProbe", "startupProbe"):
        if container.get(field) is None:
            continue
        probe, at = mapping(container[field]), path.child(field)
        errors += _handler(probe, ("exec", "httpGet", "tcpSocket", "grpc"), None, at)
        for number in (
            "initialDelaySeconds",
            "timeoutSeconds",
            "periodSeconds",
            "successThreshold",
            "failureThreshold",
        ):
            non_negative(probe, number, at.child(number), errors)
        grace = integer(
            probe,
            "terminationGracePeriodSeconds",
            at.child("terminationGracePeriodSeconds"),
            errors,
        )
        if field == "readinessProbe" and grace is not None:
            detail = "must not be set for readinessProbes"
            errors.append(invalid(at.child("terminationGracePeriodSeconds"), grace, detail))
        elif grace is not None and grace <= 0:
            errors.append(
                invalid(at.child("terminationGracePeriodSeconds"), grace, "must be greater than 0")
            )
        success = probe.get("successThreshold")
        if field != "readinessProbe" and success is not None and success != 1:
            errors.append(invalid(at.child("successThreshold"), success, "must be 1"))
    return errors


def _lifecycle(value: Any, grace: int | None, path: Path) -> Errors:
    errors: Errors = []
    for hook in ("postStart", "preStop"):
        handler = mapping(value).get(hook)
        if handler is not None:
            kinds = ("exec", "httpGet", "tcpSocket", "sleep")
            errors += _handler(mapping(handler), kinds, grace, path.child(hook))
    return errors


def _handler(
    handler: dict[str, Any], kinds: tuple[str, ...], grace: int | None, path: Path
) -> Errors:
    """Exactly one way to probe or hook: the first one set counts, any other is refused."""
    errors: Errors = []
    chosen = ""
    for kind in kinds:
        if handler.get(kind) is None:
            continue
        if chosen:
            errors.append(forbidden(path.child(kind), "may not specify more than 1 handler type"))
            continue
        chosen = kind
        action, at = mapping(handler[kind]), path.child(kind)
        if kind == "exec" and not items(action.get("command")):
            errors.append(required(at.child("command")))
        elif kind == "httpGet":
            errors += _http_get(action, at)
        elif kind in ("tcpSocket", "grpc"):
            errors += port_number_or_name(action.get("port"), at.child("port"))
        elif kind == "sleep":
            seconds = action.get("seconds")
            if grace is not None and (not is_int(seconds) or not 0 <= seconds <= grace):
                detail = (
                    f"must be non-negative and less than terminationGracePeriodSeconds ({grace})"
                )
                errors.append(invalid(at, seconds, detail))
    if not chosen:
        errors.append(required(path, "must specify a handler type"))
    return errors


def _http_get(action: dict[str, Any], path: Path) -> Errors:
    errors: Errors = []
    if not text(action.get("path")):
        errors.append(required(path.child("path")))
    errors += port_number_or_name(action.get("port"), path.child("port"))
    scheme = action.get("scheme", "")
    if scheme not in ("HTTP", "HTTPS"):
        errors.append(not_supported(path.child("scheme"), scheme, ["HTTP", "HTTPS"]))
    for header in dicts(action.get("httpHeaders")):
        name = text(header.get("name"))
        errors += messages(path.child("httpHeaders"), name, formats.is_http_header_name(name))
    return errors


def port_number_or_name(port: Any, path: Path) -> Errors:
    """An IntOrString port: a number in range, or an IANA service name."""
    if is_int(port):
        return messages(path, port, formats.is_valid_port_num(port))
    if isinstance(port, str):
        return messages(path, port, formats.is_valid_port_name(port))
    return [FieldError(FieldErrorType.TYPE_INVALID, path, "must be an integer or a string", port)]


def _id_range(context: dict[str, Any], field: str, path: Path) -> Errors:
    errors: Errors = []
    value = integer(context, field, path.child(field), errors)
    if value is not None and not 0 <= value <= MAX_ID:
        errors.append(invalid(path.child(field), value, formats.inclusive_range_error(0, MAX_ID)))
    return errors


def _security_context(context: dict[str, Any], path: Path) -> Errors:
    errors = _id_range(context, "runAsUser", path) + _id_range(context, "runAsGroup", path)
    if context.get("allowPrivilegeEscalation") is False and context.get("privileged") is True:
        detail = "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"
        errors.append(invalid(path, context, detail))
    proc_mount = context.get("procMount")
    if proc_mount is not None and proc_mount not in ("Default", "Unmasked"):
        errors.append(not_supported(path.child("procMount"), proc_mount, ["Default", "Unmasked"]))
    return errors


def _pod_security_context(context: dict[str, Any], path: Path) -> Errors:
    errors = _id_range(context, "runAsUser", path) + _id_range(context, "runAsGroup", path)
    errors += _id_range(context, "fsGroup", path)
    for i, group in enumerate(items(context.get("supplementalGroups"))):
        if not is_int(group) or not 0 <= group <= MAX_ID:
            at = path.child("supplementalGroups").item(i)
            errors.append(invalid(at, group, formats.inclusive_range_error(0, MAX_ID)))
    seen: set[str] = set()
    for i, sysctl in enumerate(dicts(context.get("sysctls"))):
        at = path.child("sysctls").item(i).child("name")
        name = text(sysctl.get("name"))
        if not name:
            errors.append(required(at))
        elif name in seen:
            errors.append(duplicate(at, name))
        seen.add(name)
    return errors


def _dns_config(spec: dict[str, Any], path: Path) -> Errors:
    config = spec.get("dnsConfig")
    if spec.get("dnsPolicy") == "None":
        if config is None:
            return [required(path, "must provide `dnsConfig` when `dnsPolicy` is None")]
        if not items(mapping(config).get("nameservers")):
            detail = "must provide at least one DNS nameserver when `dnsPolicy` is None"
            return [required(path.child("nameservers"), detail)]
    errors: Errors = []
    nameservers = items(mapping(config).get("nameservers"))
    if len(nameservers) > 3:
        errors.append(
            invalid(path.child("nameservers"), nameservers, "must not have more than 3 nameservers")
        )
    for i, server in enumerate(nameservers):
        errors += messages(
            path.child("nameservers").item(i), server, formats.is_valid_ip(text(server))
        )
    for i, search in enumerate(items(mapping(config).get("searches"))):
        domain = text(search).removesuffix(".")
        errors += messages(
            path.child("searches").item(i), domain, formats.is_dns1123_subdomain(domain)
        )
    return errors


def validate_pod_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    """Only images, the active deadline (downwards) and extra tolerations may change on a
    Pod: everything else would need the kubelet to rebuild a running sandbox."""
    new_spec, old_spec = mapping(new.get("spec")), mapping(old.get("spec"))
    errors: Errors = []
    for field in ("containers", "initContainers"):
        if len(items(new_spec.get(field))) != len(items(old_spec.get(field))):
            return [forbidden(SPEC.child(field), "pod updates may not add or remove containers")]
    errors += _deadline_update(new_spec, old_spec)
    errors += _tolerations_update(new_spec, old_spec)
    munged = copy.deepcopy(new_spec)
    for field in ("containers", "initContainers"):
        for container, before in zip(
            dicts(munged.get(field)), dicts(old_spec.get(field)), strict=True
        ):
            if "image" in before:
                container["image"] = before["image"]
            else:
                container.pop("image", None)
    for field in ("activeDeadlineSeconds", "tolerations", "schedulingGates"):
        if field in old_spec:
            munged[field] = old_spec[field]
        else:
            munged.pop(field, None)
    if munged != old_spec:
        diff = "\n".join(_diff(old_spec, munged, SPEC))
        detail = f"pod updates may not change fields other than {_UPDATABLE}\n{diff}"
        errors.append(forbidden(SPEC, detail))
    return errors


def _deadline_update(new_spec: dict[str, Any], old_spec: dict[str, Any]) -> Errors:
    path = SPEC.child("activeDeadlineSeconds")
    new, old = new_spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
    if new is None:
        if old is not None:
            return [invalid(path, None, "must not update from a positive integer to nil value")]
        return []
    if not is_int(new) or not 0 <= new <= MAX_INT32:
        return [invalid(path, new, formats.inclusive_range_error(0, MAX_INT32))]
    if is_int(old) and old < new:
        return [invalid(path, new, "must be less than or equal to previous value")]
    return []


def _tolerations_update(new_spec: dict[str, Any], old_spec: dict[str, Any]) -> Errors:
    """Existing tolerations must all still be there; only their tolerationSeconds may move."""
    new = [_without_seconds(t) for t in dicts(new_spec.get("tolerations"))]
    for toleration in dicts(old_spec.get("tolerations")):
        if _without_seconds(toleration) not in new:
            detail = "existing toleration can not be modified except its tolerationSeconds"
            return [forbidden(SPEC.child("tolerations"), detail)]
    return []


def _without_seconds(toleration: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in toleration.items() if k != "tolerationSeconds"}


def _diff(old: Any, new: Any, path: Path) -> list[str]:
    """The changed leaves, one "path: old -> new" line each: a readable stand-in for the
    Go struct diff Kubernetes appends to this message."""
    if isinstance(old, dict) and isinstance(new, dict):
        lines = []
        for key in sorted(set(old) | set(new)):
            lines += _diff(old.get(key), new.get(key), path.child(key))
        return lines
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            line
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for line in _diff(a, b, path.item(i))
        ]
    if old == new:
        return []
    return [f"{path}: {json.dumps(old, sort_keys=True)} -> {json.dumps(new, sort_keys=True)}"]
