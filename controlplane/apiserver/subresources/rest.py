"""The shape every subresource's REST object has, and what a call of one carries.

A REST object answers the verbs it serves by overriding them (`get`, `create`, `update`,
`patch`); the others are a 405 naming the verb and the subresource, as Kubernetes' API
installer registers only the verbs a REST object implements. A connecter (logs, exec,
port-forward, proxy: `proxy`) takes every verb and overrides `serve` itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Response

from kubelab.api import errors
from kubelab.api.resources import Resource

from ..authn import UserInfo
from ..requestinfo import RequestInfo

Object = dict[str, Any]


@dataclass(frozen=True)
class SubresourceRequest:
    """One call of a subresource: the resource it belongs to, the parsed request and who
    made it. The body and query stay in Flask's request, as for the main resource."""

    resource: Resource
    info: RequestInfo
    user: UserInfo

    @property
    def namespace(self) -> str:
        """The object's namespace ("" for a cluster-scoped resource, whatever the path)."""
        return self.info.namespace if self.resource.namespaced else ""

    @property
    def name(self) -> str:
        return self.info.name


class SubresourceREST:
    """A subresource's REST object (Kubernetes' ``rest.Storage`` of one subresource, as
    ``PodStorage`` holds one per pod subresource): adding a subresource adds one of these,
    registered in `subresources.storage`."""

    def serve(self, req: SubresourceRequest) -> Response:
        """Answer `req` by its verb."""
        verbs = {"get": self.get, "create": self.create, "update": self.update, "patch": self.patch}
        return verbs.get(req.info.verb, _refuse)(req)

    def get(self, req: SubresourceRequest) -> Response:
        return _refuse(req)

    def create(self, req: SubresourceRequest) -> Response:
        return _refuse(req)

    def update(self, req: SubresourceRequest) -> Response:
        return _refuse(req)

    def patch(self, req: SubresourceRequest) -> Response:
        return _refuse(req)


def _refuse(req: SubresourceRequest) -> Response:
    """405 for a verb the subresource does not serve."""
    raise errors.method_not_allowed(
        f"{req.info.verb} is not supported on {req.resource.plural}/{req.info.subresource}"
    )
