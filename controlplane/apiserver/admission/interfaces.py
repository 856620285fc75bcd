"""The shape of an admission plugin, as Kubernetes' ``k8s.io/apiserver/pkg/admission``
gives it: a `Plugin` has a ``NAME`` (what ``--enable-admission-plugins`` lists) and says
which operations it `handles`; it implements `MutationInterface` (``admit``: may change
the object), `ValidationInterface` (``validate``: may only refuse), or both. A plugin is
built by its factory from a `Lookup`, the read access to the cluster it may use (what
Kubernetes hands plugins through its initializers: informers, the authorizer).

A plugin decides what a request is by its group and resource (and subresource), as
Kubernetes' plugins compare ``a.GetResource().GroupResource()``: never by the kind's name,
which a custom resource may share (a CRD's kind ``Pod`` in ``example.com`` is
``pods.example.com``, not ``pods``, and gets none of the pod plugins' rules). The group
resources several plugins look for are constants here, the others are their plugin's.

The scheduler's plugin framework follows the same shape: a name, the extension points
(interfaces) a plugin implements, and a registry of factories by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ..authz import Authorizer
from ..registry import Attributes

Object = dict[str, Any]
Get = Callable[[str, str, str], Object | None]
"""(resource plural, namespace, name) -> object from the cache."""
List = Callable[[str, str], list[Object]]
"""(resource plural, namespace) -> objects from the cache."""
Charge = Callable[[str, str, Callable[[Object], Object | None]], Object | None]
"""(namespace, quota name, change) -> the quota as stored after `change` (None if it is
gone): a compare-and-swap loop that calls `change` on the stored quota until its write
sticks; `change` may raise to refuse, or return None to leave the quota as it is."""

WRITES = frozenset({"CREATE", "UPDATE", "DELETE"})

# Group resources (`Resource.group_resource`) several plugins act on.
PODS = "pods"
NAMESPACES = "namespaces"


@dataclass(frozen=True)
class Lookup:
    """What plugins may read of the cluster: the watch cache (`get`, `list_objects`), the
    store for what the cache may not have seen yet (`live_get`), and the authorizer; and
    the one write a plugin makes, ResourceQuota's charge (`charge`, None where there is
    no store to write to: usage is then only checked)."""

    get: Get
    list_objects: List
    live_get: Get
    authorizer: Authorizer
    charge: Charge | None = None

    def find(self, plural: str, namespace: str, name: str) -> Object | None:
        """From the cache, or from the store when the cache has not seen it yet: a
        namespace or account created a moment ago must not make the next create fail."""
        return self.get(plural, namespace, name) or self.live_get(plural, namespace, name)


class Plugin:
    """An admission plugin (see the module doc); only ResourceQuota writes the cluster
    (its charge, through `Lookup.charge`)."""

    NAME: ClassVar[str]
    OPERATIONS: ClassVar[frozenset[str]]
    """The operations (CREATE, UPDATE, DELETE) the plugin acts on."""

    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup

    def handles(self, operation: str) -> bool:
        return operation in self.OPERATIONS


class MutationInterface(Plugin, ABC):
    @abstractmethod
    def admit(self, attrs: Attributes) -> None:
        """Change attrs.object (defaults of cluster policy), or refuse with a
        StatusError."""


class ValidationInterface(Plugin, ABC):
    @abstractmethod
    def validate(self, attrs: Attributes) -> None:
        """Refuse with a StatusError; must not change anything."""


Factory = Callable[[Lookup], Plugin]


def created_pod(attrs: Attributes) -> Object | None:
    """The new pod of a pod create (not of one of its subresources), else None."""
    if attrs.operation != "CREATE" or attrs.subresource or attrs.resource.group_resource != PODS:
        return None
    return attrs.object
