"""Server-side printing: the `meta.k8s.io/v1` `Table` an apiserver answers `kubectl get`
with (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`).

kubectl does not know how to print a Deployment; it asks the server for a Table and lays
out whatever columns come back. So the columns and the text of every cell are decided
here, and they are those of Kubernetes' own printers (pkg/printers/internalversion), so
`kubectl get pods` looks the way users expect: READY "1/2", STATUS "CrashLoopBackOff" or
"Init:0/1" or "Terminating", RESTARTS "3 (5m ago)", AGE "2d4h".

Things worth knowing:

* The server always prints the wide columns (`priority` 1); kubectl hides them unless
  `-o wide`. Every row therefore has one cell per column definition.
* Column names are Kubernetes' ("Name", "Nominated Node"); kubectl upper-cases them.
  AGE and the other durations are "string" columns holding text, not timestamps.
* Resources without a printer of their own in Kubernetes (Roles, ClusterRoles,
  LimitRanges, and anything else not listed here) get the apiserver's default table:
  "Name" and "Created At" (a "date" column holding the RFC 3339 time), which is why
  `kubectl get clusterroles` shows CREATED AT rather than AGE.
* Events print "Last Seen" first and their name last, as wide-only; every other table
  starts with "Name" (format "name", which kubectl uses for `-o name`).
* Objects are read as stored, in their v1 JSON form. Where Kubernetes would have filled
  in a default this lab may not have (`replicas` 1, a Service's type ClusterIP and port
  protocol TCP, a CronJob's `suspend` false), the printer assumes that default.
* `includeObject` decides what each row carries: "Metadata" (the default) a
  `PartialObjectMetadata`, "Object" the whole object, "None" nothing.

Cells are str, int or bool, so the table is plain JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kubelab.api.errors import StatusError, bad_request, invalid
from kubelab.api.quantity import canonical
from kubelab.api.resources import Resource
from kubelab.api.selectors import (
    field_value,
    lookup_path,
    selector_from_label_selector,
    selector_from_set,
)
from kubelab.api.structural import json_path

from .negotiation import partial_object

TABLE_API_VERSION = "meta.k8s.io/v1"
INCLUDE_OBJECT_VALUES = ("None", "Metadata", "Object")

Cell = str | int | bool
Obj = Mapping[str, Any]

# ---------------------------------------------------------------------------------------
# Reading objects


def _str(obj: Any, *keys: str) -> str:
    value = lookup_path(obj, *keys)
    return value if isinstance(value, str) else ""


def _int(obj: Any, *keys: str, default: int = 0) -> int:
    value = lookup_path(obj, *keys)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _list(obj: Any, *keys: str) -> list[Any]:
    value = lookup_path(obj, *keys)
    return value if isinstance(value, list) else []


def _map(obj: Any, *keys: str) -> Mapping[str, Any]:
    value = lookup_path(obj, *keys)
    return value if isinstance(value, Mapping) else {}


def _present(obj: Any, *keys: str) -> bool:
    """Whether a field is set at all: a pod's `state.terminated: {}` is a termination
    even with nothing in it, as Go sees a non-nil pointer."""
    return isinstance(lookup_path(obj, *keys), Mapping)


def _time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (or micro-timestamp) as an aware datetime, None if unset."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _condition_status(conditions: list[Any], kind: str) -> str | None:
    """The status ("True", "False", "Unknown") of the first condition of type `kind`."""
    for condition in conditions:
        if _str(condition, "type") == kind:
            return _str(condition, "status")
    return None


def _quantity(value: Any, default: str = "") -> str:
    """A quantity the way Kubernetes prints it ("1024Mi" as "1Gi"), as stored if it does
    not parse."""
    if value is None:
        return default
    try:
        return canonical(value)
    except ValueError:
        return str(value)


# ---------------------------------------------------------------------------------------
# Durations


def human_duration(delta: timedelta) -> str:
    """A duration in kubectl's two-significant-unit style: "45s", "3m20s", "15m",
    "5h30m", "2d4h", "400d", "3y20d".

    Clocks disagree a little between machines, so less than two seconds in the future
    reads "0s"; further than that is "<invalid>"."""
    seconds = int(delta.total_seconds())  # truncates toward zero, as Go's conversion does
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if days < 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def _since(timestamp: Any, now: datetime) -> str:
    """How long ago `timestamp` was, "<unknown>" if it is unset."""
    moment = _time(timestamp)
    return "<unknown>" if moment is None else human_duration(now - moment)


def _name(obj: Obj) -> str:
    return _str(obj, "metadata", "name")


def _age(obj: Obj, now: datetime) -> str:
    return _since(lookup_path(obj, "metadata", "creationTimestamp"), now)


# ---------------------------------------------------------------------------------------
# Columns


@dataclass(frozen=True)
class _Column:
    """A column definition; priority 1 marks a column shown only with `-o wide`."""

    name: str
    type: str
    description: str
    priority: int = 0
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def _column(name: str, description: str, kind: str = "string") -> _Column:
    return _Column(name, kind, description)


def _wide(name: str, description: str, kind: str = "string") -> _Column:
    return _Column(name, kind, description, priority=1)


_NAME = _Column("Name", "string", "The object's name, unique in its namespace.", format="name")
_AGE = _column("Age", "How long ago the object was created.")
_CONTAINERS = _wide("Containers", "The containers of the pod template, by name.")
_IMAGES = _wide("Images", "The image each container of the pod template runs.")
_SELECTOR = _wide("Selector", "The label selector picking the pods this object manages.")


def _containers(pod_spec: Any) -> list[Cell]:
    """The Containers and Images cells of a pod template, comma-separated."""
    containers = _list(pod_spec, "containers")
    return [
        ",".join(_str(container, "name") for container in containers),
        ",".join(_str(container, "image") for container in containers),
    ]


def _format_label_selector(
    label_selector: Any, *, blank: str = "<none>", broken: str = "<error>"
) -> str:
    """A `metav1.LabelSelector` as kubectl prints it: `blank` when it selects everything
    or nothing, `broken` when it does not parse."""
    try:
        text = str(selector_from_label_selector(label_selector))
    except StatusError:
        return broken
    return text or blank


def _format_labels(labels: Any) -> str:
    """A label map as "a=b,c=d" (sorted), "<none>" when empty."""
    return str(selector_from_set(labels if isinstance(labels, Mapping) else None)) or "<none>"


def _replicas(obj: Obj) -> int:
    """`spec.replicas`, which the API defaults to 1."""
    return _int(obj, "spec", "replicas", default=1)


def _list_with_more(items: list[str], empty: str) -> str:
    """The first three items, then " + N more..." for the rest, as kubectl abbreviates
    long address lists."""
    text = ",".join(items[:3])
    if len(items) > 3:
        return f"{text} + {len(items) - 3} more..."
    return text or empty


# ---------------------------------------------------------------------------------------
# Pods

_POD_COLUMNS = (
    _NAME,
    _column("Ready", "Ready containers out of all the containers of the pod."),
    _column("Status", "What the pod is doing, summed up from its containers."),
    _column("Restarts", "Container restarts, and how long ago the last one happened."),
    _AGE,
    _wide("IP", "The pod's primary IP address."),
    _wide("Node", "The node the pod is bound to."),
    _wide("Nominated Node", "The node a preemption made room on for the pod."),
    _wide("Readiness Gates", "Readiness gates that are met, out of all of them."),
)
_TERMINAL_PHASES = ("Succeeded", "Failed")


def _is_sidecar(container: Any) -> bool:
    """An init container with restartPolicy Always runs beside the app containers."""
    return _str(container, "restartPolicy") == "Always"


def _termination_text(terminated: Any, prefix: str) -> str:
    """The reason a container stopped, else its signal or exit code ("Signal:9")."""
    if reason := _str(terminated, "reason"):
        return prefix + reason
    if signal := _int(terminated, "signal"):
        return f"{prefix}Signal:{signal}"
    return f"{prefix}ExitCode:{_int(terminated, 'exitCode')}"


@dataclass
class _Restarts:
    """Restarts summed over some containers, with the most recent termination."""

    count: int = 0
    last: datetime | None = None

    def add(self, status: Any) -> None:
        self.count += _int(status, "restartCount")
        finished = _time(lookup_path(status, "lastState", "terminated", "finishedAt"))
        if finished is not None and (self.last is None or finished > self.last):
            self.last = finished


def _pod_status(pod: Obj) -> tuple[str, int, _Restarts]:
    """The STATUS text, the number of ready containers and the restarts to show.

    While an init container is still to finish, STATUS tells which ("Init:1/3",
    "Init:CrashLoopBackOff") and RESTARTS counts the init containers; afterwards the
    app containers speak, the last one listed having the final word."""
    spec, status = _map(pod, "spec"), _map(pod, "status")
    conditions = _list(status, "conditions")
    phase = _str(status, "phase")
    reason = _str(status, "reason") or phase
    if any(
        _str(condition, "type") == "PodScheduled" and _str(condition, "reason") == "SchedulingGated"
        for condition in conditions
    ):
        reason = "SchedulingGated"

    init_specs = _list(spec, "initContainers")
    sidecars = {_str(container, "name") for container in init_specs if _is_sidecar(container)}
    ready = 0
    restarts, sidecar_restarts = _Restarts(), _Restarts()
    initializing = False
    for index, container in enumerate(_list(status, "initContainerStatuses")):
        is_sidecar = _str(container, "name") in sidecars
        restarts.add(container)
        if is_sidecar:
            sidecar_restarts.add(container)
        terminated = lookup_path(container, "state", "terminated")
        waiting_reason = _str(container, "state", "waiting", "reason")
        if _present(container, "state", "terminated") and _int(terminated, "exitCode") == 0:
            continue
        if is_sidecar and lookup_path(container, "started") is True:
            ready += lookup_path(container, "ready") is True
            continue
        if _present(container, "state", "terminated"):
            reason = _termination_text(terminated, "Init:")
        elif waiting_reason and waiting_reason != "PodInitializing":
            reason = "Init:" + waiting_reason
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _condition_status(conditions, "Initialized") == "True":
        restarts = sidecar_restarts
        running = False
        for container in reversed(_list(status, "containerStatuses")):
            restarts.add(container)
            terminated = lookup_path(container, "state", "terminated")
            if waiting_reason := _str(container, "state", "waiting", "reason"):
                reason = waiting_reason
            elif _present(container, "state", "terminated"):
                reason = _termination_text(terminated, "")
            elif lookup_path(container, "ready") is True and _present(
                container, "state", "running"
            ):
                running = True
                ready += 1
        # A pod whose last container completed while others still run is not Completed.
        if reason == "Completed" and running:
            ready_condition = _condition_status(conditions, "Ready") == "True"
            reason = "Running" if ready_condition else "NotReady"

    if lookup_path(pod, "metadata", "deletionTimestamp") is not None:
        if _str(status, "reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in _TERMINAL_PHASES:
            reason = "Terminating"
    return reason, ready, restarts


def _readiness_gates(pod: Obj) -> str:
    gates = _list(pod, "spec", "readinessGates")
    if not gates:
        return "<none>"
    conditions = _list(pod, "status", "conditions")
    met = sum(
        _condition_status(conditions, _str(gate, "conditionType")) == "True" for gate in gates
    )
    return f"{met}/{len(gates)}"


def _pod_cells(resource: Resource, pod: Obj, now: datetime) -> list[Cell]:
    reason, ready, restarts = _pod_status(pod)
    spec = _map(pod, "spec")
    total = len(_list(spec, "containers")) + sum(
        _is_sidecar(container) for container in _list(spec, "initContainers")
    )
    restart_text = str(restarts.count)
    if restarts.count and restarts.last is not None:
        restart_text += f" ({human_duration(now - restarts.last)} ago)"
    return [
        _name(pod),
        f"{ready}/{total}",
        reason,
        restart_text,
        _age(pod, now),
        field_value(resource, pod, "status.podIP") or "<none>",
        _str(spec, "nodeName") or "<none>",
        _str(pod, "status", "nominatedNodeName") or "<none>",
        _readiness_gates(pod),
    ]


def _pod_conditions(pod: Obj) -> list[dict[str, str]]:
    """Finished pods are flagged Completed so that clients can print them dimmed."""
    phase = _str(pod, "status", "phase")
    if phase not in _TERMINAL_PHASES:
        return []
    outcome = "ran to completion" if phase == "Succeeded" else "failed"
    return [
        {"type": "Completed", "status": "True", "reason": phase, "message": f"The pod {outcome}."}
    ]


# ---------------------------------------------------------------------------------------
# Nodes

_NODE_COLUMNS = (
    _NAME,
    _column("Status", "Ready or NotReady, and SchedulingDisabled when cordoned."),
    _column("Roles", "The roles named by the node's node-role.kubernetes.io/ labels."),
    _AGE,
    _column("Version", "The kubelet version the node reports."),
    _wide("Internal-IP", "The node's first internal address."),
    _wide("External-IP", "The node's first external address."),
    _wide("OS-Image", "The operating system the node reports."),
    _wide("Kernel-Version", "The kernel version the node reports."),
    _wide("Container-Runtime", "The container runtime and version the node reports."),
)
_ROLE_PREFIX = "node-role.kubernetes.io/"


def _node_roles(node: Obj) -> str:
    roles: set[str] = set()
    for key, value in _map(node, "metadata", "labels").items():
        if key.startswith(_ROLE_PREFIX) and key != _ROLE_PREFIX:
            roles.add(key.removeprefix(_ROLE_PREFIX))
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def _node_address(node: Obj, kind: str) -> str:
    for address in _list(node, "status", "addresses"):
        if _str(address, "type") == kind:
            return _str(address, "address")
    return "<none>"


def _node_cells(resource: Resource, node: Obj, now: datetime) -> list[Cell]:
    ready = _condition_status(_list(node, "status", "conditions"), "Ready")
    states = ["Unknown" if ready is None else "Ready" if ready == "True" else "NotReady"]
    if lookup_path(node, "spec", "unschedulable") is True:
        states.append("SchedulingDisabled")
    info = _map(node, "status", "nodeInfo")
    return [
        _name(node),
        ",".join(states),
        _node_roles(node),
        _age(node, now),
        _str(info, "kubeletVersion"),
        _node_address(node, "InternalIP"),
        _node_address(node, "ExternalIP"),
        _str(info, "osImage") or "<unknown>",
        _str(info, "kernelVersion") or "<unknown>",
        _str(info, "containerRuntimeVersion") or "<unknown>",
    ]


# ---------------------------------------------------------------------------------------
# Services and endpoints

_SERVICE_COLUMNS = (
    _NAME,
    _column("Type", "ClusterIP, NodePort, LoadBalancer or ExternalName."),
    _column("Cluster-IP", "The virtual IP the service is reached at inside the cluster."),
    _column("External-IP", "Addresses the service is reached at from outside."),
    _column("Port(s)", "Service ports, with the node port after a colon."),
    _AGE,
    _wide("Selector", "The labels of the pods the service sends traffic to."),
)


def _external_ip(kind: str, spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    external = [str(ip) for ip in _list(spec, "externalIPs")]
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        balancer = sorted(
            {
                _str(ingress, "ip") or _str(ingress, "hostname")
                for ingress in _list(status, "loadBalancer", "ingress")
            }
            - {""}
        )
        return ",".join(balancer + external) or "<pending>"
    if kind == "ExternalName":
        return _str(spec, "externalName")
    return "<unknown>"


def _ports(spec: Mapping[str, Any]) -> str:
    pieces = []
    for port in _list(spec, "ports"):
        protocol = _str(port, "protocol") or "TCP"
        node_port = _int(port, "nodePort")
        through = f":{node_port}" if node_port > 0 else ""
        pieces.append(f"{_int(port, 'port')}{through}/{protocol}")
    return ",".join(pieces) or "<none>"


def _service_cells(resource: Resource, service: Obj, now: datetime) -> list[Cell]:
    spec, status = _map(service, "spec"), _map(service, "status")
    kind = _str(spec, "type") or "ClusterIP"
    cluster_ips = _list(spec, "clusterIPs")
    cluster_ip = str(cluster_ips[0]) if cluster_ips else _str(spec, "clusterIP")
    return [
        _name(service),
        kind,
        cluster_ip or "<none>",
        _external_ip(kind, spec, status),
        _ports(spec),
        _age(service, now),
        _format_labels(spec.get("selector")),
    ]


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _endpoints_text(endpoints: Obj) -> str:
    """Up to three "ip:port" pairs, every address paired with every port of its subset."""
    subsets = _list(endpoints, "subsets")
    if not subsets:
        return "<none>"
    pairs: list[str] = []
    for subset in subsets:
        addresses = [_str(address, "ip") for address in _list(subset, "addresses")]
        ports = _list(subset, "ports")
        if not ports:  # a headless service may have no ports
            pairs.extend(addresses)
        for port in ports:
            pairs.extend(_host_port(address, _int(port, "port")) for address in addresses)
    return _list_with_more(pairs, "")


def _endpoints_cells(resource: Resource, endpoints: Obj, now: datetime) -> list[Cell]:
    return [_name(endpoints), _endpoints_text(endpoints), _age(endpoints, now)]


def _budget_cells(resource: Resource, budget: Obj, now: datetime) -> list[Cell]:
    def text(field: str) -> str:
        value = lookup_path(budget, "spec", field)
        return "N/A" if value is None else str(value)

    allowed = lookup_path(budget, "status", "disruptionsAllowed")
    return [
        _name(budget),
        text("minAvailable"),
        text("maxUnavailable"),
        int(allowed or 0),
        _age(budget, now),
    ]


def _slice_cells(resource: Resource, endpoint_slice: Obj, now: datetime) -> list[Cell]:
    ports = []
    for port in _list(endpoint_slice, "ports"):
        number, name = lookup_path(port, "port"), lookup_path(port, "name")
        ports.append(str(number) if number is not None else "*" if name is None else str(name))
    addresses = [
        str(address)
        for endpoint in _list(endpoint_slice, "endpoints")
        for address in _list(endpoint, "addresses")
    ]
    return [
        _name(endpoint_slice),
        _str(endpoint_slice, "addressType"),
        _list_with_more(ports, "<unset>"),
        _list_with_more(addresses, "<unset>"),
        _age(endpoint_slice, now),
    ]


# ---------------------------------------------------------------------------------------
# Workloads


def _deployment_cells(resource: Resource, deployment: Obj, now: datetime) -> list[Cell]:
    status = _map(deployment, "status")
    # Unlike the other workloads, a Deployment prints an unset selector as "".
    selector = _format_label_selector(
        lookup_path(deployment, "spec", "selector"), blank="", broken="<invalid>"
    )
    return [
        _name(deployment),
        f"{_int(status, 'readyReplicas')}/{_replicas(deployment)}",
        _int(status, "updatedReplicas"),
        _int(status, "availableReplicas"),
        _age(deployment, now),
        *_containers(lookup_path(deployment, "spec", "template", "spec")),
        selector,
    ]


def _replica_set_cells(resource: Resource, replica_set: Obj, now: datetime) -> list[Cell]:
    """ReplicaSets and ReplicationControllers; the latter's selector is a plain map."""
    selector = lookup_path(replica_set, "spec", "selector")
    if resource.group_resource == "replicationcontrollers":
        selector_text = _format_labels(selector)
    else:
        selector_text = _format_label_selector(selector)
    return [
        _name(replica_set),
        _replicas(replica_set),
        _int(replica_set, "status", "replicas"),
        _int(replica_set, "status", "readyReplicas"),
        _age(replica_set, now),
        *_containers(lookup_path(replica_set, "spec", "template", "spec")),
        selector_text,
    ]


def _daemon_set_cells(resource: Resource, daemon_set: Obj, now: datetime) -> list[Cell]:
    status = _map(daemon_set, "status")
    pod_spec = lookup_path(daemon_set, "spec", "template", "spec")
    return [
        _name(daemon_set),
        _int(status, "desiredNumberScheduled"),
        _int(status, "currentNumberScheduled"),
        _int(status, "numberReady"),
        _int(status, "updatedNumberScheduled"),
        _int(status, "numberAvailable"),
        _format_labels(lookup_path(pod_spec, "nodeSelector")),
        _age(daemon_set, now),
        *_containers(pod_spec),
        _format_label_selector(lookup_path(daemon_set, "spec", "selector")),
    ]


def _stateful_set_cells(resource: Resource, stateful_set: Obj, now: datetime) -> list[Cell]:
    return [
        _name(stateful_set),
        f"{_int(stateful_set, 'status', 'readyReplicas')}/{_replicas(stateful_set)}",
        _age(stateful_set, now),
        *_containers(lookup_path(stateful_set, "spec", "template", "spec")),
    ]


def _job_condition(job: Obj, kind: str) -> bool:
    return _condition_status(_list(job, "status", "conditions"), kind) == "True"


def _job_status(job: Obj) -> str:
    if _job_condition(job, "Complete"):
        return "Complete"
    if _job_condition(job, "Failed"):
        return "Failed"
    if lookup_path(job, "metadata", "deletionTimestamp") is not None:
        return "Terminating"
    if _job_condition(job, "Suspended"):
        return "Suspended"
    if _job_condition(job, "FailureTarget"):
        return "FailureTarget"
    return "Running"


def _job_cells(resource: Resource, job: Obj, now: datetime) -> list[Cell]:
    spec, status = _map(job, "spec"), _map(job, "status")
    succeeded = _int(status, "succeeded")
    completions = lookup_path(spec, "completions")
    parallelism = _int(spec, "parallelism")
    if isinstance(completions, int):
        done = f"{succeeded}/{completions}"
    elif parallelism > 1:  # a work queue: any one success completes it
        done = f"{succeeded}/1 of {parallelism}"
    else:
        done = f"{succeeded}/1"
    started = _time(status.get("startTime"))
    finished = _time(status.get("completionTime"))
    took = "" if started is None else human_duration((finished or now) - started)
    return [
        _name(job),
        _job_status(job),
        done,
        took,
        _age(job, now),
        *_containers(lookup_path(spec, "template", "spec")),
        _format_label_selector(spec.get("selector")),
    ]


def _cron_job_cells(resource: Resource, cron_job: Obj, now: datetime) -> list[Cell]:
    spec, status = _map(cron_job, "spec"), _map(cron_job, "status")
    job_spec = _map(spec, "jobTemplate", "spec")
    last = status.get("lastScheduleTime")
    return [
        _name(cron_job),
        _str(spec, "schedule"),
        _str(spec, "timeZone") or "<none>",
        "True" if spec.get("suspend") is True else "False",
        len(_list(status, "active")),
        "<none>" if last is None else _since(last, now),
        _age(cron_job, now),
        *_containers(lookup_path(job_spec, "template", "spec")),
        _format_label_selector(job_spec.get("selector")),
    ]


def _controller_revision_cells(resource: Resource, revision: Obj, now: datetime) -> list[Cell]:
    controller = "<none>"
    for owner in _list(revision, "metadata", "ownerReferences"):
        if lookup_path(owner, "controller") is True:
            api_version = _str(owner, "apiVersion")
            group = api_version.split("/")[0] if "/" in api_version else ""
            kind = _str(owner, "kind") + (f".{group}" if group else "")
            controller = f"{kind.lower()}/{_str(owner, 'name')}"
            break
    return [
        _name(revision),
        controller,
        _int(revision, "revision"),
        _age(revision, now),
    ]


# ---------------------------------------------------------------------------------------
# Networking, autoscaling, classes and registrations


def _none_if_empty(value: str) -> str:
    return value or "<none>"


def _ingress_cells(resource: Resource, ingress: Obj, now: datetime) -> list[Cell]:
    """HOSTS "*" for rules without a host; PORTS "80, 443" once TLS is configured."""
    hosts = [_str(rule, "host") or "*" for rule in _list(ingress, "spec", "rules")]
    addresses = [
        _str(entry, "ip") or _str(entry, "hostname")
        for entry in _list(ingress, "status", "loadBalancer", "ingress")
    ]
    return [
        _name(ingress),
        _none_if_empty(_str(ingress, "spec", "ingressClassName")),
        ",".join(hosts) or "*",
        ",".join(a for a in addresses if a),
        "80, 443" if _list(ingress, "spec", "tls") else "80",
        _age(ingress, now),
    ]


def _ingress_class_cells(resource: Resource, ingress_class: Obj, now: datetime) -> list[Cell]:
    params = _map(ingress_class, "spec", "parameters")
    parameters = "<none>"
    if params:
        group = _str(params, "apiGroup")
        parameters = f"{_str(params, 'kind')}{'.' + group if group else ''}/{_str(params, 'name')}"
    return [
        _name(ingress_class),
        _str(ingress_class, "spec", "controller"),
        parameters,
        _age(ingress_class, now),
    ]


def _network_policy_cells(resource: Resource, policy: Obj, now: datetime) -> list[Cell]:
    selector = _map(policy, "spec", "podSelector")
    return [_name(policy), _format_label_selector(selector), _age(policy, now)]


def _priority_class_cells(resource: Resource, priority_class: Obj, now: datetime) -> list[Cell]:
    return [
        _name(priority_class),
        _int(priority_class, "value"),
        lookup_path(priority_class, "globalDefault") is True,
        _age(priority_class, now),
        _str(priority_class, "preemptionPolicy"),
    ]


def _metric_target(spec: Obj, status: Obj) -> str:
    """One "<name>: <current>/<target>" entry of an HPA's TARGETS, in its v2 form."""
    kind = _str(spec, "type")
    key = {"Resource": "resource", "ContainerResource": "containerResource"}.get(kind, "")
    if not key:
        key = {"Pods": "pods", "Object": "object", "External": "external"}.get(kind, "")
        source = _map(spec, key)
        name = _str(source, "metric", "name")
    else:
        source = _map(spec, key)
        name = _str(source, "name")
    target = _map(source, "target")
    current = _map(status, key, "current")
    if "averageUtilization" in target:
        now_text = (
            f"{_int(current, 'averageUtilization')}%"
            if "averageUtilization" in current
            else "<unknown>"
        )
        return f"{name}: {now_text}/{_int(target, 'averageUtilization')}%"
    field = "averageValue" if "averageValue" in target else "value"
    now_value = current.get(field)
    now_text = _quantity(now_value) if now_value is not None else "<unknown>"
    suffix = " (avg)" if field == "averageValue" and kind in ("Object", "External") else ""
    return f"{name}: {now_text}/{_quantity(target.get(field))}{suffix}"


def _hpa_cells(resource: Resource, hpa: Obj, now: datetime) -> list[Cell]:
    """Served as autoscaling/v2 (metrics) or v1 (one CPU utilization target)."""
    spec = _map(hpa, "spec")
    ref = _map(spec, "scaleTargetRef")
    if "targetCPUUtilizationPercentage" in spec or resource.version == "v1":
        current = _map(hpa, "status").get("currentCPUUtilizationPercentage")
        shown = f"{current}%" if current is not None else "<unknown>"
        target = spec.get("targetCPUUtilizationPercentage")
        targets = [f"cpu: {shown}/{target}%"] if target is not None else []
    else:
        current_metrics = _list(hpa, "status", "currentMetrics")
        targets = [
            _metric_target(metric, current_metrics[i] if i < len(current_metrics) else {})
            for i, metric in enumerate(_list(spec, "metrics"))
        ]
    shown_targets = ", ".join(targets[:2])
    if len(targets) > 2:
        shown_targets += f" + {len(targets) - 2} more..."
    return [
        _name(hpa),
        f"{_str(ref, 'kind')}/{_str(ref, 'name')}",
        shown_targets or "<none>",
        _int(spec, "minReplicas", default=1),
        _int(spec, "maxReplicas"),
        _int(hpa, "status", "currentReplicas"),
        _age(hpa, now),
    ]


_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


def _storage_class_cells(resource: Resource, storage_class: Obj, now: datetime) -> list[Cell]:
    name = _name(storage_class)
    if _map(storage_class, "metadata", "annotations").get(_DEFAULT_CLASS) == "true":
        name += " (default)"
    return [
        name,
        _str(storage_class, "provisioner"),
        _str(storage_class, "reclaimPolicy") or "Delete",
        _str(storage_class, "volumeBindingMode") or "Immediate",
        lookup_path(storage_class, "allowVolumeExpansion") is True,
        _age(storage_class, now),
    ]


def _csi_driver_cells(resource: Resource, driver: Obj, now: datetime) -> list[Cell]:
    spec = _map(driver, "spec")
    audiences = [_str(token, "audience") for token in _list(spec, "tokenRequests")]
    return [
        _name(driver),
        spec.get("attachRequired") is not False,
        spec.get("podInfoOnMount") is True,
        spec.get("storageCapacity") is True,
        ",".join(audiences) or "<unset>",
        spec.get("requiresRepublish") is True,
        ",".join(str(mode) for mode in _list(spec, "volumeLifecycleModes")),
        _age(driver, now),
    ]


def _volume_attachment_cells(resource: Resource, attachment: Obj, now: datetime) -> list[Cell]:
    return [
        _name(attachment),
        _str(attachment, "spec", "attacher"),
        _str(attachment, "spec", "source", "persistentVolumeName"),
        _str(attachment, "spec", "nodeName"),
        lookup_path(attachment, "status", "attached") is True,
        _age(attachment, now),
    ]


def _component_status_cells(resource: Resource, status: Obj, now: datetime) -> list[Cell]:
    conditions = _list(status, "conditions")
    healthy: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "Healthy"), {})
    state = "Healthy" if healthy.get("status") == "True" else "Unhealthy"
    return [_name(status), state, str(healthy.get("message", "")), str(healthy.get("error", ""))]


def _runtime_class_cells(resource: Resource, runtime_class: Obj, now: datetime) -> list[Cell]:
    return [_name(runtime_class), _str(runtime_class, "handler"), _age(runtime_class, now)]


def _webhook_configuration_cells(
    resource: Resource, configuration: Obj, now: datetime
) -> list[Cell]:
    return [
        _name(configuration),
        len(_list(configuration, "webhooks")),
        _age(configuration, now),
    ]


def _api_service_cells(resource: Resource, service: Obj, now: datetime) -> list[Cell]:
    ref = _map(service, "spec", "service")
    where = f"{_str(ref, 'namespace')}/{_str(ref, 'name')}" if ref else "Local"
    available = "Unknown"
    for condition in _list(service, "status", "conditions"):
        if _str(condition, "type") == "Available":
            available = _str(condition, "status")
            if available != "True":
                available = f"{available} ({_str(condition, 'reason')})"
    return [_name(service), where, available, _age(service, now)]


# ---------------------------------------------------------------------------------------
# Configuration, identity and access


def _config_map_cells(resource: Resource, config_map: Obj, now: datetime) -> list[Cell]:
    entries = len(_map(config_map, "data")) + len(_map(config_map, "binaryData"))
    return [_name(config_map), entries, _age(config_map, now)]


def _secret_cells(resource: Resource, secret: Obj, now: datetime) -> list[Cell]:
    return [
        _name(secret),
        _str(secret, "type"),
        len(_map(secret, "data")),
        _age(secret, now),
    ]


def _service_account_cells(resource: Resource, account: Obj, now: datetime) -> list[Cell]:
    return [_name(account), len(_list(account, "secrets")), _age(account, now)]


def _namespace_cells(resource: Resource, namespace: Obj, now: datetime) -> list[Cell]:
    return [
        _name(namespace),
        _str(namespace, "status", "phase"),
        _age(namespace, now),
    ]


def _lease_cells(resource: Resource, lease: Obj, now: datetime) -> list[Cell]:
    return [
        _name(lease),
        _str(lease, "spec", "holderIdentity"),
        _age(lease, now),
    ]


def _binding_cells(resource: Resource, binding: Obj, now: datetime) -> list[Cell]:
    """RoleBindings and ClusterRoleBindings: the role, then the subjects by kind."""
    users: list[str] = []
    groups: list[str] = []
    accounts: list[str] = []
    for subject in _list(binding, "subjects"):
        kind, name = _str(subject, "kind"), _str(subject, "name")
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            accounts.append(f"{_str(subject, 'namespace')}/{name}")
    role = _map(binding, "roleRef")
    return [
        _name(binding),
        f"{_str(role, 'kind')}/{_str(role, 'name')}",
        _age(binding, now),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(accounts),
    ]


def _csr_condition(csr: Obj) -> str:
    kinds = {_str(condition, "type") for condition in _list(csr, "status", "conditions")}
    text = "Denied" if "Denied" in kinds else "Approved" if "Approved" in kinds else "Pending"
    if "Failed" in kinds:
        text += ",Failed"
    if _str(csr, "status", "certificate"):
        text += ",Issued"
    return text


def _csr_cells(resource: Resource, csr: Obj, now: datetime) -> list[Cell]:
    spec = _map(csr, "spec")
    seconds = lookup_path(spec, "expirationSeconds")
    duration = "<none>"
    if isinstance(seconds, int):
        duration = human_duration(timedelta(seconds=seconds))
    return [
        _name(csr),
        _age(csr, now),
        _str(spec, "signerName") or "<none>",
        _str(spec, "username"),
        duration,
        _csr_condition(csr),
    ]


# ---------------------------------------------------------------------------------------
# Storage and quotas

_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)
_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


def _access_modes(modes: list[Any]) -> str:
    return ",".join(short for mode, short in _ACCESS_MODES if mode in modes)


def _storage_class(volume: Obj) -> str:
    """The class a volume or claim belongs to; the beta annotation still wins."""
    annotation = lookup_path(volume, "metadata", "annotations", _STORAGE_CLASS_ANNOTATION)
    if isinstance(annotation, str):
        return annotation
    return _str(volume, "spec", "storageClassName")


def _volume_phase(volume: Obj) -> str:
    if lookup_path(volume, "metadata", "deletionTimestamp") is not None:
        return "Terminating"
    return _str(volume, "status", "phase")


def _volume_cells(resource: Resource, volume: Obj, now: datetime) -> list[Cell]:
    spec = _map(volume, "spec")
    claim = _map(spec, "claimRef")
    claimed = _present(spec, "claimRef")
    return [
        _name(volume),
        _quantity(lookup_path(spec, "capacity", "storage"), "0"),
        _access_modes(_list(spec, "accessModes")),
        _str(spec, "persistentVolumeReclaimPolicy"),
        _volume_phase(volume),
        f"{_str(claim, 'namespace')}/{_str(claim, 'name')}" if claimed else "",
        _storage_class(volume),
        _str(spec, "volumeAttributesClassName") or "<unset>",
        _str(volume, "status", "reason"),
        _age(volume, now),
        _str(spec, "volumeMode") or "<unset>",
    ]


def _claim_cells(resource: Resource, claim: Obj, now: datetime) -> list[Cell]:
    spec, status = _map(claim, "spec"), _map(claim, "status")
    bound = bool(_str(spec, "volumeName"))  # capacity and modes mean nothing before
    return [
        _name(claim),
        _volume_phase(claim),
        _str(spec, "volumeName"),
        _quantity(lookup_path(status, "capacity", "storage"), "0") if bound else "",
        _access_modes(_list(status, "accessModes")) if bound else "",
        _storage_class(claim),
        _str(spec, "volumeAttributesClassName") or "<unset>",
        _age(claim, now),
        _str(spec, "volumeMode") or "<unset>",
    ]


def _quota_cells(resource: Resource, quota: Obj, now: datetime) -> list[Cell]:
    """Used/hard per resource, "limits.*" in the Limit column and the rest in Request."""
    hard, used = _map(quota, "status", "hard"), _map(quota, "status", "used")
    requests: list[str] = []
    limits: list[str] = []
    for name in sorted(hard):
        entry = f"{name}: {_quantity(used.get(name), '0')}/{_quantity(hard[name])}"
        (limits if name.startswith("limits.") else requests).append(entry)
    return [
        _name(quota),
        ", ".join(requests),
        ", ".join(limits),
        _age(quota, now),
    ]


# ---------------------------------------------------------------------------------------
# Events

_EVENT_COLUMNS = (
    _column("Last Seen", "How long ago the event last happened."),
    _column("Type", "Normal or Warning."),
    _column("Reason", "Why the event happened, in one word."),
    _column("Object", "The object the event is about, as kind/name."),
    _wide("Subobject", "The part of the object concerned, such as a container."),
    _wide("Source", "The component that reported the event, and on which host."),
    _column("Message", "What happened, for a human."),
    _wide("First Seen", "How long ago the event first happened."),
    _wide("Count", "How many times the event happened."),
    _Column("Name", "string", _NAME.description, priority=1, format="name"),
)


def _as_core_event(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event in the core v1 shape the printer reads (Kubernetes
    converts it the same way before printing)."""
    return {
        **event,
        "involvedObject": event.get("regarding", {}),
        "message": event.get("note", ""),
        "source": event.get("deprecatedSource", {}),
        "firstTimestamp": event.get("deprecatedFirstTimestamp"),
        "lastTimestamp": event.get("deprecatedLastTimestamp"),
        "count": event.get("deprecatedCount", 0),
        "reportingComponent": event.get("reportingController", ""),
    }


def _event_cells(resource: Resource, stored: Obj, now: datetime) -> list[Cell]:
    event = _as_core_event(stored) if resource.group == "events.k8s.io" else stored
    first = _since(event.get("firstTimestamp") or event.get("eventTime"), now)
    last = _since(event["lastTimestamp"], now) if event.get("lastTimestamp") else first
    count = _int(event, "count") or 1  # events of the new API leave count unset
    if _present(event, "series"):
        last = _since(lookup_path(event, "series", "lastObservedTime"), now)
        count = _int(event, "series", "count")
    involved = _map(event, "involvedObject")
    target = _str(involved, "kind").lower()
    if name := _str(involved, "name"):
        target += "/" + name
    component = _str(event, "source", "component") or _str(event, "reportingComponent")
    host = _str(event, "source", "host") or _str(event, "reportingInstance")
    return [
        last,
        _str(event, "type"),
        _str(event, "reason"),
        target,
        _str(involved, "fieldPath"),
        f"{component}, {host}" if host else component,
        _str(event, "message").strip(),
        first,
        count,
        _name(event),
    ]


# ---------------------------------------------------------------------------------------
# The table

CellsFunction = Callable[[Resource, Obj, datetime], list[Cell]]


@dataclass(frozen=True)
class _Printer:
    columns: tuple[_Column, ...]
    cells: CellsFunction
    conditions: Callable[[Obj], list[dict[str, str]]] | None = None


def _default_cells(resource: Resource, obj: Obj, now: datetime) -> list[Cell]:
    created = _time(lookup_path(obj, "metadata", "creationTimestamp"))
    # Go prints its zero time for an object without a creation time.
    when = (created or datetime(1, 1, 1, tzinfo=UTC)).astimezone(UTC).replace(microsecond=0)
    return [_name(obj), when.isoformat().replace("+00:00", "Z")]


_DEFAULT = _Printer(
    (_NAME, _column("Created At", "When the object was created.", "date")), _default_cells
)
_WORKLOAD_COUNTS = (
    _column("Desired", "How many pods are wanted.", "integer"),
    _column("Current", "How many pods exist.", "integer"),
    _column("Ready", "How many pods are ready.", "integer"),
)
_READY_OF_DESIRED = _column("Ready", "Ready pods out of the pods wanted.")
_BINDING_COLUMNS = (
    _NAME,
    _column("Role", "The role granted, as kind/name."),
    _AGE,
    _wide("Users", "Users the role is granted to."),
    _wide("Groups", "Groups the role is granted to."),
    _wide("ServiceAccounts", "Service accounts the role is granted to, as namespace/name."),
)
_REPLICA_SET = _Printer(
    (_NAME, *_WORKLOAD_COUNTS, _AGE, _CONTAINERS, _IMAGES, _SELECTOR), _replica_set_cells
)
_EVENT = _Printer(_EVENT_COLUMNS, _event_cells)
_WEBHOOK_CONFIGURATION = _Printer(
    (_NAME, _column("Webhooks", "How many webhooks it configures.", "integer"), _AGE),
    _webhook_configuration_cells,
)
_HPA = _Printer(
    (
        _NAME,
        _column("Reference", "The scaled object, as kind/name."),
        _column("Targets", "Current and target value of each metric."),
        _column("MinPods", "The fewest replicas the autoscaler may scale to.", "integer"),
        _column("MaxPods", "The most replicas the autoscaler may scale to.", "integer"),
        _column("Replicas", "How many replicas there are now.", "integer"),
        _AGE,
    ),
    _hpa_cells,
)

# Keyed by Resource.group_resource.
_PRINTERS: dict[str, _Printer] = {
    "pods": _Printer(_POD_COLUMNS, _pod_cells, _pod_conditions),
    "nodes": _Printer(_NODE_COLUMNS, _node_cells),
    "namespaces": _Printer(
        (_NAME, _column("Status", "Active, or Terminating while being deleted."), _AGE),
        _namespace_cells,
    ),
    "services": _Printer(_SERVICE_COLUMNS, _service_cells),
    "endpoints": _Printer(
        (_NAME, _column("Endpoints", "Up to three of the endpoints' addresses."), _AGE),
        _endpoints_cells,
    ),
    "poddisruptionbudgets.policy": _Printer(
        (
            _NAME,
            _column("Min Available", "The pods that must stay available, N/A if not set."),
            _column("Max Unavailable", "The pods that may be unavailable, N/A if not set."),
            _column("Allowed Disruptions", "How many pods may be evicted now.", "integer"),
            _AGE,
        ),
        _budget_cells,
    ),
    "endpointslices.discovery.k8s.io": _Printer(
        (
            _NAME,
            _column("AddressType", "IPv4, IPv6 or FQDN."),
            _column("Ports", "Up to three of the slice's ports."),
            _column("Endpoints", "Up to three of the slice's addresses."),
            _AGE,
        ),
        _slice_cells,
    ),
    "configmaps": _Printer(
        (_NAME, _column("Data", "How many entries the config map holds."), _AGE), _config_map_cells
    ),
    "secrets": _Printer(
        (
            _NAME,
            _column("Type", "What kind of secret this is."),
            _column("Data", "How many entries the secret holds."),
            _AGE,
        ),
        _secret_cells,
    ),
    "serviceaccounts": _Printer(
        (_NAME, _column("Secrets", "How many secrets the account lists."), _AGE),
        _service_account_cells,
    ),
    "events": _EVENT,
    "events.events.k8s.io": _EVENT,
    "replicationcontrollers": _REPLICA_SET,
    "replicasets.apps": _REPLICA_SET,
    "deployments.apps": _Printer(
        (
            _NAME,
            _READY_OF_DESIRED,
            _column("Up-to-date", "Pods running the current template."),
            _column("Available", "Pods ready for long enough to count as available."),
            _AGE,
            _CONTAINERS,
            _IMAGES,
            _SELECTOR,
        ),
        _deployment_cells,
    ),
    "daemonsets.apps": _Printer(
        (
            _NAME,
            _column("Desired", "Nodes that should run the pod.", "integer"),
            _column("Current", "Nodes that run the pod.", "integer"),
            _column("Ready", "Nodes where the pod is ready.", "integer"),
            _column("Up-to-date", "Nodes that run the current template.", "integer"),
            _column("Available", "Nodes where the pod is available.", "integer"),
            _column("Node Selector", "The labels a node needs to run the pod."),
            _AGE,
            _CONTAINERS,
            _IMAGES,
            _SELECTOR,
        ),
        _daemon_set_cells,
    ),
    "statefulsets.apps": _Printer(
        (_NAME, _READY_OF_DESIRED, _AGE, _CONTAINERS, _IMAGES), _stateful_set_cells
    ),
    "controllerrevisions.apps": _Printer(
        (
            _NAME,
            _column("Controller", "The object this revision belongs to, as kind/name."),
            _column("Revision", "The revision number."),
            _AGE,
        ),
        _controller_revision_cells,
    ),
    "jobs.batch": _Printer(
        (
            _NAME,
            _column("Status", "Running, Complete, Failed, Suspended or Terminating."),
            _column("Completions", "Pods that succeeded out of those needed."),
            _column("Duration", "How long the job ran, or has been running."),
            _AGE,
            _CONTAINERS,
            _IMAGES,
            _SELECTOR,
        ),
        _job_cells,
    ),
    "cronjobs.batch": _Printer(
        (
            _NAME,
            _column("Schedule", "When jobs start, in cron syntax."),
            _column("Timezone", "The time zone of the schedule."),
            _column("Suspend", "Whether new jobs are held back.", "boolean"),
            _column("Active", "Jobs running now.", "integer"),
            _column("Last Schedule", "How long ago the last job was started."),
            _AGE,
            _CONTAINERS,
            _IMAGES,
            _SELECTOR,
        ),
        _cron_job_cells,
    ),
    "leases.coordination.k8s.io": _Printer(
        (_NAME, _column("Holder", "Who holds the lease."), _AGE), _lease_cells
    ),
    "rolebindings.rbac.authorization.k8s.io": _Printer(_BINDING_COLUMNS, _binding_cells),
    "clusterrolebindings.rbac.authorization.k8s.io": _Printer(_BINDING_COLUMNS, _binding_cells),
    "certificatesigningrequests.certificates.k8s.io": _Printer(
        (
            _NAME,
            _AGE,
            _column("SignerName", "The signer asked to sign the certificate."),
            _column("Requestor", "The user who asked for the certificate."),
            _column("RequestedDuration", "How long the certificate was asked to be valid."),
            _column("Condition", "Pending, Approved or Denied; Issued once signed."),
        ),
        _csr_cells,
    ),
    "persistentvolumes": _Printer(
        (
            _NAME,
            _column("Capacity", "The storage the volume offers."),
            _column("Access Modes", "How the volume can be mounted (RWO, ROX, RWX, RWOP)."),
            _column("Reclaim Policy", "What happens to the volume once released."),
            _column("Status", "Available, Bound, Released or Failed."),
            _column("Claim", "The claim bound to the volume, as namespace/name."),
            _column("StorageClass", "The storage class of the volume."),
            _column("VolumeAttributesClass", "The volume attributes class of the volume."),
            _column("Reason", "Why the volume is in its phase."),
            _AGE,
            _wide("VolumeMode", "Filesystem or Block."),
        ),
        _volume_cells,
    ),
    "persistentvolumeclaims": _Printer(
        (
            _NAME,
            _column("Status", "Pending, Bound or Lost."),
            _column("Volume", "The volume bound to the claim."),
            _column("Capacity", "The storage of the bound volume."),
            _column("Access Modes", "How the bound volume can be mounted."),
            _column("StorageClass", "The storage class of the claim."),
            _column("VolumeAttributesClass", "The volume attributes class of the claim."),
            _AGE,
            _wide("VolumeMode", "Filesystem or Block."),
        ),
        _claim_cells,
    ),
    "ingresses.networking.k8s.io": _Printer(
        (
            _NAME,
            _column("Class", "The ingress class that serves it."),
            _column("Hosts", "The hosts its rules match."),
            _column("Address", "Where the load balancer answers."),
            _column("Ports", "The ports it serves."),
            _AGE,
        ),
        _ingress_cells,
    ),
    "ingressclasses.networking.k8s.io": _Printer(
        (
            _NAME,
            _column("Controller", "The controller that implements the class."),
            _column("Parameters", "The controller's configuration, as kind/name."),
            _AGE,
        ),
        _ingress_class_cells,
    ),
    "networkpolicies.networking.k8s.io": _Printer(
        (_NAME, _column("Pod-Selector", "The pods the policy applies to."), _AGE),
        _network_policy_cells,
    ),
    "componentstatuses": _Printer(
        (
            _NAME,
            _column("Status", "Whether the component answered its health check."),
            _column("Message", "What its health check said."),
            _column("Error", "Why it could not be checked."),
        ),
        _component_status_cells,
    ),
    "priorityclasses.scheduling.k8s.io": _Printer(
        (
            _NAME,
            _column("Value", "The priority of the pods of this class.", "integer"),
            _column("Global-Default", "Whether pods without a class get this one.", "boolean"),
            _AGE,
            _column("PreemptionPolicy", "Whether its pods may preempt lower ones."),
        ),
        _priority_class_cells,
    ),
    "horizontalpodautoscalers.autoscaling": _HPA,
    "storageclasses.storage.k8s.io": _Printer(
        (
            _NAME,
            _column("Provisioner", "The volume plugin that provisions its volumes."),
            _column("ReclaimPolicy", "What happens to a volume once released."),
            _column("VolumeBindingMode", "When volumes are bound and provisioned."),
            _column("AllowVolumeExpansion", "Whether claims may grow.", "boolean"),
            _AGE,
        ),
        _storage_class_cells,
    ),
    "csidrivers.storage.k8s.io": _Printer(
        (
            _NAME,
            _column("AttachRequired", "Whether volumes are attached before mounting.", "boolean"),
            _column("PodInfoOnMount", "Whether mounts get the pod's details.", "boolean"),
            _column("StorageCapacity", "Whether the scheduler checks capacity.", "boolean"),
            _column("TokenRequests", "Audiences of the tokens passed to the driver."),
            _column("RequiresRepublish", "Whether volumes are remounted periodically.", "boolean"),
            _column("Modes", "The volume lifecycle modes the driver supports."),
            _AGE,
        ),
        _csi_driver_cells,
    ),
    "volumeattachments.storage.k8s.io": _Printer(
        (
            _NAME,
            _column("Attacher", "The volume plugin that attaches the volume."),
            _column("PV", "The persistent volume attached."),
            _column("Node", "The node it is attached to."),
            _column("Attached", "Whether the attachment is done.", "boolean"),
            _AGE,
        ),
        _volume_attachment_cells,
    ),
    "runtimeclasses.node.k8s.io": _Printer(
        (_NAME, _column("Handler", "The container runtime handler it selects."), _AGE),
        _runtime_class_cells,
    ),
    "mutatingwebhookconfigurations.admissionregistration.k8s.io": _WEBHOOK_CONFIGURATION,
    "validatingwebhookconfigurations.admissionregistration.k8s.io": _WEBHOOK_CONFIGURATION,
    "apiservices.apiregistration.k8s.io": _Printer(
        (
            _NAME,
            _column("Service", "Where the API is served: Local, or namespace/name."),
            _column("Available", "Whether the API is being served."),
            _AGE,
        ),
        _api_service_cells,
    ),
    "resourcequotas": _Printer(
        (
            _NAME,
            _column("Request", "Used out of allowed, for everything but limits."),
            _column("Limit", "Used out of allowed, for limits.* resources."),
            _AGE,
        ),
        _quota_cells,
    ),
}


def _embedded(obj: Obj, include_object: str) -> Any:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return partial_object(obj)


def _custom_printer(columns: list[dict[str, Any]]) -> _Printer:
    """The printer of a custom resource with its CRD's additionalPrinterColumns (name, type,
    jsonPath, description, priority, format): after the name, each column's value at its
    path, a ``date`` as an age, as kube-apiserver does."""
    paths = [(str(c["jsonPath"]), c.get("type") == "date") for c in columns]

    def cells(resource: Resource, obj: Obj, now: datetime) -> list[Cell]:
        out: list[Cell] = [_name(obj)]
        for path, is_date in paths:
            value = json_path(obj, path)
            if is_date and value:
                out.append(_since(value, now))
            elif isinstance(value, (str, int, bool)):
                out.append(value)
            else:  # nothing there (kubectl shows <none>), or a float, list or object
                out.append("<none>" if value is None else json.dumps(value))
        return out

    defined = tuple(
        _Column(
            str(c["name"]),
            "string" if c.get("type") == "date" else str(c.get("type", "string")),
            str(c.get("description", "")),
            int(c.get("priority", 0)),
            str(c.get("format", "")),
        )
        for c in columns
    )
    return _Printer((_NAME, *defined), cells)


class Printers:
    """One apiserver's printers: the built-in ones (constants), and those of the custom
    resources it serves, set by its CRD controller (`controlplane.apiserver.crds`)."""

    def __init__(self) -> None:
        self._custom: dict[str, _Printer] = {}

    def set_custom(self, group_resource: str, columns: list[dict[str, Any]] | None) -> None:
        """Print a custom resource with its CRD's additionalPrinterColumns; None: no
        longer served."""
        if columns is None:
            self._custom.pop(group_resource, None)
        else:
            self._custom[group_resource] = _custom_printer(columns)

    def to_table(
        self,
        resource: Resource,
        objects: list[dict[str, Any]],
        *,
        include_object: str = "Metadata",
        list_meta: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """The Table for `objects` of `resource` (one object for a get, the items of a
        list), in its printer's columns.

        `include_object` is the `?includeObject=` parameter ("" means "Metadata");
        `list_meta` the list's metadata (or, for a get, the object's resourceVersion), of
        which resourceVersion, continue and remainingItemCount are kept; `now` the time
        _AGE counts to. Raises StatusError 400, worded as Kubernetes does, for another
        include_object."""
        printer = _PRINTERS.get(resource.group_resource) or self._custom.get(
            resource.group_resource, _DEFAULT
        )
        return _to_table(
            printer, resource, objects, include_object=include_object, list_meta=list_meta, now=now
        )


def _to_table(
    printer: _Printer,
    resource: Resource,
    objects: list[dict[str, Any]],
    *,
    include_object: str = "Metadata",
    list_meta: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """`Printers.to_table` with `printer`."""
    include_object = include_object or "Metadata"
    if include_object not in INCLUDE_OBJECT_VALUES:
        detail = "must be 'Metadata', 'Object', 'None', or empty"
        error = invalid("includeObject", include_object, detail).message()
        raise bad_request(f"Unable to convert to Table as requested: {error}")
    clock = now or datetime.now(UTC)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": printer.cells(resource, obj, clock)}
        if printer.conditions is not None and (conditions := printer.conditions(obj)):
            row["conditions"] = conditions
        row["object"] = _embedded(obj, include_object)
        rows.append(row)
    kept = ("resourceVersion", "continue", "remainingItemCount")
    metadata = {
        key: value
        for key, value in (list_meta or {}).items()
        if key in kept and value is not None and value != ""
    }
    return {
        "kind": "Table",
        "apiVersion": TABLE_API_VERSION,
        "metadata": metadata,
        "columnDefinitions": [column.definition() for column in printer.columns],
        "rows": rows,
    }
