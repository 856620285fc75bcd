"""VolumeBinding (pre-filter, filter, reserve, pre-bind): a pod goes where its volumes
are, and volumes that wait for their first consumer are bound where the pod goes, as
kube-scheduler's VolumeBinding plugin does it.

* Pre-filter reads the pod's claims (`persistentVolumeClaim` volumes) from the
  scheduler's caches. A missing claim, or an unbound one whose class binds at once
  (`Immediate`, or no class: the persistent-volume controller binds those, and the pod
  waits for it), makes the pod unschedulable everywhere; the claim's update brings it
  back (`queue.HINTS`).
* Filter, per node: a bound claim's volume must admit the node by its node affinity
  ("node(s) had volume node affinity conflict": a local-path volume lives on one
  node); an unbound claim of a `WaitForFirstConsumer` class needs, on that node, a free
  volume that fits (`kubelab.api.claims`) or a class that provisions ("node(s) didn't
  find available persistent volumes to bind").
* Reserve decides, for the chosen node, which free volume each unbound claim gets (or
  that it is provisioned there), and holds those volumes for this pod so that the next
  cycles do not hand them to another claim before the binding is written.
* Pre-bind, in the binding pool before the pod is bound: a chosen volume gets the
  claim's reference (`spec.claimRef`: the persistent-volume controller completes the
  bind), a claim to provision gets `volume.kubernetes.io/selected-node` (the
  provisioner makes its volume on that node); then it waits until every claim is
  Bound, for at most `BIND_TIMEOUT` (kube-scheduler's bindTimeoutSeconds), so that the
  kubelet finds the volume when the pod arrives. A provisioner that cannot make the
  volume there takes the annotation off again: the wait ends at once, and the pod is
  scheduled anew (with back-off), as kube-scheduler does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubelab.api import claims as c
from kubelab.api.errors import StatusError
from kubelab.client import PatchType, RestClient, ServerUnreachable, SharedInformer, resource_for

from ..framework import (
    SKIP,
    SUCCESS,
    CycleState,
    Handle,
    NodeInfo,
    PodInfo,
    Snapshot,
    Status,
    error,
    unresolvable,
)

NAME = "VolumeBinding"
CLAIMS = resource_for("v1", "PersistentVolumeClaim")
VOLUMES = resource_for("v1", "PersistentVolume")
CLASSES = resource_for("storage.k8s.io/v1", "StorageClass")

ERR_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_NO_VOLUME = "node(s) didn't find available persistent volumes to bind"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
ERR_MISSING_VOLUME = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"

BIND_TIMEOUT = 600.0
"""Seconds pre-bind waits for the claims to be Bound."""
BIND_POLL = 0.05

log = logging.getLogger("kubelab.scheduler.volumebinding")

Object = Mapping[str, Any]


@dataclass
class _PodVolumes:
    """What pre-filter found: the volumes of bound claims, and the claims to bind."""

    bound: list[Object] = field(default_factory=list)
    unbound: list[Object] = field(default_factory=list)
    decisions: list[tuple[Object, Object | None]] = field(default_factory=list)
    """Set by reserve: each unbound claim with its volume (None: to be provisioned)."""


class VolumeBinding:
    name = NAME

    def __init__(
        self,
        client: RestClient,
        snapshot: Snapshot,
        claims: SharedInformer,
        volumes: SharedInformer,
        classes: SharedInformer,
    ) -> None:
        self._client = client
        self._snapshot = snapshot
        self._claims = claims
        self._volumes = volumes
        self._classes = classes
        self._lock = threading.Lock()
        self._held: dict[str, str] = {}
        """Volume name -> the claim key reserve chose it for, until the cache shows it."""

    # -- scheduling cycle ----------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status:
        names = c.pod_claims(pod.pod)
        if not names:
            state.skip_filter.add(NAME)
            state.skip_pre_bind.add(NAME)
            return SKIP
        namespace = (pod.pod.get("metadata") or {}).get("namespace", "")
        found = _PodVolumes()
        for name in names:
            claim = self._claims.indexer.get(f"{namespace}/{name}")
            if claim is None:
                return unresolvable(f'persistentvolumeclaim "{name}" not found')
            if claim["metadata"].get("deletionTimestamp"):
                return unresolvable(f'persistentvolumeclaim "{name}" is being deleted')
            volume_name = (claim.get("spec") or {}).get("volumeName")
            if volume_name:
                volume = self._volumes.indexer.get(volume_name)
                if volume is None:
                    return unresolvable(ERR_MISSING_VOLUME)
                found.bound.append(volume)
            elif c.wait_for_first_consumer(self._classes.indexer.get(c.claim_class(claim))):
                found.unbound.append(claim)
            else:
                return unresolvable(ERR_UNBOUND_IMMEDIATE)
        state.write(NAME, found)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        found: _PodVolumes | None = state.read(NAME)
        if found is None:
            return SUCCESS
        if not all(c.volume_node_fits(v, node.node) for v in found.bound):
            return unresolvable(ERR_NODE_CONFLICT)
        if self._decide(found.unbound, node.node) is None:
            return unresolvable(ERR_NO_VOLUME)
        return SUCCESS

    def _decide(
        self, unbound: list[Object], node: Object
    ) -> list[tuple[Object, Object | None]] | None:
        """Each claim with a free volume that fits on `node`, or None where its class
        provisions; None if some claim has neither."""
        decisions: list[tuple[Object, Object | None]] = []
        taken: set[str] = set()
        with self._lock:
            held = dict(self._held)
        for claim in unbound:
            key = c.claim_key(claim)
            free = [
                v
                for v in self._volumes.indexer.list()
                if v["metadata"]["name"] not in taken
                and held.get(v["metadata"]["name"], key) == key
            ]
            volume = c.best_volume(free, claim, node)
            if volume is not None:
                taken.add(volume["metadata"]["name"])
            elif not self._provisions(claim):
                return None
            decisions.append((claim, volume))
        return decisions

    def _provisions(self, claim: Object) -> bool:
        storage_class = self._classes.indexer.get(c.claim_class(claim)) or {}
        return str(storage_class.get("provisioner") or c.NO_PROVISIONER) != c.NO_PROVISIONER

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        found: _PodVolumes | None = state.read(NAME)
        info = self._snapshot.get(node_name)
        if found is None or not found.unbound or info is None:
            state.skip_pre_bind.add(NAME)
            return SUCCESS
        decisions = self._decide(found.unbound, info.node)
        if decisions is None:
            return unresolvable(ERR_NO_VOLUME)
        found.decisions = decisions
        with self._lock:
            for claim, volume in decisions:
                if volume is not None:
                    self._held[volume["metadata"]["name"]] = c.claim_key(claim)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        found: _PodVolumes | None = state.read(NAME)
        if found is not None:
            self._release(found)

    def _release(self, found: _PodVolumes) -> None:
        """Stop holding the volumes reserve chose: the binding failed, or the cache now
        shows them reserved (pre-bind's wait is over)."""
        with self._lock:
            for _claim, volume in found.decisions:
                if volume is not None:
                    self._held.pop(volume["metadata"]["name"], None)

    # -- binding cycle -------------------------------------------------------------------

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        found: _PodVolumes | None = state.read(NAME)
        if found is None or not found.decisions:
            return SUCCESS
        written: dict[str, int] = {}
        """Claims to provision: key -> the resourceVersion our annotation made."""
        try:
            for claim, volume in found.decisions:
                version = self._write(pod, claim, volume, node_name)
                if version is not None:
                    written[c.claim_key(claim)] = version
        except (StatusError, ServerUnreachable) as exc:
            return error(f"binding volumes of {pod.key}: {exc}")
        keys = [c.claim_key(claim) for claim, _ in found.decisions]
        deadline = time.monotonic() + BIND_TIMEOUT
        while not all(self._bound(key) for key in keys):
            for key, version in written.items():
                if self._node_reset(key, version):
                    return error(
                        f"binding volumes of {pod.key}: selectedNode annotation reset for "
                        f"PVC {key} (its provisioner could not make a volume on {node_name}: "
                        "see the claim's events)"
                    )
            if time.monotonic() > deadline:
                return error(f"binding volumes of {pod.key}: timed out waiting for the condition")
            time.sleep(BIND_POLL)
        self._release(found)
        return SUCCESS

    def _write(
        self, pod: PodInfo, claim: Object, volume: Object | None, node_name: str
    ) -> int | None:
        """Reserve `volume` for the claim, or ask for one on the node (then the
        resourceVersion of the claim so annotated)."""
        meta = claim["metadata"]
        if volume is None:
            patch: dict[str, Any] = {"metadata": {"annotations": {c.SELECTED_NODE: node_name}}}
            written = self._client.patch(CLAIMS, meta["name"], patch, meta["namespace"])
            log.info(
                "%s: claim %s (uid %s, resourceVersion %s) to be provisioned on %s",
                pod.key,
                c.claim_key(claim),
                meta.get("uid"),
                written["metadata"].get("resourceVersion"),
                node_name,
            )
            return int(written["metadata"]["resourceVersion"])
        patch = {
            "metadata": {"annotations": {c.BOUND_BY_CONTROLLER: "yes"}},
            "spec": {"claimRef": c.claim_ref(claim)},
        }
        written = self._client.patch(
            VOLUMES, volume["metadata"]["name"], patch, patch_type=PatchType.MERGE
        )
        log.info(
            "%s: claim %s (uid %s) to bind volume %s (uid %s, resourceVersion %s)",
            pod.key,
            c.claim_key(claim),
            meta.get("uid"),
            volume["metadata"]["name"],
            written["metadata"].get("uid"),
            written["metadata"].get("resourceVersion"),
        )
        return None

    def _node_reset(self, key: str, version: int) -> bool:
        """Whether the claim, changed after our annotation, no longer has it: its
        provisioner gave up on that node (external-provisioner's reschedule)."""
        claim = self._claims.indexer.get(key)
        if claim is None:
            return True
        newer = int(claim["metadata"].get("resourceVersion") or 0) > version
        return newer and not c.annotations_of(claim).get(c.SELECTED_NODE)

    def _bound(self, key: str) -> bool:
        claim = self._claims.indexer.get(key)
        return claim is not None and (claim.get("status") or {}).get("phase") == "Bound"


def new(args: Mapping[str, Any], handle: Handle) -> VolumeBinding:
    return VolumeBinding(
        handle.client,
        handle.snapshot,
        handle.informer(CLAIMS),
        handle.informer(VOLUMES),
        handle.informer(CLASSES),
    )
