"""What the workload controllers (ReplicaSet, Deployment, DaemonSet, StatefulSet) share:
expectations, the controller reference manager, slow-start bursts, the ranking of pods
to delete, and reading a pod's state. This is `pkg/controller/controller_utils.go` and
`controller_ref_manager.go` of Kubernetes.

Expectations. A ReplicaSet that wants 3 pods and has 0 creates 3. The pods' ADDED events
reach its cache a moment later; a sync that ran before they did would count 0 again and
create 3 more. So before creating or deleting, a controller notes how many creations
and which deletions it expects (`Expectations`), the pod handlers tick them off as the
events arrive, and `manage` steps are skipped until every expectation has been observed
(status is still written). A create that fails is ticked off by the creator, since no
event will come. Expectations expire after `EXPECTATIONS_TTL` (5 min, as Kubernetes) so
that an event lost for good cannot wedge a controller forever.

Ownership. A controller owns what it made through an owner reference with
`controller: true` (one per object; the garbage collector deletes the object with its
owner). `claim` applies Kubernetes' rules to the objects its selector might concern:

* an object whose controller reference names us stays ours while the selector matches
  it, and is released (the reference removed) once it does not, unless we are being
  deleted (then nothing is released: the garbage collector is on its way);
* an object with no controller that the selector matches and that is not being deleted
  is adopted (our reference added), unless we are being deleted; before the first
  adoption of a sync the owner is read afresh from the apiserver, so that a controller
  deleted meanwhile (uid changed or deletionTimestamp set) adopts nothing;
* objects controlled by someone else are none of our business.

Both writes are merge patches that carry the object's uid and resourceVersion, so the
apiserver refuses them (409) if the object changed since the cache saw it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import copy
import datetime
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource
from kubelab.api.selectors import Selector, selector_from_label_selector
from kubelab.client import REAL_CLOCK, Clock, IndexFunc, Object, RestClient, SharedInformer

T = TypeVar("T")

EXPECTATIONS_TTL = 300.0
"""Seconds after which unobserved expectations are forgotten (Kubernetes' ExpectationsTimeout)."""

SLOW_START_INITIAL_BATCH = 1
"""The first burst of creates (Kubernetes' SlowStartInitialBatchSize); each next one doubles."""

BURST_REPLICAS = 500
"""The most pods one sync creates or deletes (kube-controller-manager's burstReplicas)."""

DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"


# -- time and pod state --------------------------------------------------------------------


def parse_time(value: Any) -> datetime.datetime | None:
    """An RFC 3339 timestamp of the API ("2024-05-01T10:00:00Z"), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def format_time(value: datetime.datetime) -> str:
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(obj: Object) -> dict[str, Any]:
    m: dict[str, Any] = obj.get("metadata") or {}
    return m


def labels(obj: Object) -> dict[str, str]:
    return dict(meta(obj).get("labels") or {})


def being_deleted(obj: Object) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def pod_condition(pod: Object, kind: str) -> dict[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            found: dict[str, Any] = condition
            return found
    return None


def pod_ready(pod: Object) -> bool:
    condition = pod_condition(pod, "Ready")
    return condition is not None and condition.get("status") == "True"


def pod_available(pod: Object, min_ready_seconds: int, now: datetime.datetime) -> bool:
    """Ready for at least `min_ready_seconds` (Kubernetes' IsPodAvailable)."""
    condition = pod_condition(pod, "Ready")
    if condition is None or condition.get("status") != "True":
        return False
    if min_ready_seconds <= 0:
        return True
    since = parse_time(condition.get("lastTransitionTime"))
    return since is not None and since + datetime.timedelta(seconds=min_ready_seconds) <= now


def pod_active(pod: Object) -> bool:
    """Counts towards replicas: not finished and not being deleted (FilterActivePods)."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not being_deleted(pod)


def available_in(pod: Object, min_ready_seconds: int, now: datetime.datetime) -> float | None:
    """Seconds until a ready pod becomes available, if it is ready but not yet available."""
    condition = pod_condition(pod, "Ready")
    if condition is None or condition.get("status") != "True" or min_ready_seconds <= 0:
        return None
    since = parse_time(condition.get("lastTransitionTime"))
    if since is None:
        return None
    left = (since - now).total_seconds() + min_ready_seconds
    return left if left > 0 else None


# -- the ranking of pods to delete ----------------------------------------------------------

_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def _deletion_cost(pod: Object) -> int:
    try:
        return int((meta(pod).get("annotations") or {}).get(DELETION_COST_ANNOTATION, 0))
    except ValueError:
        return 0


def deletion_order(pod: Object) -> tuple[Any, ...]:
    """A sort key that puts the pods to delete first first (Kubernetes' ActivePods order):
    unscheduled before scheduled; Pending, Unknown, then Running; not ready before ready;
    lower `controller.kubernetes.io/pod-deletion-cost` first; ready for less time first;
    more container restarts first; newer first."""
    status = pod.get("status") or {}
    ready = pod_ready(pod)
    ready_since = (pod_condition(pod, "Ready") or {}).get("lastTransitionTime") or ""
    restarts = sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or [])
    created = meta(pod).get("creationTimestamp") or ""
    return (
        bool((pod.get("spec") or {}).get("nodeName")),
        _PHASE_RANK.get(status.get("phase") or "Pending", 0),
        ready,
        _deletion_cost(pod),
        Descending(ready_since if ready else ""),
        -restarts,
        Descending(created),
    )


@dataclass(frozen=True, order=False)
class Descending:
    """Orders strings from the greatest (an RFC 3339 timestamp: the latest) down."""

    value: str

    def __lt__(self, other: Descending) -> bool:
        return self.value > other.value


def pods_to_delete(pods: Sequence[Object], count: int) -> list[Object]:
    """The `count` pods that go first when scaling down (ranking of `deletion_order`)."""
    return sorted(pods, key=deletion_order)[:count]


# -- bursts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchResult:
    """What `slow_start_batch` did: calls tried, calls that succeeded, the first error."""

    tried: int
    succeeded: int
    error: BaseException | None


def slow_start_batch(
    count: int, fn: Callable[[int], None], initial: int = SLOW_START_INITIAL_BATCH
) -> BatchResult:
    """Call `fn(i)` for i in 0..count-1 in batches of 1, 2, 4, ... run concurrently,
    stopping after the first batch in which a call failed: a quota or admission refusal
    then costs one request, not hundreds (Kubernetes' slowStartBatch). Each call runs in
    a copy of the caller's context, so its requests carry the reconcile's trace context
    (a pool thread would otherwise start with none, and the pods a ReplicaSet's
    reconcile creates would start traces of their own)."""
    tried = succeeded = 0
    batch = min(count, max(1, initial))
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        while batch > 0:
            futures = [
                pool.submit(contextvars.copy_context().run, fn, tried + i) for i in range(batch)
            ]
            tried += batch
            failures = [e for f in futures if (e := f.exception()) is not None]
            succeeded += batch - len(failures)
            if failures:
                return BatchResult(tried, succeeded, failures[0])
            batch = min(count - tried, 2 * batch)
    return BatchResult(tried, succeeded, None)


# -- expectations ---------------------------------------------------------------------------


@dataclass
class _Expected:
    adds: int
    deletes: set[str]
    since: float


class Expectations:
    """Client-go's UIDTrackingControllerExpectations, keyed by controller key: creations
    are counted, deletions tracked by pod key so that the update that marks a pod
    (deletionTimestamp) and its final delete tick it off once."""

    def __init__(self, clock: Clock = REAL_CLOCK) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._by_key: dict[str, _Expected] = {}

    def satisfied(self, key: str) -> bool:
        """Whether a sync of `key` may create or delete: nothing is expected, or what
        was expected has been seen, or the expectations have expired."""
        with self._lock:
            expected = self._by_key.get(key)
            if expected is None:
                return True
            if expected.adds <= 0 and not expected.deletes:
                return True
            return self._clock.now() - expected.since > EXPECTATIONS_TTL

    def expect_creations(self, key: str, count: int) -> None:
        with self._lock:
            self._by_key[key] = _Expected(count, set(), self._clock.now())

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        with self._lock:
            self._by_key[key] = _Expected(0, set(pod_keys), self._clock.now())

    def creation_observed(self, key: str) -> None:
        with self._lock:
            expected = self._by_key.get(key)
            if expected is not None:
                expected.adds -= 1

    def deletion_observed(self, key: str, pod_key: str) -> None:
        with self._lock:
            expected = self._by_key.get(key)
            if expected is not None:
                expected.deletes.discard(pod_key)

    def forget(self, key: str) -> None:
        with self._lock:
            self._by_key.pop(key, None)


# -- controller references ---------------------------------------------------------------


def controller_ref(obj: Object) -> dict[str, Any] | None:
    """The owner reference with `controller: true`, if any."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller") is True:
            found: dict[str, Any] = ref
            return found
    return None


def new_controller_ref(owner: Object) -> dict[str, Any]:
    """The reference a controller puts on what it owns."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta(owner)["name"],
        "uid": meta(owner)["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def resolve_controller(
    obj: Object, kind: str, lookup: Callable[[str], Object | None]
) -> Object | None:
    """The controller of `obj` if it is a `kind` and still the one the reference names
    (same uid): `lookup` finds it by "namespace/name" in a cache."""
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != kind:
        return None
    owner = lookup(f"{meta(obj).get('namespace')}/{ref.get('name')}")
    if owner is None or meta(owner).get("uid") != ref.get("uid"):
        return None
    return owner


def label_selector(owner: Object) -> Selector:
    """The selector of an owner whose `spec.selector` is a LabelSelector."""
    return selector_from_label_selector((owner.get("spec") or {}).get("selector"))


def selecting(
    owners: Iterable[Object], child: Object, selector_of: Callable[[Object], Selector]
) -> list[Object]:
    """The owners in `child`'s namespace whose selector matches its labels: those that
    may adopt it, to be told when an orphan appears or changes."""
    namespace = meta(child).get("namespace")
    child_labels = labels(child)
    return [
        o
        for o in owners
        if meta(o).get("namespace") == namespace and selector_of(o).matches(child_labels)
    ]


@dataclass
class ClaimResult:
    """The objects that are ours after a claim, and what the claim changed."""

    owned: list[Object] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)


class RefManager:
    """Claims objects of `resource` for `owner`, an object of `owner_resource` (module
    docstring); what it adopts and releases is logged to `log`."""

    def __init__(
        self,
        client: RestClient,
        owner_resource: Resource,
        owner: Object,
        resource: Resource,
        selector: Selector,
        log: logging.Logger,
    ) -> None:
        self._client = client
        self._owner_resource = owner_resource
        self._resource = resource
        self._owner = owner
        self._uid = meta(owner).get("uid")
        self._selector = selector
        self._log = log
        self._may_adopt: bool | None = None

    def _describe(self) -> str:
        m = meta(self._owner)
        return f"{self._owner_resource.kind} {m.get('namespace')}/{m.get('name')}"

    def _can_adopt(self) -> bool:
        """Whether the owner, read afresh, is still the one cached and not being deleted."""
        if self._may_adopt is None:
            m = meta(self._owner)
            try:
                fresh = self._client.get(
                    self._owner_resource, str(m["name"]), str(m.get("namespace") or "")
                )
            except StatusError as exc:
                if exc.code != 404:
                    raise
                self._may_adopt = False
            else:
                self._may_adopt = meta(fresh).get("uid") == self._uid and not being_deleted(fresh)
        return self._may_adopt

    def claim(self, objects: Iterable[Object]) -> ClaimResult:
        result = ClaimResult()
        owner_deleting = being_deleted(self._owner)
        for obj in objects:
            ref = controller_ref(obj)
            matches = self._selector.matches(labels(obj))
            if ref is not None:
                if ref.get("uid") != self._uid:
                    continue
                if matches or owner_deleting:
                    result.owned.append(obj)
                elif self._release(obj):
                    result.released.append(str(meta(obj).get("name")))
                    self._log.info(
                        "%s released %s %s",
                        self._describe(),
                        self._resource.kind,
                        meta(obj)["name"],
                    )
                continue
            if owner_deleting or not matches or being_deleted(obj):
                continue
            if not self._can_adopt():
                continue
            adopted = self._adopt(obj)
            if adopted is not None:
                result.owned.append(adopted)
                result.adopted.append(str(meta(obj).get("name")))
                self._log.info(
                    "%s adopted %s %s", self._describe(), self._resource.kind, meta(obj)["name"]
                )
        return result

    def _patch(self, obj: Object, refs: list[dict[str, Any]] | None) -> Object | None:
        m = meta(obj)
        body = {
            "metadata": {
                "uid": m.get("uid"),
                "resourceVersion": m.get("resourceVersion"),
                "ownerReferences": refs,
            }
        }
        try:
            return self._client.patch(
                self._resource, str(m["name"]), body, str(m.get("namespace") or "")
            )
        except StatusError as exc:
            if exc.code in (404, 409, 422):
                # Gone, changed since the cache saw it, or refused (being deleted): the
                # event that follows brings the owner back to look again.
                return None
            raise

    def _adopt(self, obj: Object) -> Object | None:
        refs = [copy.deepcopy(r) for r in meta(obj).get("ownerReferences") or []]
        return self._patch(obj, [*refs, new_controller_ref(self._owner)])

    def _release(self, obj: Object) -> bool:
        refs = [r for r in meta(obj).get("ownerReferences") or [] if r.get("uid") != self._uid]
        return self._patch(obj, refs or None) is not None


# -- pods from templates ---------------------------------------------------------------------


def add_index(informer: SharedInformer, name: str, func: IndexFunc) -> None:
    """Give a shared informer's cache the index `name`, unless another controller did."""
    with contextlib.suppress(ValueError):  # it is there already
        informer.indexer.add_indexers({name: func})


def pod_from_template(
    template: Object, owner: Object, *, name: str = "", extra_labels: dict[str, str] | None = None
) -> Object:
    """A pod made from `template` for `owner`: the template's labels, annotations and
    finalizers, its spec, and the owner's controller reference; named `name`, or by the
    apiserver from the prefix "<owner>-"."""
    template_meta = template.get("metadata") or {}
    pod_meta: dict[str, Any] = {
        "labels": {**(template_meta.get("labels") or {}), **(extra_labels or {})},
        "ownerReferences": [new_controller_ref(owner)],
    }
    if name:
        pod_meta["name"] = name
    else:
        pod_meta["generateName"] = f"{meta(owner)['name']}-"
    for key in ("annotations", "finalizers"):
        if template_meta.get(key):
            pod_meta[key] = copy.deepcopy(template_meta[key])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


# -- int-or-percent ------------------------------------------------------------------------


def scaled_value(value: int | str | None, total: int, round_up: bool) -> int:
    """An int-or-string field (maxSurge, maxUnavailable) against `total`: an int as it is,
    "25%" as that share of `total`, rounded up or down (Kubernetes'
    GetScaledValueFromIntOrPercent). Raises ValueError for anything else."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is neither an integer nor a percentage")
    if isinstance(value, int):
        return value
    text = value.strip()
    try:
        percent = int(text[:-1]) if text.endswith("%") else None
    except ValueError:
        percent = None
    if percent is None:
        raise ValueError(f"{value!r} is neither an integer nor a percentage such as '25%'")
    share, rest = divmod(percent * total, 100)
    return share + 1 if round_up and rest else share
