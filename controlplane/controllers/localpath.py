"""The local-path provisioner: dynamic volumes in a directory of the node the claim's
first pod goes to, as rancher's local-path-provisioner gives them to kind and k3s (and
under its provisioner name, `rancher.io/local-path`, so that the StorageClass `standard`
reads as it does there).

Provisioning. A claim the persistent-volume controller handed to this provisioner
(`volume.kubernetes.io/storage-provisioner`) whose class is ours waits for the node the
scheduler chose (`volume.kubernetes.io/selected-node`: the class binds
`WaitForFirstConsumer`, since a directory exists on one node only). The provisioner
then creates the PersistentVolume `pvc-<claim uid>`:

* a hostPath volume at `/var/lib/kubelab/local-path/<volume>_<namespace>_<claim>`,
  type `DirectoryOrCreate`, so the kubelet makes the directory when it first mounts it;
* required node affinity to that node (`kubernetes.io/hostname`), so every later pod
  of the claim is scheduled there (the scheduler's VolumeBinding);
* the claim's size and access modes, the class's reclaim policy, and a claimRef to the
  claim, which the persistent-volume controller then binds.

A claim that cannot be provisioned gets a ProvisioningFailed Event saying why (no node
selected under an `Immediate` class, an unknown node, an access mode a node directory
cannot give); where a node had been selected, the annotation is taken off, so that the
scheduler, waiting for the volume, schedules the pod anew.

Deleting. A volume of ours that is Released with reclaim policy Delete has its
directory removed by a helper pod on its node (`helper-<volume>` in kube-system,
busybox `rm -rf` over a hostPath mount of the base directory), as local-path-provisioner
does: the controller-manager runs on a control-plane node and cannot reach another
node's disk, while a pod can run on any node, with nothing on the node but its kubelet.
Once the helper pod has Succeeded it is deleted and so is the volume; a helper that
Failed is reported (VolumeFailedDelete) and tried again. A volume whose node is gone is
deleted without its directory (nothing could remove it), with a warning in the log.

Creating the directory needs no helper: the kubelet's hostPath `DirectoryOrCreate`
makes it as the first pod starts, which saves a pod start on the way to a Bound claim.
"""

from __future__ import annotations

import posixpath
from typing import Any

from kubelab.api import claims as c
from kubelab.api.errors import StatusError
from kubelab.client import (
    DeletedFinalStateUnknown,
    Object,
    object_key,
    resource_for,
)
from kubelab.client.record import NORMAL, WARNING

from .base import ControllerContext, SyncResult, controller_logger
from .persistentvolume import CLAIMS, RESYNC, VOLUMES, ClaimsAndVolumes, described, phase

NAME = "local-path-provisioner"
PROVISIONER = "rancher.io/local-path"
BASE_DIR = "/var/lib/kubelab/local-path"
"""Where volumes live on every node."""
NODE_ANNOTATION = "local.path.provisioner/selected-node"
"""The node a volume's directory is on (local-path-provisioner's annotation)."""
HOSTNAME_LABEL = "kubernetes.io/hostname"
HELPER_NAMESPACE = "kube-system"
HELPER_LABEL = "kubelab.io/local-path-helper"
"""Helper pods carry the name of their volume under this label."""
HELPER_IMAGE = "busybox:latest"
ACCESS_MODES = frozenset({"ReadWriteOnce", "ReadWriteOncePod"})
NODES = resource_for("v1", "Node")
PODS = resource_for("v1", "Pod")
HELPER_POLL = 1.0
"""Seconds between looks at a helper pod that has not finished (its events also wake
the volume's sync)."""

log = controller_logger(NAME)


def volume_path(volume_name: str, claim: Object) -> str:
    meta = claim["metadata"]
    return posixpath.join(BASE_DIR, f"{volume_name}_{meta['namespace']}_{meta['name']}")


def helper_name(volume_name: str) -> str:
    return f"helper-{volume_name}"


class LocalPathProvisioner(ClaimsAndVolumes):
    """Makes and deletes node-directory volumes (module docstring)."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, NAME, f"{PROVISIONER}_{NAME}", log)
        self._nodes = ctx.informers.informer(NODES)
        self._pods = ctx.informers.informer(PODS)
        self._claims.add_event_handler(
            on_add=self._claim_changed, on_update=lambda _old, new: self._claim_changed(new)
        )
        self._volumes.add_event_handler(
            on_add=self._volume_changed, on_update=lambda _old, new: self._volume_changed(new)
        )
        self._pods.add_event_handler(
            on_update=lambda _old, new: self._pod_changed(new), on_delete=self._pod_changed
        )

    def _claim_changed(self, claim: Object) -> None:
        if c.annotations_of(claim).get(c.STORAGE_PROVISIONER) == PROVISIONER:
            self.claim_queue.add(object_key(claim))

    def _volume_changed(self, volume: Object) -> None:
        if c.annotations_of(volume).get(c.PROVISIONED_BY) == PROVISIONER:
            self.volume_queue.add(object_key(volume))

    def _pod_changed(self, obj: Object | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        volume = ((pod.get("metadata") or {}).get("labels") or {}).get(HELPER_LABEL)
        if volume:
            self.volume_queue.add(volume)

    # -- provisioning --------------------------------------------------------------------

    def sync_claim(self, key: str) -> SyncResult:
        claim = self._claims.indexer.get(key)
        if (
            claim is None
            or claim["metadata"].get("deletionTimestamp")
            or (claim.get("spec") or {}).get("volumeName")
            or c.annotations_of(claim).get(c.STORAGE_PROVISIONER) != PROVISIONER
        ):
            return None
        storage_class = self._classes.indexer.get(c.claim_class(claim))
        if storage_class is None or storage_class.get("provisioner") != PROVISIONER:
            return None
        volume_name = f"pvc-{claim['metadata']['uid']}"
        if self._volumes.indexer.get(volume_name) is not None:
            return None
        node_name = c.annotations_of(claim).get(c.SELECTED_NODE)
        if not node_name:
            if not c.wait_for_first_consumer(storage_class):
                self._failed(claim, storage_class, "configuration error, no node was specified")
            return None
        node = self._nodes.indexer.get(node_name)
        if node is None:
            self._failed(claim, storage_class, f'nodes "{node_name}" not found', reschedule=True)
            return None
        modes = set((claim.get("spec") or {}).get("accessModes") or [])
        if not modes <= ACCESS_MODES:
            self._failed(
                claim,
                storage_class,
                "NodePath only supports ReadWriteOnce and ReadWriteOncePod access modes",
                reschedule=True,
            )
            return None
        self._events.event(
            claim,
            NORMAL,
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{key}"',
        )
        body = self._volume(volume_name, claim, storage_class, node)
        try:
            volume = self._client.create(VOLUMES, body)
        except StatusError as exc:
            if exc.code == 409:
                return None  # made by an earlier sync the cache has not shown yet
            raise
        log.info(
            "provisioned %s at %s on node %s for %s",
            described(volume),
            body["spec"]["hostPath"]["path"],
            node_name,
            described(claim),
        )
        self._events.event(
            claim, NORMAL, "ProvisioningSucceeded", f"Successfully provisioned volume {volume_name}"
        )
        return None

    def _failed(
        self, claim: Object, storage_class: Object, why: str, reschedule: bool = False
    ) -> None:
        """Say why; with `reschedule`, also take the selected node off the claim, so
        the scheduler, waiting for the volume, tries its pod again (external-
        provisioner's reschedule on a final error)."""
        class_name = storage_class["metadata"]["name"]
        log.warning("cannot provision a volume for %s: %s", described(claim), why)
        self._events.event(
            claim,
            WARNING,
            "ProvisioningFailed",
            f'failed to provision volume with StorageClass "{class_name}": {why}',
        )
        if reschedule:
            meta = claim["metadata"]
            patch = {"metadata": {"annotations": {c.SELECTED_NODE: None}}}
            self._client.patch(CLAIMS, meta["name"], patch, meta["namespace"])

    @staticmethod
    def _volume(
        volume_name: str, claim: Object, storage_class: Object, node: Object
    ) -> dict[str, Any]:
        node_meta = node["metadata"]
        hostname = (node_meta.get("labels") or {}).get(HOSTNAME_LABEL) or node_meta["name"]
        spec = claim.get("spec") or {}
        return {
            "apiVersion": VOLUMES.api_version,
            "kind": VOLUMES.kind,
            "metadata": {
                "name": volume_name,
                "annotations": {c.PROVISIONED_BY: PROVISIONER, NODE_ANNOTATION: node_meta["name"]},
            },
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": list(spec.get("accessModes") or []),
                "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
                "storageClassName": storage_class["metadata"]["name"],
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "claimRef": c.claim_ref(claim),
                "hostPath": {"path": volume_path(volume_name, claim), "type": "DirectoryOrCreate"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": HOSTNAME_LABEL, "operator": "In", "values": [hostname]}
                                ]
                            }
                        ]
                    }
                },
            },
        }

    # -- deleting ------------------------------------------------------------------------

    def sync_volume(self, name: str) -> SyncResult:
        volume = self._volumes.indexer.get(name)
        if (
            volume is None
            or volume["metadata"].get("deletionTimestamp")
            or c.annotations_of(volume).get(c.PROVISIONED_BY) != PROVISIONER
            or phase(volume) != "Released"
            or (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") != "Delete"
        ):
            return None
        node_name = c.annotations_of(volume).get(NODE_ANNOTATION, "")
        helper = self._pods.indexer.get(f"{HELPER_NAMESPACE}/{helper_name(name)}")
        if helper is None:
            if not self._still_to_delete(name):
                return None
            if self._nodes.indexer.get(node_name) is None:
                log.warning(
                    "node %r of %s is gone: deleting the volume, its directory cannot be",
                    node_name,
                    described(volume),
                )
                self._delete_volume(volume)
                return None
            pod = self._client.create(PODS, self._helper(volume, node_name), HELPER_NAMESPACE)
            log.info("removing the directory of %s with %s", described(volume), described(pod))
            return HELPER_POLL
        helper_phase = phase(helper)
        if helper_phase == "Succeeded":
            self._delete_helper(helper)
            self._delete_volume(volume)
            return None
        if helper_phase == "Failed":
            why = (helper.get("status") or {}).get("message") or "the helper pod failed"
            self._events.event(
                volume,
                WARNING,
                "VolumeFailedDelete",
                f"removing {volume['spec']['hostPath']['path']} on {node_name} failed: {why}",
            )
            self._delete_helper(helper)
            return RESYNC
        return HELPER_POLL

    def _still_to_delete(self, name: str) -> bool:
        """Whether the volume, as the apiserver has it now, still waits for its helper:
        the cache may show it after a finished helper's sync deleted it (and the
        helper), and a helper made then would never be cleaned up."""
        try:
            current = self._client.get(VOLUMES, name)
        except StatusError as exc:
            if exc.code == 404:
                return False
            raise
        return not current["metadata"].get("deletionTimestamp")

    @staticmethod
    def _helper(volume: Object, node_name: str) -> dict[str, Any]:
        name = volume["metadata"]["name"]
        directory = posixpath.basename(volume["spec"]["hostPath"]["path"])
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": helper_name(name), "labels": {HELPER_LABEL: name}},
            "spec": {
                "nodeName": node_name,
                "restartPolicy": "Never",
                "tolerations": [{"operator": "Exists"}],
                "containers": [
                    {
                        "name": "helper",
                        "image": HELPER_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["rm", "-rf", posixpath.join("/data", directory)],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }
                ],
                "volumes": [
                    {"name": "data", "hostPath": {"path": BASE_DIR, "type": "DirectoryOrCreate"}}
                ],
            },
        }

    def _delete_helper(self, helper: Object) -> None:
        try:
            self._client.delete(PODS, helper["metadata"]["name"], HELPER_NAMESPACE)
        except StatusError as exc:
            if exc.code != 404:
                raise

    def _delete_volume(self, volume: Object) -> None:
        try:
            self._client.delete(VOLUMES, volume["metadata"]["name"])
        except StatusError as exc:
            if exc.code != 404:
                raise
        log.info("deleted %s", described(volume))
