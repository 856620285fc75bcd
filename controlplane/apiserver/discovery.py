"""API discovery: the documents that tell a client which groups, versions and resources exist.

What kubectl 1.37 does, and so what this module serves:

* It asks `/api` and `/apis` once each with
  `Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json`.
  A server that answers with that Content-Type hands over every group, version and
  resource (with its subresources) in two requests: the *aggregated* discovery format
  (`apidiscovery.k8s.io/v2`). The client reads the response's Content-Type, not the body,
  to tell the two formats apart, so the media type parameters must come back as sent.
* A server that answers plain `application/json` instead gets the legacy walk: `/api`
  (APIVersions), `/apis` (APIGroupList), then one APIResourceList per group version
  (`/api/v1`, `/apis/apps/v1`, ...). Older kubectl, the official Python client and
  `kubectl get --raw` use these, so both formats are served from the same table.
* kubectl 1.37 no longer asks for `v2beta1`; older releases do (alone, or after v2). Its
  shape is v2's but for `apiVersion`, so it costs nothing to keep.

Everything here is derived from an apiserver's `kubelab.api.resources.ResourceTable`, so
`kubectl api-resources` shows exactly what that apiserver routes. The documents change
only when a CustomResourceDefinition comes or goes, which gives the apiserver a new table
and a new `Discovery`; each `Discovery` keeps its documents' encoded bytes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource, ResourceTable

JSONDict = dict[str, Any]

DISCOVERY_GROUP = "apidiscovery.k8s.io"
AGGREGATED_VERSIONS = ("v2", "v2beta1")
JSON_CONTENT_TYPE = "application/json"


def aggregated_content_type(version: str) -> str:
    """The media type both asked for and answered with for aggregated discovery."""
    return f"application/json;g={DISCOVERY_GROUP};v={version};as=APIGroupDiscoveryList"


# Verbs of each subresource, as kube-apiserver reports them: the table of resources only
# says which subresources exist and what kind their body is.
SUBRESOURCE_VERBS: dict[str, tuple[str, ...]] = {
    "status": ("get", "patch", "update"),
    "scale": ("get", "patch", "update"),
    "approval": ("get", "patch", "update"),
    "ephemeralcontainers": ("get", "patch", "update"),
    "finalize": ("update",),
    "binding": ("create",),
    "eviction": ("create",),
    "token": ("create",),
    "log": ("get",),
    "exec": ("create", "get"),
    "attach": ("create", "get"),
    "portforward": ("create", "get"),
    "proxy": ("create", "delete", "get", "patch", "update"),
}

# Subresource bodies that live in another API group than their parent resource.
_FOREIGN_KINDS = {
    "Scale": ("autoscaling", "v1"),
    "Eviction": ("policy", "v1"),
    "TokenRequest": ("authentication.k8s.io", "v1"),
}

# Streaming subresources are described by their options kind (PodExecOptions, ...).
_CONNECT_OPTIONS = {"exec": "Exec", "attach": "Attach", "portforward": "PortForward"}


@dataclass(frozen=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    def as_dict(self) -> dict[str, str]:
        return {"group": self.group, "version": self.version, "kind": self.kind}


def subresource_kind(resource: Resource, subresource: str) -> GroupVersionKind:
    """The kind a subresource reads and writes: the parent's own kind unless the table names
    another (deployments/scale is autoscaling/v1 Scale, pods/exec is PodExecOptions)."""
    kind = resource.subresources[subresource]
    if not kind:
        if subresource in _CONNECT_OPTIONS:
            kind = f"{resource.kind}{_CONNECT_OPTIONS[subresource]}Options"
        elif subresource == "proxy":
            kind = f"{resource.kind}ProxyOptions"
        else:
            kind = resource.kind
    group, version = _FOREIGN_KINDS.get(kind, (resource.group, resource.version))
    return GroupVersionKind(group, version, kind)


def storage_version_hash(resource: Resource) -> str:
    """An opaque token that changes when the stored group/version/kind changes; storage
    version migrators compare it, clients only check that it is present."""
    digest = hashlib.sha256(f"{resource.group_version}/{resource.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _group_version_entry(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": f"{group}/{version}" if group else version, "version": version}


def _api_group(group: str, versions: list[str]) -> JSONDict:
    entries = [_group_version_entry(group, v) for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_versions(table: ResourceTable, server_address: str = "") -> JSONDict:
    """`/api`: the core group's versions. `serverAddressByClientCIDRs` is a required field;
    it is left empty unless the caller knows the address clients should use."""
    cidrs = [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}] if server_address else []
    versions = next(v for g, v in table.groups() if g == "")
    return {"kind": "APIVersions", "versions": versions, "serverAddressByClientCIDRs": cidrs}


def api_group_list(table: ResourceTable) -> JSONDict:
    """`/apis`: every named group (the core group is only under `/api`)."""
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_api_group(g, versions) for g, versions in table.groups() if g],
    }


def api_group(table: ResourceTable, group: str) -> JSONDict | None:
    """`/apis/<group>`, or None when the group is not served."""
    for name, versions in table.groups():
        if name == group and group:
            return _group_document(group, versions)
    return None


def _group_document(group: str, versions: list[str]) -> JSONDict:
    return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(group, versions)}


def _legacy_resource(resource: Resource) -> JSONDict:
    entry: JSONDict = {
        "name": resource.plural,
        "singularName": resource.singular,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": list(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    if resource.stored:
        entry["storageVersionHash"] = storage_version_hash(resource)
    return entry


def _legacy_subresource(resource: Resource, subresource: str) -> JSONDict:
    gvk = subresource_kind(resource, subresource)
    entry: JSONDict = {
        "name": f"{resource.plural}/{subresource}",
        "singularName": "",
        "namespaced": resource.namespaced,
        "kind": gvk.kind,
        "verbs": list(SUBRESOURCE_VERBS[subresource]),
    }
    # Only a body from another group version is spelled out, as kube-apiserver does.
    if (gvk.group, gvk.version) != (resource.group, resource.version):
        entry["group"] = gvk.group
        entry["version"] = gvk.version
    return entry


def api_resource_list(table: ResourceTable, group: str, version: str) -> JSONDict | None:
    """`/api/v1` or `/apis/<group>/<version>`: resources, then their subresources as
    "pods/status"-style entries; None when the group version is not served."""
    if not table.in_group_version(group, version):
        return None
    return _resource_list(table, group, version)


def _resource_list(table: ResourceTable, group: str, version: str) -> JSONDict:
    resources: list[JSONDict] = []
    for resource in table.in_group_version(group, version):
        resources.append(_legacy_resource(resource))
        resources.extend(_legacy_subresource(resource, s) for s in resource.subresources)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _aggregated_resource(resource: Resource) -> JSONDict:
    entry: JSONDict = {
        "resource": resource.plural,
        "responseKind": GroupVersionKind(resource.group, resource.version, resource.kind).as_dict(),
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular,
        "verbs": list(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    if resource.subresources:
        entry["subresources"] = [
            {
                "subresource": sub,
                "responseKind": subresource_kind(resource, sub).as_dict(),
                "verbs": list(SUBRESOURCE_VERBS[sub]),
            }
            for sub in resource.subresources
        ]
    return entry


def aggregated_discovery(table: ResourceTable, core: bool, version: str = "v2") -> JSONDict:
    """The APIGroupDiscoveryList for `/api` (core=True: the unnamed group alone) or `/apis`
    (every named group). Versions are listed preferred first, as clients expect."""
    items = []
    for group, versions in table.groups():
        if (group == "") != core:
            continue
        items.append(
            {
                "metadata": {"name": group},
                "versions": [
                    {
                        "version": v,
                        "resources": [
                            _aggregated_resource(r) for r in table.in_group_version(group, v)
                        ],
                        "freshness": "Current",
                    }
                    for v in versions
                ],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"{DISCOVERY_GROUP}/{version}",
        "metadata": {},
        "items": items,
    }


@dataclass(frozen=True)
class MediaRange:
    """One entry of an Accept header: `type/subtype;param=value` with its quality."""

    type: str
    subtype: str
    params: dict[str, str] = field(default_factory=dict)
    quality: float = 1.0

    def covers(self, type_: str, subtype: str) -> bool:
        """Whether this range admits type_/subtype (wildcards included)."""
        return self.type in ("*", type_) and self.subtype in ("*", subtype)


def parse_accept(header: str | None) -> list[MediaRange]:
    """Accept header entries, most preferred first (by q, then the order the client sent).
    A missing or empty header means anything is fine, as HTTP says."""
    if not header or not header.strip():
        return [MediaRange("*", "*")]
    ranges: list[MediaRange] = []
    for item in header.split(","):
        mime, *raw_params = (part.strip() for part in item.split(";"))
        type_, _, subtype = mime.partition("/")
        params: dict[str, str] = {}
        quality = 1.0
        for raw in raw_params:
            key, _, value = raw.partition("=")
            key, value = key.strip().lower(), value.strip().strip('"')
            if key == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
            elif key:
                params[key] = value
        if type_ and subtype and quality > 0:
            ranges.append(MediaRange(type_.lower(), subtype.lower(), params, quality))
    return sorted(ranges, key=lambda r: -r.quality)


@dataclass(frozen=True)
class Negotiated:
    """Which discovery format to send: `aggregated` is the apidiscovery version ("v2",
    "v2beta1") or None for the legacy documents; `content_type` is the header to answer
    with, which is how the client learns which format it got."""

    aggregated: str | None
    content_type: str


def negotiate(accept: str | None, aggregated: bool = True) -> Negotiated | None:
    """Pick the discovery format for an Accept header, honouring the client's preference;
    None when nothing the client accepts can be produced (answer 406).

    An aggregated range must name the group, a version served here and the list kind, and
    is only considered where aggregated documents exist (aggregated=True: `/api`, `/apis`).
    Protobuf is never produced, so `application/vnd.kubernetes.protobuf` ranges are
    skipped and the client's next choice wins."""
    for media in parse_accept(accept):
        if not media.covers("application", "json"):
            continue
        if "g" not in media.params:
            return Negotiated(None, JSON_CONTENT_TYPE)
        version = media.params.get("v", "")
        if (
            aggregated
            and media.params["g"] == DISCOVERY_GROUP
            and version in AGGREGATED_VERSIONS
            and media.params.get("as") == "APIGroupDiscoveryList"
        ):
            return Negotiated(version, aggregated_content_type(version))
    return None


@dataclass(frozen=True)
class Served:
    """A ready HTTP answer: the Flask view passes these straight to `Response`."""

    status: int
    body: bytes
    headers: dict[str, str]


def _not_found() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource")


def not_acceptable(supported: list[str]) -> StatusError:
    """The 406 kube-apiserver sends when no Accept entry can be produced."""
    return StatusError(
        406,
        "NotAcceptable",
        "only the following media types are accepted: " + ", ".join(supported),
    )


class Discovery:
    """The discovery documents of one resource table, built on first use and kept as
    encoded bytes: an apiserver makes a new one whenever its table changes."""

    def __init__(self, table: ResourceTable) -> None:
        self.table = table

    @functools.cached_property
    def _documents(self) -> dict[tuple[str, str | None], bytes]:
        """Every discovery document, encoded, by (path, aggregated version or None); a
        fixed set of keys means requests for made-up paths cannot grow it."""
        table = self.table
        docs: dict[tuple[str, str | None], JSONDict] = {
            ("/api", None): api_versions(table),
            ("/apis", None): api_group_list(table),
        }
        for version in AGGREGATED_VERSIONS:
            docs["/api", version] = aggregated_discovery(table, True, version)
            docs["/apis", version] = aggregated_discovery(table, False, version)
        for group, versions in table.groups():
            if group:
                docs[f"/apis/{group}", None] = _group_document(group, versions)
            for version in versions:
                path = f"/apis/{group}/{version}" if group else f"/api/{version}"
                docs[path, None] = _resource_list(table, group, version)
        return {key: json.dumps(doc, separators=(",", ":")).encode() for key, doc in docs.items()}

    def serve(self, path: str, accept: str | None) -> Served:
        """The answer for GET on a discovery path (`/api`, `/apis`, `/api/v1`,
        `/apis/<group>`, `/apis/<group>/<version>`), content-negotiated on the Accept
        header.

        Raises StatusError: 404 for a group or version that is not served, 406 when the
        client accepts none of the formats offered there."""
        path = "/" + path.strip("/")
        at_root = path in ("/api", "/apis")
        choice = negotiate(accept, aggregated=at_root)
        if choice is None:
            offered = [JSON_CONTENT_TYPE]
            if at_root:
                offered += [aggregated_content_type(v) for v in AGGREGATED_VERSIONS]
            raise not_acceptable(offered)
        body = self._documents.get((path, choice.aggregated))
        if body is None:
            raise _not_found()
        return Served(200, body, {"Content-Type": choice.content_type})
