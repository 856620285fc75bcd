"""The arithmetic and bookkeeping of Deployments, without I/O (Kubernetes'
`pkg/controller/deployment/util`): the pod-template hash, maxSurge and maxUnavailable,
how many pods a rolling update may add or remove, proportional scaling, revisions and
the Progressing/Available conditions. `deployment.py` drives it.

The pod-template hash names a Deployment's ReplicaSet (`<deployment>-<hash>`) and labels
its pods (`pod-template-hash`), so that two ReplicaSets of one Deployment never select
each other's pods. It must be stable: the same template (and collision count) always
gives the same hash, so a controller restarted mid-rollout finds its ReplicaSet again
instead of making another. Kubernetes hashes Go's printed form of the template with
FNV-1a; here FNV-1a runs over the template's canonical JSON (sorted keys), plus the
collision count, and the result is spelled with the same alphabet of consonants and
digits (no vowels: no words). It does not match Kubernetes' value bit for bit.
"""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubelab.client import Object

from . import podcontrol as pc

POD_TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

ANNOTATIONS_NOT_COPIED = frozenset(
    {LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS}
)
"""The Deployment's annotations its ReplicaSets do not take over (the others, e.g.
`kubernetes.io/change-cause`, `kubectl rollout history` reads from them)."""

PROGRESSING = "Progressing"
AVAILABLE = "Available"
REPLICA_FAILURE = "ReplicaFailure"

# The reasons of the conditions, as Kubernetes words them.
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
RS_UPDATED = "ReplicaSetUpdated"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
MINIMUM_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_UNAVAILABLE = "MinimumReplicasUnavailable"

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


# -- the hash ------------------------------------------------------------------------------


def fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def safe_encode(text: str) -> str:
    """Each character mapped into the consonant-and-digit alphabet (apimachinery's
    rand.SafeEncodeString)."""
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in text)


def template_hash(template: Object, collision_count: int | None = None) -> str:
    """The pod-template hash of `template` (module docstring)."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        data += collision_count.to_bytes(4, "little", signed=False)
    return safe_encode(str(fnv32a(data)))


def without_hash(template: Object) -> Object:
    """`template` without the pod-template-hash label, for comparing templates."""
    out = copy.deepcopy(template)
    template_labels = (out.get("metadata") or {}).get("labels")
    if template_labels:
        template_labels.pop(POD_TEMPLATE_HASH, None)
        if not template_labels:
            del out["metadata"]["labels"]
    if "metadata" in out and not out["metadata"]:
        del out["metadata"]
    return out


def same_template(a: Object, b: Object) -> bool:
    """Whether two pod templates are equal but for the pod-template-hash label."""
    return without_hash(a) == without_hash(b)


# -- surge and unavailability --------------------------------------------------------------


def replicas(obj: Object) -> int:
    """`spec.replicas` of a Deployment or ReplicaSet (defaulted to 1)."""
    return int((obj.get("spec") or {}).get("replicas", 1))


def status_int(obj: Object, field: str) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def rolling_update(deployment: Object) -> dict[str, Any] | None:
    strategy = (deployment.get("spec") or {}).get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return None
    rolling: dict[str, Any] = strategy.get("rollingUpdate") or {}
    return rolling


def fenceposts(
    max_surge: int | str | None, max_unavailable: int | str | None, desired: int
) -> tuple[int, int]:
    """(surge, unavailable) in pods for `desired` replicas: surge rounded up, unavailable
    down; both 0 would make progress impossible, so unavailable is then 1 (Kubernetes'
    ResolveFenceposts)."""
    surge = pc.scaled_value(max_surge, desired, round_up=True)
    unavailable = pc.scaled_value(max_unavailable, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _rolling_fenceposts(deployment: Object) -> tuple[int, int]:
    rolling = rolling_update(deployment)
    if rolling is None:
        return 0, 0
    return fenceposts(
        rolling.get("maxSurge", "25%"), rolling.get("maxUnavailable", "25%"), replicas(deployment)
    )


def max_surge(deployment: Object) -> int:
    """How many pods above `spec.replicas` a rolling update may run (0 for Recreate)."""
    return _rolling_fenceposts(deployment)[0]


def max_unavailable(deployment: Object) -> int:
    """How many of `spec.replicas` may be unavailable during a rolling update."""
    wanted = replicas(deployment)
    if rolling_update(deployment) is None or wanted == 0:
        return 0
    return min(_rolling_fenceposts(deployment)[1], wanted)


def total_replicas(replica_sets: Sequence[Object]) -> int:
    return sum(replicas(rs) for rs in replica_sets)


def pods_of(rs: Object) -> int:
    """The pods a ReplicaSet may have right now: those it is asked for, or more while its
    controller has not yet reported the surplus gone."""
    return max(replicas(rs), status_int(rs, "replicas"))


def new_rs_replicas(deployment: Object, all_rs: Sequence[Object], new_rs: Object | None) -> int:
    """How many replicas the new ReplicaSet may have now (NewRSNewReplicas): all of
    them for Recreate; for a rolling update as many as fit under replicas + maxSurge.

    A departure: Kubernetes counts the replicas the ReplicaSets are asked for, so an old
    pod whose deletion is still on its way and the new pod that replaces it may exist
    together, one above the surge, for a moment. Here the pods a ReplicaSet still
    reports (`pods_of`) count, so the surge holds for the pods that exist."""
    wanted = replicas(deployment)
    if rolling_update(deployment) is None:
        return wanted
    current_new = replicas(new_rs) if new_rs is not None else 0
    allowed_total = wanted + max_surge(deployment)
    current_total = sum(pods_of(rs) for rs in all_rs)
    if current_total >= allowed_total:
        return current_new
    scale_up = min(allowed_total - current_total, wanted - current_new)
    return current_new + max(0, scale_up)


def max_old_scale_down(deployment: Object, all_rs: Sequence[Object], new_rs: Object) -> int:
    """How many old pods a rolling update may remove now, keeping replicas -
    maxUnavailable available even if the new ReplicaSet's unavailable pods never
    become ready."""
    min_available = replicas(deployment) - max_unavailable(deployment)
    new_unavailable = replicas(new_rs) - status_int(new_rs, "availableReplicas")
    return total_replicas(all_rs) - min_available - new_unavailable


# -- proportional scaling ------------------------------------------------------------------


def _annotation_int(obj: Object, key: str) -> int | None:
    value = (pc.meta(obj).get("annotations") or {}).get(key)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _round_half_away(value: float) -> int:
    return int(value + 0.5) if value >= 0 else -int(-value + 0.5)


def rs_fraction(rs: Object, deployment: Object) -> int:
    """How many replicas `rs` gains (or loses) when a Deployment being rolled out is
    scaled: its share of the new size, by its share of the size it was made for."""
    wanted = replicas(deployment)
    if wanted == 0:
        return -replicas(rs)
    allowed = wanted + max_surge(deployment)
    annotated = _annotation_int(rs, MAX_REPLICAS)
    if annotated is None:
        annotated = status_int(deployment, "replicas")
    if annotated == 0:
        return 0
    return _round_half_away(replicas(rs) * allowed / annotated) - replicas(rs)


def proportional_sizes(deployment: Object, active: list[Object]) -> dict[str, int]:
    """The new size of each active ReplicaSet (by name) when a Deployment with several
    of them is scaled: each takes its proportion of the change, the largest the
    rounding leftover (Kubernetes' DeploymentController.scale)."""
    wanted = replicas(deployment)
    allowed = wanted + max_surge(deployment) if wanted > 0 else 0
    to_add = allowed - total_replicas(active)
    if to_add > 0:
        order = sorted(active, key=lambda r: (-replicas(r), _desc_created(r)))
    else:
        order = sorted(active, key=lambda r: (-replicas(r), _created(r)))
    sizes = {pc.meta(rs)["name"]: replicas(rs) for rs in order}
    added = 0
    for rs in order:
        if to_add == 0 or to_add == added or replicas(rs) == 0:
            continue
        fraction = rs_fraction(rs, deployment)
        left = to_add - added
        proportion = min(fraction, left) if to_add > 0 else max(fraction, left)
        sizes[pc.meta(rs)["name"]] += proportion
        added += proportion
    if order and to_add != 0:
        first = pc.meta(order[0])["name"]
        sizes[first] = max(0, sizes[first] + to_add - added)
    return sizes


def _created(obj: Object) -> str:
    return str(pc.meta(obj).get("creationTimestamp") or "")


def _desc_created(obj: Object) -> pc.Descending:
    return pc.Descending(_created(obj))


def by_creation(replica_sets: Sequence[Object]) -> list[Object]:
    """Oldest first (ties by name), as Kubernetes' ReplicaSetsByCreationTimestamp."""
    return sorted(replica_sets, key=lambda r: (_created(r), pc.meta(r).get("name", "")))


# -- revisions -----------------------------------------------------------------------------


def revision(obj: Object) -> int:
    return _annotation_int(obj, REVISION) or 0


def max_revision(replica_sets: Sequence[Object]) -> int:
    return max((revision(rs) for rs in replica_sets), default=0)


def copied_annotations(deployment: Object) -> dict[str, str]:
    annotations = pc.meta(deployment).get("annotations") or {}
    return {k: v for k, v in annotations.items() if k not in ANNOTATIONS_NOT_COPIED}


def new_rs_annotations(
    deployment: Object, rs: Object, new_revision: int, exists: bool
) -> dict[str, str]:
    """The annotations the new ReplicaSet should have: the Deployment's (but for ours),
    its revision (a reused ReplicaSet's old revision moves to the revision history, as
    `kubectl rollout undo` leaves it) and, if it is yet to be created, the desired and
    max replicas."""
    current: dict[str, str] = dict(pc.meta(rs).get("annotations") or {})
    annotations = {**current, **copied_annotations(deployment)}
    old = revision(rs) if exists else 0
    if old < new_revision:
        annotations[REVISION] = str(new_revision)
        if old > 0:
            history = [h for h in current.get(REVISION_HISTORY, "").split(",") if h]
            annotations[REVISION_HISTORY] = ",".join([*history, str(old)])
    if not exists:
        # Only a new ReplicaSet is sized here; an existing one keeps the size it was
        # made for until it is scaled, which proportional scaling reads.
        annotations[DESIRED_REPLICAS] = str(replicas(deployment))
        annotations[MAX_REPLICAS] = str(replicas(deployment) + max_surge(deployment))
    return annotations


# -- status and conditions -----------------------------------------------------------------


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == kind:
            found: dict[str, Any] = cond
            return found
    return None


def set_condition(
    status: dict[str, Any],
    kind: str,
    value: str,
    reason: str,
    message: str,
    now: datetime.datetime,
    *,
    touch: bool = False,
) -> None:
    """Set a condition of `status`. Unless `touch` is set, a condition whose status and
    reason stay is left as it is (Kubernetes' SetDeploymentCondition); with it, its
    lastUpdateTime moves (progress was made: the deadline counts from now). The
    lastTransitionTime moves only with the status."""
    stamp = pc.format_time(now)
    old = condition(status, kind)
    same = old is not None and old.get("status") == value
    if same and old is not None and old.get("reason") == reason and not touch:
        return
    since = (old or {}).get("lastTransitionTime") if same else None
    new = {
        "type": kind,
        "status": value,
        "lastUpdateTime": stamp,
        "lastTransitionTime": since or stamp,
        "reason": reason,
        "message": message,
    }
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != kind] + [
        new
    ]


def remove_condition(status: dict[str, Any], kind: str) -> None:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != kind]
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)


def calculate_status(
    deployment: Object, all_rs: Sequence[Object], new_rs: Object | None, now: datetime.datetime
) -> dict[str, Any]:
    """The Deployment's status from its ReplicaSets, with the Available condition."""
    available = sum(status_int(rs, "availableReplicas") for rs in all_rs)
    unavailable = max(0, total_replicas(all_rs) - available)
    old = deployment.get("status") or {}
    status: dict[str, Any] = {
        "observedGeneration": pc.meta(deployment).get("generation", 0),
        "replicas": sum(status_int(rs, "replicas") for rs in all_rs),
        "updatedReplicas": status_int(new_rs, "replicas") if new_rs is not None else 0,
        "readyReplicas": sum(status_int(rs, "readyReplicas") for rs in all_rs),
        "availableReplicas": available,
        "unavailableReplicas": unavailable,
    }
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    if old.get("conditions"):
        status["conditions"] = copy.deepcopy(old["conditions"])
    if available >= replicas(deployment) - max_unavailable(deployment):
        set_condition(
            status,
            AVAILABLE,
            "True",
            MINIMUM_AVAILABLE,
            "Deployment has minimum availability.",
            now,
        )
    else:
        set_condition(
            status,
            AVAILABLE,
            "False",
            MINIMUM_UNAVAILABLE,
            "Deployment does not have minimum availability.",
            now,
        )
    return status


def complete(deployment: Object, status: dict[str, Any]) -> bool:
    """Every replica updated and available, and this generation observed."""
    wanted = replicas(deployment)
    return bool(
        status.get("updatedReplicas", 0) == wanted
        and status.get("replicas", 0) == wanted
        and status.get("availableReplicas", 0) == wanted
        and status.get("observedGeneration", 0) >= pc.meta(deployment).get("generation", 0)
    )


def progressing(deployment: Object, new_status: dict[str, Any]) -> bool:
    """Whether the rollout moved since the stored status: more updated, ready or
    available pods, or fewer old ones."""
    old = deployment.get("status") or {}

    def get(s: dict[str, Any], k: str) -> int:
        return int(s.get(k) or 0)

    old_old = get(old, "replicas") - get(old, "updatedReplicas")
    new_old = get(new_status, "replicas") - get(new_status, "updatedReplicas")
    return (
        get(new_status, "updatedReplicas") > get(old, "updatedReplicas")
        or new_old < old_old
        or get(new_status, "readyReplicas") > get(old, "readyReplicas")
        or get(new_status, "availableReplicas") > get(old, "availableReplicas")
    )


def deadline(deployment: Object) -> int | None:
    value = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    return int(value) if value is not None else None


def timed_out(deployment: Object, status: dict[str, Any], now: datetime.datetime) -> bool:
    """Whether the rollout has made no progress for progressDeadlineSeconds."""
    limit = deadline(deployment)
    cond = condition(status, PROGRESSING)
    if limit is None or cond is None or cond.get("reason") == NEW_RS_AVAILABLE:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    since = pc.parse_time(cond.get("lastUpdateTime"))
    return since is not None and now > since + datetime.timedelta(seconds=limit)


def seconds_to_deadline(
    deployment: Object, status: dict[str, Any], now: datetime.datetime
) -> float | None:
    """Seconds until the Progressing condition of `status` passes the deadline; None if
    there is no deadline to watch (none set, complete, or already passed)."""
    limit = deadline(deployment)
    cond = condition(status, PROGRESSING)
    if limit is None or cond is None or cond.get("reason") in (NEW_RS_AVAILABLE, TIMED_OUT):
        return None
    since = pc.parse_time(cond.get("lastUpdateTime"))
    if since is None:
        return None
    return (since - now).total_seconds() + limit


@dataclass(frozen=True)
class Scaled:
    """A ReplicaSet scaled by a sync, for its Event."""

    name: str
    old: int
    new: int

    def message(self) -> str:
        way = "up" if self.new > self.old else "down"
        return f"Scaled {way} replica set {self.name} from {self.old} to {self.new}"
