"""The CronJob controller (kube-controller-manager's cronjob-controller, its second
version): creates a Job for each time a CronJob's schedule comes round (the seeds'
CronJob controller, which "creates Jobs on schedule").

When (`plan`). The schedule is read with croniter (robfig/cron's five fields and
@hourly-style descriptors; `@every <duration>` counts from the CronJob's creation), in
`spec.timeZone` (an IANA name) or else UTC. The times due are those after the last
scheduled one (`status.lastScheduleTime`, or the CronJob's creation) up to now; only
the most recent of them is run, as Kubernetes does after a pause: a controller-manager
that was down for an hour starts one Job, not sixty. With `startingDeadlineSeconds`, a
time older than that is missed (Warning MissSchedule) and waits for the next one. More
than 100 missed times are reported (Warning TooManyMissedTimes). A suspended CronJob
starts nothing.

Concurrency. With Allow, a new Job starts whatever still runs; with Forbid, none starts
while one is active (the time stays due, and is tried again until its deadline); with
Replace, the active Jobs are deleted first.

Jobs. A Job is named `<cronjob>-<scheduled time in minutes since the epoch>`, so a
second attempt at the same time finds it (AlreadyExists) instead of making another; it
carries the jobTemplate's labels and annotations and
`batch.kubernetes.io/cronjob-scheduled-timestamp`, and is owned by the CronJob. The
status lists the active Jobs, `lastScheduleTime` and `lastSuccessfulTime`. Finished
Jobs beyond `successfulJobsHistoryLimit` (3) and `failedJobsHistoryLimit` (1) are
deleted, oldest first, with their pods. The controller looks again just after the next
time due (100 ms after, as Kubernetes does), and whenever a Job of the CronJob changes.
"""

from __future__ import annotations

import copy
import datetime
import threading
import zoneinfo
from dataclasses import dataclass, field
from typing import Any

from croniter import croniter

from kubelab.api.errors import StatusError
from kubelab.api.taints import parse_time
from kubelab.api.validation.schedule import parse_schedule
from kubelab.client import (
    REAL_CLOCK,
    Clock,
    DeletedFinalStateUnknown,
    Object,
    WorkQueue,
    object_key,
    resource_for,
    rfc3339,
)
from kubelab.client.record import NORMAL, WARNING, EventRecorder

from .base import ControllerContext, SyncResult, Workers, add_index, controller_logger
from .job import CONTROLLER_UID_INDEX, controller_uid, finished_condition

NAME = "cronjob-controller"

CRONJOBS = resource_for("batch/v1", "CronJob")
JOBS = resource_for("batch/v1", "Job")

SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
NEXT_SCHEDULE_DELTA = 0.1
TOO_MANY_MISSED = 100

log = controller_logger(NAME)


def _every(schedule: str) -> datetime.timedelta | None:
    """The interval of an "@every" schedule, None for a cron one (read as the apiserver's
    validation reads it)."""
    seconds = parse_schedule(schedule.strip()).interval()
    return datetime.timedelta(seconds=seconds) if seconds else None


def time_zone(spec: dict[str, Any]) -> datetime.tzinfo:
    name = spec.get("timeZone")
    return zoneinfo.ZoneInfo(str(name)) if name else datetime.UTC


def times_due(
    schedule: str, tz: datetime.tzinfo, after: datetime.datetime, now: datetime.datetime
) -> tuple[datetime.datetime | None, int]:
    """The most recent time of `schedule` in (`after`, `now`], and how many there are
    (counting stops past TOO_MANY_MISSED)."""
    every = _every(schedule)
    if every is not None:
        count = int((now - after) / every)
        return (after + count * every if count else None), count
    it = croniter(schedule, after.astimezone(tz))
    count = 0
    latest: datetime.datetime | None = None
    while count <= TOO_MANY_MISSED:
        at = it.get_next(datetime.datetime)
        if at > now:
            return latest, count
        latest, count = at, count + 1
    # Too many to walk: the most recent one, counting back from now.
    most_recent = croniter(schedule, now.astimezone(tz)).get_prev(datetime.datetime)
    return most_recent, count


def next_time(
    schedule: str, tz: datetime.tzinfo, created: datetime.datetime, now: datetime.datetime
) -> datetime.datetime:
    """The first time of `schedule` after `now`."""
    every = _every(schedule)
    if every is not None:
        return created + (int((now - created) / every) + 1) * every
    return croniter(schedule, now.astimezone(tz)).get_next(datetime.datetime)


@dataclass
class Plan:
    """What a CronJob calls for now."""

    run_at: datetime.datetime | None = None
    """The scheduled time to start a Job for."""
    missed: datetime.datetime | None = None
    """A time missed by more than startingDeadlineSeconds."""
    too_many: int = 0
    """How many times were missed, when more than TOO_MANY_MISSED."""
    replace: list[str] = field(default_factory=list)
    """Active Jobs to delete first (Replace)."""
    forbidden: bool = False
    """A time is due, but a Job is active and concurrency is Forbid."""


def plan(
    spec: dict[str, Any],
    last: datetime.datetime,
    active: list[str],
    now: datetime.datetime,
) -> Plan:
    """What to do for a CronJob last scheduled (or created) at `last`, with the Jobs
    `active`, at `now` (module docstring)."""
    result = Plan()
    if spec.get("suspend"):
        return result
    deadline = spec.get("startingDeadlineSeconds")
    after = last
    if deadline is not None:
        after = max(after, now - datetime.timedelta(seconds=int(deadline)))
    scheduled, count = times_due(str(spec["schedule"]), time_zone(spec), after, now)
    if count > TOO_MANY_MISSED:
        result.too_many = count
    if scheduled is None:
        if deadline is not None:
            # A time after `last` but before the deadline's window was missed.
            missed, _ = times_due(str(spec["schedule"]), time_zone(spec), last, after)
            result.missed = missed
        return result
    policy = spec.get("concurrencyPolicy") or "Allow"
    if active and policy == "Forbid":
        result.forbidden = True
        return result
    if active and policy == "Replace":
        result.replace = list(active)
    result.run_at = scheduled
    return result


def history_to_delete(
    finished: list[Object], successful_limit: int | None, failed_limit: int | None
) -> list[Object]:
    """The finished Jobs beyond the history limits, oldest first."""
    doomed: list[Object] = []
    for kind, limit in (("Complete", successful_limit), ("Failed", failed_limit)):
        if limit is None:
            continue
        jobs = [j for j in finished if (finished_condition(j) or {}).get("type") == kind]
        jobs.sort(key=_started)
        doomed.extend(jobs[: max(0, len(jobs) - int(limit))])
    return doomed


def _started(job: Object) -> str:
    status = job.get("status") or {}
    return str(status.get("startTime") or job["metadata"].get("creationTimestamp") or "")


def job_name(cronjob: str, scheduled: datetime.datetime) -> str:
    return f"{cronjob}-{int(scheduled.timestamp()) // 60}"


class CronJobController:
    """The controller of the module docstring, keyed by CronJob "namespace/name"."""

    name = NAME

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._clock = clock
        self._client = ctx.client_for(NAME)
        self._events = EventRecorder(self._client, "cronjob-controller", clock=clock)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._cronjobs = ctx.informers.informer(CRONJOBS)
        self._jobs = ctx.informers.informer(JOBS)
        add_index(self._jobs, CONTROLLER_UID_INDEX, controller_uid)
        self._cronjobs.add_event_handler(
            on_add=self._changed, on_update=lambda _old, new: self._changed(new)
        )
        self._jobs.add_event_handler(
            on_add=self._job_changed,
            on_update=lambda _old, new: self._job_changed(new),
            on_delete=self._job_changed,
        )

    def _changed(self, cronjob: Object) -> None:
        self.queue.add(object_key(cronjob))

    def _job_changed(self, job: Object | DeletedFinalStateUnknown) -> None:
        last = job.obj if isinstance(job, DeletedFinalStateUnknown) else job
        for ref in (last.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "CronJob":
                self.queue.add(f"{last['metadata'].get('namespace')}/{ref.get('name')}")

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(
                NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._cronjobs
            ).run(workers, stop)

    def sync(self, key: str) -> SyncResult:
        cronjob = self._cronjobs.indexer.get(key)
        if cronjob is None or cronjob["metadata"].get("deletionTimestamp"):
            return None
        spec = cronjob.get("spec") or {}
        try:
            tz = time_zone(spec)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            self._events.event(
                cronjob,
                WARNING,
                "UnknownTimeZone",
                f"invalid timeZone: {spec.get('timeZone')!r}: not a known IANA time zone",
            )
            return None
        jobs = self._jobs.indexer.by_index(CONTROLLER_UID_INDEX, str(cronjob["metadata"]["uid"]))
        status = copy.deepcopy(cronjob.get("status") or {})
        active, finished = self._sort_jobs(cronjob, jobs, status)
        now = self._clock.utcnow()
        created = parse_time(str(cronjob["metadata"]["creationTimestamp"]))
        last = parse_time(status["lastScheduleTime"]) if status.get("lastScheduleTime") else created
        decision = plan(spec, last, [j["metadata"]["name"] for j in active], now)
        if decision.too_many:
            self._events.event(
                cronjob,
                WARNING,
                "TooManyMissedTimes",
                f"too many missed start times: {decision.too_many}. Set or decrease "
                ".spec.startingDeadlineSeconds or check clock skew",
            )
        if decision.missed is not None:
            self._events.event(
                cronjob,
                WARNING,
                "MissSchedule",
                f"Missed scheduled time to start a job: {rfc3339(decision.missed)}",
            )
        if decision.forbidden:
            log.info("cronjob %s: a job is still active and concurrency is Forbid", key)
            self._events.event(
                cronjob,
                NORMAL,
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy "
                "is Forbid",
            )
        for job in active:
            if job["metadata"]["name"] in decision.replace:
                self._delete_job(cronjob, job)
                active = [j for j in active if j is not job]
        if decision.run_at is not None:
            new = self._create_job(cronjob, decision.run_at)
            if new is not None and all(
                j["metadata"]["name"] != new["metadata"]["name"] for j in active
            ):
                active.append(new)
            status["lastScheduleTime"] = rfc3339(decision.run_at)
        status["active"] = [self._reference(j) for j in active]
        if not status["active"]:
            status.pop("active")
        if status != (cronjob.get("status") or {}):
            updated = copy.deepcopy(cronjob)
            updated["status"] = status
            self._client.update_status(CRONJOBS, updated)
        # Only once the status has recorded what the finished Jobs said (their success
        # in lastSuccessfulTime): a failed status write retries with them still there.
        for job in history_to_delete(
            finished, spec.get("successfulJobsHistoryLimit"), spec.get("failedJobsHistoryLimit")
        ):
            self._delete_job(cronjob, job)
        if spec.get("suspend"):
            return None
        upcoming = next_time(str(spec["schedule"]), tz, created, now)
        if decision.forbidden:
            # Try again soon: the due time stays due until the active Job ends (its
            # event brings the CronJob back) or its deadline passes.
            return min((upcoming - now).total_seconds(), 5.0) + NEXT_SCHEDULE_DELTA
        return (upcoming - now).total_seconds() + NEXT_SCHEDULE_DELTA

    def _sort_jobs(
        self, cronjob: Object, jobs: list[Object], status: dict[str, Any]
    ) -> tuple[list[Object], list[Object]]:
        """(active, finished) Jobs; a newly finished one sets lastSuccessfulTime."""
        active, finished = [], []
        listed = {ref.get("uid") for ref in status.get("active") or []}
        for job in jobs:
            cond = finished_condition(job)
            if cond is None:
                if not job["metadata"].get("deletionTimestamp"):
                    active.append(job)
                continue
            finished.append(job)
            if job["metadata"]["uid"] in listed:
                self._events.event(
                    cronjob,
                    NORMAL,
                    "SawCompletedJob",
                    f"Saw completed job: {job['metadata']['name']}, status: {cond['type']}",
                )
            if cond["type"] == "Complete":
                done = str((job.get("status") or {}).get("completionTime") or "")
                if done and done > str(status.get("lastSuccessfulTime") or ""):
                    status["lastSuccessfulTime"] = done
        return active, finished

    @staticmethod
    def _reference(job: Object) -> dict[str, Any]:
        meta = job["metadata"]
        return {
            "apiVersion": JOBS.api_version,
            "kind": "Job",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta.get("resourceVersion", ""),
        }

    def _create_job(self, cronjob: Object, scheduled: datetime.datetime) -> Object | None:
        meta = cronjob["metadata"]
        template = copy.deepcopy((cronjob.get("spec") or {}).get("jobTemplate") or {})
        template_meta = template.get("metadata") or {}
        name = job_name(meta["name"], scheduled)
        body = {
            "apiVersion": JOBS.api_version,
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": dict(template_meta.get("labels") or {}),
                "annotations": {
                    **(template_meta.get("annotations") or {}),
                    SCHEDULED_TIMESTAMP: rfc3339(scheduled),
                },
                "ownerReferences": [
                    {
                        "apiVersion": CRONJOBS.api_version,
                        "kind": "CronJob",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template.get("spec") or {},
        }
        try:
            job = self._client.create(JOBS, body, meta["namespace"])
        except StatusError as exc:
            if exc.code == 409:  # made at an earlier attempt for this time
                return self._jobs.indexer.get(f"{meta['namespace']}/{name}")
            raise
        self._events.event(cronjob, NORMAL, "SuccessfulCreate", f"Created job {name}")
        log.info(
            "cronjob %s/%s: created job %s for %s",
            meta["namespace"],
            meta["name"],
            name,
            rfc3339(scheduled),
        )
        return job

    def _delete_job(self, cronjob: Object, job: Object) -> None:
        meta = job["metadata"]
        try:
            self._client.delete(
                JOBS, meta["name"], meta["namespace"], propagation_policy="Background"
            )
        except StatusError as exc:
            if exc.code != 404:
                raise
            return
        self._events.event(cronjob, NORMAL, "SuccessfulDelete", f"Deleted job {meta['name']}")
