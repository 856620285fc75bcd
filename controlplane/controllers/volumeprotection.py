"""Storage-object-in-use protection (kube-controller-manager's
persistentvolumeclaim-protection-controller and persistentvolume-protection-controller):
a claim a pod still uses, or a volume still bound, is not deleted under it.

The apiserver's StorageObjectInUseProtection admission puts the finalizers
`kubernetes.io/pvc-protection` on every new claim and `kubernetes.io/pv-protection` on
every new volume, so a delete only marks them (Terminating). These controllers take the
finalizer off once nothing needs the object any more:

* a claim, once no pod of its namespace that has not finished (Succeeded or Failed)
  mounts it: `kubectl delete pvc` of a StatefulSet's claim waits for its pod, and the
  local-path provisioner removes no directory a container still writes to;
* a volume, once it is not Bound (its claim is gone: Released, or never bound).

The finalizer goes by an update of the cached object (its resourceVersion guards it: a
conflict is retried on a newer cache).
"""

from __future__ import annotations

import copy
import threading

from kubelab.api import claims as c
from kubelab.api import podutil
from kubelab.api.resources import Resource
from kubelab.client import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    Object,
    RestClient,
    WorkQueue,
    namespace_index,
    object_key,
    resource_for,
)

from .base import ControllerContext, SyncResult, Workers, add_index, controller_logger
from .persistentvolume import CLAIMS, VOLUMES, described, phase

CLAIM_PROTECTION = "persistentvolumeclaim-protection-controller"
VOLUME_PROTECTION = "persistentvolume-protection-controller"
CLAIM_FINALIZER = "kubernetes.io/pvc-protection"
VOLUME_FINALIZER = "kubernetes.io/pv-protection"
PODS = resource_for("v1", "Pod")

claim_log = controller_logger(CLAIM_PROTECTION)
volume_log = controller_logger(VOLUME_PROTECTION)


def deleting_with(obj: Object | None, finalizer: str) -> bool:
    meta = (obj or {}).get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and finalizer in (meta.get("finalizers") or [])


def release(client: RestClient, resource: Resource, obj: Object, finalizer: str) -> Object:
    """`obj` written back without `finalizer`."""
    updated = copy.deepcopy(obj)
    updated["metadata"]["finalizers"] = [
        f for f in updated["metadata"].get("finalizers") or [] if f != finalizer
    ]
    return client.update(resource, updated)


class ClaimProtectionController:
    """Releases deleted claims no unfinished pod mounts (module docstring)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.name = CLAIM_PROTECTION
        self._tracer = ctx.tracer
        self._client = ctx.client_for(CLAIM_PROTECTION)
        self.queue: WorkQueue[str] = WorkQueue()
        self._claims = ctx.informers.informer(CLAIMS)
        self._pods = ctx.informers.informer(PODS)
        add_index(self._pods, NAMESPACE_INDEX, namespace_index)
        self._claims.add_event_handler(
            on_add=self._claim_changed, on_update=lambda _old, new: self._claim_changed(new)
        )
        self._pods.add_event_handler(
            on_update=lambda _old, new: self._pod_changed(new), on_delete=self._pod_changed
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(
            CLAIM_PROTECTION,
            self.queue,
            self.sync,
            claim_log,
            tracer=self._tracer,
            objects=self._claims,
        ).run(workers, stop)

    def _claim_changed(self, claim: Object) -> None:
        if deleting_with(claim, CLAIM_FINALIZER):
            self.queue.add(object_key(claim))

    def _pod_changed(self, obj: Object | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        namespace = (pod.get("metadata") or {}).get("namespace", "")
        for name in c.pod_claims(pod):
            self.queue.add(f"{namespace}/{name}")

    def sync(self, key: str) -> SyncResult:
        claim = self._claims.indexer.get(key)
        if not deleting_with(claim, CLAIM_FINALIZER):
            return None
        assert claim is not None
        namespace, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
        users = [
            object_key(pod)
            for pod in self._pods.indexer.by_index(NAMESPACE_INDEX, namespace)
            if not podutil.pod_terminal(pod) and name in c.pod_claims(pod)
        ]
        if users:
            claim_log.info("%s is still used by %s", described(claim), ", ".join(users))
            return None
        release(self._client, CLAIMS, claim, CLAIM_FINALIZER)
        claim_log.info("%s is used by no pod: removed %s", described(claim), CLAIM_FINALIZER)
        return None


class VolumeProtectionController:
    """Releases deleted volumes that are not Bound (module docstring)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.name = VOLUME_PROTECTION
        self._tracer = ctx.tracer
        self._client = ctx.client_for(VOLUME_PROTECTION)
        self.queue: WorkQueue[str] = WorkQueue()
        self._volumes = ctx.informers.informer(VOLUMES)
        self._volumes.add_event_handler(
            on_add=self._volume_changed, on_update=lambda _old, new: self._volume_changed(new)
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(
            VOLUME_PROTECTION,
            self.queue,
            self.sync,
            volume_log,
            tracer=self._tracer,
            objects=self._volumes,
        ).run(workers, stop)

    def _volume_changed(self, volume: Object) -> None:
        if deleting_with(volume, VOLUME_FINALIZER):
            self.queue.add(object_key(volume))

    def sync(self, key: str) -> SyncResult:
        volume = self._volumes.indexer.get(key)
        if not deleting_with(volume, VOLUME_FINALIZER):
            return None
        assert volume is not None
        if phase(volume) == "Bound":
            volume_log.info("%s is still Bound", described(volume))
            return None
        release(self._client, VOLUMES, volume, VOLUME_FINALIZER)
        volume_log.info("%s is not Bound: removed %s", described(volume), VOLUME_FINALIZER)
        return None
