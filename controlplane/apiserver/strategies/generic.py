"""The default strategy: what the registry does for a kind that says nothing special.

A strategy (Kubernetes' ``pkg/registry/<group>/<kind>/strategy.go``) is where a kind's
rules live that the generic registry applies on every write: which fields the server owns
and resets on create, what an update of the main resource may not touch (the status,
which only the status subresource writes), when ``metadata.generation`` moves, how the
object is defaulted and validated (the `Defaulter` and `Validator` its resource's entry
names), and how its deletion goes (graceful, held back, marked). The registry asks its
apiserver's `controlplane.apiserver.strategies.Strategies` for the one object of a
resource and calls it; it never asks for the kind.

Two small variants cover most kinds: `StatusResetStrategy` (a controller writes the
status, so a new object's is emptied) and `NoGenerationStrategy` (objects without a
desired state to count changes of: Events, ConfigMaps, Leases).
"""

from __future__ import annotations

import copy
import datetime
import secrets
import uuid
from typing import Any, ClassVar

from kubelab.api.defaults import Defaulter
from kubelab.api.errors import FieldError
from kubelab.api.resources import Resource
from kubelab.api.validation import METADATA, Validator

Object = dict[str, Any]

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # as Kubernetes: no vowels, no look-alikes
# Metadata only the server writes: a client's values are dropped on create and replaced
# by the stored ones on update.
_CREATE_OWNED = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "resourceVersion",
    "selfLink",
)
_UPDATE_OWNED = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_name(base: str) -> str:
    """generateName + 5 random characters, the base cut so the name fits 63 chars."""
    return base[:58] + "".join(secrets.choice(_NAME_CHARS) for _ in range(5))


def _spec_part(obj: Object) -> Object:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


class Strategy:
    """Default rules; a kind's strategy overrides what differs (see the module doc)."""

    generation: ClassVar[bool] = True
    """Whether ``metadata.generation`` counts changes of the desired state (everything
    outside metadata and status)."""

    immediate_delete: ClassVar[bool] = True
    """Whether a deletion with no grace period and no finalizers removes the object at
    once (a Namespace is always marked first: its controller empties it)."""

    allocates: ClassVar[bool] = False
    """Whether writes take keys from the registry's allocator in the same transaction (a
    Service's cluster IP and node ports; see `controlplane.apiserver.services`)."""

    def __init__(
        self,
        resource: Resource,
        validator: Validator = METADATA,
        defaulter: Defaulter | None = None,
    ) -> None:
        self.resource = resource
        self.validator = validator
        self.defaulter = defaulter
        # Kinds with a status subresource keep their status out of main-resource writes.
        self.status_subresource = "status" in resource.subresources

    # -- create --------------------------------------------------------------------------

    def generate_name(self, base: str) -> str:
        return generate_name(base)

    def prepare_for_create(self, obj: Object, user: Any = None) -> None:
        """Server-owned fields of a new object: uid, creationTimestamp, generation, status.
        `user` (the creator's UserInfo) is for kinds that record who asked."""
        meta = obj.setdefault("metadata", {})
        for owned in _CREATE_OWNED:
            meta.pop(owned, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if self.generation:
            meta["generation"] = 1
        status = self.initial_status(obj)
        if status is not None:
            obj["status"] = status

    def initial_status(self, obj: Object) -> Object | None:
        """The status a new object starts with; None keeps the one it was sent with (a
        kubelet registers its Node with the node's status)."""
        return None

    # -- update --------------------------------------------------------------------------

    def prepare_for_update(self, new: Object, old: Object) -> None:
        """An update of the main resource: status and server-owned metadata stay as stored;
        the generation moves when anything outside metadata and status changed."""
        meta, old_meta = new.setdefault("metadata", {}), old.get("metadata", {})
        for owned in _UPDATE_OWNED:
            if owned in old_meta:
                meta[owned] = old_meta[owned]
            else:
                meta.pop(owned, None)
        if not meta.get("managedFields") and old_meta.get("managedFields"):
            # A client that sends none (most do) leaves the record of appliers as it is.
            meta["managedFields"] = old_meta["managedFields"]
        if self.status_subresource:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        if self.generation and _spec_part(new) != _spec_part(old):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1

    def prepare_for_status_update(self, new: Object, old: Object) -> Object:
        """A status update: only the status (and nothing of the metadata a user owns)
        moves."""
        out = copy.deepcopy(old)
        out["status"] = new.get("status", {})
        out["metadata"]["resourceVersion"] = new.get("metadata", {}).get(
            "resourceVersion", old["metadata"].get("resourceVersion")
        )
        return out

    # -- patches -------------------------------------------------------------------------

    @property
    def patch_kind(self) -> str:
        """The kind whose strategic-merge-patch metadata (`kubelab.api.patch`: which lists
        merge by which key) this resource's objects follow: a built-in resource's own.
        Kubernetes takes it from the built-in Go type; a custom resource has none,
        whatever its kind is called (see `CustomResourceStrategy`)."""
        return self.resource.kind

    # -- defaulting and validation -------------------------------------------------------

    def default(self, obj: Object) -> None:
        """Fill in what a client left out (`kubelab.api.defaults`), after the prepare step
        of any write and before admission and validation."""
        if self.defaulter is not None:
            self.defaulter(obj)

    def validate(self, obj: Object) -> list[FieldError]:
        """Every problem of a new object (`kubelab.api.validation`: the resource's rules)."""
        return self.validator.validate(obj, None, self.resource.namespaced)

    def validate_update(self, new: Object, old: Object) -> list[FieldError]:
        """Every problem of `new`, and of its changes from `old` (immutable fields)."""
        return self.validator.validate(new, old, self.resource.namespaced)

    # -- delete --------------------------------------------------------------------------

    def grace_period(self, obj: Object, requested: int | None) -> int:
        """Seconds a deletion waits for someone (a kubelet) to finish; 0 deletes at once."""
        return 0

    def mark_deleting(self, obj: Object, grace: int) -> bool:
        """What else a deletion that is not immediate writes on the object, besides its
        deletionTimestamp and finalizers; True when it changed something."""
        return False

    def holds_deletion(self, obj: Object) -> bool:
        """Whether a marked object with no finalizers left must still stay (someone has
        to confirm the deletion first)."""
        return False

    # -- scale ---------------------------------------------------------------------------

    def scale_labels(self, obj: Object) -> Object:
        """The labels a Scale's ``status.selector`` shows (a label selector's matchLabels)."""
        selector = obj.get("spec", {}).get("selector", {}) or {}
        labels: Object = selector.get("matchLabels", selector)
        return labels

    def scale_patch(self, replicas: int) -> Object:
        """The merge patch a Scale update makes to the object (a custom resource keeps
        its replicas where its CRD says)."""
        return {"spec": {"replicas": replicas}}

    def to_scale(self, obj: Object) -> Object:
        """The autoscaling/v1 Scale view of the object (``kubectl scale``)."""
        meta = obj["metadata"]
        labels = self.scale_labels(obj)
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace", ""),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
                "creationTimestamp": meta.get("creationTimestamp"),
            },
            "spec": {"replicas": int(obj.get("spec", {}).get("replicas", 0))},
            "status": {
                "replicas": int(obj.get("status", {}).get("replicas", 0)),
                "selector": ",".join(
                    f"{k}={v}" for k, v in sorted(labels.items()) if isinstance(v, str)
                ),
            },
        }


class StatusResetStrategy(Strategy):
    """A kind whose status a controller writes through the status subresource: a new
    object's status is empty, whatever the client sent."""

    def initial_status(self, obj: Object) -> Object | None:
        return {}


class NoGenerationStrategy(Strategy):
    """A kind without a desired state to count changes of (no ``metadata.generation``)."""

    generation = False
