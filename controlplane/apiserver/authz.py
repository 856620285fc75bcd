"""Authorization: may this user do this? Node authorizer, then RBAC (``--authorization-mode
Node,RBAC`` as kubeadm sets it), with ``system:masters`` as the privileged group.

RBAC reads Roles, ClusterRoles and their bindings from the watch cache, so a new binding
takes effect as soon as it is stored, with no restart and no store round trip per request.
A rule matches when its verbs, API groups and resources (``pods``, ``pods/log``, ``*``,
``*/scale``) or non-resource URLs (``/healthz``, ``/api/*``) and, if given, resource
names cover the request.

The Node authorizer (the seeds' rule that a kubelet touches only its own node) lets a user
``system:node:<name>`` in group ``system:nodes`` read what kubelets read, write its own
Node and Lease, write the status of pods bound to it, create events and CSRs, and read the
Secrets and ConfigMaps its pods mount. The NodeRestriction admission plugin completes it
for writes whose target is only known from the body.

The default roles and bindings (`BOOTSTRAP_POLICY`) are reconciled by the apiserver at
start, as Kubernetes' RBAC bootstrap hook does (`reconcile`): missing ones are created, and
labels, rules, subjects or aggregation selectors a newer kubelab added are added to
existing ones, keeping what an operator added. `admin`, `edit` and `view` are aggregated
as in Kubernetes: their rules are gathered by the controller-manager's
clusterrole-aggregation-controller from `system:aggregate-to-*` and any other ClusterRole
labelled `rbac.authorization.k8s.io/aggregate-to-<role>: "true"`. An object annotated
``rbac.authorization.kubernetes.io/autoupdate: "false"`` is left as it is.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .authn import AUTHENTICATED, UNAUTHENTICATED, UserInfo
from .requestinfo import RequestInfo

log = logging.getLogger("kubelab.apiserver.authz")

MASTERS = "system:masters"
NODES = "system:nodes"
NODE_PREFIX = "system:node:"

Object = dict[str, Any]
ListFn = Callable[[str, str], list[Object]]
"""(resource plural, namespace or "" for all) -> objects from the cache."""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def _rule_covers(rule: Object, info: RequestInfo) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and info.verb not in verbs:
        return False
    if not info.is_resource:
        for url in rule.get("nonResourceURLs") or []:
            if (
                url == "*"
                or url == info.path
                or (url.endswith("*") and info.path.startswith(url[:-1]))
            ):
                return True
        return False
    groups = rule.get("apiGroups")
    if groups is None or ("*" not in groups and info.group not in groups):
        return False
    wanted = info.resource + (f"/{info.subresource}" if info.subresource else "")
    resources = rule.get("resources") or []
    if not any(
        r == "*" or r == wanted or (r == f"*/{info.subresource}" and info.subresource)
        for r in resources
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or info.name in names


def _subject_matches(subject: Object, user: UserInfo, binding_ns: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{name}"
    return False


class Authorizer:
    """``system:masters``, then (with `node_authorizer`) the Node authorizer, then RBAC."""

    def __init__(
        self,
        list_objects: ListFn,
        get_object: Callable[[str, str, str], Object | None],
        node_authorizer: bool = True,
    ) -> None:
        self.list_objects = list_objects
        self.get_object = get_object
        self.node_authorizer = node_authorizer

    def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        if MASTERS in user.groups:
            return Decision(True, "system:masters")
        if self.node_authorizer and NODES in user.groups and user.name.startswith(NODE_PREFIX):
            node = self._node_decision(user.name[len(NODE_PREFIX) :], info)
            if node is not None:
                return node
        for rule, via in self.rules_for(user, info.namespace if info.is_resource else ""):
            if _rule_covers(rule, info):
                return Decision(True, via)
        return Decision(False, "no RBAC rule allows it")

    def uncovered(self, user: UserInfo, rules: list[Object], namespace: str) -> list[str]:
        """The permissions in `rules` that `user` does not hold in `namespace` (RBAC's
        escalation check: nobody grants what they do not have). A wildcard in a rule is
        only covered by the same wildcard."""
        missing = []
        for rule in rules:
            verbs = rule.get("verbs") or []
            for url in rule.get("nonResourceURLs") or []:
                missing += [
                    f"{v} {url}"
                    for v in verbs
                    if not self.authorize(user, RequestInfo(v, url)).allowed
                ]
            grants = itertools.product(
                rule.get("apiGroups") or [],
                rule.get("resources") or [],
                rule.get("resourceNames") or [""],
                verbs,
            )
            for group, resource, name, v in grants:
                plural, _, sub = resource.partition("/")
                info = RequestInfo(
                    verb=v,
                    path="",
                    is_resource=True,
                    group=group,
                    namespace=namespace,
                    resource=plural,
                    subresource=sub,
                    name=name,
                )
                if not self.authorize(user, info).allowed:
                    what = f"{resource}.{group}" if group else resource
                    missing.append(f"{v} {what}" + (f" {name!r}" if name else ""))
        return missing

    def rules_for(self, user: UserInfo, namespace: str) -> Iterable[tuple[Object, str]]:
        """The rules that apply to `user` in `namespace` (cluster-wide ones first)."""
        for b in self.list_objects("clusterrolebindings", ""):
            if any(_subject_matches(s, user, "") for s in b.get("subjects") or []):
                role = self.get_object("clusterroles", "", b.get("roleRef", {}).get("name", ""))
                for rule in (role or {}).get("rules") or []:
                    yield rule, f'ClusterRoleBinding "{b["metadata"]["name"]}"'
        if not namespace:
            return
        for b in self.list_objects("rolebindings", namespace):
            if any(_subject_matches(s, user, namespace) for s in b.get("subjects") or []):
                ref = b.get("roleRef", {})
                if ref.get("kind") == "ClusterRole":
                    role = self.get_object("clusterroles", "", ref.get("name", ""))
                else:
                    role = self.get_object("roles", namespace, ref.get("name", ""))
                for rule in (role or {}).get("rules") or []:
                    yield rule, f'RoleBinding "{namespace}/{b["metadata"]["name"]}"'

    # -- the Node authorizer -------------------------------------------------------------

    def _node_decision(self, node: str, info: RequestInfo) -> Decision | None:
        """Allow what a kubelet needs; None to fall through to RBAC (which grants nodes
        nothing by default, so it is a refusal)."""
        allow = Decision(True, f"Node authorizer: node {node}")
        if not info.is_resource:
            return None
        r, verb, sub = info.resource, info.verb, info.subresource
        if (
            verb in ("get", "list", "watch")
            and not sub
            and r
            in (
                "nodes",
                "pods",
                "services",
                "endpoints",
                "endpointslices",
                "namespaces",
                "persistentvolumes",
                "runtimeclasses",
                "csidrivers",
            )
        ):
            return allow
        if r == "nodes" and (info.name == node or verb == "create"):
            return allow if verb in ("get", "create", "update", "patch") else None
        if (
            r == "leases"
            and info.namespace == "kube-node-lease"
            and (info.name == node or verb == "create")
        ):
            return allow
        if r == "events" and verb in ("create", "update", "patch"):
            return allow
        if r == "certificatesigningrequests" and verb in ("create", "get", "list", "watch"):
            return allow
        if r in ("tokenreviews", "subjectaccessreviews") and verb == "create":
            return allow
        if r == "pods" and sub == "status" and verb in ("update", "patch"):
            return allow if self._pod_on(node, info.namespace, info.name) else None
        if r == "pods" and not sub and verb in ("create", "delete"):
            # Mirror pods (create) and confirming a deletion: NodeRestriction checks that
            # the pod is bound to this node.
            return allow
        if r == "pods" and sub == "eviction" and verb == "create":
            return allow
        if r == "serviceaccounts" and sub == "token" and verb == "create":
            # Only for the accounts of pods bound to it (it mounts their tokens).
            return allow if self._mounted_by_pod_on(node, r, info.namespace, info.name) else None
        if (
            r in ("secrets", "configmaps", "persistentvolumeclaims", "serviceaccounts")
            and verb == "get"
            and not sub
        ):
            return allow if self._mounted_by_pod_on(node, r, info.namespace, info.name) else None
        return None

    def _pods_on(self, node: str, namespace: str) -> list[Object]:
        return [
            p
            for p in self.list_objects("pods", namespace)
            if p.get("spec", {}).get("nodeName") == node
        ]

    def _pod_on(self, node: str, namespace: str, name: str) -> bool:
        pod = self.get_object("pods", namespace, name)
        return pod is not None and pod.get("spec", {}).get("nodeName") == node

    def _mounted_by_pod_on(self, node: str, resource: str, namespace: str, name: str) -> bool:
        return any(name in _references(pod, resource) for pod in self._pods_on(node, namespace))


def _references(pod: Object, resource: str) -> set[str]:
    """Names of the `resource` objects a pod refers to (volumes, env, pull secrets)."""
    spec = pod.get("spec", {})
    names: set[str] = set()
    if resource == "serviceaccounts":
        return {spec.get("serviceAccountName") or "default"}
    for v in spec.get("volumes") or []:
        if resource == "secrets" and "secret" in v:
            names.add(v["secret"].get("secretName", ""))
        if resource == "configmaps" and "configMap" in v:
            names.add(v["configMap"].get("name", ""))
        if resource == "persistentvolumeclaims" and "persistentVolumeClaim" in v:
            names.add(v["persistentVolumeClaim"].get("claimName", ""))
        for src in (v.get("projected") or {}).get("sources") or []:
            if resource == "secrets" and "secret" in src:
                names.add(src["secret"].get("name", ""))
            if resource == "configmaps" and "configMap" in src:
                names.add(src["configMap"].get("name", ""))
    if resource == "secrets":
        names.update(s.get("name", "") for s in spec.get("imagePullSecrets") or [])
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for e in c.get("env") or []:
            ref = e.get("valueFrom") or {}
            if resource == "secrets" and "secretKeyRef" in ref:
                names.add(ref["secretKeyRef"].get("name", ""))
            if resource == "configmaps" and "configMapKeyRef" in ref:
                names.add(ref["configMapKeyRef"].get("name", ""))
        for ef in c.get("envFrom") or []:
            if resource == "secrets" and "secretRef" in ef:
                names.add(ef["secretRef"].get("name", ""))
            if resource == "configmaps" and "configMapRef" in ef:
                names.add(ef["configMapRef"].get("name", ""))
    return names


# -- bootstrap policy --------------------------------------------------------------------

_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]

AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
"""The label prefix (`admin`, `edit`, `view` after it) that puts a ClusterRole's rules
into the aggregated role of that name."""


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Object:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _url_rule(urls: list[str], verbs: list[str]) -> Object:
    return {"nonResourceURLs": urls, "verbs": verbs}


# The user-facing roles as Kubernetes defines them: `admin`, `edit` and `view` hold no
# rules of their own but an aggregationRule, and the controller-manager's
# clusterrole-aggregation-controller fills them from the roles labelled for them. So
# view's rules are in edit, edit's in admin (edit and view carry the labels), and a
# CRD's installer extends them by labelling a role of its own.
_AGGREGATE_TO_VIEW = [
    _rule(
        [""],
        [
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "configmaps",
        ],
        _READ,
    ),
    _rule(
        [""],
        [
            "limitranges",
            "resourcequotas",
            "bindings",
            "events",
            "pods/status",
            "resourcequotas/status",
            "namespaces/status",
            "replicationcontrollers/status",
            "pods/log",
        ],
        _READ,
    ),
    _rule([""], ["namespaces"], _READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], _READ),
    _rule(
        ["apps"],
        [
            "controllerrevisions",
            "statefulsets",
            "statefulsets/status",
            "statefulsets/scale",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/status",
            "deployments/scale",
            "replicasets",
            "replicasets/status",
            "replicasets/scale",
        ],
        _READ,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], _READ),
    _rule(["batch"], ["jobs", "cronjobs", "cronjobs/status", "jobs/status"], _READ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], _READ),
    _rule(["networking.k8s.io"], ["networkpolicies", "ingresses", "ingresses/status"], _READ),
]
_AGGREGATE_TO_EDIT = [
    _rule(
        [""],
        ["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"],
        _READ,
    ),
    _rule([""], ["serviceaccounts"], ["impersonate"]),
    _rule([""], ["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"], _WRITE),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule(
        [""],
        [
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/proxy",
            "persistentvolumeclaims",
            "configmaps",
            "secrets",
            "events",
        ],
        _WRITE,
    ),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule(
        ["apps"],
        [
            "statefulsets",
            "statefulsets/scale",
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "replicasets",
            "replicasets/scale",
        ],
        _WRITE,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], _WRITE),
    _rule(["batch"], ["jobs", "cronjobs"], _WRITE),
    _rule(["policy"], ["poddisruptionbudgets"], _WRITE),
    _rule(["networking.k8s.io"], ["networkpolicies", "ingresses"], _WRITE),
    _rule(["coordination.k8s.io"], ["leases"], _READ + _WRITE),
]
_AGGREGATE_TO_ADMIN = [
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    _rule(["rbac.authorization.k8s.io"], ["roles", "rolebindings"], _READ + _WRITE),
]


def _aggregation(to: str) -> Object:
    return {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE_TO + to: "true"}}]}


AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"

_BOOTSTRAP_META = {
    "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
    "annotations": {AUTOUPDATE: "true"},
}


def _cluster_role(
    name: str,
    rules: list[Object],
    *,
    aggregate_to: tuple[str, ...] = (),
    aggregation: Object | None = None,
) -> Object:
    """A default ClusterRole; `aggregate_to` names the aggregated roles its rules go
    into, `aggregation` is the aggregationRule of one that gathers them."""
    labels = {**_BOOTSTRAP_META["labels"], **{AGGREGATE_TO + to: "true" for to in aggregate_to}}
    role: Object = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {**_BOOTSTRAP_META, "name": name, "labels": labels},
        "rules": rules,
    }
    if aggregation is not None:
        role["aggregationRule"] = aggregation
    return role


def _binding(name: str, role: str, subjects: list[tuple[str, str]]) -> Object:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, **_BOOTSTRAP_META},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": n}
            for kind, n in subjects
        ],
    }


def reconcile(existing: Object, wanted: Object) -> Object | None:
    """`existing` with what the bootstrap object `wanted` has and it lacks (labels and
    annotations, rules of a role, subjects of a binding, the clusterRoleSelectors of an
    aggregated role, whose rules are the aggregation controller's), or None if it lacks
    nothing or must not be touched (annotated autoupdate "false"). What an operator
    added stays, as Kubernetes' reconciliation keeps it."""
    meta = existing.get("metadata") or {}
    if (meta.get("annotations") or {}).get(AUTOUPDATE) == "false":
        return None
    updated = dict(existing)
    new_meta = dict(meta)
    for key in ("labels", "annotations"):
        have = meta.get(key) or {}
        missing = {k: v for k, v in (wanted["metadata"].get(key) or {}).items() if k not in have}
        if missing:
            new_meta[key] = {**have, **missing}
    if new_meta != meta:
        updated["metadata"] = new_meta
    if "aggregationRule" in wanted:
        rule = existing.get("aggregationRule") or {}
        have = rule.get("clusterRoleSelectors") or []
        add = [s for s in wanted["aggregationRule"]["clusterRoleSelectors"] if s not in have]
        if add:
            updated["aggregationRule"] = {**rule, "clusterRoleSelectors": [*have, *add]}
    else:
        field = "subjects" if "roleRef" in wanted else "rules"
        have = existing.get(field) or []
        missing_items = [item for item in wanted[field] if item not in have]
        if missing_items:
            updated[field] = [*have, *missing_items]
    return None if updated == existing else updated


_HEALTH = [
    "/healthz",
    "/livez",
    "/readyz",
    "/version",
    "/version/",
    "/healthz/*",
    "/livez/*",
    "/readyz/*",
]
_MONITORING = [
    "/metrics",
    "/metrics/slis",
    "/healthz",
    "/livez",
    "/readyz",
    "/healthz/*",
    "/livez/*",
    "/readyz/*",
]
MONITORING = "system:monitoring"
"""The group the bootstrap policy lets read every component's metrics and checks."""
_DISCOVERY = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/openapi",
    "/openapi/*",
    "/version",
    "/version/",
    "/healthz",
    "/livez",
    "/readyz",
]

BOOTSTRAP_POLICY: list[Object] = [
    _cluster_role("cluster-admin", [_rule(["*"], ["*"], ["*"]), _url_rule(["*"], ["*"])]),
    _cluster_role("admin", [], aggregation=_aggregation("admin")),
    _cluster_role("edit", [], aggregate_to=("admin",), aggregation=_aggregation("edit")),
    _cluster_role("view", [], aggregate_to=("edit",), aggregation=_aggregation("view")),
    _cluster_role("system:aggregate-to-admin", _AGGREGATE_TO_ADMIN, aggregate_to=("admin",)),
    _cluster_role("system:aggregate-to-edit", _AGGREGATE_TO_EDIT, aggregate_to=("edit",)),
    _cluster_role("system:aggregate-to-view", _AGGREGATE_TO_VIEW, aggregate_to=("view",)),
    # metrics.k8s.io is served here, where a cluster with metrics-server gets this role
    # (and `kubectl top` for viewers) from metrics-server's manifests.
    _cluster_role(
        "system:aggregated-metrics-reader",
        [_rule(["metrics.k8s.io"], ["pods", "nodes"], _READ)],
        aggregate_to=("view", "edit", "admin"),
    ),
    _cluster_role("system:discovery", [_url_rule(_DISCOVERY, ["get"])]),
    _cluster_role("system:public-info-viewer", [_url_rule(_HEALTH, ["get"])]),
    # Scrapers of every component's /metrics (the controller-manager's and scheduler's
    # delegate the question here), and of the health checks one by one.
    _cluster_role("system:monitoring", [_url_rule(_MONITORING, ["get"])]),
    _cluster_role(
        "system:basic-user",
        [
            _rule(
                ["authorization.k8s.io"],
                ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ["create"],
            ),
            _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
        ],
    ),
    _cluster_role(
        "system:node-bootstrapper",
        [
            _rule(
                ["certificates.k8s.io"],
                ["certificatesigningrequests"],
                ["create", "get", "list", "watch"],
            ),
        ],
    ),
    _cluster_role(
        "system:kube-scheduler",
        [
            _rule(
                [""],
                [
                    "pods",
                    "nodes",
                    "namespaces",
                    "services",
                    "persistentvolumeclaims",
                    "persistentvolumes",
                    "replicationcontrollers",
                ],
                _READ,
            ),
            _rule([""], ["pods"], ["delete"]),  # preemption's victims
            _rule([""], ["pods/binding", "bindings"], ["create"]),
            _rule([""], ["pods/status"], ["patch", "update"]),
            _rule([""], ["events"], ["create", "patch", "update"]),
            _rule(["events.k8s.io"], ["events"], ["create", "patch", "update"]),
            _rule(["apps"], ["replicasets", "statefulsets"], _READ),
            _rule(
                ["coordination.k8s.io"], ["leases"], ["create", "get", "update", "list", "watch"]
            ),
            # Its /metrics' callers, reviewed by delegation (kubelab.serving).
            _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
            _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
        ],
    ),
    _cluster_role("system:kube-controller-manager", [_rule(["*"], ["*"], ["*"])]),
    # The scheduler's VolumeBinding: it reserves volumes and picks claims' nodes.
    _cluster_role(
        "system:volume-scheduler",
        [
            _rule([""], ["persistentvolumes"], ["get", "list", "watch", "patch", "update"]),
            _rule([""], ["persistentvolumeclaims"], ["get", "list", "watch", "patch", "update"]),
            _rule(["storage.k8s.io"], ["storageclasses"], _READ),
        ],
    ),
    _cluster_role(
        "system:node-proxier",
        [
            _rule([""], ["services", "endpoints", "nodes"], _READ),
            _rule(["discovery.k8s.io"], ["endpointslices"], _READ),
            _rule([""], ["events"], ["create", "patch", "update"]),
        ],
    ),
    _cluster_role(
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        [
            _rule(["certificates.k8s.io"], ["certificatesigningrequests/nodeclient"], ["create"]),
        ],
    ),
    _cluster_role(
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
        [
            _rule(
                ["certificates.k8s.io"], ["certificatesigningrequests/selfnodeclient"], ["create"]
            ),
        ],
    ),
    _binding("cluster-admin", "cluster-admin", [("Group", MASTERS)]),
    _binding("system:discovery", "system:discovery", [("Group", AUTHENTICATED)]),
    _binding("system:basic-user", "system:basic-user", [("Group", AUTHENTICATED)]),
    _binding(
        "system:public-info-viewer",
        "system:public-info-viewer",
        [("Group", AUTHENTICATED), ("Group", UNAUTHENTICATED)],
    ),
    _binding("system:monitoring", "system:monitoring", [("Group", MONITORING)]),
    _binding("system:kube-scheduler", "system:kube-scheduler", [("User", "system:kube-scheduler")]),
    _binding(
        "system:volume-scheduler", "system:volume-scheduler", [("User", "system:kube-scheduler")]
    ),
    _binding(
        "system:kube-controller-manager",
        "system:kube-controller-manager",
        [("User", "system:kube-controller-manager")],
    ),
    _binding("system:node-proxier", "system:node-proxier", [("User", "system:kube-proxy")]),
]
