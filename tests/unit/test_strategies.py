"""Per-kind strategies (`controlplane.apiserver.strategies`): the lookup by resource and
the rules that differ by kind, on objects as the registry hands them over."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.strategies import Strategies, Strategy
from controlplane.apiserver.strategies.core import drop_type_dependent_fields
from kubelab.api.resources import RESOURCES, Resource, lookup

Object = dict[str, Any]
for_resource = Strategies().for_resource


def _resource(group: str, version: str, plural: str) -> Resource:
    r = lookup(group, version, plural)
    assert r is not None
    return r


@pytest.mark.parametrize(
    "r", [r for r in RESOURCES if r.stored and not r.converted_from], ids=lambda r: r.group_resource
)
def test_every_stored_resource_has_a_strategy_of_its_own(r: Resource) -> None:
    strategy = for_resource(r)
    assert isinstance(strategy, Strategy) and strategy.resource is r


def test_a_conversion_view_is_written_by_its_stored_resource_strategy() -> None:
    v1 = _resource("autoscaling", "v1", "horizontalpodautoscalers")
    assert for_resource(v1).resource is _resource("autoscaling", "v2", "horizontalpodautoscalers")


def test_a_new_object_starts_with_the_status_its_kind_gives_it() -> None:
    sent: Object = {"phase": "Running", "replicas": 3}

    def created(plural: str, group: str = "", version: str = "v1") -> Object:
        obj: Object = {"metadata": {"name": "x"}, "spec": {}, "status": dict(sent)}
        for_resource(_resource(group, version, plural)).prepare_for_create(obj)
        return obj

    assert created("nodes")["status"] == sent  # the kubelet registers it with its status
    assert created("deployments", "apps")["status"] == {}
    assert created("pods")["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert created("namespaces")["status"] == {"phase": "Active"}
    assert created("persistentvolumeclaims")["status"] == {"phase": "Pending"}
    assert created("configmaps")["metadata"].get("generation") is None
    assert created("deployments", "apps")["metadata"]["generation"] == 1


def test_only_a_change_of_the_desired_state_moves_the_generation() -> None:
    strategy = for_resource(_resource("apps", "v1", "deployments"))
    old: Object = {"metadata": {"name": "d", "generation": 4}, "spec": {"replicas": 1}}
    relabelled: Object = {"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 1}}
    strategy.prepare_for_update(relabelled, old)
    assert relabelled["metadata"]["generation"] == 4
    scaled: Object = {"metadata": {"name": "d"}, "spec": {"replicas": 2}, "status": {"x": 1}}
    strategy.prepare_for_update(scaled, old)
    assert scaled["metadata"]["generation"] == 5
    assert "status" not in scaled  # only the status subresource writes it


def test_a_bound_pod_is_deleted_gracefully_and_an_unbound_one_at_once() -> None:
    pods = for_resource(_resource("", "v1", "pods"))
    bound: Object = {"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 12}}
    assert pods.grace_period(bound, None) == 12
    assert pods.grace_period(bound, 3) == 3
    assert pods.grace_period({"spec": {}}, None) == 0
    assert for_resource(_resource("", "v1", "configmaps")).grace_period(bound, 5) == 0


def test_a_replication_controllers_scale_selector_is_its_label_map() -> None:
    obj: Object = {"metadata": {"name": "r"}, "spec": {"replicas": 2, "selector": {"app": "a"}}}
    scale = for_resource(_resource("", "v1", "replicationcontrollers")).to_scale(obj)
    assert scale["status"]["selector"] == "app=a"
    rs: Object = {
        "metadata": {"name": "r"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "a"}}},
    }
    assert for_resource(_resource("apps", "v1", "replicasets")).to_scale(rs)["status"] == {
        "replicas": 0,
        "selector": "app=a",
    }


def test_a_custom_resources_strategy_is_its_apiservers_alone() -> None:
    widgets = Resource("example.com", "v1", "Widget", "widgets", True)
    mine, other = Strategies(), Strategies()
    custom = Strategy(widgets)
    mine.register(custom)
    assert mine.for_resource(widgets) is custom
    assert other.for_resource(widgets) is not custom
    mine.unregister(widgets.group_resource)
    assert mine.for_resource(widgets) is not custom


def test_a_custom_kind_named_like_a_core_kind_gets_no_core_rules() -> None:
    """serving.knative.dev's Service: metadata rules only, no core Service defaults."""
    knative = Resource("serving.knative.dev", "v1", "Service", "services", True)
    strategy = Strategies().for_resource(knative)
    obj: Object = {"metadata": {"name": "hello", "namespace": "default"}, "spec": {}}
    strategy.default(obj)
    assert obj["spec"] == {}
    assert strategy.validate(obj) == []


def _lb_spec(**changes: Any) -> dict[str, Any]:
    spec = {
        "type": "LoadBalancer",
        "ports": [{"port": 80, "nodePort": 30080}],
        "allocateLoadBalancerNodePorts": True,
        "externalTrafficPolicy": "Cluster",
    }
    return {"spec": {**spec, **changes}}


@pytest.mark.parametrize(
    ("changes", "left"),
    [
        # kubectl patch of the type alone: what only a LoadBalancer had goes.
        ({"type": "ClusterIP"}, {"type": "ClusterIP", "ports": [{"port": 80}]}),
        (
            {"type": "NodePort"},
            {
                "type": "NodePort",
                "ports": [{"port": 80, "nodePort": 30080}],
                "externalTrafficPolicy": "Cluster",
            },
        ),
        # What the client changed is its own: validation judges it.
        (
            {"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30081}]},
            {"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30081}]},
        ),
    ],
)
def test_a_service_type_change_drops_the_old_types_fields(
    changes: dict[str, Any], left: dict[str, Any]
) -> None:
    new, old = _lb_spec(**changes), _lb_spec()
    drop_type_dependent_fields(new, old)
    assert new["spec"] == left
