"""The garbage collector (kube-controller-manager's garbage-collector-controller): deletes
objects whose owners are gone, and carries out the three propagation policies of a
delete.

An object names its owners in `metadata.ownerReferences` (apiVersion, kind, name, uid,
`blockOwnerDeletion`); a ReplicaSet names its Deployment, a Pod its ReplicaSet. When an
owner goes, its dependents go too, as the DELETE's `propagationPolicy` says:

* Background (the default): the apiserver deletes the owner at once. The collector then
  finds dependents whose owners are all gone and deletes them, and so on down the tree.
* Foreground: the apiserver only marks the owner (deletionTimestamp) and gives it the
  `foregroundDeletion` finalizer. The collector deletes the dependents (a dependent that
  has dependents of its own in the foreground as well, so the tree empties from the
  leaves up) and, once no *blocking* dependent is left, removes the finalizer; the
  apiserver then deletes the owner.
* Orphan: the `orphan` finalizer. The collector removes the owner's reference from each
  dependent, which then lives on unowned, and then removes the finalizer.

Why an owner is identified by its uid. The name and kind of a reference only say where
to look; the uid says which object is meant. Delete Deployment "web" and create another
"web": the old ReplicaSets still name "web", but with the old uid, and must not be
adopted by the new Deployment by accident. They are garbage. So an owner counts as
present only if the object found under that name has the reference's uid. And since
the caches lag, "absent" is only ever concluded from the apiserver itself (a 404, or
another uid there): a cache that has not yet seen a new owner must not get its
dependents deleted.

Why foreground deletion waits only for dependents with `blockOwnerDeletion`. Every
dependent is deleted, but the owner stays only for those whose reference says "my
owner must outlive me". Controllers set it on what they create (a ReplicaSet's pods),
so `kubectl delete --cascade=foreground` returns once they are gone; a reference
without it is a loose link whose dependent may take its time (a pod's grace period)
without holding the owner, and whoever deletes it has not promised to wait for it.

The dependency graph. Kubernetes' collector keeps its own graph of objects linked by
uid, fed by an informer per resource ("monitors"). Here the monitors' caches are the
graph: each is indexed by owner uid, so "the dependents of X" is one index lookup per
resource and "is X still there" a lookup by key checked against X's uid. Events only
queue work, in two queues:

* attempt-to-delete: objects to look at: dependents of a deleted owner, objects whose
  references changed (a new one may name a missing owner), owners in foreground
  deletion and their dependents;
* attempt-to-orphan: owners with the orphan finalizer.

The monitored resources are those of `kubelab.api.resources.RESOURCES` that are stored
and can be listed, watched and deleted, each once: a resource served from another's
objects (events.k8s.io Events are core Events) is that one's. Events are left out, as
kube-controller-manager's collector leaves them out: they are the most numerous objects
by far, and nothing owns them or is owned by them.

Custom resources are monitored too, found by discovery (`kubelab.client.discovery`), as
Kubernetes' collector finds them: a third queue, `resync-monitors`, runs discovery when a
CustomResourceDefinition changes (the CRD informer's events; its status changes once the
apiserver serves it) and every `RESYNC_PERIOD` seconds in any case. A custom resource
newly served gets an informer of the collector's own; its monitor joins the graph only
once that cache has listed it (before, an owner in foreground deletion could miss
dependents and go too early), and its objects are then queued as if just added. A
resource no longer served has its informer stopped and its monitor dropped; the keys
of its objects still queued are let go.

A reference that cannot be resolved (a kind this API does not have, or a namespaced
owner named by a cluster-scoped object, which Kubernetes rejects too) keeps its
dependent: deleting on the strength of a reference the collector cannot check would be
a guess. Left out: Kubernetes' cycle breaking in foreground deletion (it makes a
dependent's references non-blocking when the dependent is itself waiting for its own
dependents, so that an ownership cycle cannot deadlock), and its cache of owners known
to be absent. Without cycle breaking, two objects that own each other with
`blockOwnerDeletion` wait for each other forever once both are in foreground deletion;
the collector logs a warning (once per owner) naming the cycle, so that an operator can
remove a `blockOwnerDeletion` by hand. Longer cycles are not detected.
"""

from __future__ import annotations

import enum
import functools
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.api.resources import RESOURCES, Resource, by_kind
from kubelab.client import (
    DeletedFinalStateUnknown,
    Object,
    Preconditions,
    SharedInformer,
    WorkQueue,
    resource_for,
)
from kubelab.client.discovery import discover

from .base import (
    ControllerContext,
    SyncError,
    SyncResult,
    Workers,
    controller_logger,
    run_workers,
)

NAME = "garbage-collector-controller"

FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"

OWNER_UID_INDEX = "ownerUID"

IGNORED_RESOURCES = frozenset({"events"})
"""Not monitored (module docstring)."""

CRDS = resource_for("apiextensions.k8s.io/v1", "CustomResourceDefinition")

RESYNC_PERIOD = 30.0
"""Seconds between discoveries of the custom resources when no CRD event asks for one
(kube-controller-manager's collector resyncs its monitors every 30 s too)."""

RESYNC_KEY = "custom-resources"
"""The one key of the resync-monitors queue."""

MONITOR_SYNC_TIMEOUT = 30.0
"""Seconds a new custom resource's cache has to list it before the resync is retried."""

log = controller_logger(NAME)


def monitored_resources(custom: tuple[Resource, ...] = ()) -> list[Resource]:
    """The resources whose objects the collector follows, as owners and dependents: the
    built-in ones and those of `custom`, the custom resources discovered."""
    needed = {"list", "watch", "delete"}
    return [
        r
        for r in RESOURCES + custom
        if r.stored
        and not r.converted_from
        and needed <= set(r.verbs)
        and r.group_resource not in IGNORED_RESOURCES
    ]


# -- reading objects ---------------------------------------------------------------------


def _meta(obj: Object) -> dict[str, Any]:
    meta: dict[str, Any] = obj.get("metadata") or {}
    return meta


def owner_references(obj: Object) -> list[dict[str, Any]]:
    """The owner references that name an owner by uid (a reference without one points
    at nothing the collector could check)."""
    return [ref for ref in _meta(obj).get("ownerReferences") or [] if ref.get("uid")]


def owner_uid_index(obj: Object) -> list[str]:
    """The index of dependents by owner: an object is filed under each owner's uid."""
    return [str(ref["uid"]) for ref in owner_references(obj)]


def being_deleted(obj: Object) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def has_finalizer(obj: Object, finalizer: str) -> bool:
    return finalizer in (_meta(obj).get("finalizers") or [])


def deleting_dependents(obj: Object) -> bool:
    """An owner in foreground deletion, waiting for its dependents."""
    return being_deleted(obj) and has_finalizer(obj, FOREGROUND_FINALIZER)


def blocks(dependent: Object, owner_uid: str) -> bool:
    """Whether `dependent` holds back the foreground deletion of the owner `owner_uid`."""
    return any(
        ref["uid"] == owner_uid and ref.get("blockOwnerDeletion") is True
        for ref in owner_references(dependent)
    )


def _describe_ref(ref: Mapping[str, Any]) -> str:
    return f"{ref.get('kind')} {ref.get('name')} (uid {ref.get('uid')})"


# -- deciding ----------------------------------------------------------------------------


class OwnerState(enum.Enum):
    """What an owner reference leads to."""

    SOLID = "solid"
    """The owner exists and is not deleting its dependents (or cannot be checked)."""
    DANGLING = "dangling"
    """No object with the reference's uid exists where the reference points."""
    WAITING = "waiting"
    """The owner is in foreground deletion, waiting for its dependents to go."""


@dataclass(frozen=True)
class Keep:
    """Leave the dependent as it is."""


@dataclass(frozen=True)
class DropReferences:
    """Remove the references to these owner uids; another owner keeps the dependent."""

    uids: tuple[str, ...]


@dataclass(frozen=True)
class Delete:
    """Delete the dependent with this propagation policy."""

    policy: str
    reason: str


Plan = Keep | DropReferences | Delete


def plan(dependent: Object, owners: Mapping[str, OwnerState], has_dependents: bool) -> Plan:
    """What the collector does with `dependent`, given the state of each owner it refers
    to (by uid) and whether it has dependents of its own.

    * One solid owner is enough to keep it; references to owners that are gone, or that
      are deleting their dependents, are then removed, so that the latter need not wait
      for an object that stays.
    * With no solid owner it is garbage. If an owner waits for it and it has dependents
      itself, it goes in the foreground too, so that the owner's wait covers the whole
      subtree. Otherwise it goes with the policy its own finalizers ask for, if any.
    """
    refs = owner_references(dependent)
    if not refs:
        return Keep()
    by_state: dict[OwnerState, list[dict[str, Any]]] = {state: [] for state in OwnerState}
    for ref in refs:
        by_state[owners[ref["uid"]]].append(ref)
    solid = by_state[OwnerState.SOLID]
    dangling = by_state[OwnerState.DANGLING]
    waiting = by_state[OwnerState.WAITING]
    if solid:
        stale = dangling + waiting
        return DropReferences(tuple(ref["uid"] for ref in stale)) if stale else Keep()
    if waiting:
        reason = f"its owner {_describe_ref(waiting[0])} is deleting its dependents"
        if has_dependents:
            return Delete("Foreground", reason)
    else:
        reason = "its owners are gone: " + ", ".join(_describe_ref(ref) for ref in dangling)
    if has_finalizer(dependent, ORPHAN_FINALIZER):
        return Delete("Orphan", reason)
    if has_finalizer(dependent, FOREGROUND_FINALIZER):
        return Delete("Foreground", reason)
    return Delete("Background", reason)


# -- the controller ----------------------------------------------------------------------


@dataclass(frozen=True)
class Identity:
    """One object, as the work queues name it: where it is, and which one (uid)."""

    resource: str
    """Its resource's group_resource, e.g. "replicasets.apps"."""
    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.resource} {where}"


@dataclass(frozen=True)
class _Monitor:
    resource: Resource
    informer: SharedInformer
    stop: threading.Event | None = None
    """Stops the informer of a custom resource's monitor (the collector's own)."""

    def stop_informer(self) -> None:
        if self.stop is not None:
            self.stop.set()

    def identity(self, obj: Object) -> Identity:
        meta = _meta(obj)
        return Identity(
            self.resource.group_resource,
            str(meta.get("namespace") or ""),
            str(meta["name"]),
            str(meta.get("uid") or ""),
        )

    def cached(self, namespace: str, name: str, uid: str) -> Object | None:
        """The cached object under that name, if it is the one with `uid`."""
        key = f"{namespace}/{name}" if namespace else name
        obj = self.informer.indexer.get(key)
        return obj if obj is not None and _meta(obj).get("uid") == uid else None


class GarbageCollector:
    """The collector of the module docstring: `workers` threads for each of its queues."""

    name = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        self._tracer = ctx.tracer
        self._client = ctx.client_for(NAME)
        self.attempt_to_delete: WorkQueue[Identity] = WorkQueue()
        self.attempt_to_orphan: WorkQueue[Identity] = WorkQueue()
        self.resync_monitors: WorkQueue[str] = WorkQueue()
        # Replaced whole, never changed in place: workers iterate over it while the
        # resync adds and drops custom resources' monitors.
        self._monitors: dict[str, _Monitor] = {}
        # Owners (uid) whose ownership cycle has been logged (see the module docstring).
        self._cycles_reported: set[str] = set()
        self._cycles_lock = threading.Lock()
        for resource in monitored_resources():
            monitor = _Monitor(resource, ctx.informers.informer(resource))
            monitor.informer.indexer.add_indexers({OWNER_UID_INDEX: owner_uid_index})
            self._watch(monitor)
            self._monitors[resource.group_resource] = monitor
        ctx.informers.informer(CRDS).add_event_handler(
            on_add=lambda _crd: self.resync_monitors.add(RESYNC_KEY),
            on_update=lambda _old, _new: self.resync_monitors.add(RESYNC_KEY),
            on_delete=lambda _crd: self.resync_monitors.add(RESYNC_KEY),
        )

    def _watch(self, monitor: _Monitor) -> None:
        monitor.informer.add_event_handler(
            on_add=functools.partial(self._on_change, monitor, None),
            on_update=functools.partial(self._on_change, monitor),
            on_delete=functools.partial(self._on_delete, monitor),
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        self.resync_monitors.add(RESYNC_KEY)
        resync = threading.Thread(
            target=Workers(f"{NAME}-resync", self.resync_monitors, self.sync_monitors, log).run,
            args=(1, stop),
            name=f"{NAME}-resync",
            daemon=True,
        )
        resync.start()
        try:
            run_workers(
                stop,
                workers,
                Workers(
                    f"{NAME}-delete",
                    self.attempt_to_delete,
                    self.attempt_to_delete_item,
                    log,
                    tracer=self._tracer,
                ),
                Workers(
                    f"{NAME}-orphan",
                    self.attempt_to_orphan,
                    self.orphan_dependents,
                    log,
                    tracer=self._tracer,
                ),
            )
        finally:
            resync.join()
            for monitor in self._monitors.values():
                monitor.stop_informer()

    # -- custom resources' monitors --------------------------------------------------------

    def sync_monitors(self, _key: str = RESYNC_KEY) -> SyncResult:
        """Monitor the custom resources served now, and only those (module docstring);
        when to look again. A group discovery could not read keeps its monitors."""
        discovered = discover(self._client)
        unreadable = {gv.rpartition("/")[0] for gv in discovered.failed}
        wanted = {r.group_resource: r for r in monitored_resources(discovered.custom)}
        current = self._monitors
        gone = [
            m
            for name, m in current.items()
            if m.stop is not None
            and wanted.get(name) != m.resource
            and m.resource.group not in unreadable
        ]
        new = [r for name, r in wanted.items() if name not in current or current[name] in gone]
        started: list[tuple[_Monitor, threading.Event]] = []
        for resource in new:
            stop = threading.Event()
            monitor = _Monitor(resource, SharedInformer(self._client, resource), stop)
            monitor.informer.indexer.add_indexers({OWNER_UID_INDEX: owner_uid_index})
            monitor.informer.start(stop)
            started.append((monitor, stop))
        for monitor, _ in started:
            if not monitor.informer.wait_for_sync(MONITOR_SYNC_TIMEOUT):
                for _, stop in started:
                    stop.set()
                raise SyncError(f"the cache of {monitor.resource.group_resource} did not sync")
        monitors = {name: m for name, m in current.items() if m not in gone}
        monitors.update((m.resource.group_resource, m) for m, _ in started)
        self._monitors = monitors
        for monitor in gone:
            log.info("no longer monitoring %s: it is not served", monitor.resource.group_resource)
            monitor.stop_informer()
        for monitor, _ in started:
            log.info("monitoring the custom resource %s", monitor.resource.group_resource)
            self._watch(monitor)  # replays the cached objects as added
        return RESYNC_PERIOD

    # -- the graph, read from the caches ---------------------------------------------------

    def dependents(self, owner: Identity) -> Iterator[tuple[_Monitor, Object]]:
        """The cached objects that refer to `owner` by uid. A namespaced owner can only
        own objects of its own namespace: a reference from elsewhere names another
        (absent) object, and is dealt with as such when its holder is looked at."""
        for monitor in self._monitors.values():
            for obj in monitor.informer.indexer.by_index(OWNER_UID_INDEX, owner.uid):
                if not owner.namespace or _meta(obj).get("namespace") == owner.namespace:
                    yield monitor, obj

    def _resource_of(self, api_version: str, kind: str) -> Resource | None:
        """The resource of an owner reference's kind: a built-in one, or a custom one
        monitored, in whichever of its versions the reference names it."""
        resource = by_kind(api_version, kind)
        if resource is not None:
            return resource
        group = api_version.rpartition("/")[0]
        for monitor in self._monitors.values():
            if monitor.stop is not None and (monitor.resource.group, monitor.resource.kind) == (
                group,
                kind,
            ):
                return monitor.resource
        return None

    def _lookup(
        self, dependent: Identity, ref: Mapping[str, Any]
    ) -> tuple[Resource, str, Object | None]:
        """Where a reference of `dependent` points (its resource and namespace) and the
        owner the caches hold there, if they hold the one with the reference's uid;
        ValueError for a reference the collector cannot resolve (module docstring)."""
        resource = self._resource_of(str(ref.get("apiVersion")), str(ref.get("kind")))
        if resource is None or not resource.stored:
            raise ValueError(
                f"the API has no stored kind {ref.get('kind')} {ref.get('apiVersion')}"
            )
        if resource.namespaced and not dependent.namespace:
            raise ValueError(f"a cluster-scoped object cannot be owned by a {resource.kind}")
        namespace = dependent.namespace if resource.namespaced else ""
        monitor = self._monitors.get(resource.group_resource)
        owner = None
        if monitor is not None:
            owner = monitor.cached(namespace, str(ref.get("name")), str(ref["uid"]))
        return resource, namespace, owner

    def _waiting_owner(self, dependent: Identity, ref: Mapping[str, Any]) -> Identity | None:
        """The owner `ref` names, if the caches hold it and it is deleting its
        dependents: an owner that may be waiting for `dependent`."""
        try:
            resource, _, owner = self._lookup(dependent, ref)
        except ValueError:
            return None
        if owner is None or not deleting_dependents(owner):
            return None
        monitor = self._monitors.get(resource.group_resource)
        return monitor.identity(owner) if monitor is not None else None

    def owner_state(self, dependent: Identity, ref: Mapping[str, Any]) -> OwnerState:
        """Classify one reference of `dependent`. The cache answers when it holds the
        owner; otherwise the apiserver does, because only it can say "absent"."""
        try:
            resource, namespace, owner = self._lookup(dependent, ref)
        except ValueError as exc:
            log.warning(
                "%s: cannot check its owner %s, keeping it: %s", dependent, _describe_ref(ref), exc
            )
            return OwnerState.SOLID
        if owner is None:
            try:
                owner = self._client.get(resource, str(ref.get("name")), namespace)
            except StatusError as exc:
                if exc.code == 404:
                    return OwnerState.DANGLING
                raise
            if _meta(owner).get("uid") != ref["uid"]:
                return OwnerState.DANGLING
        return OwnerState.WAITING if deleting_dependents(owner) else OwnerState.SOLID

    # -- event handlers: they only queue work ----------------------------------------------

    def _on_change(self, monitor: _Monitor, old: Object | None, new: Object) -> None:
        identity = monitor.identity(new)
        if deleting_dependents(new):
            self.attempt_to_delete.add(identity)
            self._queue_dependents(identity)
        if being_deleted(new) and has_finalizer(new, ORPHAN_FINALIZER):
            self.attempt_to_orphan.add(identity)
        old_refs = owner_references(old) if old is not None else []
        new_refs = owner_references(new)
        if new_refs != old_refs:
            if new_refs:
                self.attempt_to_delete.add(identity)
            # An owner waiting for its dependents may have just lost a blocking one.
            self._queue_waiting_owners(identity, old_refs + new_refs)

    def _on_delete(self, monitor: _Monitor, obj: Object | DeletedFinalStateUnknown) -> None:
        last = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        identity = monitor.identity(last)
        self._queue_dependents(identity)
        self._queue_waiting_owners(identity, owner_references(last))

    def _queue_dependents(self, owner: Identity) -> None:
        for monitor, dependent in self.dependents(owner):
            self.attempt_to_delete.add(monitor.identity(dependent))

    def _queue_waiting_owners(self, dependent: Identity, refs: Iterable[Mapping[str, Any]]) -> None:
        for ref in refs:
            owner = self._waiting_owner(dependent, ref)
            if owner is not None:
                self.attempt_to_delete.add(owner)

    # -- syncs -----------------------------------------------------------------------------

    def attempt_to_delete_item(self, identity: Identity) -> SyncResult:
        """Delete `identity` if it is garbage, trim its references to owners that no
        longer hold it, or, if it is an owner in foreground deletion, finish that."""
        monitor = self._monitors.get(identity.resource)
        if monitor is None:
            return None  # a custom resource no longer served
        obj = monitor.cached(identity.namespace, identity.name, identity.uid)
        if obj is None:
            return None  # gone (its deletion queued its dependents), or replaced
        if deleting_dependents(obj):
            self._finish_foreground_deletion(monitor, identity, obj)
            return None
        if being_deleted(obj):
            return None  # on its way out: its deletion will carry the cascade on
        owners = {ref["uid"]: self.owner_state(identity, ref) for ref in owner_references(obj)}
        has_dependents = next(self.dependents(identity), None) is not None
        match plan(obj, owners, has_dependents):
            case Keep():
                pass
            case DropReferences(uids):
                log.info("%s: removing its references to owners %s", identity, ", ".join(uids))
                self._drop_references(monitor, obj, set(uids))
            case Delete(policy, reason):
                log.info("deleting %s (propagation %s): %s", identity, policy, reason)
                self._delete(monitor.resource, identity, policy)
        return None

    def _finish_foreground_deletion(self, monitor: _Monitor, owner: Identity, obj: Object) -> None:
        dependents = list(self.dependents(owner))
        blocking = [d for _, d in dependents if blocks(d, owner.uid)]
        if not blocking:
            with self._cycles_lock:
                self._cycles_reported.discard(owner.uid)
            log.info(
                "%s: no blocking dependents left; removing its %s finalizer",
                owner,
                FOREGROUND_FINALIZER,
            )
            self._remove_finalizer(monitor, obj, FOREGROUND_FINALIZER)
            return
        log.debug("%s: waiting for %d blocking dependents", owner, len(blocking))
        self._report_cycle(owner, obj, blocking)
        for dependent_monitor, dependent in dependents:
            if not deleting_dependents(dependent):
                self.attempt_to_delete.add(dependent_monitor.identity(dependent))

    def _report_cycle(self, owner: Identity, obj: Object, blocking: list[Object]) -> None:
        """Warn, once per owner, when a blocking dependent is itself in foreground
        deletion waiting for `owner` (which blocks it): neither can ever finish."""
        for dependent in blocking:
            if not (deleting_dependents(dependent) and blocks(obj, str(_meta(dependent)["uid"]))):
                continue
            with self._cycles_lock:
                if owner.uid in self._cycles_reported:
                    return
                self._cycles_reported.add(owner.uid)
            meta = _meta(dependent)
            log.warning(
                "%s: foreground deletion cannot finish: its blocking dependent %s %s "
                "(uid %s) is itself in foreground deletion, waiting for it "
                "(an ownership cycle with blockOwnerDeletion, which this collector does "
                "not break); remove blockOwnerDeletion from one of the two references",
                owner,
                dependent.get("kind"),
                meta.get("name"),
                meta.get("uid"),
            )
            return

    def orphan_dependents(self, owner: Identity) -> SyncResult:
        """Remove the references to an owner with the orphan finalizer from its
        dependents, then the finalizer, which lets the apiserver delete the owner."""
        monitor = self._monitors.get(owner.resource)
        obj = monitor.cached(owner.namespace, owner.name, owner.uid) if monitor else None
        if (
            monitor is None
            or obj is None
            or not (being_deleted(obj) and has_finalizer(obj, ORPHAN_FINALIZER))
        ):
            return None
        dependents = list(self.dependents(owner))
        for dependent_monitor, dependent in dependents:
            self._drop_references(dependent_monitor, dependent, {owner.uid})
        log.info(
            "%s: orphaned %d dependents; removing its %s finalizer",
            owner,
            len(dependents),
            ORPHAN_FINALIZER,
        )
        self._remove_finalizer(monitor, obj, ORPHAN_FINALIZER)
        return None

    # -- writes ----------------------------------------------------------------------------

    def _delete(self, resource: Resource, identity: Identity, policy: str) -> None:
        try:
            self._client.delete(
                resource,
                identity.name,
                identity.namespace,
                propagation_policy=policy,
                # Never another object that took the name meanwhile.
                preconditions=Preconditions(uid=identity.uid),
            )
        except StatusError as exc:
            if exc.code != 404:
                raise

    def _drop_references(self, monitor: _Monitor, obj: Object, uids: set[str]) -> None:
        refs = _meta(obj).get("ownerReferences") or []
        remaining = [ref for ref in refs if ref.get("uid") not in uids]
        self._patch_metadata(monitor.resource, obj, {"ownerReferences": remaining or None})

    def _remove_finalizer(self, monitor: _Monitor, obj: Object, finalizer: str) -> None:
        remaining = [f for f in _meta(obj).get("finalizers") or [] if f != finalizer]
        self._patch_metadata(monitor.resource, obj, {"finalizers": remaining or None})

    def _patch_metadata(self, resource: Resource, obj: Object, changes: dict[str, Any]) -> None:
        """Merge-patch `changes` into the metadata of the cached `obj`. The patch carries
        the cached resourceVersion: had the object changed since (the cache is behind),
        the apiserver answers 409 and the sync is retried on a fresher cache, instead of
        writing a list computed from a stale one."""
        meta = _meta(obj)
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"], **changes}}
        try:
            self._client.patch(resource, str(meta["name"]), patch, str(meta.get("namespace") or ""))
        except StatusError as exc:
            if exc.code != 404:
                raise
