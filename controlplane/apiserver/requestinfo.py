"""What a request is about, read off its method and path (Kubernetes' RequestInfo).

Authorization, admission, audit and metrics all speak in these terms (verb, API group,
resource, subresource, namespace, name), so the path is parsed once, here:

    /api/v1/namespaces/default/pods/web/log    get pods/log "web" in default
    /apis/apps/v1/deployments?watch=1          watch deployments in all namespaces
    /api/v1/namespaces/kube-system             get namespaces "kube-system"
    /healthz                                   a non-resource request: get /healthz

The verb follows Kubernetes: GET is `get` on a name, `list` on a collection and `watch`
with ``?watch=1``; POST is `create`; PUT `update`; PATCH `patch`; DELETE `delete` on a
name and `deletecollection` on a collection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_TRUE = ("1", "true", "True")
# /api/v1/namespaces/<name>/status is the namespace's own subresource, not a resource
# called "status" inside the namespace.
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True)
class RequestInfo:
    verb: str
    path: str
    is_resource: bool = False
    api_prefix: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def parse(method: str, path: str, args: Mapping[str, str]) -> RequestInfo:
    method = method.upper()
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return RequestInfo(_non_resource_verb(method), path)
    prefix = parts[0]
    if prefix == "api":
        group, rest = "", parts[1:]
    else:
        if len(parts) < 2:
            return RequestInfo(_non_resource_verb(method), path)
        group, rest = parts[1], parts[2:]
    if not rest:
        return RequestInfo(_non_resource_verb(method), path)
    version, rest = rest[0], rest[1:]
    if not rest:  # discovery of one group version
        return RequestInfo(_non_resource_verb(method), path)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = "/".join(rest[2:]) if len(rest) > 2 else ""
    if resource == "namespaces" and name:
        # /api/v1/namespaces/<name>[/status|finalize]: the namespace itself is the object.
        namespace = name
    if subresource in ("proxy",) or subresource.startswith("proxy/"):
        subresource = "proxy"
    watching = args.get("watch", "") in _TRUE
    if method in ("GET", "HEAD"):
        verb = "watch" if watching else ("get" if name else "list")
    elif method == "POST":
        verb = "create"
    elif method == "PUT":
        verb = "update"
    elif method == "PATCH":
        verb = "patch"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = method.lower()
    return RequestInfo(
        verb=verb,
        path=path,
        is_resource=True,
        api_prefix=prefix,
        group=group,
        version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )


def _non_resource_verb(method: str) -> str:
    return {
        "GET": "get",
        "HEAD": "head",
        "POST": "post",
        "PUT": "put",
        "PATCH": "patch",
        "DELETE": "delete",
    }.get(method.upper(), method.lower())
