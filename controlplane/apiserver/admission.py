"""Admission: cluster policy applied to writes after authorization, before storage.

The plugins kubeadm enables, in Kubernetes' order; mutating ones run first (`admit`),
then validation, then the validating ones (`validate`):

* NamespaceLifecycle: no new objects in a namespace that does not exist or is being
  deleted; the system namespaces cannot be deleted.
* ServiceAccount: a pod runs as ``default`` unless it names an account, the account must
  exist, and the pod gets the projected service-account token volume
  (``kube-api-access-<5 chars>``) mounted at /var/run/secrets/kubernetes.io/serviceaccount.
* LimitRanger: containers without requests/limits get the namespace's LimitRange defaults;
  values outside its min/max are refused.
* ResourceQuota: a create that would push a namespace over a quota's ``hard`` limits is
  refused with the quota's numbers (object counts, ``pods`` or ``count/pods`` for core
  resources and ``count/deployments.apps`` for other groups; requests and limits of
  pods). Usage is counted from the watch cache at admission time, so two creates racing
  for the last unit can both pass; Kubernetes closes that gap by writing the quota's
  usage with a compare-and-swap first.
* DefaultTolerationSeconds: pods tolerate ``not-ready`` and ``unreachable`` nodes for 300 s
  before taint-based eviction, unless they say otherwise.
* NodeRestriction: a kubelet (``system:node:<name>``) may only write its own Node and Lease
  and pods bound to it (mirror pods included).
* Priority: a pod's ``spec.priority`` and ``preemptionPolicy`` come from its
  PriorityClass, or the global default one; one global default; system classes stay
  (`priority`).
* MutatingAdmissionWebhook, ValidatingAdmissionWebhook: the webhooks of the
  admissionregistration.k8s.io configurations, called over HTTPS last in each phase
  (`webhooks`).

Always on, as in Kubernetes' RBAC registry: nobody may create or change a Role, or bind
one, granting permissions they do not hold themselves, unless they have the ``escalate``
(for roles) or ``bind`` (for bindings) verb on it.

Plugins read the cluster's state (namespaces, accounts, limit ranges, quotas) from the
watch cache through `Lookup`; they never write it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from kubelab.api import errors, resources
from kubelab.api.quantity import Quantity, parse_quantity
from kubelab.api.resources import Resource

from . import priority
from .authn import UserInfo
from .authz import MASTERS, NODE_PREFIX, NODES, Authorizer
from .registry import Admission, Attributes
from .requestinfo import RequestInfo
from .webhooks import Webhooks

Object = dict[str, Any]
Get = Callable[[str, str, str], Object | None]
"""(resource plural, namespace, name) -> object from the cache."""
List = Callable[[str, str], list[Object]]
"""(resource plural, namespace) -> objects from the cache."""

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
RBAC_GROUP = "rbac.authorization.k8s.io"
PRIORITY_CLASSES = "priorityclasses.scheduling.k8s.io"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
_CHARS = "bcdfghjklmnpqrstvwxz2456789"


class Chain(Admission):
    """The enabled plugins; `plugins` names them as --enable-admission-plugins does."""

    ALL = (
        "NamespaceLifecycle",
        "ServiceAccount",
        "LimitRanger",
        "DefaultTolerationSeconds",
        "NodeRestriction",
        "ResourceQuota",
        "Priority",
        "MutatingAdmissionWebhook",
        "ValidatingAdmissionWebhook",
    )

    def __init__(
        self,
        get: Get,
        list_objects: List,
        authorizer: Authorizer,
        plugins: tuple[str, ...] = ALL,
        live_get: Get | None = None,
    ) -> None:
        unknown = [p for p in plugins if p not in self.ALL]
        if unknown:
            raise ValueError(f"unknown admission plugins {unknown}; known: {list(self.ALL)}")
        self.get = get
        self.list_objects = list_objects
        self.authorizer = authorizer
        self.plugins = plugins
        self.live_get = live_get or get
        self.webhooks = Webhooks(list_objects, lambda name: self._lookup("namespaces", "", name))

    def _lookup(self, plural: str, namespace: str, name: str) -> Object | None:
        """From the cache, or from the store when the cache has not seen it yet: a
        namespace or account created a moment ago must not make the next create fail."""
        return self.get(plural, namespace, name) or self.live_get(plural, namespace, name)

    def admit(self, attrs: Attributes) -> None:
        self._admit_builtin(attrs)
        if "MutatingAdmissionWebhook" in self.plugins:
            self.webhooks.admit(attrs)

    def _admit_builtin(self, attrs: Attributes) -> None:
        if "NamespaceLifecycle" in self.plugins:
            self._namespace_lifecycle(attrs)
        if "Priority" in self.plugins and attrs.resource.kind == "Pod":
            priority.admit_pod(attrs, self._priority_classes)
        if attrs.operation != "CREATE" or attrs.subresource or attrs.object is None:
            return
        if attrs.resource.kind == "Pod":
            if "ServiceAccount" in self.plugins:
                self._service_account(attrs.namespace, attrs.object)
            if "LimitRanger" in self.plugins:
                self._limit_defaults(attrs.namespace, attrs.object)
            if "DefaultTolerationSeconds" in self.plugins:
                _default_tolerations(attrs.object)

    def validate(self, attrs: Attributes) -> None:
        self._rbac_escalation(attrs)
        if "Priority" in self.plugins and attrs.resource.kind == "PriorityClass":
            priority.validate_priority_class(attrs, self._priority_classes)
        if "NodeRestriction" in self.plugins:
            self._node_restriction(attrs)
        if (
            attrs.operation == "DELETE"
            and attrs.resource.kind == "Namespace"
            and attrs.name in SYSTEM_NAMESPACES
            and "NamespaceLifecycle" in self.plugins
        ):
            raise errors.StatusError(
                403,
                "Forbidden",
                f'namespaces "{attrs.name}" is forbidden: this namespace may not be deleted',
            )
        if (
            attrs.operation == "CREATE"
            and not attrs.subresource
            and "ResourceQuota" in self.plugins
            and attrs.object is not None
            and attrs.resource.namespaced
        ):
            self._quota(attrs)
        if "ValidatingAdmissionWebhook" in self.plugins:
            self.webhooks.validate(attrs)

    def _priority_classes(self) -> list[Object]:
        return self.list_objects(PRIORITY_CLASSES, "")

    # -- plugins -------------------------------------------------------------------------

    def _namespace_lifecycle(self, attrs: Attributes) -> None:
        if attrs.operation != "CREATE" or not attrs.resource.namespaced or attrs.subresource:
            return
        ns = self._lookup("namespaces", "", attrs.namespace)
        if ns is None:
            raise errors.StatusError(
                404,
                "NotFound",
                f'namespaces "{attrs.namespace}" not found',
                {"name": attrs.namespace, "kind": "namespaces"},
            )
        if ns.get("status", {}).get("phase") == "Terminating":
            raise errors.StatusError(
                403,
                "Forbidden",
                f'{attrs.resource.plural} "{attrs.name}" is forbidden: unable to create new '
                f"content in namespace {attrs.namespace} because it is being terminated",
            )

    def _service_account(self, namespace: str, pod: Object) -> None:
        spec = pod.setdefault("spec", {})
        name = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        spec["serviceAccountName"] = name
        spec.pop("serviceAccount", None)
        if pod.get("metadata", {}).get("annotations", {}).get("kubernetes.io/config.mirror"):
            return  # mirror pods of static pods are the kubelet's, not the API's
        if self._lookup("serviceaccounts", namespace, name) is None:
            raise errors.StatusError(
                403,
                "Forbidden",
                f'pods "{pod.get("metadata", {}).get("name", "")}" is forbidden: error looking '
                f'up service account {namespace}/{name}: serviceaccount "{name}" not found',
            )
        if spec.get("automountServiceAccountToken") is False:
            return
        volumes = spec.setdefault("volumes", [])
        if any(v.get("name", "").startswith("kube-api-access-") for v in volumes):
            return
        volume = "kube-api-access-" + "".join(secrets.choice(_CHARS) for _ in range(5))
        volumes.append(
            {
                "name": volume,
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {
                                            "apiVersion": "v1",
                                            "fieldPath": "metadata.namespace",
                                        },
                                    }
                                ]
                            }
                        },
                    ],
                },
            }
        )
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            mounts = c.setdefault("volumeMounts", [])
            if not any(m.get("mountPath") == TOKEN_PATH for m in mounts):
                mounts.append({"name": volume, "readOnly": True, "mountPath": TOKEN_PATH})

    def _limit_defaults(self, namespace: str, pod: Object) -> None:
        for lr in self.list_objects("limitranges", namespace):
            for item in lr.get("spec", {}).get("limits", []):
                if item.get("type") != "Container":
                    continue
                for c in pod.get("spec", {}).get("containers", []):
                    res = c.setdefault("resources", {})
                    for field, default in (
                        ("limits", item.get("default")),
                        ("requests", item.get("defaultRequest") or item.get("default")),
                    ):
                        for name, value in (default or {}).items():
                            res.setdefault(field, {}).setdefault(name, value)
                    for name, low in (item.get("min") or {}).items():
                        got = res.get("requests", {}).get(name)
                        if got is not None and _q(got) < _q(low):
                            raise errors.StatusError(
                                403,
                                "Forbidden",
                                f"minimum {name} usage per Container is "
                                f"{low}, but request is {got}",
                            )
                    for name, high in (item.get("max") or {}).items():
                        got = res.get("limits", {}).get(name)
                        if got is not None and _q(got) > _q(high):
                            raise errors.StatusError(
                                403,
                                "Forbidden",
                                f"maximum {name} usage per Container is {high}, but limit is {got}",
                            )

    def _quota(self, attrs: Attributes) -> None:
        quotas = self.list_objects("resourcequotas", attrs.namespace)
        if not quotas:
            return
        adding = _usage(attrs.resource, attrs.object or {})
        current: dict[str, Fraction] | None = None
        for q in quotas:
            hard = q.get("spec", {}).get("hard") or {}
            relevant = {k: v for k, v in hard.items() if k in adding}
            if not relevant:
                continue
            if current is None:
                current = self._namespace_usage(attrs.namespace, attrs.resource)
            over = [
                k for k, v in relevant.items() if current.get(k, Fraction(0)) + adding[k] > _q(v)
            ]
            if over:
                requested = ",".join(f"{k}={_fmt(adding[k])}" for k in over)
                used = ",".join(f"{k}={_fmt(current.get(k, Fraction(0)))}" for k in over)
                limited = ",".join(f"{k}={relevant[k]}" for k in over)
                raise errors.StatusError(
                    403,
                    "Forbidden",
                    f'{attrs.resource.plural} "{attrs.name}" is forbidden: exceeded quota: '
                    f"{q['metadata']['name']}, requested: {requested}, used: {used}, "
                    f"limited: {limited}",
                )

    def _namespace_usage(self, namespace: str, creating: Resource) -> dict[str, Fraction]:
        """What the namespace uses now: the core kinds quotas know by name, and the kind
        being created (for its ``count/<resource>.<group>``)."""
        total: dict[str, Fraction] = {}
        kinds = [resources.lookup("", "v1", plural) for plural in _QUOTA_CORE]
        if creating.plural not in _QUOTA_CORE or creating.group:
            kinds.append(creating)
        for r in kinds:
            assert r is not None
            for obj in self.list_objects(
                f"{r.plural}.{r.group}" if r.group else r.plural, namespace
            ):
                if r.plural == "pods" and obj.get("status", {}).get("phase") in (
                    "Succeeded",
                    "Failed",
                ):
                    continue
                for k, v in _usage(r, obj).items():
                    total[k] = total.get(k, Fraction(0)) + v
        return total

    def _rbac_escalation(self, attrs: Attributes) -> None:
        r, user, obj = attrs.resource, attrs.user, attrs.object
        if r.group != RBAC_GROUP or attrs.operation not in ("CREATE", "UPDATE") or obj is None:
            return
        if not isinstance(user, UserInfo) or MASTERS in user.groups:
            return
        ns = attrs.namespace if r.namespaced else ""
        if r.kind in ("Role", "ClusterRole"):
            if self._may(user, "escalate", r.plural, ns, attrs.name):
                return
            rules = obj.get("rules") or []
        else:
            ref = obj.get("roleRef") or {}
            role_kind = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            if self._may(
                user,
                "bind",
                role_kind,
                ns if role_kind == "roles" else "",
                str(ref.get("name", "")),
            ):
                return
            role = self.get(role_kind, ns if role_kind == "roles" else "", str(ref.get("name", "")))
            if role is None:
                raise errors.StatusError(
                    404, "NotFound", f'{role_kind}.{RBAC_GROUP} "{ref.get("name")}" not found'
                )
            rules = role.get("rules") or []
        missing = self.authorizer.uncovered(user, rules, ns)
        if missing:
            raise errors.StatusError(
                403,
                "Forbidden",
                f'{r.group_resource} "{attrs.name}" is forbidden: user "{user.name}" (groups='
                f"{list(user.groups)}) is attempting to grant RBAC permissions not currently "
                f"held: {'; '.join(missing[:20])}",
            )

    def _may(self, user: UserInfo, verb: str, plural: str, namespace: str, name: str) -> bool:
        info = RequestInfo(
            verb=verb,
            path="",
            is_resource=True,
            group=RBAC_GROUP,
            namespace=namespace,
            resource=plural,
            name=name,
        )
        return self.authorizer.authorize(user, info).allowed

    def _node_restriction(self, attrs: Attributes) -> None:
        user: UserInfo | None = attrs.user
        if user is None or NODES not in user.groups or not user.name.startswith(NODE_PREFIX):
            return
        node = user.name[len(NODE_PREFIX) :]
        kind = attrs.resource.kind
        target = attrs.object or attrs.old or {}
        if kind == "Lease" and attrs.namespace == "kube-node-lease" and attrs.name != node:
            raise errors.StatusError(
                403, "Forbidden", f'node "{node}" may only write its own lease, not "{attrs.name}"'
            )
        if kind == "Node" and attrs.name != node:
            raise errors.StatusError(
                403, "Forbidden", f'node "{node}" is not allowed to modify node "{attrs.name}"'
            )
        if kind == "Pod" and attrs.operation in ("CREATE", "DELETE", "UPDATE"):
            bound = target.get("spec", {}).get("nodeName")
            if bound != node:
                raise errors.StatusError(
                    403,
                    "Forbidden",
                    f'node "{node}" can only {attrs.operation.lower()} pods '
                    f'bound to itself; pod "{attrs.name}" is bound to "{bound or ""}"',
                )
            mirror = (
                target.get("metadata", {}).get("annotations", {}).get("kubernetes.io/config.mirror")
            )
            if attrs.operation == "CREATE" and not mirror:
                raise errors.StatusError(
                    403, "Forbidden", f'node "{node}" can only create mirror pods'
                )


def _default_tolerations(pod: Object) -> None:
    tolerations = pod.setdefault("spec", {}).setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if any(
            t.get("key") == key and t.get("effect") in ("NoExecute", None, "") for t in tolerations
        ) or any(t.get("operator") == "Exists" and not t.get("key") for t in tolerations):
            continue
        tolerations.append(
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        )


_QUOTA_CORE = (
    "pods",
    "services",
    "configmaps",
    "secrets",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "resourcequotas",
)
"""Core kinds a quota can also count by their plain name (``pods: 10``)."""


def _usage(r: Resource, obj: Object) -> dict[str, Fraction]:
    """What one object counts against a quota."""
    plural = r.plural
    # count/pods for core resources, count/deployments.apps for the others
    out = {f"count/{plural}.{r.group}" if r.group else f"count/{plural}": Fraction(1)}
    if plural in _QUOTA_CORE and not r.group:
        out[plural] = Fraction(1)
    if plural == "pods":
        for c in obj.get("spec", {}).get("containers", []):
            res = c.get("resources", {})
            for field in ("requests", "limits"):
                for name, value in (res.get(field) or {}).items():
                    key = f"{field}.{name}"
                    out[key] = out.get(key, Fraction(0)) + _q(value)
                    if field == "requests":
                        out[name] = out.get(name, Fraction(0)) + _q(value)
    return out


def _q(value: Any) -> Fraction:
    """A quantity's exact value; a malformed one (validation reports it) counts as 0."""
    try:
        return parse_quantity(value).value
    except ValueError:
        return Fraction(0)


def _fmt(value: Fraction) -> str:
    return str(Quantity(value))
