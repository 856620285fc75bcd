"""The live-data subresources: what the apiserver answers from a node's kubelet, not from
the store (the transport and the kubelet's paths are in `controlplane.apiserver.kubelet`).

* ``pods/log``: streamed from ``/containerLogs/...`` (``kubectl logs -f`` follows);
* ``pods/exec|attach|portforward``: the client's protocol upgrade (WebSocket or SPDY)
  tunnelled to the kubelet; the upgrade arrives as a GET, so it needs the ``create``
  right, as in Kubernetes;
* ``nodes/proxy/<path>``: a GET of ``/<path>`` on the node's kubelet;
* ``pods/proxy`` and ``services/proxy`` go to the pod's or the service's own address,
  which the apiserver cannot reach without the pod network: a 503 that says what to use.

They take every verb (Kubernetes' connecters), so each overrides `serve`; a pod's log,
exec, attach and port-forward first need the pod scheduled to a node.
"""

from __future__ import annotations

import logging

from flask import Response, request

from kubelab.api import errors
from kubelab.api.resources import by_group_resource

from .. import kubelet
from ..authz import Authorizer
from ..registry import Registry
from ..requestinfo import RequestInfo
from .rest import Object, SubresourceRequest, SubresourceREST

log = logging.getLogger("kubelab.apiserver.proxy")

# Request headers an upgraded stream needs at the kubelet (the client's credentials stay
# here: they are the apiserver's business, not the kubelet's).
_UPGRADE_HEADERS = (
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
    "x-stream-protocol-version",
    "content-length",
)


class _KubeletREST(SubresourceREST):
    """A subresource answered by a node's kubelet."""

    def __init__(self, registry: Registry, kubelets: kubelet.KubeletClient) -> None:
        self.registry, self.kubelets = registry, kubelets

    def node(self, name: str) -> Object:
        return self.registry.get(by_group_resource("nodes"), "", name)

    def scheduled_pod(self, req: SubresourceRequest) -> tuple[Object, str]:
        """The pod `req` names and the node it runs on; 400 while it has none."""
        pod = self.registry.get(req.resource, req.namespace, req.name)
        node_name = pod.get("spec", {}).get("nodeName") or ""
        if not node_name:
            raise errors.bad_request(
                f"pod {req.name} is not scheduled to a node yet; {req.info.subresource} "
                "needs a running container"
            )
        return pod, str(node_name)


class LogREST(_KubeletREST):
    def serve(self, req: SubresourceRequest) -> Response:
        pod, node_name = self.scheduled_pod(req)
        if req.info.verb != "get":
            raise errors.method_not_allowed(
                f"{req.resource.plural}/{req.info.subresource} is read-only"
            )
        path, follow = kubelet.log_path(pod, request.args.to_dict())
        body = self.kubelets.stream(self.node(node_name), path, follow)
        return Response(body, mimetype="text/plain", direct_passthrough=True)


class StreamREST(_KubeletREST):
    """exec, attach and port-forward: the client's upgrade tunnelled to the kubelet."""

    def __init__(
        self, registry: Registry, kubelets: kubelet.KubeletClient, authz: Authorizer
    ) -> None:
        super().__init__(registry, kubelets)
        self.authz = authz

    def serve(self, req: SubresourceRequest) -> Response:
        pod, node_name = self.scheduled_pod(req)
        r, info, user = req.resource, req.info, req.user
        # A WebSocket upgrade arrives as GET; it acts like a create, so it needs that right.
        create = RequestInfo(
            verb="create",
            path=info.path,
            is_resource=True,
            group=r.group,
            version=r.version,
            namespace=info.namespace,
            resource=r.plural,
            subresource=info.subresource,
            name=info.name,
        )
        if not self.authz.authorize(user, create).allowed:
            raise errors.forbidden_request(
                user.name, "create", r.plural, r.group, info.namespace, info.name, info.subresource
            )
        if "upgrade" not in request.headers.get("Connection", "").lower():
            raise errors.bad_request(
                f"{info.subresource} needs a connection upgrade (WebSocket or SPDY), as "
                "kubectl sends it"
            )
        take_over = request.environ.get("kubelab.take_over")
        if take_over is None:
            raise errors.service_unavailable("this server cannot hand over connections")
        path = kubelet.stream_path(
            pod, info.subresource, request.query_string.decode(), request.args.to_dict()
        )
        node = self.node(node_name)
        headers = [(k, v) for k, v in request.headers.items() if k.lower() in _UPGRADE_HEADERS]
        upgrade = request.environ.get("kubelab.upgrade")  # kept aside by the server
        if upgrade:
            headers.append(("Upgrade", upgrade))
        log.info(
            "apiserver: %s %s/%s for %s via the kubelet of %s",
            info.subresource,
            info.namespace,
            info.name,
            user.name,
            node_name,
        )
        self.kubelets.tunnel(node, f"{request.method} {path} HTTP/1.1", headers, take_over)
        return Response(b"", status=101)


class PodProxyREST(_KubeletREST):
    def serve(self, req: SubresourceRequest) -> Response:
        self.scheduled_pod(req)
        raise errors.service_unavailable(
            f"{req.info.subresource} goes to the pod's own address, which needs the pod "
            "network; use kubectl port-forward meanwhile"
        )


class ServiceProxyREST(SubresourceREST):
    def serve(self, req: SubresourceRequest) -> Response:
        raise errors.service_unavailable(
            f"{req.resource.plural}/proxy goes to the service's endpoints, which needs the "
            "pod network; use kubectl port-forward meanwhile"
        )


class NodeProxyREST(_KubeletREST):
    def serve(self, req: SubresourceRequest) -> Response:
        if req.info.verb != "get":
            raise errors.method_not_allowed("the node proxy is only served for GET")
        rest = request.full_path.split(f"/nodes/{req.name}/proxy", 1)[1]
        path = "/" + rest.lstrip("/").rstrip("?")
        body = self.kubelets.stream(self.node(req.name), path, follow=False)
        return Response(body, direct_passthrough=True)
