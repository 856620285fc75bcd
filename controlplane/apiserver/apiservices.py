"""The APIService objects of the groups this apiserver serves itself.

kube-aggregator lists every API group version as an APIService (`kubectl get
apiservices`), "Local" for those the apiserver serves and Available; tools read them
to tell whether an API is up (Helm, the metrics pipeline, `kubectl api-resources`'
error reporting). The apiserver creates them at start, with Kubernetes' names
("v1." for the core group, "v1.apps") and an order of preference: groups in discovery
order, a group's versions in its preferred order.
"""

from __future__ import annotations

from typing import Any

from kubelab.api.resources import groups

Object = dict[str, Any]

_TOP_GROUP_PRIORITY = 18000
_GROUP_STEP = 100
_VERSION_STEP = 15


def local_api_services() -> list[Object]:
    """One APIService per group version served here, without status."""
    services = []
    for i, (group, versions) in enumerate(groups()):
        for j, version in enumerate(versions):
            services.append(
                {
                    "apiVersion": "apiregistration.k8s.io/v1",
                    "kind": "APIService",
                    "metadata": {
                        "name": f"{version}.{group}",
                        "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"},
                    },
                    "spec": {
                        "group": group,
                        "version": version,
                        "groupPriorityMinimum": max(1, _TOP_GROUP_PRIORITY - i * _GROUP_STEP),
                        "versionPriority": _VERSION_STEP * (len(versions) - j),
                    },
                }
            )
    return services


def available(service: Object, now: str) -> Object:
    """`service` with the Available condition of an API served locally."""
    conditions = [
        c
        for c in (service.get("status") or {}).get("conditions") or []
        if c.get("type") != "Available"
    ]
    conditions.append(
        {
            "type": "Available",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "Local",
            "message": "Local APIServices are always available",
        }
    )
    return {**service, "status": {"conditions": conditions}}
