"""The namespace controller (kube-controller-manager's namespace-controller): empties a
namespace that is being deleted, then lets the apiserver remove it.

`kubectl delete namespace x` does not remove x. The apiserver marks it (a
deletionTimestamp, `status.phase: Terminating`), refuses new objects in it from then
on, and keeps it while `spec.finalizers` holds `kubernetes`, the entry that stands for
this controller. For such a namespace the controller:

1. deletes the content, resource by resource: it lists the namespace's objects of each
   namespaced resource and, if some are not being deleted yet, deletes them all with one
   deletecollection (Background propagation: everything in the namespace goes anyway)
   and lists again to see what is left;
2. records what is left in the namespace's status conditions, as Kubernetes names
   them: NamespaceDeletionContentFailure (a delete or list failed),
   NamespaceContentRemaining (objects are still there) and NamespaceFinalizersRemaining
   (some of them wait for finalizers), which `kubectl get namespace -o yaml` shows;
3. when nothing is left, removes `kubernetes` from `spec.finalizers` through the
   `namespaces/<name>/finalize` subresource, after which the apiserver deletes the
   namespace.

Why a namespace waits for what lingers. A delete does not always remove an object at
once: a pod bound to a node stays, marked, until its kubelet has stopped its containers
(within the pod's grace period) and confirms; any object stays while it has finalizers.
Were the namespace removed meanwhile, those objects would stay in the store in a
namespace that does not exist, where nobody lists them any more, and a namespace
created later under the same name would find them. So the controller looks again, at
half the longest grace period of the pods left plus a second (Kubernetes' estimate),
but not sooner than `FINALIZER_ESTIMATE` (15 s) while objects wait for finalizers,
whose holders may take long, nor than `CONTENT_RECHECK` (5 s) otherwise, until the
content is really gone. Only a failure backs off exponentially. The controller's own
status writes come back as updates of the namespace; those, like any update of a
namespace it plans to look at again, do not bring the next look forward: the handlers
queue the namespace for when its recheck is due.

Each resource that is namespaced, stored, and can be listed and deleted by collection
(`kubelab.api.resources.RESOURCES`) is emptied, once: a resource served from another's
objects (events.k8s.io Events are core Events) is emptied with that one. Every
namespaced resource of this API has deletecollection. So are the custom resources served
at the time of the pass, found by discovery (`kubelab.client.discovery`) on each pass as
Kubernetes' controller does, since CustomResourceDefinitions come and go: a group
version discovery could not read is a failure of the pass, and the namespace is not
finalized while it may still hold objects of that group.
"""

from __future__ import annotations

import copy
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.api.resources import RESOURCES, Resource
from kubelab.client import (
    REAL_CLOCK,
    Clock,
    Object,
    ServerUnreachable,
    WorkQueue,
    resource_for,
)
from kubelab.client.discovery import discover

from .base import (
    NAMESPACES,
    ControllerContext,
    SyncError,
    SyncResult,
    Workers,
    controller_logger,
)

NAME = "namespace-controller"

FINALIZER = "kubernetes"
"""The entry of a Namespace's `spec.finalizers` that stands for this controller."""

PODS = resource_for("v1", "Pod")

CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"

FINALIZER_ESTIMATE = 15.0
"""Seconds before looking again at content held by finalizers (Kubernetes'
finalizerEstimateSeconds)."""

CONTENT_RECHECK = 5.0
"""The least number of seconds before looking again at content that is still there."""

log = controller_logger(NAME)


def content_resources(custom: tuple[Resource, ...] = ()) -> list[Resource]:
    """The resources a namespace's content is made of (module docstring): the built-in
    ones and those of `custom`, the custom resources discovered."""
    needed = {"list", "deletecollection"}
    return [
        r
        for r in RESOURCES + custom
        if r.namespaced and r.stored and not r.converted_from and needed <= set(r.verbs)
    ]


@dataclass
class Leftovers:
    """What a pass over a namespace's content left behind."""

    objects: Counter[str] = field(default_factory=Counter)
    """Objects left, by resource (group_resource)."""
    finalizers: Counter[str] = field(default_factory=Counter)
    """Objects left that hold each finalizer."""
    failures: list[str] = field(default_factory=list)
    """What could not be deleted or listed, and why."""
    grace_seconds: int = 0
    """The longest grace period of a pod left."""

    def add(self, resource: Resource, items: list[Object]) -> None:
        """Count `items`, the objects of `resource` still in the namespace."""
        if not items:
            return
        self.objects[resource.group_resource] += len(items)
        for item in items:
            meta = item.get("metadata") or {}
            self.finalizers.update(meta.get("finalizers") or [])
            if resource == PODS:
                grace = meta.get("deletionGracePeriodSeconds")
                if grace is None:
                    grace = (item.get("spec") or {}).get("terminationGracePeriodSeconds", 0)
                self.grace_seconds = max(self.grace_seconds, int(grace))

    def summary(self) -> str:
        """The objects left, e.g. "2 pods, 1 configmaps"."""
        return ", ".join(f"{n} {r}" for r, n in sorted(self.objects.items()))

    @property
    def empty(self) -> bool:
        return not self.objects and not self.failures

    def recheck_after(self) -> float:
        """When to look again: halfway through the longest grace period, plus a second,
        but not sooner than the floor of the module docstring."""
        floor = FINALIZER_ESTIMATE if self.finalizers else CONTENT_RECHECK
        return max(floor, self.grace_seconds / 2 + 1)


def _condition(
    kind: str, problem: str, reasons: tuple[str, str], old: list[dict[str, Any]], now: str
) -> dict[str, Any]:
    """A condition that is True with `problem` as its message, or False if there is none;
    `reasons` are (when False, when True). The transition time moves only with the
    status."""
    status = "True" if problem else "False"
    previous = next((c for c in old if c.get("type") == kind), {})
    since = previous.get("lastTransitionTime") if previous.get("status") == status else None
    condition = {
        "type": kind,
        "status": status,
        "lastTransitionTime": since or now,
        "reason": reasons[bool(problem)],
    }
    if problem:
        condition["message"] = problem
    return condition


def namespace_conditions(
    leftovers: Leftovers, old: list[dict[str, Any]], now: str
) -> list[dict[str, Any]]:
    """The namespace's conditions after a pass that left `leftovers` (module docstring);
    conditions of other types in `old` are kept."""
    failures = "; ".join(leftovers.failures)
    objects = leftovers.summary()
    finalizers = ", ".join(f"{f} ({n})" for f, n in sorted(leftovers.finalizers.items()))
    ours = [
        _condition(
            CONTENT_FAILURE,
            f"Deleting the content failed: {failures}" if failures else "",
            ("ContentDeleted", "ContentDeletionFailed"),
            old,
            now,
        ),
        _condition(
            CONTENT_REMAINING,
            f"Waiting for the deletion of {objects}" if objects else "",
            ("ContentRemoved", "SomeResourcesRemain"),
            old,
            now,
        ),
        _condition(
            FINALIZERS_REMAINING,
            f"Objects still held by finalizers: {finalizers}" if finalizers else "",
            ("ContentHasNoFinalizers", "SomeFinalizersRemain"),
            old,
            now,
        ),
    ]
    kinds = {c["type"] for c in ours}
    return [c for c in old if c.get("type") not in kinds] + ours


class NamespaceController:
    """The controller of the module docstring, keyed by namespace name."""

    name = NAME

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._client = ctx.client_for(NAME)
        self._clock = clock
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        # When (clock time) each namespace is to be looked at again, while a look is
        # planned: the handlers queue it for then, not sooner.
        self._lock = threading.Lock()
        self._recheck_at: dict[str, float] = {}
        self._namespaces = ctx.informers.informer(NAMESPACES)
        self._namespaces.add_event_handler(
            on_add=self._enqueue_if_deleted,
            on_update=lambda _old, new: self._enqueue_if_deleted(new),
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(
            NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._namespaces
        ).run(workers, stop)

    def _enqueue_if_deleted(self, namespace: Object) -> None:
        meta = namespace.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            name = str(meta["name"])
            with self._lock:
                due = self._recheck_at.get(name)
            self.queue.add_after(name, 0.0 if due is None else due - self._clock.now())

    def _plan(self, name: str, wait: float | None) -> None:
        """Note that `name` is to be looked at again in `wait` seconds (None: no look
        is planned)."""
        with self._lock:
            if wait is None:
                self._recheck_at.pop(name, None)
            else:
                self._recheck_at[name] = self._clock.now() + wait

    def sync(self, name: str) -> SyncResult:
        """Look at the namespace `name`; when to look again (None: no need). A failure
        keeps the planned look, and the work queue's back-off decides the retry."""
        wait = self._sync(name)
        if wait is None:
            self._plan(name, None)
        return wait

    def _sync(self, name: str) -> SyncResult:
        cached = self._namespaces.indexer.get(name)
        if cached is None or not (cached.get("metadata") or {}).get("deletionTimestamp"):
            return None
        # Read it afresh: the cache may not show yet that it has been finalized.
        try:
            namespace = self._client.get(NAMESPACES, name)
        except StatusError as exc:
            if exc.code == 404:
                return None
            raise
        if FINALIZER not in ((namespace.get("spec") or {}).get("finalizers") or []):
            return None
        leftovers = self.delete_content(name)
        # Planned before the status write, whose update event would queue it again.
        wait = None if leftovers.empty else leftovers.recheck_after()
        self._plan(name, wait if wait is not None else CONTENT_RECHECK)
        namespace = self._set_conditions(namespace, leftovers)
        if leftovers.failures:
            raise SyncError(f"namespace {name}: " + "; ".join(leftovers.failures))
        if wait is not None:
            log.info(
                "namespace %s: waiting for %s; looking again in %gs",
                name,
                leftovers.summary(),
                wait,
            )
            return wait
        self._finalize(namespace)
        return None

    def delete_content(self, namespace: str) -> Leftovers:
        """One pass of deletes over the namespace's content; what it left behind."""
        leftovers = Leftovers()
        try:
            discovered = discover(self._client)
        except (StatusError, ServerUnreachable, ValueError) as exc:
            leftovers.failures.append(f"discovering the custom resources: {exc}")
            return leftovers
        leftovers.failures.extend(
            f"discovering {gv}: {why}" for gv, why in sorted(discovered.failed.items())
        )
        for resource in content_resources(discovered.custom):
            try:
                items = self._client.list(resource, namespace).get("items") or []
                if any(not (i.get("metadata") or {}).get("deletionTimestamp") for i in items):
                    log.info("namespace %s: deleting its %s", namespace, resource.group_resource)
                    self._client.request(
                        "DELETE",
                        resource.path(namespace),
                        body={
                            "kind": "DeleteOptions",
                            "apiVersion": "v1",
                            "propagationPolicy": "Background",
                        },
                    )
                    items = self._client.list(resource, namespace).get("items") or []
                leftovers.add(resource, items)
            except (StatusError, ServerUnreachable) as exc:
                leftovers.failures.append(f"{resource.group_resource}: {exc}")
        return leftovers

    def _set_conditions(self, namespace: Object, leftovers: Leftovers) -> Object:
        """Write the conditions `leftovers` call for; the namespace as now stored."""
        status = namespace.get("status") or {}
        old = status.get("conditions") or []
        now = self._clock.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = namespace_conditions(leftovers, old, now)
        if conditions == old:
            return namespace
        updated = copy.deepcopy(namespace)
        updated.setdefault("status", {})["conditions"] = conditions
        return self._client.update_status(NAMESPACES, updated)

    def _finalize(self, namespace: Object) -> None:
        name = str(namespace["metadata"]["name"])
        finalized = copy.deepcopy(namespace)
        spec = finalized.setdefault("spec", {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != FINALIZER]
        try:
            self._client.request("PUT", NAMESPACES.path("", name) + "/finalize", body=finalized)
        except StatusError as exc:
            if exc.code != 404:
                raise
        log.info("namespace %s: its content is gone; removed the %s finalizer", name, FINALIZER)
