"""Workload controllers: Deployment, ReplicaSet, ReplicationController, DaemonSet,
StatefulSet, ControllerRevision, Job and CronJob.

What they share is a selector and a pod template that the selector must match: a
controller whose selector does not select its own pods would create pods forever. The
pod template itself goes through the Pod validator; what is checked here is the
controller's own spec and which of its fields may change after creation.
"""

from __future__ import annotations

import zoneinfo
from typing import Any

from kubelab.api.errors import forbidden, invalid, not_supported, required
from kubelab.api.validation import formats
from kubelab.api.validation.fields import (
    IMMUTABLE,
    NEGATIVE,
    Errors,
    Path,
    dicts,
    immutable,
    is_int,
    label_selector,
    labels,
    mapping,
    non_negative,
    selector_matches,
    text,
)
from kubelab.api.validation.pods import pod_template
from kubelab.api.validation.schedule import parse_schedule

SPEC = Path("spec")
_MISMATCH = "`selector` does not match template `labels`"


def _template_labels(spec: dict[str, Any]) -> dict[str, Any]:
    return mapping(mapping(mapping(spec.get("template")).get("metadata")).get("labels"))


def _selector(spec: dict[str, Any], path: Path, kind: str = "") -> Errors:
    """A required label selector that selects the template's own labels; non-empty too
    when `kind` names the controller for the error message."""
    selector = spec.get("selector")
    if selector is None:
        return [required(path.child("selector"))]
    errors = label_selector(selector, path.child("selector"))
    selector = mapping(selector)
    if kind and not selector.get("matchLabels") and not selector.get("matchExpressions"):
        detail = f"empty selector is invalid for {kind}"
        errors.append(invalid(path.child("selector"), selector, detail))
    elif not selector_matches(selector, _template_labels(spec)):
        at = path.child("template", "metadata", "labels")
        errors.append(invalid(at, _template_labels(spec), _MISMATCH))
    return errors


def _always_restarting_template(
    spec: dict[str, Any], owner: str, path: Path, extra: frozenset[str] = frozenset()
) -> Errors:
    """Long-running controllers replace pods that exit, so their pods restart Always and
    have no deadline."""
    template = mapping(spec.get("template"))
    at = path.child("template")
    errors = pod_template(template, at, extra)
    template_spec = mapping(template.get("spec"))
    policy = template_spec.get("restartPolicy", "")
    if policy != "Always":
        errors.append(not_supported(at.child("spec", "restartPolicy"), policy, ["Always"]))
    if template_spec.get("activeDeadlineSeconds") is not None:
        detail = f"activeDeadlineSeconds in {owner} is not Supported"
        errors.append(forbidden(at.child("spec", "activeDeadlineSeconds"), detail))
    return errors


def _int_or_percent(value: Any, path: Path) -> Errors:
    if isinstance(value, str):
        return [invalid(path, value, msg) for msg in formats.is_valid_percent(value)]
    if is_int(value):
        return [invalid(path, value, NEGATIVE)] if value < 0 else []
    return [invalid(path, value, "must be an integer or percentage (e.g '5%')")]


def _int_or_percent_value(value: Any) -> int:
    if isinstance(value, str) and not formats.is_valid_percent(value):
        return int(value[:-1])
    return value if is_int(value) else 0


def _not_over_100_percent(value: Any, path: Path) -> Errors:
    if isinstance(value, str) and not formats.is_valid_percent(value) and int(value[:-1]) > 100:
        return [invalid(path, value, "must not be greater than 100%")]
    return []


def validate_deployment(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors: Errors = []
    non_negative(spec, "replicas", SPEC.child("replicas"), errors)
    errors += _selector(spec, SPEC, "deployment")
    errors += _always_restarting_template(spec, "ReplicaSet", SPEC)
    errors += _deployment_strategy(mapping(spec.get("strategy")), SPEC.child("strategy"))
    min_ready = non_negative(spec, "minReadySeconds", SPEC.child("minReadySeconds"), errors)
    non_negative(spec, "revisionHistoryLimit", SPEC.child("revisionHistoryLimit"), errors)
    deadline = non_negative(
        spec, "progressDeadlineSeconds", SPEC.child("progressDeadlineSeconds"), errors
    )
    if deadline is not None and deadline <= (min_ready or 0):
        detail = "must be greater than minReadySeconds"
        errors.append(invalid(SPEC.child("progressDeadlineSeconds"), deadline, detail))
    return errors


def _deployment_strategy(strategy: dict[str, Any], path: Path) -> Errors:
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            detail = "may not be specified when strategy `type` is 'Recreate'"
            return [forbidden(path.child("rollingUpdate"), detail)]
        return []
    if kind != "RollingUpdate":
        return [not_supported(path, strategy, ["Recreate", "RollingUpdate"])]
    if rolling is None:
        return [required(path.child("rollingUpdate"), "this should be defaulted and never be nil")]
    rolling, at = mapping(rolling), path.child("rollingUpdate")
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errors = _int_or_percent(unavailable, at.child("maxUnavailable"))
    errors += _int_or_percent(surge, at.child("maxSurge"))
    if _int_or_percent_value(unavailable) == 0 and _int_or_percent_value(surge) == 0:
        detail = "may not be 0 when `maxSurge` is 0"
        errors.append(invalid(at.child("maxUnavailable"), unavailable, detail))
    return errors + _not_over_100_percent(unavailable, at.child("maxUnavailable"))


def validate_replica_set(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors: Errors = []
    non_negative(spec, "replicas", SPEC.child("replicas"), errors)
    non_negative(spec, "minReadySeconds", SPEC.child("minReadySeconds"), errors)
    # Kubernetes says "deployment" here too: ReplicaSets share the Deployment's wording.
    errors += _selector(spec, SPEC, "deployment")
    return errors + _always_restarting_template(spec, "ReplicaSet", SPEC)


def validate_replication_controller(obj: dict[str, Any]) -> Errors:
    """ReplicationControllers predate label selectors: their selector is a plain map."""
    spec = mapping(obj.get("spec"))
    errors: Errors = []
    non_negative(spec, "minReadySeconds", SPEC.child("minReadySeconds"), errors)
    selector = mapping(spec.get("selector"))
    if not selector:
        errors.append(required(SPEC.child("selector")))
    non_negative(spec, "replicas", SPEC.child("replicas"), errors)
    if spec.get("template") is None:
        return [*errors, required(SPEC.child("template"))]
    if selector and not selector_matches({"matchLabels": selector}, _template_labels(spec)):
        at = SPEC.child("template", "metadata", "labels")
        errors.append(invalid(at, _template_labels(spec), _MISMATCH))
    return errors + _always_restarting_template(spec, "ReplicationController", SPEC)


def validate_daemon_set(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors = _selector(spec, SPEC, "daemonset")
    errors += _always_restarting_template(spec, "DaemonSet", SPEC)
    non_negative(spec, "minReadySeconds", SPEC.child("minReadySeconds"), errors)
    non_negative(spec, "revisionHistoryLimit", SPEC.child("revisionHistoryLimit"), errors)
    strategy, at = mapping(spec.get("updateStrategy")), SPEC.child("updateStrategy")
    kind = strategy.get("type")
    if kind == "RollingUpdate":
        if strategy.get("rollingUpdate") is None:
            return [*errors, required(at.child("rollingUpdate"))]
        errors += _daemon_set_rolling(mapping(strategy["rollingUpdate"]), at.child("rollingUpdate"))
    elif kind != "OnDelete":
        errors.append(not_supported(at, strategy, ["RollingUpdate", "OnDelete"]))
    return errors


def _daemon_set_rolling(rolling: dict[str, Any], path: Path) -> Errors:
    """A DaemonSet has one pod per node, so it either surges or takes pods down: one of
    maxSurge and maxUnavailable must be zero and the other not."""
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errors = _int_or_percent(unavailable, path.child("maxUnavailable"))
    errors += _int_or_percent(surge, path.child("maxSurge"))
    errors += _not_over_100_percent(unavailable, path.child("maxUnavailable"))
    errors += _not_over_100_percent(surge, path.child("maxSurge"))
    has_unavailable, has_surge = (
        _int_or_percent_value(unavailable) != 0,
        _int_or_percent_value(surge) != 0,
    )
    if has_unavailable and has_surge:
        detail = "may not be set when maxUnavailable is non-zero"
        errors.append(invalid(path.child("maxSurge"), surge, detail))
    elif not has_unavailable and not has_surge:
        errors.append(required(path.child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
    return errors


def validate_stateful_set(obj: dict[str, Any]) -> Errors:
    """Unlike Kubernetes, which leaves a StatefulSet's pod spec to fail at pod creation,
    the template is validated here, counting the claim templates as volumes."""
    spec = mapping(obj.get("spec"))
    errors: Errors = []
    policy = spec.get("podManagementPolicy", "")
    if policy == "":
        errors.append(required(SPEC.child("podManagementPolicy")))
    elif policy not in ("OrderedReady", "Parallel"):
        detail = "must be 'OrderedReady' or 'Parallel'"
        errors.append(invalid(SPEC.child("podManagementPolicy"), policy, detail))
    errors += _stateful_set_strategy(
        mapping(spec.get("updateStrategy")), SPEC.child("updateStrategy")
    )
    retention = mapping(spec.get("persistentVolumeClaimRetentionPolicy"))
    for field in ("whenDeleted", "whenScaled"):
        value = retention.get(field)
        if spec.get("persistentVolumeClaimRetentionPolicy") is not None and value not in (
            "Retain",
            "Delete",
        ):
            at = SPEC.child("persistentVolumeClaimRetentionPolicy", field)
            errors.append(not_supported(at, value, ["Retain", "Delete"]))
    non_negative(spec, "replicas", SPEC.child("replicas"), errors)
    non_negative(spec, "minReadySeconds", SPEC.child("minReadySeconds"), errors)
    non_negative(mapping(spec.get("ordinals")), "start", SPEC.child("ordinals.start"), errors)
    errors += _selector(spec, SPEC, "statefulset")
    claims = frozenset(
        text(mapping(c.get("metadata")).get("name"))
        for c in dicts(spec.get("volumeClaimTemplates"))
    )
    return errors + _always_restarting_template(spec, "StatefulSet", SPEC, claims)


def _stateful_set_strategy(strategy: dict[str, Any], path: Path) -> Errors:
    kind, rolling = strategy.get("type", ""), strategy.get("rollingUpdate")
    if kind == "":
        return [required(path)]
    if kind == "OnDelete":
        if rolling is not None:
            detail = "only allowed for updateStrategy 'RollingUpdate'"
            return [invalid(path.child("rollingUpdate"), rolling, detail)]
        return []
    if kind != "RollingUpdate":
        return [invalid(path, strategy, "must be 'RollingUpdate' or 'OnDelete'")]
    errors: Errors = []
    if rolling is not None:
        rolling, at = mapping(rolling), path.child("rollingUpdate")
        non_negative(rolling, "partition", at.child("partition"), errors)
        unavailable = rolling.get("maxUnavailable")
        if unavailable is not None:
            errors += _int_or_percent(unavailable, at.child("maxUnavailable"))
            if _int_or_percent_value(unavailable) == 0:
                errors.append(invalid(at.child("maxUnavailable"), unavailable, "cannot be 0"))
            errors += _not_over_100_percent(unavailable, at.child("maxUnavailable"))
    return errors


def validate_controller_revision(obj: dict[str, Any]) -> Errors:
    errors: Errors = []
    if obj.get("data") is None:
        errors.append(required(Path("data"), "data is mandatory"))
    non_negative(obj, "revision", Path("revision"), errors)
    return errors


def validate_job(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    return _selector(spec, SPEC) + _job_spec(spec, SPEC)


def _job_spec(spec: dict[str, Any], path: Path) -> Errors:
    """The parts of a Job spec a CronJob's job template shares."""
    errors: Errors = []
    for field in (
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ):
        non_negative(spec, field, path.child(field), errors)
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("Indexed", "NonIndexed"):
        errors.append(not_supported(path.child("completionMode"), mode, ["Indexed", "NonIndexed"]))
    if mode == "Indexed" and spec.get("completions") is None:
        errors.append(required(path.child("completions"), "when completion mode is Indexed"))
    template = mapping(spec.get("template"))
    errors += pod_template(template, path.child("template"))
    policy = mapping(template.get("spec")).get("restartPolicy", "")
    if policy not in ("OnFailure", "Never"):
        at = path.child("template", "spec", "restartPolicy")
        errors.append(not_supported(at, policy, ["OnFailure", "Never"]))
    return errors


def validate_cron_job(obj: dict[str, Any]) -> Errors:
    spec = mapping(obj.get("spec"))
    errors: Errors = []
    name = text(mapping(obj.get("metadata")).get("name"))
    if len(name) > 52:  # room for the "-<minutes since epoch>" suffix of its Jobs
        errors.append(invalid(Path("metadata.name"), name, "must be no more than 52 characters"))
    schedule = text(spec.get("schedule"))
    if not schedule:
        errors.append(required(SPEC.child("schedule")))
    else:
        try:
            parse_schedule(schedule)
        except ValueError as exc:
            errors.append(invalid(SPEC.child("schedule"), schedule, str(exc)))
    time_zone = spec.get("timeZone")
    if time_zone is not None:
        errors += _time_zone(time_zone, SPEC.child("timeZone"))
    for field in (
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ):
        non_negative(spec, field, SPEC.child(field), errors)
    policy = spec.get("concurrencyPolicy", "")
    if policy == "":
        errors.append(required(SPEC.child("concurrencyPolicy")))
    elif policy not in ("Allow", "Forbid", "Replace"):
        errors.append(
            not_supported(SPEC.child("concurrencyPolicy"), policy, ["Allow", "Forbid", "Replace"])
        )
    job_template = mapping(spec.get("jobTemplate"))
    template_path = SPEC.child("jobTemplate")
    errors += labels(
        mapping(job_template.get("metadata")).get("labels"),
        template_path.child("metadata", "labels"),
    )
    job_spec, at = mapping(job_template.get("spec")), template_path.child("spec")
    errors += _job_spec(job_spec, at)
    if job_spec.get("selector") is not None:
        errors.append(
            invalid(at.child("selector"), job_spec["selector"], "`selector` will be auto-generated")
        )
    if job_spec.get("manualSelector") is True:
        errors.append(not_supported(at.child("manualSelector"), True, ["nil", "false"]))
    return errors


def _time_zone(time_zone: Any, path: Path) -> Errors:
    if not isinstance(time_zone, str) or not time_zone or time_zone == "Local":
        return [invalid(path, time_zone, "unknown time zone " + str(time_zone))]
    try:
        zoneinfo.ZoneInfo(time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return [invalid(path, time_zone, f"unknown time zone {time_zone}")]
    return []


def validate_selector_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    """Deployments, ReplicaSets and DaemonSets keep their selector: changing it would
    orphan every pod they own."""
    return immutable(
        mapping(new.get("spec")).get("selector"),
        mapping(old.get("spec")).get("selector"),
        SPEC.child("selector"),
    )


def validate_stateful_set_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    mutable = (
        "replicas",
        "ordinals",
        "template",
        "updateStrategy",
        "persistentVolumeClaimRetentionPolicy",
        "minReadySeconds",
    )
    new_spec = {k: v for k, v in mapping(new.get("spec")).items() if k not in mutable}
    old_spec = {k: v for k, v in mapping(old.get("spec")).items() if k not in mutable}
    if new_spec != old_spec:
        detail = (
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
            "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
            "'minReadySeconds' are forbidden"
        )
        return [forbidden(SPEC, detail)]
    return []


def validate_job_update(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    """A Job's selector, completions and pod template are fixed once it exists."""
    new_spec, old_spec = mapping(new.get("spec")), mapping(old.get("spec"))
    errors: Errors = []
    for field in ("completions", "selector", "template"):
        if new_spec.get(field) != old_spec.get(field):
            errors.append(invalid(SPEC.child(field), new_spec.get(field), IMMUTABLE))
    return errors
