"""Subresources as REST objects of their own, as Kubernetes' registry has them
(``pkg/registry/core/pod/storage``: a ``PodStorage`` of Pod, Status, Binding, Eviction,
Log, Exec, Attach, PortForward, Proxy): one `SubresourceREST` per subresource, answering
the verbs it serves; adding a subresource adds a type and a line in `storage`, not a
branch in a handler.

Which subresources a resource has is its `Resource.subresources` (the built-in table, or
a CRD's ``subresources``); which REST object serves one is `SubresourceStorage`'s
lookup: the resource's own (``pods/binding``, keyed by group and resource, never by
kind), else the one every resource shares (``status``, ``scale``). A subresource a
resource declares but nothing serves (``pods/ephemeralcontainers``) is a 405.

==========================  ==================================================
module                      REST objects
==========================  ==================================================
`generic`                   status, scale (any resource, custom ones too);
                            namespaces/finalize, certificatesigningrequests/approval
`pod`                       pods/binding, pods/eviction
`serviceaccount`            serviceaccounts/token
`proxy`                     pods/log, exec, attach, portforward, proxy; nodes/proxy;
                            services/proxy (the live-data path, from the kubelets)
==========================  ==================================================
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from flask import Response

from kubelab.api import errors
from kubelab.api.resources import Resource

from ..authn import UserInfo
from ..registry import STATUS
from ..requestinfo import RequestInfo
from .generic import FieldREST, ScaleREST, StatusREST
from .pod import BindingREST, EvictionREST
from .proxy import LogREST, NodeProxyREST, PodProxyREST, ServiceProxyREST, StreamREST
from .rest import SubresourceRequest, SubresourceREST
from .serviceaccount import TokenREST

if TYPE_CHECKING:
    from ..apiserver import APIServer

__all__ = ["SubresourceREST", "SubresourceRequest", "SubresourceStorage", "storage"]


class SubresourceStorage:
    """An apiserver's subresource REST objects (see the module doc)."""

    def __init__(self, shared: dict[str, SubresourceREST], own: dict[str, SubresourceREST]) -> None:
        """`shared`: by subresource name; `own`: by "<group resource>/<subresource>"."""
        self.shared, self.own = shared, own

    def rest_for(self, r: Resource, subresource: str) -> SubresourceREST | None:
        return self.own.get(f"{r.group_resource}/{subresource}") or self.shared.get(subresource)

    def serve(self, r: Resource, info: RequestInfo, user: UserInfo) -> Response:
        """Answer a request of one of `r`'s subresources."""
        sub = info.subresource
        if sub not in r.subresources:
            raise errors.StatusError(
                404, "NotFound", f"{r.group_resource} has no subresource {sub!r}"
            )
        rest = self.rest_for(r, sub)
        if rest is None:
            raise errors.method_not_allowed(f"{info.verb} is not supported on {r.plural}/{sub}")
        return rest.serve(SubresourceRequest(r, info, user))


def storage(server: APIServer) -> SubresourceStorage:
    """The subresource REST objects of `server`, over its registry and its kubelet client."""
    registry, kubelets = server.registry, server.kubelets
    streams = StreamREST(registry, kubelets, server.authz)
    return SubresourceStorage(
        shared={
            "status": StatusREST(server.registry_for),
            "scale": ScaleREST(server.registry_for, server.api.strategies),
        },
        own={
            "pods/binding": BindingREST(registry),
            "pods/eviction": EvictionREST(
                registry,
                functools.partial(server.cached_list, "poddisruptionbudgets.policy"),
                functools.partial(server.swap, "poddisruptionbudgets.policy"),
            ),
            "pods/log": LogREST(registry, kubelets),
            "pods/exec": streams,
            "pods/attach": streams,
            "pods/portforward": streams,
            "pods/proxy": PodProxyREST(registry, kubelets),
            "services/proxy": ServiceProxyREST(),
            "nodes/proxy": NodeProxyREST(registry, kubelets),
            "serviceaccounts/token": TokenREST(registry, server.issuer),
            "namespaces/finalize": FieldREST(registry, "spec", "finalizers"),
            "certificatesigningrequests.certificates.k8s.io/approval": FieldREST(
                registry, "status", "conditions", STATUS
            ),
        },
    )
