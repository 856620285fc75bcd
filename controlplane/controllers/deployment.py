"""The Deployment controller (kube-controller-manager's deployment-controller): rolls a
Deployment's pod template out through ReplicaSets, one per template, named
`<deployment>-<pod-template-hash>` (`deploymentutil.template_hash`).

A sync of one Deployment (keyed "namespace/name"), as Kubernetes' syncDeployment:

1. claims the ReplicaSets of its namespace by selector (adopt/release, as the
   ReplicaSet controller claims pods);
2. a Deployment being deleted only gets its status;
3. pause: the Progressing condition says DeploymentPaused (Unknown), and a paused
   Deployment is only scaled, never rolled out; on resume it says DeploymentResumed;
4. a scaling event (`spec.replicas` differs from what the active ReplicaSets were made
   for, their `deployment.kubernetes.io/desired-replicas`) is a scale: a single active
   ReplicaSet takes the new size; several (mid-rollout) share the change in proportion
   to their sizes (`deploymentutil.proportional_sizes`);
5. otherwise a rollout step of the strategy:
   * RollingUpdate: scale the new ReplicaSet up as far as replicas + maxSurge allows,
     else scale old ones down as far as replicas - maxUnavailable allows (old pods that
     are not available first, then the oldest ReplicaSets);
   * Recreate: scale every old ReplicaSet to 0, wait until their pods are gone, then
     create or scale up the new one;
6. once complete, deletes the oldest old ReplicaSets (scaled to 0) beyond
   `revisionHistoryLimit`;
7. writes the status (replicas, updated, ready, available, unavailable,
   observedGeneration) with the Available and Progressing conditions. Progressing goes
   False (ProgressDeadlineExceeded) once the rollout made no progress for
   `progressDeadlineSeconds`: the sync asks to look again when that deadline falls.

Revisions. The new ReplicaSet is annotated `deployment.kubernetes.io/revision` one above
the old ones, and so is the Deployment. `kubectl rollout history` lists the
ReplicaSets' revisions; `kubectl rollout undo` copies an old ReplicaSet's template into
the Deployment, whose template then matches that ReplicaSet again: it becomes the new
one with the next revision, its old number moving to `revision-history`.
`kubectl rollout restart` changes an annotation of the template: a new ReplicaSet.

The ReplicaSets' writes are updates carrying the cached resourceVersion: a stale cache
costs a 409 and a retry, never a lost change. A new ReplicaSet's name is fixed by the
hash, so a sync that runs on a cache without it gets AlreadyExists, never a duplicate;
when the name is taken by a ReplicaSet that is not ours, `status.collisionCount` goes
up and the next hash differs.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client import (
    NAMESPACE_INDEX,
    REAL_CLOCK,
    Clock,
    DeletedFinalStateUnknown,
    Object,
    WorkQueue,
    namespace_index,
    object_key,
    resource_for,
)
from kubelab.client.record import NORMAL, EventRecorder

from . import deploymentutil as du
from . import podcontrol as pc
from .base import ControllerContext, SyncError, SyncResult, Workers, controller_logger
from .replicaset import REPLICA_SETS, pod_informer

NAME = "deployment-controller"

DEPLOYMENTS = resource_for("apps/v1", "Deployment")

log = controller_logger(NAME)


def _template(obj: Object) -> Object:
    template: Object = (obj.get("spec") or {}).get("template") or {}
    return template


def _name(obj: Object) -> str:
    return str(pc.meta(obj)["name"])


class DeploymentController:
    """The controller of the module docstring."""

    name = NAME

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._client = ctx.client_for(NAME)
        self._events = EventRecorder(self._client, NAME)
        self._clock = clock
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._deployments = ctx.informers.informer(DEPLOYMENTS)
        self._replica_sets = ctx.informers.informer(REPLICA_SETS)
        pc.add_index(self._replica_sets, NAMESPACE_INDEX, namespace_index)
        self._pods = pod_informer(ctx)
        self._deployments.add_event_handler(
            on_add=self._enqueue,
            on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._enqueue,
        )
        self._replica_sets.add_event_handler(
            on_add=self._rs_added, on_update=self._rs_updated, on_delete=self._rs_deleted
        )
        self._pods.add_event_handler(on_delete=self._pod_deleted)

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(
                NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._deployments
            ).run(workers, stop)

    # -- handlers ------------------------------------------------------------------------

    def _enqueue(self, obj: Object | DeletedFinalStateUnknown) -> None:
        self.queue.add(object_key(obj))

    def _owner_of(self, rs: Object) -> Object | None:
        return pc.resolve_controller(rs, DEPLOYMENTS.kind, self._deployments.indexer.get)

    def _enqueue_matching(self, rs: Object) -> None:
        for d in pc.selecting(self._deployments.indexer.list(), rs, pc.label_selector):
            self._enqueue(d)

    def _rs_added(self, rs: Object) -> None:
        owner = self._owner_of(rs)
        if owner is not None:
            self._enqueue(owner)
        elif pc.controller_ref(rs) is None and not pc.being_deleted(rs):
            self._enqueue_matching(rs)

    def _rs_updated(self, old: Object, new: Object) -> None:
        if pc.meta(old).get("resourceVersion") == pc.meta(new).get("resourceVersion"):
            return
        old_ref, new_ref = pc.controller_ref(old), pc.controller_ref(new)
        if old_ref is not None and (new_ref is None or old_ref.get("uid") != new_ref.get("uid")):
            previous = self._owner_of(old)
            if previous is not None:
                self._enqueue(previous)
        owner = self._owner_of(new)
        if owner is not None:
            self._enqueue(owner)
        elif new_ref is None and (pc.labels(old) != pc.labels(new) or old_ref is not None):
            self._enqueue_matching(new)

    def _rs_deleted(self, rs: Object | DeletedFinalStateUnknown) -> None:
        obj = rs.obj if isinstance(rs, DeletedFinalStateUnknown) else rs
        owner = self._owner_of(obj)
        if owner is not None:
            self._enqueue(owner)

    def _pod_deleted(self, pod: Object | DeletedFinalStateUnknown) -> None:
        """A Recreate rollout waits for the old pods to be gone."""
        obj = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        rs = pc.resolve_controller(obj, REPLICA_SETS.kind, self._replica_sets.indexer.get)
        owner = self._owner_of(rs) if rs is not None else None
        if owner is not None and du.rolling_update(owner) is None:
            self._enqueue(owner)

    # -- sync ----------------------------------------------------------------------------

    def sync(self, key: str) -> SyncResult:
        cached = self._deployments.indexer.get(key)
        if cached is None:
            return None
        d = copy.deepcopy(cached)
        rs_list = self._claim(d)
        if pc.being_deleted(d):
            new_rs, old_rs = self._split(d, rs_list)
            self._sync_status(d, [*old_rs, *([new_rs] if new_rs else [])], new_rs)
            return None
        d = self._check_paused(d)
        if (d.get("spec") or {}).get("paused") or self._scaling_event(d, rs_list):
            return self._sync_scale(d, rs_list)
        if du.rolling_update(d) is None:
            return self._rollout_recreate(d, rs_list)
        return self._rollout_rolling(d, rs_list)

    def _claim(self, d: Object) -> list[Object]:
        namespace = str(pc.meta(d)["namespace"])

        refs = pc.RefManager(self._client, DEPLOYMENTS, d, REPLICA_SETS, pc.label_selector(d), log)
        claimed = refs.claim(self._replica_sets.indexer.by_index(NAMESPACE_INDEX, namespace))
        return [copy.deepcopy(rs) for rs in claimed.owned]

    @staticmethod
    def _split(d: Object, rs_list: list[Object]) -> tuple[Object | None, list[Object]]:
        """(the new ReplicaSet, the old ones): the new one has the Deployment's template
        (the oldest such, should there be several)."""
        new = next(
            (rs for rs in du.by_creation(rs_list) if du.same_template(_template(rs), _template(d))),
            None,
        )
        return new, [rs for rs in rs_list if rs is not new]

    # -- the new ReplicaSet and revisions ------------------------------------------------

    def _new_rs(
        self, d: Object, rs_list: list[Object], create: bool
    ) -> tuple[Object | None, list[Object], Object]:
        """(new ReplicaSet, old ones, the Deployment as now stored): the new one's
        revision and annotations brought up to date, or created if `create` and there
        is none."""
        existing, old_rs = self._split(d, rs_list)
        new_revision = du.max_revision(old_rs) + 1
        now = self._clock.utcnow()
        if existing is not None:
            annotations = du.new_rs_annotations(d, existing, new_revision, exists=True)
            min_ready = (d.get("spec") or {}).get("minReadySeconds")
            rs_spec = existing.setdefault("spec", {})
            if (
                annotations != (pc.meta(existing).get("annotations") or {})
                or rs_spec.get("minReadySeconds") != min_ready
            ):
                existing["metadata"]["annotations"] = annotations
                if min_ready is None:
                    rs_spec.pop("minReadySeconds", None)
                else:
                    rs_spec["minReadySeconds"] = min_ready
                existing = self._client.update(REPLICA_SETS, existing)
            d = self._set_revision(d, annotations[du.REVISION])
            status = copy.deepcopy(d.get("status") or {})
            if du.deadline(d) is not None and du.condition(status, du.PROGRESSING) is None:
                du.set_condition(
                    status,
                    du.PROGRESSING,
                    "True",
                    du.FOUND_NEW_RS,
                    f'Found new replica set "{_name(existing)}"',
                    now,
                )
                d = self._write_status(d, status)
            return existing, old_rs, d
        if not create:
            return None, old_rs, d
        created = self._create_rs(d, old_rs, new_revision)
        d = self._set_revision(d, str(new_revision))
        status = copy.deepcopy(d.get("status") or {})
        if du.deadline(d) is not None:
            du.set_condition(
                status,
                du.PROGRESSING,
                "True",
                du.NEW_RS_CREATED,
                f'Created new replica set "{_name(created)}"',
                now,
            )
        d = self._write_status(d, status)
        return created, old_rs, d

    def _create_rs(self, d: Object, old_rs: list[Object], new_revision: int) -> Object:
        namespace = str(pc.meta(d)["namespace"])
        collisions = (d.get("status") or {}).get("collisionCount")
        hash_ = du.template_hash(_template(d), collisions)
        template = copy.deepcopy(_template(d))
        template.setdefault("metadata", {}).setdefault("labels", {})[du.POD_TEMPLATE_HASH] = hash_
        selector = copy.deepcopy((d.get("spec") or {}).get("selector") or {})
        selector.setdefault("matchLabels", {})[du.POD_TEMPLATE_HASH] = hash_
        rs: Object = {
            "apiVersion": REPLICA_SETS.api_version,
            "kind": REPLICA_SETS.kind,
            "metadata": {
                "name": f"{_name(d)}-{hash_}",
                "namespace": namespace,
                "labels": dict(template["metadata"]["labels"]),
                "ownerReferences": [pc.new_controller_ref(d)],
            },
            "spec": {"replicas": 0, "selector": selector, "template": template},
        }
        min_ready = (d.get("spec") or {}).get("minReadySeconds")
        if min_ready is not None:
            rs["spec"]["minReadySeconds"] = min_ready
        rs["spec"]["replicas"] = du.new_rs_replicas(d, old_rs, rs)
        rs["metadata"]["annotations"] = du.new_rs_annotations(d, rs, new_revision, exists=False)
        try:
            created = self._client.create(REPLICA_SETS, rs, namespace)
        except StatusError as exc:
            if exc.code != 409:
                raise
            return self._name_taken(d, rs, exc)
        log.info(
            "deployment %s/%s: created replica set %s (revision %d)",
            namespace,
            _name(d),
            _name(created),
            new_revision,
        )
        size = du.replicas(created)
        if size > 0:
            self._events.event(
                d, NORMAL, "ScalingReplicaSet", du.Scaled(_name(created), 0, size).message()
            )
        return created

    def _name_taken(self, d: Object, rs: Object, exc: StatusError) -> Object:
        """The new ReplicaSet's name exists: ours already (the cache lagged), or another
        object's, a hash collision: count it, so that the next sync hashes anew."""
        namespace = str(pc.meta(d)["namespace"])
        current = self._client.get(REPLICA_SETS, _name(rs), namespace)
        ref = pc.controller_ref(current)
        if (
            ref is not None
            and ref.get("uid") == pc.meta(d).get("uid")
            and du.same_template(_template(current), _template(d))
        ):
            return current
        status = copy.deepcopy(d.get("status") or {})
        status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
        self._write_status(d, status)
        raise SyncError(
            f"deployment {namespace}/{_name(d)}: the name of its new replica set {_name(rs)} "
            f"is taken by another object; collisionCount is now {status['collisionCount']}"
        ) from exc

    def _set_revision(self, d: Object, revision: str) -> Object:
        if (pc.meta(d).get("annotations") or {}).get(du.REVISION) == revision:
            return d
        patch = {
            "metadata": {
                "resourceVersion": pc.meta(d).get("resourceVersion"),
                "annotations": {du.REVISION: revision},
            }
        }
        return self._client.patch(DEPLOYMENTS, _name(d), patch, str(pc.meta(d)["namespace"]))

    def _write_status(self, d: Object, status: dict[str, Any]) -> Object:
        if status == (d.get("status") or {}):
            return d
        updated = copy.deepcopy(d)
        updated["status"] = status
        return self._client.update_status(DEPLOYMENTS, updated)

    # -- scaling -------------------------------------------------------------------------

    def _scale_rs(self, d: Object, rs: Object, size: int) -> Object:
        """`rs` scaled to `size` with the Deployment's desired and max replicas noted;
        the ReplicaSet as now stored (unchanged if nothing was to change)."""
        annotations = dict(pc.meta(rs).get("annotations") or {})
        wanted = {
            du.DESIRED_REPLICAS: str(du.replicas(d)),
            du.MAX_REPLICAS: str(du.replicas(d) + du.max_surge(d)),
        }
        old_size = du.replicas(rs)
        if old_size == size and wanted.items() <= annotations.items():
            return rs
        updated = copy.deepcopy(rs)
        updated["spec"]["replicas"] = size
        updated["metadata"]["annotations"] = {**annotations, **wanted}
        stored = self._client.update(REPLICA_SETS, updated)
        if old_size != size:
            self._events.event(
                d, NORMAL, "ScalingReplicaSet", du.Scaled(_name(rs), old_size, size).message()
            )
        return stored

    def _scaling_event(self, d: Object, rs_list: list[Object]) -> bool:
        """Whether `spec.replicas` changed since the active ReplicaSets were sized."""
        for rs in rs_list:
            if du.replicas(rs) == 0:
                continue
            desired = (pc.meta(rs).get("annotations") or {}).get(du.DESIRED_REPLICAS)
            if desired is not None and desired != str(du.replicas(d)):
                return True
        return False

    def _sync_scale(self, d: Object, rs_list: list[Object]) -> SyncResult:
        """A paused Deployment, or a scaling event: resize, do not roll out."""
        new_rs, old_rs, d = self._new_rs(d, rs_list, create=False)
        all_rs = self._scale(d, new_rs, old_rs)
        # `_scale` keeps the order: the old ones, then the new one.
        if new_rs is not None:
            *old_rs, new_rs = all_rs
        else:
            old_rs = all_rs
        if (d.get("spec") or {}).get("paused"):
            self._cleanup(d, old_rs)
        self._sync_status(d, all_rs, new_rs)
        return None

    def _scale(self, d: Object, new_rs: Object | None, old_rs: list[Object]) -> list[Object]:
        """Kubernetes' DeploymentController.scale; the ReplicaSets as now stored."""
        all_rs = [*old_rs, *([new_rs] if new_rs is not None else [])]
        active = [rs for rs in all_rs if du.replicas(rs) > 0]
        wanted = du.replicas(d)
        if len(active) <= 1:
            # One ReplicaSet runs (or none: the new one, else the latest old one) and
            # takes the whole size.
            latest = du.by_creation(old_rs)[-1:] if new_rs is None else [new_rs]
            targets = active or latest
            return [self._scale_rs(d, rs, wanted) if rs in targets else rs for rs in all_rs]
        if (
            new_rs is not None
            and du.replicas(new_rs) == wanted
            and (pc.meta(new_rs).get("annotations") or {}).get(du.DESIRED_REPLICAS) == str(wanted)
            and du.status_int(new_rs, "availableReplicas") == wanted
        ):
            # The new ReplicaSet is saturated: the old ones are not needed any more.
            return [rs if rs is new_rs else self._scale_rs(d, rs, 0) for rs in all_rs]
        if du.rolling_update(d) is None:
            return all_rs
        sizes = du.proportional_sizes(d, active)
        return [
            self._scale_rs(d, rs, sizes[_name(rs)]) if _name(rs) in sizes else rs for rs in all_rs
        ]

    # -- rollouts ------------------------------------------------------------------------

    def _rollout_rolling(self, d: Object, rs_list: list[Object]) -> SyncResult:
        new_rs, old_rs, d = self._new_rs(d, rs_list, create=True)
        assert new_rs is not None
        wanted = du.replicas(d)
        # Scale the new ReplicaSet up (or down, if above the Deployment's size).
        size = du.replicas(new_rs)
        target = wanted if size > wanted else du.new_rs_replicas(d, [*old_rs, new_rs], new_rs)
        if target != size:
            new_rs = self._scale_rs(d, new_rs, target)
            return self._sync_rollout_status(d, [*old_rs, new_rs], new_rs)
        scaled, old_rs = self._scale_down_old(d, old_rs, new_rs)
        if scaled:
            return self._sync_rollout_status(d, [*old_rs, new_rs], new_rs)
        if du.complete(d, d.get("status") or {}):
            self._cleanup(d, old_rs)
        return self._sync_rollout_status(d, [*old_rs, new_rs], new_rs)

    def _scale_down_old(
        self, d: Object, old_rs: list[Object], new_rs: Object
    ) -> tuple[bool, list[Object]]:
        """Kubernetes' reconcileOldReplicaSets: first the old pods that are not available
        (removing them costs no availability), then available ones down to replicas -
        maxUnavailable, oldest ReplicaSets first."""
        if sum(du.replicas(rs) for rs in old_rs) == 0:
            return False, old_rs
        budget = du.max_old_scale_down(d, [*old_rs, new_rs], new_rs)
        if budget <= 0:
            return False, old_rs
        by_name = {_name(rs): rs for rs in old_rs}
        cleaned = 0
        for rs in du.by_creation(old_rs):
            if cleaned >= budget:
                break
            size = du.replicas(rs)
            unhealthy = size - du.status_int(rs, "availableReplicas")
            if size == 0 or unhealthy <= 0:
                continue
            count = min(budget - cleaned, unhealthy)
            by_name[_name(rs)] = self._scale_rs(d, rs, size - count)
            cleaned += count
        old_rs = [by_name[_name(rs)] for rs in old_rs]
        min_available = du.replicas(d) - du.max_unavailable(d)
        available = sum(du.status_int(rs, "availableReplicas") for rs in [*old_rs, new_rs])
        removed = 0
        if available > min_available:
            allowed = available - min_available
            for rs in du.by_creation(old_rs):
                if removed >= allowed:
                    break
                size = du.replicas(rs)
                if size == 0:
                    continue
                count = min(size, allowed - removed)
                by_name[_name(rs)] = self._scale_rs(d, rs, size - count)
                removed += count
        return cleaned + removed > 0, [by_name[_name(rs)] for rs in old_rs]

    def _rollout_recreate(self, d: Object, rs_list: list[Object]) -> SyncResult:
        new_rs, old_rs, d = self._new_rs(d, rs_list, create=False)
        all_rs = [*old_rs, *([new_rs] if new_rs is not None else [])]
        if any(du.replicas(rs) > 0 for rs in old_rs):
            old_rs = [self._scale_rs(d, rs, 0) if du.replicas(rs) > 0 else rs for rs in old_rs]
            return self._sync_rollout_status(
                d, [*old_rs, *([new_rs] if new_rs is not None else [])], new_rs
            )
        if self._old_pods_running(old_rs):
            return self._sync_rollout_status(d, all_rs, new_rs)
        if new_rs is None:
            new_rs, old_rs, d = self._new_rs(d, rs_list, create=True)
            assert new_rs is not None
        if du.replicas(new_rs) != du.replicas(d):
            new_rs = self._scale_rs(d, new_rs, du.replicas(d))
            return self._sync_rollout_status(d, [*old_rs, new_rs], new_rs)
        if du.complete(d, d.get("status") or {}):
            self._cleanup(d, old_rs)
        return self._sync_rollout_status(d, [*old_rs, new_rs], new_rs)

    def _old_pods_running(self, old_rs: list[Object]) -> bool:
        """Whether an old ReplicaSet still has a pod that has not finished (one being
        deleted counts: Recreate promises that old and new never run together)."""
        if any(du.status_int(rs, "replicas") > 0 for rs in old_rs):
            return True
        if not old_rs:
            return False
        uids = {pc.meta(rs).get("uid") for rs in old_rs}
        namespace = pc.meta(old_rs[0]).get("namespace") or ""
        for pod in self._pods.indexer.by_index(NAMESPACE_INDEX, namespace):
            ref = pc.controller_ref(pod)
            phase = (pod.get("status") or {}).get("phase")
            if ref is not None and ref.get("uid") in uids and phase not in ("Succeeded", "Failed"):
                return True
        return False

    def _cleanup(self, d: Object, old_rs: list[Object]) -> None:
        """Delete the oldest old ReplicaSets, scaled to 0, beyond revisionHistoryLimit."""
        limit = (d.get("spec") or {}).get("revisionHistoryLimit")
        if limit is None:
            return
        cleanable = [rs for rs in old_rs if not pc.being_deleted(rs)]
        excess = len(cleanable) - int(limit)
        if excess <= 0:
            return
        for rs in sorted(cleanable, key=du.revision)[:excess]:
            status = rs.get("status") or {}
            if (
                du.replicas(rs) != 0
                or int(status.get("replicas") or 0) != 0
                or pc.meta(rs).get("generation", 0) > int(status.get("observedGeneration") or 0)
            ):
                continue
            log.info(
                "deployment %s/%s: deleting old replica set %s (revision %d)",
                pc.meta(d)["namespace"],
                _name(d),
                _name(rs),
                du.revision(rs),
            )
            try:
                self._client.delete(REPLICA_SETS, _name(rs), str(pc.meta(rs)["namespace"]))
            except StatusError as exc:
                if exc.code != 404:
                    raise

    # -- status --------------------------------------------------------------------------

    def _check_paused(self, d: Object) -> Object:
        if du.deadline(d) is None:
            return d
        status = copy.deepcopy(d.get("status") or {})
        cond = du.condition(status, du.PROGRESSING)
        paused_noted = cond is not None and cond.get("reason") == du.PAUSED
        paused = bool((d.get("spec") or {}).get("paused"))
        now = self._clock.utcnow()
        if paused and not paused_noted:
            du.set_condition(
                status, du.PROGRESSING, "Unknown", du.PAUSED, "Deployment is paused", now
            )
        elif not paused and paused_noted:
            du.set_condition(
                status, du.PROGRESSING, "Unknown", du.RESUMED, "Deployment is resumed", now
            )
        else:
            return d
        return self._write_status(d, status)

    def _sync_status(self, d: Object, all_rs: list[Object], new_rs: Object | None) -> None:
        status = du.calculate_status(d, all_rs, new_rs, self._clock.utcnow())
        self._write_status(d, status)

    def _sync_rollout_status(
        self, d: Object, all_rs: list[Object], new_rs: Object | None
    ) -> SyncResult:
        """The status with the Progressing condition of a rollout (Kubernetes'
        syncRolloutStatus); when to look again for the progress deadline."""
        now = self._clock.utcnow()
        status = du.calculate_status(d, all_rs, new_rs, now)
        if du.deadline(d) is None:
            du.remove_condition(status, du.PROGRESSING)
        cond = du.condition(status, du.PROGRESSING)
        done = (
            status["replicas"] == status["updatedReplicas"]
            and cond is not None
            and cond.get("reason") == du.NEW_RS_AVAILABLE
        )
        what = f'ReplicaSet "{_name(new_rs)}"' if new_rs is not None else f'Deployment "{_name(d)}"'
        if du.deadline(d) is not None and not done:
            if du.complete(d, status):
                du.set_condition(
                    status,
                    du.PROGRESSING,
                    "True",
                    du.NEW_RS_AVAILABLE,
                    f"{what} has successfully progressed.",
                    now,
                )
            elif du.progressing(d, status):
                du.set_condition(
                    status,
                    du.PROGRESSING,
                    "True",
                    du.RS_UPDATED,
                    f"{what} is progressing.",
                    now,
                    touch=True,
                )
            elif du.timed_out(d, status, now):
                du.set_condition(
                    status,
                    du.PROGRESSING,
                    "False",
                    du.TIMED_OUT,
                    f"{what} has timed out progressing.",
                    now,
                )
        failures = [
            c
            for rs in all_rs
            for c in (rs.get("status") or {}).get("conditions") or []
            if c.get("type") == du.REPLICA_FAILURE
        ]
        if failures:
            f = failures[0]
            du.set_condition(
                status,
                du.REPLICA_FAILURE,
                str(f.get("status")),
                str(f.get("reason")),
                str(f.get("message")),
                now,
            )
        else:
            du.remove_condition(status, du.REPLICA_FAILURE)
        self._write_status(d, status)
        wait = du.seconds_to_deadline(d, status, now)
        return None if wait is None else max(wait, 0.0) + 1.0
