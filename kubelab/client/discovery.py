"""Discovery: which resources the apiserver serves now (client-go's discovery client).

The built-in resources are known in advance (`kubelab.api.resources.RESOURCES`), but
the resources of CustomResourceDefinitions come and go while a controller runs. The
controllers that act on every resource (the namespace controller empties a namespace of
all its objects, the garbage collector follows ownerReferences between any objects) ask
the apiserver instead, as Kubernetes' do (`ServerPreferredResources`).

One request answers: `GET /apis` asking for the aggregated format
(`apidiscovery.k8s.io/v2` APIGroupDiscoveryList, as kubectl and client-go ask since
Kubernetes 1.30), which lists every group, its versions preferred first, and each
version's resources with kind, scope and verbs. The named groups are all that can be
custom; the core group is built in. Only each group's preferred version counts: every
version of a resource shows the same objects, so following one is enough. Each becomes a
`Resource` built from its discovery entry; `Discovered.custom` keeps those that are not
built in, which the controllers add to the built-in ones they know better (whether
stored, or served from another's objects). A group version marked stale (its server
could not answer, for an aggregated API) is named in `Discovered.failed` instead, as
client-go's partial discovery errors: a controller deciding that a namespace is empty
must know that it could not see everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubelab.api.resources import RESOURCES, Resource
from kubelab.client.rest import RestClient

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

_BUILT_IN = frozenset(r.group_resource for r in RESOURCES)


@dataclass(frozen=True)
class Discovered:
    """What one discovery found: the resources served in their groups' preferred
    versions, and the group versions that could not be read (with why)."""

    resources: tuple[Resource, ...]
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def custom(self) -> tuple[Resource, ...]:
        """The resources that are not built in (those of CustomResourceDefinitions)."""
        return tuple(r for r in self.resources if r.group_resource not in _BUILT_IN)


def _resource(group: str, version: str, entry: dict[str, Any]) -> Resource:
    kind = (entry.get("responseKind") or {}).get("kind") or ""
    return Resource(
        group,
        version,
        str(kind),
        str(entry["resource"]),
        entry.get("scope") == "Namespaced",
        short_names=tuple(entry.get("shortNames") or ()),
        verbs=tuple(entry.get("verbs") or ()),
        categories=tuple(entry.get("categories") or ()),
    )


def discover(client: RestClient) -> Discovered:
    """The resources of the named groups the apiserver serves now (module docstring);
    StatusError or ServerUnreachable if it cannot say."""
    answer = client.request("GET", "/apis", accept=AGGREGATED)
    if not isinstance(answer, dict) or answer.get("kind") != "APIGroupDiscoveryList":
        raise ValueError(
            "the apiserver does not serve aggregated discovery (apidiscovery.k8s.io/v2)"
        )
    found: list[Resource] = []
    failed: dict[str, str] = {}
    for group in answer.get("items") or []:
        name = str((group.get("metadata") or {}).get("name") or "")
        versions = group.get("versions") or []
        if not versions:
            continue
        preferred = versions[0]
        version = str(preferred.get("version"))
        if preferred.get("freshness") == "Stale":
            failed[f"{name}/{version}"] = "its discovery document is stale"
            continue
        found.extend(_resource(name, version, entry) for entry in preferred.get("resources") or [])
    return Discovered(tuple(found), failed)
