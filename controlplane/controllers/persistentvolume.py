"""The persistent-volume controller (kube-controller-manager's
persistentvolume-binder-controller): it binds PersistentVolumeClaims to
PersistentVolumes, and looks after volumes whose claim is gone.

Claims, keyed "namespace/name":

* A claim that names a volume (`spec.volumeName`, set by its author or by the
  scheduler's VolumeBinding) is bound to it once the volume is free or reserved for
  it; a volume bound to another claim leaves the claim Pending with a FailedBinding
  Event. A Bound claim whose volume is gone is Lost (ClaimLost).
* Otherwise the volume that fits best is bound (`kubelab.api.claims`). If none fits:
  - a claim of a `WaitForFirstConsumer` class waits, with the WaitForFirstConsumer
    Event, until the scheduler has picked a node for its first pod
    (`volume.kubernetes.io/selected-node`);
  - a claim of a class with a provisioner gets the `volume.kubernetes.io/storage-
    provisioner` annotation, which is what the provisioner acts on (the local-path
    provisioner: `localpath`), and the ExternalProvisioning Event;
  - a claim of a class that does not exist gets ProvisioningFailed, one of no class
    FailedBinding ("no persistent volumes available for this claim and no storage
    class is set"); both are looked at again every `RESYNC` seconds, as Kubernetes'
    controller resyncs, since a volume made by hand may come.

Binding writes the volume first (`spec.claimRef`, then status Bound) and the claim
second (`spec.volumeName` with `pv.kubernetes.io/bind-completed`, then status Bound with
the volume's capacity and access modes), as Kubernetes does: a crash in between leaves
a volume reserved for the claim, which the next sync completes, never a claim pointing
at a volume another claim may take.

Volumes, keyed by name: a volume without a claimRef is Available; one whose claim is
gone (deleted, or replaced by a claim of the same name and another uid) is Released,
and then its reclaim policy applies: Retain keeps it Released until an administrator
deals with it; Delete is the provisioner's job for the volumes it made (it deletes the
data and the volume); a Delete volume that no provisioner made (a hostPath volume made
by hand) goes Failed with VolumeFailedDelete, as in Kubernetes, which has no deleter for
hostPath outside its test clusters. Recycle is refused likewise.

Each bind and phase change is logged with the objects' uid and resourceVersion; the
syncs are traced as every controller's (`base.Workers`).
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import Any

from kubelab.api import claims as c
from kubelab.api.errors import StatusError
from kubelab.client import (
    DeletedFinalStateUnknown,
    Object,
    RestClient,
    WorkQueue,
    object_key,
    resource_for,
)
from kubelab.client.record import NORMAL, WARNING, EventRecorder

from .base import ControllerContext, SyncResult, Workers, controller_logger, run_workers

NAME = "persistentvolume-binder-controller"
CLAIMS = resource_for("v1", "PersistentVolumeClaim")
VOLUMES = resource_for("v1", "PersistentVolume")
CLASSES = resource_for("storage.k8s.io/v1", "StorageClass")

RESYNC = 15.0
"""Seconds after which a claim that found nothing to bind looks again (Kubernetes'
--pvclaimbinder-sync-period)."""

log = controller_logger(NAME)


def described(obj: Object) -> str:
    """How a log line names an object: name, uid and resourceVersion."""
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return (
        f"{obj.get('kind', '')} {where}{meta.get('name', '')} "
        f"(uid {meta.get('uid', '')}, resourceVersion {meta.get('resourceVersion', '')})"
    )


def phase(obj: Object) -> str:
    return str((obj.get("status") or {}).get("phase") or "")


class ClaimsAndVolumes:
    """What the persistent-volume controller and the local-path provisioner are both made
    of: a client and an Event recorder of their own, the claim, volume and class caches,
    and a work queue of claims and one of volumes, drained by `sync_claim` and
    `sync_volume` (which each subclass defines)."""

    def __init__(
        self, ctx: ControllerContext, name: str, event_source: str, logger: logging.Logger
    ) -> None:
        self.name = name
        self._log = logger
        self._tracer = ctx.tracer
        self._client: RestClient = ctx.client_for(name)
        self._events = EventRecorder(self._client, event_source)
        self.claim_queue: WorkQueue[str] = WorkQueue()
        self.volume_queue: WorkQueue[str] = WorkQueue()
        self._claims = ctx.informers.informer(CLAIMS)
        self._volumes = ctx.informers.informer(VOLUMES)
        self._classes = ctx.informers.informer(CLASSES)

    def sync_claim(self, key: str) -> SyncResult:
        raise NotImplementedError

    def sync_volume(self, name: str) -> SyncResult:
        raise NotImplementedError

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            run_workers(
                stop,
                workers,
                Workers(
                    f"{self.name}-claims",
                    self.claim_queue,
                    self.sync_claim,
                    self._log,
                    tracer=self._tracer,
                    objects=self._claims,
                ),
                Workers(
                    f"{self.name}-volumes",
                    self.volume_queue,
                    self.sync_volume,
                    self._log,
                    tracer=self._tracer,
                    objects=self._volumes,
                ),
            )


class PersistentVolumeController(ClaimsAndVolumes):
    """Binds claims and volumes and tracks their phases (module docstring)."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, NAME, "persistentvolume-controller", log)
        self._claims.add_event_handler(
            on_add=self._claim_changed,
            on_update=lambda _old, new: self._claim_changed(new),
            on_delete=self._claim_deleted,
        )
        self._volumes.add_event_handler(
            on_add=self._volume_changed,
            on_update=lambda _old, new: self._volume_changed(new),
            on_delete=self._volume_changed,
        )
        self._classes.add_event_handler(on_add=self._class_added)

    # -- handlers ------------------------------------------------------------------------

    def _claim_changed(self, claim: Object) -> None:
        self.claim_queue.add(object_key(claim))
        volume = (claim.get("spec") or {}).get("volumeName")
        if volume:
            self.volume_queue.add(volume)

    def _claim_deleted(self, obj: Object | DeletedFinalStateUnknown) -> None:
        claim = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        volume = (claim.get("spec") or {}).get("volumeName")
        if volume:
            self.volume_queue.add(volume)

    def _volume_changed(self, obj: Object | DeletedFinalStateUnknown) -> None:
        volume = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.volume_queue.add(object_key(volume))
        ref = (volume.get("spec") or {}).get("claimRef")
        if ref:
            self.claim_queue.add(f"{ref.get('namespace', '')}/{ref.get('name', '')}")
        elif not isinstance(obj, DeletedFinalStateUnknown) and phase(volume) != "Released":
            # A new free volume may be what a pending claim waits for.
            for claim in self._claims.indexer.list():
                if not (claim.get("spec") or {}).get("volumeName"):
                    self.claim_queue.add(object_key(claim))

    def _class_added(self, _storage_class: Object) -> None:
        for claim in self._claims.indexer.list():
            if phase(claim) != "Bound":
                self.claim_queue.add(object_key(claim))

    # -- claims --------------------------------------------------------------------------

    def sync_claim(self, key: str) -> SyncResult:
        claim = self._claims.indexer.get(key)
        if claim is None or (claim.get("metadata") or {}).get("deletionTimestamp"):
            return None
        volume_name = (claim.get("spec") or {}).get("volumeName")
        if volume_name:
            return self._sync_named_claim(claim, str(volume_name))
        volume = c.best_volume(self._volumes.indexer.list(), claim)
        if volume is not None:
            self._bind(volume, claim)
            return None
        return self._nothing_to_bind(claim)

    def _sync_named_claim(self, claim: Object, volume_name: str) -> SyncResult:
        volume = self._volumes.indexer.get(volume_name)
        if volume is None:
            if phase(claim) == "Bound":
                self._set_claim_phase(claim, "Lost")
                self._events.event(
                    claim,
                    WARNING,
                    "ClaimLost",
                    "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
                )
            return None
        if c.reserved_for(volume, claim) or not (volume.get("spec") or {}).get("claimRef"):
            self._bind(volume, claim)
            return None
        if phase(claim) != "Bound":
            self._events.event(
                claim,
                WARNING,
                "FailedBinding",
                f'volume "{volume_name}" already bound to a different claim.',
            )
        return None

    def _nothing_to_bind(self, claim: Object) -> SyncResult:
        """No volume fits: wait, ask a provisioner, or say why not (module docstring)."""
        class_name = c.claim_class(claim)
        if not class_name:
            self._events.event(
                claim,
                NORMAL,
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set",
            )
            return RESYNC
        storage_class = self._classes.indexer.get(class_name)
        if storage_class is None:
            self._events.event(
                claim,
                WARNING,
                "ProvisioningFailed",
                f'storageclass.storage.k8s.io "{class_name}" not found',
            )
            return RESYNC
        if c.wait_for_first_consumer(storage_class) and not c.annotations_of(claim).get(
            c.SELECTED_NODE
        ):
            self._events.event(
                claim,
                NORMAL,
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
            )
            return None
        provisioner = str(storage_class.get("provisioner") or "")
        if provisioner == c.NO_PROVISIONER:
            self._events.event(
                claim,
                NORMAL,
                "FailedBinding",
                f'no persistent volumes available for this claim and storage class "{class_name}" '
                "provisions none",
            )
            return RESYNC
        if c.annotations_of(claim).get(c.STORAGE_PROVISIONER) != provisioner:
            patch = {
                "metadata": {
                    "annotations": {
                        c.STORAGE_PROVISIONER: provisioner,
                        c.BETA_STORAGE_PROVISIONER: provisioner,
                    }
                }
            }
            meta = claim["metadata"]
            self._client.patch(CLAIMS, meta["name"], patch, meta["namespace"])
            log.info("%s: waiting for provisioner %s", described(claim), provisioner)
        self._events.event(
            claim,
            NORMAL,
            "ExternalProvisioning",
            f"Waiting for a volume to be created either by the external provisioner "
            f'"{provisioner}" or manually by the system administrator. If volume creation '
            "is delayed, please verify that the provisioner is running and correctly "
            "registered.",
        )
        return None

    def _bind(self, volume: Object, claim: Object) -> None:
        """Bind in Kubernetes' order (module docstring); each step only if not done."""
        if not c.reserved_for(volume, claim) or not (volume["spec"]["claimRef"].get("uid")):
            volume = copy.deepcopy(volume)
            volume["spec"]["claimRef"] = c.claim_ref(claim)
            volume["metadata"].setdefault("annotations", {})[c.BOUND_BY_CONTROLLER] = "yes"
            volume = self._client.update(VOLUMES, volume)
            log.info("bound %s to %s", described(volume), described(claim))
        if phase(volume) != "Bound":
            volume = copy.deepcopy(volume)
            volume["status"] = {**(volume.get("status") or {}), "phase": "Bound"}
            volume = self._client.update_status(VOLUMES, volume)
            log.info("%s is Bound", described(volume))
        volume_name = volume["metadata"]["name"]
        claim_annotations = c.annotations_of(claim)
        if (claim.get("spec") or {}).get("volumeName") != volume_name or (
            claim_annotations.get(c.BIND_COMPLETED) != "yes"
        ):
            claim = copy.deepcopy(claim)
            claim["spec"]["volumeName"] = volume_name
            added = claim["metadata"].setdefault("annotations", {})
            added[c.BIND_COMPLETED] = "yes"
            if claim_annotations.get(c.BIND_COMPLETED) is None:
                added.setdefault(c.BOUND_BY_CONTROLLER, "yes")
            claim = self._client.update(CLAIMS, claim)
        spec = volume.get("spec") or {}
        status: dict[str, Any] = {
            "phase": "Bound",
            "accessModes": list(spec.get("accessModes") or []),
            "capacity": dict(spec.get("capacity") or {}),
        }
        if any((claim.get("status") or {}).get(k) != v for k, v in status.items()):
            claim = copy.deepcopy(claim)
            claim["status"] = {**(claim.get("status") or {}), **status}
            claim = self._client.update_status(CLAIMS, claim)
            log.info("%s is Bound to volume %s", described(claim), volume_name)

    def _set_claim_phase(self, claim: Object, new_phase: str) -> None:
        claim = copy.deepcopy(claim)
        claim["status"] = {**(claim.get("status") or {}), "phase": new_phase}
        claim = self._client.update_status(CLAIMS, claim)
        log.info("%s is %s", described(claim), new_phase)

    # -- volumes -------------------------------------------------------------------------

    def sync_volume(self, name: str) -> SyncResult:
        volume = self._volumes.indexer.get(name)
        if volume is None:
            return None
        ref = (volume.get("spec") or {}).get("claimRef")
        if not ref:
            if phase(volume) != "Available" and not volume["metadata"].get("deletionTimestamp"):
                self._set_volume_phase(volume, "Available")
            return None
        claim = self._claim_of(ref)
        if claim is not None and c.reserved_for(volume, claim):
            if (claim.get("spec") or {}).get("volumeName") in (None, "", name):
                self.claim_queue.add(object_key(claim))  # the claim side completes the bind
            return None
        if not ref.get("uid") and claim is None:
            return None  # reserved for a claim not made yet: Kubernetes waits for it too
        return self._released(volume)

    def _claim_of(self, ref: Object) -> Object | None:
        """The claim a claimRef names, from the cache or, when the cache does not have it
        (a claim made a moment ago), from the apiserver: releasing a volume whose claim
        exists would lose its data."""
        key = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        claim = self._claims.indexer.get(key)
        if claim is not None:
            return claim
        try:
            return self._client.get(CLAIMS, str(ref.get("name", "")), str(ref.get("namespace", "")))
        except StatusError as exc:
            if exc.code == 404:
                return None
            raise

    def _released(self, volume: Object) -> SyncResult:
        """The volume's claim is gone: Released, then its reclaim policy."""
        if phase(volume) not in ("Released", "Failed"):
            volume = self._set_volume_phase(volume, "Released")
        if phase(volume) == "Failed" or volume["metadata"].get("deletionTimestamp"):
            return None  # a volume deleted by hand goes as it is, without reclaiming
        policy = (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "Retain"
        if policy == "Retain":
            return None
        if policy == "Delete" and c.annotations_of(volume).get(c.PROVISIONED_BY):
            return None  # its provisioner deletes it
        reason = "VolumeFailedDelete" if policy == "Delete" else "VolumeFailedRecycle"
        message = (
            f'error getting deleter volume plugin for volume "{volume["metadata"]["name"]}": '
            "no deletable volume plugin matched"
            if policy == "Delete"
            else "recycling is not supported: delete the volume and make a new one"
        )
        volume = self._set_volume_phase(volume, "Failed", message)
        self._events.event(volume, WARNING, reason, message)
        return None

    def _set_volume_phase(self, volume: Object, new_phase: str, message: str = "") -> Object:
        volume = copy.deepcopy(volume)
        status = {**(volume.get("status") or {}), "phase": new_phase}
        if message:
            status["message"] = message
        else:
            status.pop("message", None)
        volume["status"] = status
        volume = self._client.update_status(VOLUMES, volume)
        log.info("%s is %s", described(volume), new_phase)
        return volume
