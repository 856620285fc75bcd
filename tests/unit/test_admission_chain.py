"""The admission chain's plugin registry (`controlplane.apiserver.admission`): what
``--enable-admission-plugins`` selects, in which order the plugins run, and the shape
every plugin has."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.apiserver.admission import (
    PLUGINS,
    Chain,
    MutationInterface,
    Plugin,
    ValidationInterface,
)
from controlplane.apiserver.authn import UserInfo
from controlplane.apiserver.authz import Authorizer
from controlplane.apiserver.registry import Attributes
from kubelab.api import errors
from kubelab.api.resources import Resource, lookup

Object = dict[str, Any]
ADMIN = UserInfo("admin", "", ("system:masters",))
NODE = UserInfo("system:node:n1", "", ("system:nodes",))
JANE = UserInfo("jane", "", ())
STATE: dict[tuple[str, str, str], Object] = {
    ("namespaces", "", "team"): {"metadata": {"name": "team"}, "status": {"phase": "Active"}},
    ("serviceaccounts", "team", "default"): {"metadata": {"name": "default"}},
}
LIMITS = {
    "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}, "max": {"cpu": "1"}}]}
}


def _get(plural: str, namespace: str, name: str) -> Object | None:
    return STATE.get((plural, namespace, name))


def _list(plural: str, namespace: str) -> list[Object]:
    return [LIMITS] if plural == "limitranges" else []


def _chain(plugins: tuple[str, ...] = Chain.ALL) -> Chain:
    authorizer = Authorizer(_list, _get, True)
    return Chain(_get, _list, authorizer, plugins)


def _pod_create(cpu_limit: str | None = None) -> Attributes:
    container: Object = {"name": "c", "image": "busybox"}
    if cpu_limit is not None:
        container["resources"] = {"limits": {"cpu": cpu_limit}}
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [container]}}
    pods = lookup("", "v1", "pods")
    assert pods is not None
    return Attributes("CREATE", pods, "", "team", "p", pod, None, ADMIN, False)


def test_plugins_run_in_kubernetes_order_whatever_order_the_flag_lists_them() -> None:
    chain = _chain(("ResourceQuota", "DefaultTolerationSeconds", "NamespaceLifecycle"))
    assert [p.NAME for p in chain.mutating] == ["NamespaceLifecycle", "DefaultTolerationSeconds"]
    # The RBAC escalation check is always on, first.
    assert [p.NAME for p in chain.validating] == [
        "RBACEscalation",
        "NamespaceLifecycle",
        "ResourceQuota",
    ]
    assert Chain.ALL == (
        "NamespaceLifecycle",
        "LimitRanger",
        "ServiceAccount",
        "NodeRestriction",
        "PodSecurity",
        "Priority",
        "DefaultTolerationSeconds",
        "DefaultStorageClass",
        "StorageObjectInUseProtection",
        "DefaultIngressClass",
        "MutatingAdmissionWebhook",
        "ValidatingAdmissionWebhook",
        "ResourceQuota",
    )


def test_an_unknown_plugin_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown admission plugins \\['AlwaysAdmit'\\]; known"):
        _chain(("NamespaceLifecycle", "AlwaysAdmit"))


@pytest.mark.parametrize("name", list(PLUGINS))
def test_every_plugin_has_a_name_operations_and_an_interface(name: str) -> None:
    chain = _chain((name,))
    mine = [p for p in [*chain.mutating, *chain.validating] if name == p.NAME]
    assert mine, f"{name} implements neither admit nor validate"
    for p in mine:
        assert isinstance(p, Plugin)
        assert isinstance(p, MutationInterface | ValidationInterface)
        assert p.OPERATIONS and all(p.handles(op) for op in p.OPERATIONS)
        assert not p.handles("CONNECT")


def test_a_pod_create_gets_the_defaults_of_every_mutating_plugin() -> None:
    attrs = _pod_create()
    _chain().admit(attrs)
    assert attrs.object is not None
    spec = attrs.object["spec"]
    assert spec["serviceAccountName"] == "default"
    assert spec["containers"][0]["resources"]["limits"] == {"cpu": "500m"}
    assert spec["volumes"][0]["name"].startswith("kube-api-access-")
    assert {t["key"] for t in spec["tolerations"]} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }


def test_a_disabled_plugin_does_not_run() -> None:
    attrs = _pod_create(cpu_limit="2")
    with pytest.raises(errors.StatusError, match="maximum cpu usage per Container is 1"):
        _chain().admit(attrs)
    attrs = _pod_create(cpu_limit="2")
    _chain(tuple(p for p in Chain.ALL if p != "LimitRanger")).admit(attrs)
    assert attrs.object is not None
    assert "tolerations" in attrs.object["spec"]


@pytest.mark.parametrize(
    ("operation", "kind", "plural", "namespace", "name", "obj", "user"),
    [
        # Priority would refuse the unknown class; ServiceAccount, LimitRanger and
        # DefaultTolerationSeconds would add an account, a token volume, tolerations.
        ("CREATE", "Pod", "pods", "team", "p", {"spec": {"priorityClassName": "none"}}, ADMIN),
        # NodeRestriction: a kubelet creates only mirror pods bound to it, writes only its
        # own Node and Lease.
        ("CREATE", "Pod", "pods", "team", "p", {"spec": {}}, NODE),
        ("UPDATE", "Node", "nodes", "", "n2", {"spec": {}}, NODE),
        ("UPDATE", "Lease", "leases", "kube-node-lease", "n2", {"spec": {}}, NODE),
        # NamespaceLifecycle: the system namespaces cannot be deleted.
        ("DELETE", "Namespace", "namespaces", "", "kube-system", None, ADMIN),
        # RBAC escalation: jane holds no permission at all.
        ("CREATE", "Role", "roles", "team", "r", {"rules": [{"verbs": ["*"]}]}, JANE),
    ],
)
def test_a_custom_resource_with_a_core_kind_gets_none_of_its_rules(
    operation: str,
    kind: str,
    plural: str,
    namespace: str,
    name: str,
    obj: Object | None,
    user: UserInfo,
) -> None:
    """Plugins decide by group and resource, never by the kind's name: a custom resource
    of example.com whose kind is Pod, Node, Lease, Namespace or Role passes the whole
    chain unchanged."""
    custom = Resource("example.com", "v1", kind, plural, bool(namespace))
    attrs = Attributes(
        operation, custom, "", namespace, name, copy.deepcopy(obj), None, user, False
    )
    chain = _chain()
    chain.admit(attrs)
    chain.validate(attrs)
    assert attrs.object == obj
