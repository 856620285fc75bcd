"""The Job controller (kube-controller-manager's job-controller) and TTL-after-finished
(ttl-after-finished-controller): run a Job's pods until enough have succeeded, or the
Job has failed too often or for too long; delete finished Jobs whose time is up (the
seeds' Job controller, which "runs pods to completion").

Pods. A Job runs `parallelism` pods at a time until `completions` have succeeded (no
completions: until one has, the pods being a work queue). Each pod is made from the
template, named `<job>-<random>`, labelled with the Job's controller-uid and job-name,
owned by the Job, and carries the finalizer `batch.kubernetes.io/job-tracking`. A failed
pod is replaced after a back-off (10 s, doubled per failure, at most 6 min, as
Kubernetes' DefaultJobPodFailureBackOff); pods beyond parallelism are deleted, newest
first.

Counting each pod once. A pod's end is counted in the Job's status before the pod is
let go, in three steps Kubernetes' tracking with finalizers also takes, each a write
that survives a crash of the controller-manager between them:

1. the uids of pods that have finished (Succeeded, Failed, or deleted before they
   finished, which counts as failed) and still hold the finalizer are added to
   `status.uncountedTerminatedPods`;
2. the finalizer is removed from those pods, so that they can go;
3. once none of them holds it any more, they move from uncountedTerminatedPods to
   `status.succeeded` and `status.failed`.

A pod listed in uncountedTerminatedPods is never added again, and a pod without the
finalizer is never counted, so deleting a finished pod, or a sync repeated after a
crash, cannot count one twice.

The end. More failures than `backoffLimit` fail the Job (condition Failed, reason
BackoffLimitExceeded), so does running longer than `activeDeadlineSeconds` from its
start (DeadlineExceeded); the pods still active are deleted then. Enough successes
complete it (condition Complete) and set completionTime. A suspended Job (spec.suspend)
runs no pods and says so in the condition Suspended.

TTL after finished. A Job with `ttlSecondsAfterFinished` is deleted (its pods with it,
Background propagation) that many seconds after its Complete or Failed condition.
"""

from __future__ import annotations

import copy
import datetime
import threading
from typing import Any

from kubelab.api import podutil
from kubelab.api.errors import StatusError
from kubelab.api.taints import parse_time
from kubelab.client import (
    REAL_CLOCK,
    Clock,
    DeletedFinalStateUnknown,
    Object,
    Preconditions,
    WorkQueue,
    object_key,
    resource_for,
    rfc3339,
)
from kubelab.client.record import NORMAL, WARNING, EventRecorder

from .base import (
    CACHE_WAIT,
    ControllerContext,
    Expectations,
    SyncResult,
    Workers,
    add_index,
    controller_logger,
)

NAME = "job-controller"
TTL_AFTER_FINISHED = "ttl-after-finished-controller"

JOBS = resource_for("batch/v1", "Job")
PODS = resource_for("v1", "Pod")

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
CONTROLLER_UID_INDEX = "kubelab.io/controller-uid"
POD_FAILURE_BACKOFF = 10.0
MAX_POD_FAILURE_BACKOFF = 360.0

log = controller_logger(NAME)
ttl_log = controller_logger(TTL_AFTER_FINISHED)


def controller_uid(obj: Object) -> list[str]:
    """The uid of the object's controlling owner, for an index of pods by owner."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return [str(ref.get("uid"))]
    return []


def finished_condition(job: Object) -> dict[str, Any] | None:
    """The Job's Complete or Failed condition, if it has finished."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return dict(cond)
    return None


def _tracked(pod: Object) -> bool:
    return TRACKING_FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or [])


def pod_outcome(pod: Object) -> str:
    """ "succeeded", "failed" (including deleted before it finished) or "" (running)."""
    phase = podutil.pod_phase(pod)
    if phase == "Succeeded":
        return "succeeded"
    if phase == "Failed" or podutil.terminating(pod):
        return "failed"
    return ""


def pod_failure_backoff(failures: int, base: float) -> float:
    """Seconds to wait before replacing a failed pod after `failures` failures."""
    if failures <= 0:
        return 0.0
    return float(min(base * 2 ** (failures - 1), MAX_POD_FAILURE_BACKOFF))


def wanted_active(spec: dict[str, Any], succeeded: int, active: int) -> int:
    """How many pods should be running (module docstring)."""
    if spec.get("suspend"):
        return 0
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    if completions is None:
        return parallelism if succeeded == 0 else min(active, parallelism)
    return max(0, min(parallelism, int(completions) - succeeded))


def complete(spec: dict[str, Any], succeeded: int, active: int) -> bool:
    completions = spec.get("completions")
    if completions is None:
        return succeeded > 0 and active == 0
    return succeeded >= int(completions)


class JobController:
    """The Job controller of the module docstring, keyed by Job "namespace/name"."""

    name = NAME

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._clock = clock
        self._backoff = float(
            getattr(ctx.args, "job_pod_failure_backoff", POD_FAILURE_BACKOFF) or 0.0
        )
        self._client = ctx.client_for(NAME)
        self._events = EventRecorder(self._client, "job-controller", clock=clock)
        self._expectations = Expectations()
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._jobs = ctx.informers.informer(JOBS)
        self._pods = ctx.informers.informer(PODS)
        add_index(self._pods, CONTROLLER_UID_INDEX, controller_uid)
        self._jobs.add_event_handler(
            on_add=self._job_changed,
            on_update=lambda _old, new: self._job_changed(new),
        )
        self._pods.add_event_handler(
            on_add=self._pod_changed,
            on_update=lambda _old, new: self._pod_changed(new),
            on_delete=self._pod_changed,
        )
        # job key -> (failures counted, when the last one was seen) for the back-off.
        self._lock = threading.Lock()
        self._failures_seen: dict[str, tuple[int, float]] = {}

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._jobs).run(
                workers, stop
            )

    def _job_changed(self, job: Object) -> None:
        self.queue.add(object_key(job))

    def _pod_changed(self, pod: Object | DeletedFinalStateUnknown) -> None:
        last = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        for ref in (last.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Job":
                self.queue.add(f"{last['metadata'].get('namespace')}/{ref.get('name')}")

    def _owned_pods(self, job: Object) -> list[Object]:
        return self._pods.indexer.by_index(CONTROLLER_UID_INDEX, str(job["metadata"]["uid"]))

    def sync(self, key: str) -> SyncResult:
        job = self._jobs.indexer.get(key)
        if job is None:
            self._expectations.forget(key)
            return None
        pods = self._owned_pods(job)
        if not self._expectations.satisfied(key, {p["metadata"]["name"]: p for p in pods}):
            return CACHE_WAIT
        status = copy.deepcopy(job.get("status") or {})
        # Steps 1 to 3 of the module docstring.
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        listed = set(uncounted.get("succeeded") or []) | set(uncounted.get("failed") or [])
        newly = [
            p for p in pods if _tracked(p) and pod_outcome(p) and p["metadata"]["uid"] not in listed
        ]
        if newly:
            for pod in newly:
                uncounted.setdefault(pod_outcome(pod), []).append(pod["metadata"]["uid"])
            job = self._write_status(job, status)
            status = copy.deepcopy(job["status"])
            uncounted = status["uncountedTerminatedPods"]
            listed = set(uncounted.get("succeeded") or []) | set(uncounted.get("failed") or [])
        by_uid = {p["metadata"]["uid"]: p for p in pods}
        for uid in listed:
            held = by_uid.get(uid)
            if held is not None and _tracked(held):
                self._release(held)
        if listed:
            status["succeeded"] = int(status.get("succeeded", 0)) + len(
                uncounted.get("succeeded") or []
            )
            status["failed"] = int(status.get("failed", 0)) + len(uncounted.get("failed") or [])
            status["uncountedTerminatedPods"] = {}
        elif not status["uncountedTerminatedPods"]:
            status.pop("uncountedTerminatedPods", None)
        return self._reconcile(key, job, pods, status)

    def _release(self, pod: Object) -> None:
        """Remove the tracking finalizer (step 2), with the pod's resourceVersion so that
        a concurrent change is not overwritten."""
        meta = pod["metadata"]
        finalizers = [f for f in meta.get("finalizers") or [] if f != TRACKING_FINALIZER]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        try:
            self._client.patch(PODS, meta["name"], patch, meta["namespace"])
        except StatusError as exc:
            if exc.code != 404:
                raise

    def _reconcile(
        self, key: str, job: Object, pods: list[Object], status: dict[str, Any]
    ) -> SyncResult:
        spec = job.get("spec") or {}
        now = self._clock.utcnow()
        active = [p for p in pods if not pod_outcome(p) and not podutil.terminating(p)]
        succeeded, failed = int(status.get("succeeded", 0)), int(status.get("failed", 0))
        wait: float | None = None
        if finished_condition(job) is not None:
            self._delete_pods(key, active)
            self._maybe_write(job, status, [])
            return None
        if not spec.get("suspend") and not status.get("startTime"):
            status["startTime"] = rfc3339(self._clock.utcnow())
        failure = ""
        if failed > int(spec.get("backoffLimit", 6)):
            failure = "BackoffLimitExceeded"
            message = "Job has reached the specified backoff limit"
        deadline = spec.get("activeDeadlineSeconds")
        if (
            not failure
            and deadline is not None
            and status.get("startTime")
            and not spec.get("suspend")
        ):
            ends = parse_time(status["startTime"]) + datetime.timedelta(seconds=int(deadline))
            if now >= ends:
                failure = "DeadlineExceeded"
                message = "Job was active longer than specified deadline"
            else:
                wait = (ends - now).total_seconds()
        conditions = status.setdefault("conditions", [])
        self._suspended_condition(spec, conditions)
        if failure:
            self._delete_pods(key, active)
            conditions.append(self._condition("Failed", failure, message))
            self._events.event(job, WARNING, failure, message)
            self._write_status(job, {**status, "active": 0, "ready": 0})
            log.info("job %s failed: %s", key, message)
            return None
        if complete(spec, succeeded, len(active)):
            self._delete_pods(key, active)
            conditions.append(self._condition("Complete", "", ""))
            status["completionTime"] = rfc3339(self._clock.utcnow())
            self._events.event(job, NORMAL, "Completed", "Job completed")
            self._write_status(job, {**status, "active": 0, "ready": 0})
            log.info("job %s complete: %d succeeded, %d failed", key, succeeded, failed)
            return None
        want = wanted_active(spec, succeeded, len(active))
        if len(active) > want:
            newest = sorted(active, key=lambda p: str(p["metadata"].get("creationTimestamp")))
            self._delete_pods(key, newest[want:])
            active = newest[:want]
        elif len(active) < want:
            delay = self._backoff_left(key, failed)
            if delay > 0:
                wait = delay if wait is None else min(wait, delay)
            else:
                active = active + self._create_pods(key, job, want - len(active))
        self._maybe_write(job, status, active)
        return wait

    def _backoff_left(self, key: str, failed: int) -> float:
        """Seconds before a failed pod may be replaced (module docstring)."""
        now = self._clock.now()
        with self._lock:
            seen, at = self._failures_seen.get(key, (0, now))
            if failed != seen:
                self._failures_seen[key] = (failed, now)
                at = now
        if failed == 0:
            return 0.0
        return at + pod_failure_backoff(failed, self._backoff) - now

    def _suspended_condition(self, spec: dict[str, Any], conditions: list[dict[str, Any]]) -> None:
        current = next((c for c in conditions if c.get("type") == "Suspended"), None)
        if spec.get("suspend"):
            if current is None or current.get("status") != "True":
                conditions[:] = [c for c in conditions if c.get("type") != "Suspended"]
                conditions.append(self._condition("Suspended", "JobSuspended", "Job suspended"))
        elif current is not None and current.get("status") == "True":
            current.update(
                status="False",
                reason="JobResumed",
                message="Job resumed",
                lastTransitionTime=rfc3339(self._clock.utcnow()),
            )

    def _condition(self, kind: str, reason: str, message: str) -> dict[str, Any]:
        now = rfc3339(self._clock.utcnow())
        cond = {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        return cond

    def _maybe_write(self, job: Object, status: dict[str, Any], active: list[Object]) -> bool:
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if podutil.pod_ready(p))
        if status == (job.get("status") or {}):
            return False
        self._write_status(job, status)
        return True

    def _write_status(self, job: Object, status: dict[str, Any]) -> Object:
        updated = copy.deepcopy(job)
        updated["status"] = status
        return self._client.update_status(JOBS, updated)

    def _create_pods(self, key: str, job: Object, count: int) -> list[Object]:
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        meta = job["metadata"]
        pod_meta = template.get("metadata") or {}
        labels = dict(pod_meta.get("labels") or {})
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": meta["uid"],
                "batch.kubernetes.io/job-name": meta["name"],
                "controller-uid": meta["uid"],
                "job-name": meta["name"],
            }
        )
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **{k: v for k, v in pod_meta.items() if k in ("annotations",)},
                "generateName": f"{meta['name']}-",
                "namespace": meta["namespace"],
                "labels": labels,
                "finalizers": [TRACKING_FINALIZER],
                "ownerReferences": [
                    {
                        "apiVersion": JOBS.api_version,
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template.get("spec") or {},
        }
        created: list[Object] = []
        writes: dict[str, str | None] = {}
        try:
            for _ in range(count):
                pod = self._client.create(PODS, body, meta["namespace"])
                created.append(pod)
                writes[pod["metadata"]["name"]] = ""
                self._events.event(
                    job, NORMAL, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}"
                )
        finally:
            self._expectations.expect(key, writes)
        log.info("job %s: created %d pods", key, len(created))
        return created

    def _delete_pods(self, key: str, pods: list[Object]) -> None:
        writes: dict[str, str | None] = {}
        try:
            for pod in pods:
                meta = pod["metadata"]
                try:
                    self._client.delete(
                        PODS,
                        meta["name"],
                        meta["namespace"],
                        preconditions=Preconditions(uid=meta["uid"]),
                    )
                except StatusError as exc:
                    if exc.code not in (404, 409):
                        raise
                    continue
                writes[meta["name"]] = None
        finally:
            self._expectations.expect(key, writes)
        if pods:
            log.info("job %s: deleted %d pods", key, len(writes))


class TTLAfterFinishedController:
    """Deletes finished Jobs `ttlSecondsAfterFinished` after they finished; keyed by Job."""

    name = TTL_AFTER_FINISHED

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._clock = clock
        self._client = ctx.client_for(TTL_AFTER_FINISHED)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._jobs = ctx.informers.informer(JOBS)
        self._jobs.add_event_handler(
            on_add=self._changed, on_update=lambda _old, new: self._changed(new)
        )

    def _changed(self, job: Object) -> None:
        if (job.get("spec") or {}).get("ttlSecondsAfterFinished") is not None:
            self.queue.add(object_key(job))

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(
            TTL_AFTER_FINISHED,
            self.queue,
            self.sync,
            ttl_log,
            tracer=self._tracer,
            objects=self._jobs,
        ).run(workers, stop)

    def sync(self, key: str) -> SyncResult:
        job = self._jobs.indexer.get(key)
        if job is None or podutil.terminating(job):
            return None
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        finished = finished_condition(job)
        if ttl is None or finished is None:
            return None
        since = finished.get("lastTransitionTime") or job["status"].get("completionTime")
        if not since:
            return None
        expires = parse_time(str(since)) + datetime.timedelta(seconds=int(ttl))
        left = (expires - self._clock.utcnow()).total_seconds()
        if left > 0:
            return left
        meta = job["metadata"]
        try:
            self._client.delete(
                JOBS,
                meta["name"],
                meta["namespace"],
                propagation_policy="Background",
                preconditions=Preconditions(uid=meta["uid"]),
            )
        except StatusError as exc:
            if exc.code not in (404, 409):
                raise
            return None
        ttl_log.info("job %s (uid %s): finished %s ago, deleted", key, meta["uid"], f"{ttl}s")
        return None
