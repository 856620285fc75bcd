"""The ResourceQuota controller (kube-controller-manager's resourcequota-controller):
keeps each quota's `status.hard` (its spec's) and `status.used` (what its namespace
uses of each thing it limits, counted as `kubelab.api.quota` says), for `kubectl
describe quota` and for the apiserver's ResourceQuota admission, which in the seeds'
request flow runs "before the object is persisted".

Admission charges each create to the quota as it lets it through, so status.used only
goes up between recounts; this controller recounts from the objects themselves, which
gives back what deleted objects, finished pods and creates that failed after admission
held. Changes of the kinds quotas count by name (pods, services, configmaps, secrets,
persistentvolumeclaims, replicationcontrollers, resourcequotas) queue their namespace's
quotas at once; other kinds (`count/deployments.apps`) are listed at each recount, and
every quota is recounted each `--resource-quota-sync-period` (5 min) whatever happened.

A recount never lowers what admission charged a moment ago (`CHARGE_GRACE`): between
the charge and the write of the object charged for, the object is in nobody's cache,
and a recount in that gap would give back its unit to the next create, letting two
creates share the last unit after all.
"""

from __future__ import annotations

import argparse
import copy
import threading
from fractions import Fraction

from kubelab.api import quota
from kubelab.api.resources import RESOURCES, Resource, lookup
from kubelab.client import (
    NAMESPACE_INDEX,
    REAL_CLOCK,
    DeletedFinalStateUnknown,
    Object,
    SharedInformer,
    WorkQueue,
    namespace_index,
    object_key,
    resource_for,
)

from .base import ControllerContext, SyncResult, Workers, add_index, controller_logger

NAME = "resourcequota-controller"
QUOTAS = resource_for("v1", "ResourceQuota")
DEFAULT_SYNC_PERIOD = 300.0
CHARGE_GRACE = 5.0
"""Seconds a charge is left alone by recounts (module docstring): far more than a
create takes from admission to its write."""

log = controller_logger(NAME)


class ResourceQuotaController:
    """The controller of the module docstring, keyed by quota "namespace/name"."""

    name = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        self._tracer = ctx.tracer
        args: argparse.Namespace = ctx.args
        self._period = float(getattr(args, "resource_quota_sync_period", DEFAULT_SYNC_PERIOD))
        self._client = ctx.client_for(NAME)
        self._clock = REAL_CLOCK
        self.queue: WorkQueue[str] = WorkQueue()
        # quota key -> (its resourceVersion, when this controller first saw it)
        self._seen: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._quotas = ctx.informers.informer(QUOTAS)
        add_index(self._quotas, NAMESPACE_INDEX, namespace_index)
        self._quotas.add_event_handler(
            on_add=self._quota_changed, on_update=lambda _old, new: self._quota_changed(new)
        )
        self._counted: dict[str, tuple[Resource, SharedInformer]] = {}
        for plural in quota.CORE_COUNTED:
            resource = lookup("", "v1", plural)
            assert resource is not None
            informer = ctx.informers.informer(resource)
            add_index(informer, NAMESPACE_INDEX, namespace_index)
            informer.add_event_handler(
                on_add=self._object_changed,
                on_update=lambda _old, new: self._object_changed(new),
                on_delete=self._object_changed,
            )
            self._counted[plural] = (resource, informer)

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._quotas).run(
            workers, stop
        )

    def _quota_changed(self, q: Object) -> None:
        self.queue.add(object_key(q))

    def _object_changed(self, obj: Object | DeletedFinalStateUnknown) -> None:
        last = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        namespace = str((last.get("metadata") or {}).get("namespace") or "")
        for q in self._quotas.indexer.by_index(NAMESPACE_INDEX, namespace):
            self.queue.add(object_key(q))

    def usage(self, namespace: str, keys: list[str]) -> dict[str, Fraction]:
        """What `namespace` uses of each of `keys`."""
        wanted: set[tuple[str, str]] = {("", "pods")}
        wanted.update(filter(None, (quota.resource_of_key(k) for k in keys)))
        total: dict[str, Fraction] = {}
        for group, plural in sorted(wanted):
            if not group and plural in self._counted:
                resource, informer = self._counted[plural]
                objects = informer.indexer.by_index(NAMESPACE_INDEX, namespace)
            else:
                found = next(
                    (r for r in RESOURCES if r.plural == plural and r.group == group),
                    None,
                )
                if found is None:
                    continue  # a key for a resource this API does not serve counts 0
                resource = found
                objects = self._client.list(resource, namespace).get("items") or []
            for k, v in quota.total(resource, objects).items():
                total[k] = total.get(k, Fraction(0)) + v
        return total

    def sync(self, key: str) -> SyncResult:
        q = self._quotas.indexer.get(key)
        if q is None:
            return None
        hard = dict((q.get("spec") or {}).get("hard") or {})
        namespace = str(q["metadata"]["namespace"])
        counted = self.usage(namespace, list(hard))
        status = {
            "hard": hard,
            "used": {k: quota.fmt(counted.get(k, Fraction(0))) for k in hard},
        }
        old_used = (q.get("status") or {}).get("used") or {}
        lowered = any(
            k in old_used and quota.quantity(v) < quota.quantity(old_used[k])
            for k, v in status["used"].items()
        )
        if lowered:
            left = self._charge_age_left(key, str(q["metadata"].get("resourceVersion")))
            if left > 0:
                return left
        if status != (q.get("status") or {}):
            updated = copy.deepcopy(q)
            updated["status"] = status
            written = self._client.update_status(QUOTAS, updated)
            log.info(
                "quota %s: used %s (resourceVersion %s)",
                key,
                ", ".join(f"{k}={v}" for k, v in sorted(status["used"].items())),
                written["metadata"].get("resourceVersion"),
            )
        return self._period

    def _charge_age_left(self, key: str, resource_version: str) -> float:
        """Seconds until the quota's current version is CHARGE_GRACE old."""
        now = self._clock.now()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or seen[0] != resource_version:
                seen = self._seen[key] = (resource_version, now)
        return seen[1] + CHARGE_GRACE - now
