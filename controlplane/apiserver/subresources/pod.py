"""The pod's write subresources: ``binding`` (the scheduler's decision) and ``eviction``
(a delete that respects the pod's disruption budget). The pod's live-data subresources
(log, exec, attach, portforward, proxy) are in `proxy`; its status in `generic`.

* ``binding``: a Binding sets the pod's ``spec.nodeName`` and its PodScheduled condition
  once; a second binding, or one of a pod being deleted, is a 409.
* ``eviction``: an Eviction deletes the pod if its disruption budget allows
  (`controlplane.apiserver.eviction` holds the rules).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from flask import Response, request

from kubelab.api import errors
from kubelab.api.errors import FieldError

from ..eviction import ChargeBudget, admit_eviction
from ..handlers import json_response, request_body
from ..registry import DeleteOptions, Registry, UpdateStrategy
from ..strategies import Strategy, now_rfc3339
from .rest import Object, SubresourceRequest, SubresourceREST

_CREATED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


class BindingUpdateStrategy(UpdateStrategy):
    """A binding's write: the server itself wrote both ``spec.nodeName`` and the
    PodScheduled condition, so nothing of the stored pod is kept back; and since the pod
    update rules forbid users to change ``spec.nodeName``, the result is validated as an
    object, not as an update."""

    subresource = "binding"

    def prepare_for_update(self, strategy: Strategy, new: Object, old: Object) -> Object:
        return new

    def validate_update(self, strategy: Strategy, new: Object, old: Object) -> list[FieldError]:
        return strategy.validate(new)


BINDING = BindingUpdateStrategy()


class BindingREST(SubresourceREST):
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def create(self, req: SubresourceRequest) -> Response:
        name, binding = req.name, request_body()
        target = binding.get("target")
        node = target.get("name") if isinstance(target, dict) else None
        if not node or not isinstance(node, str):
            raise errors.invalid_object("Binding", name, [errors.required("target.name")])
        pod_name = binding.get("metadata", {}).get("name", name)
        if pod_name != name:
            raise errors.bad_request("the Binding's name must be the pod's name")
        self.registry.update_with(
            req.resource, req.namespace, name, _assign(name, node), req.user, BINDING
        )
        return json_response(_CREATED, 201)


def _assign(name: str, node: str) -> Callable[[Object], Object]:
    """The change that binds pod `name` to `node`, unless it is bound or going."""

    def bind(old: Object) -> Object:
        if old.get("metadata", {}).get("deletionTimestamp"):
            raise errors.conflict(
                "pods", name, why="pod is being deleted, cannot be assigned a host"
            )
        if old.get("spec", {}).get("nodeName"):
            raise errors.conflict(
                "pods",
                name,
                why=(f'pod {name} is already assigned to node "{old["spec"]["nodeName"]}"'),
            )
        new = copy.deepcopy(old)
        new["spec"]["nodeName"] = node
        conditions = [
            c
            for c in new.setdefault("status", {}).get("conditions", [])
            if c.get("type") != "PodScheduled"
        ]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": now_rfc3339(),
                "lastProbeTime": None,
            }
        )
        new["status"]["conditions"] = conditions
        return new

    return bind


class EvictionREST(SubresourceREST):
    def __init__(
        self, registry: Registry, budgets: Callable[[str], list[Object]], charge: ChargeBudget
    ) -> None:
        """`budgets`: a namespace's PodDisruptionBudgets (cached); `charge`: a
        compare-and-swap of one of them in the store."""
        self.registry, self.budgets, self.charge = registry, budgets, charge

    def create(self, req: SubresourceRequest) -> Response:
        r, ns = req.resource, req.namespace
        options = DeleteOptions.parse(dict(request.args), request_body().get("deleteOptions"))
        admit_eviction(
            self.registry.get(r, ns, req.name),
            self.budgets(ns),
            self.charge,
            dry_run=options.dry_run,
        )
        self.registry.delete(r, ns, req.name, options, req.user)
        return json_response(_CREATED, 201)
