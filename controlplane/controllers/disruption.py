"""The disruption controller (kube-controller-manager's disruption-controller): keeps
each PodDisruptionBudget's status, from which the apiserver's eviction decides whether
a pod may go (`controlplane/apiserver/eviction.py`; `kubectl drain` evicts).

For the pods the budget selects in its namespace:

* `expectedPods`: how many there should be. For `minAvailable` as a number, the pods
  there are; otherwise (a percentage, or `maxUnavailable`) the replicas their
  controllers ask for (a ReplicaSet's, or its Deployment's when it has one, a
  StatefulSet's, a ReplicationController's), as Kubernetes counts them. A pod without
  such a controller makes the budget allow no disruption (Warning NoControllers),
  since nothing would replace it.
* `desiredHealthy`: minAvailable, or expectedPods - maxUnavailable; percentages of
  expectedPods are rounded up.
* `currentHealthy`: pods that are Ready, not being deleted, and not in
  `disruptedPods` (pods the apiserver let go whose deletion this controller has not
  seen yet; an entry older than two minutes is dropped, as Kubernetes' DeletionTimeout).
* `disruptionsAllowed`: currentHealthy - desiredHealthy, at least 0; the condition
  DisruptionAllowed says whether it is above 0 (SufficientPods / InsufficientPods).
* `observedGeneration`: the budget's generation this status is for; eviction refuses
  while the status is behind the spec.
"""

from __future__ import annotations

import copy
import datetime
import math
import threading
from typing import Any

from kubelab.api import podutil
from kubelab.api.errors import StatusError
from kubelab.api.selectors import selector_from_label_selector
from kubelab.api.taints import parse_time
from kubelab.client import (
    NAMESPACE_INDEX,
    REAL_CLOCK,
    Clock,
    DeletedFinalStateUnknown,
    Object,
    RestClient,
    WorkQueue,
    namespace_index,
    object_key,
    resource_for,
    rfc3339,
)
from kubelab.client.record import WARNING, EventRecorder

from .base import ControllerContext, SyncResult, Workers, add_index, controller_logger

NAME = "disruption-controller"

BUDGETS = resource_for("policy/v1", "PodDisruptionBudget")
PODS = resource_for("v1", "Pod")
SCALED = {
    "ReplicaSet": resource_for("apps/v1", "ReplicaSet"),
    "Deployment": resource_for("apps/v1", "Deployment"),
    "StatefulSet": resource_for("apps/v1", "StatefulSet"),
    "ReplicationController": resource_for("v1", "ReplicationController"),
}
DELETION_TIMEOUT = 120.0

log = controller_logger(NAME)


def scaled_value(value: Any, total: int) -> int:
    """An IntOrString of a budget: a number, or a percentage of `total` rounded up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def selects(budget: Object, pod: Object) -> bool:
    selector = (budget.get("spec") or {}).get("selector")
    if not selector:
        return False
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return selector_from_label_selector(selector).matches(labels)


def controller_ref(obj: Object) -> dict[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def budget_status(
    budget: Object,
    pods: list[Object],
    expected_from_controllers: int | None,
    now: datetime.datetime,
) -> dict[str, Any]:
    """The status of `budget` (module docstring) for the `pods` it selects;
    `expected_from_controllers` is None when a pod has no controller to count."""
    spec = budget.get("spec") or {}
    old = budget.get("status") or {}
    names = {p["metadata"]["name"]: p for p in pods}
    disrupted = {
        name: at
        for name, at in (old.get("disruptedPods") or {}).items()
        if name in names
        and not podutil.terminating(names[name])
        and (now - parse_time(str(at))).total_seconds() < DELETION_TIMEOUT
    }
    healthy = sum(
        1
        for p in pods
        if podutil.pod_ready(p)
        and not podutil.terminating(p)
        and p["metadata"]["name"] not in disrupted
    )
    min_available = spec.get("minAvailable")
    max_unavailable = spec.get("maxUnavailable")
    if min_available is not None and not isinstance(min_available, str):
        expected, desired = len(pods), int(min_available)
    elif expected_from_controllers is None:
        # Nothing to count on: no disruption is allowed (healthy <= desired).
        expected, desired = len(pods), len(pods)
    else:
        expected = expected_from_controllers
        if min_available is not None:
            desired = scaled_value(min_available, expected)
        elif max_unavailable is not None:
            desired = max(0, expected - scaled_value(max_unavailable, expected))
        else:
            desired = 0  # a budget that sets neither allows any disruption
    allowed = max(0, healthy - desired)
    previous: dict[str, Any] = next(
        (c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), {}
    )
    state = "True" if allowed > 0 else "False"
    condition = {
        "type": "DisruptionAllowed",
        "status": state,
        "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
        "message": "",
        "observedGeneration": int(budget["metadata"].get("generation") or 1),
        "lastTransitionTime": previous.get("lastTransitionTime")
        if previous.get("status") == state
        else rfc3339(now),
    }
    status: dict[str, Any] = {
        "observedGeneration": int(budget["metadata"].get("generation") or 1),
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [condition],
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    return status


class DisruptionController:
    """The controller of the module docstring, keyed by budget "namespace/name"."""

    name = NAME

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._clock = clock
        self._client: RestClient = ctx.client_for(NAME)
        self._events = EventRecorder(self._client, "controllermanager", clock=clock)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._budgets = ctx.informers.informer(BUDGETS)
        self._pods = ctx.informers.informer(PODS)
        add_index(self._budgets, NAMESPACE_INDEX, namespace_index)
        add_index(self._pods, NAMESPACE_INDEX, namespace_index)
        self._budgets.add_event_handler(
            on_add=self._budget_changed, on_update=lambda _old, new: self._budget_changed(new)
        )
        self._pods.add_event_handler(
            on_add=self._pod_changed,
            on_update=self._pod_updated,
            on_delete=self._pod_changed,
        )

    def run(self, workers: int, stop: threading.Event) -> None:
        with self._events:
            Workers(
                NAME, self.queue, self.sync, log, tracer=self._tracer, objects=self._budgets
            ).run(workers, stop)

    def _budget_changed(self, budget: Object) -> None:
        self.queue.add(object_key(budget))

    def _pod_updated(self, old: Object, new: Object) -> None:
        self._pod_changed(old)
        self._pod_changed(new)

    def _pod_changed(self, pod: Object | DeletedFinalStateUnknown) -> None:
        last = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        namespace = str((last.get("metadata") or {}).get("namespace") or "")
        for budget in self._budgets.indexer.by_index(NAMESPACE_INDEX, namespace):
            if selects(budget, last):
                self.queue.add(object_key(budget))

    def _expected_from_controllers(self, namespace: str, pods: list[Object]) -> int | None:
        """The replicas the pods' controllers ask for, summed once per controller; None
        if a pod has none."""
        scales: dict[str, int] = {}
        seen: set[str] = set()  # the pods' controllers already counted
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None or ref.get("kind") not in SCALED:
                return None
            if str(ref.get("uid")) in seen:
                continue
            owner = self._get(SCALED[ref["kind"]], ref["name"], namespace)
            if owner is None:
                return None
            if ref["kind"] == "ReplicaSet":
                parent = controller_ref(owner)
                if parent is not None and parent.get("kind") == "Deployment":
                    deployment = self._get(SCALED["Deployment"], parent["name"], namespace)
                    owner = deployment or owner
            uid = str(owner["metadata"]["uid"])
            seen.add(str(ref.get("uid")))
            scales[uid] = int((owner.get("spec") or {}).get("replicas", 1))
        return sum(scales.values())

    def _get(self, resource: Any, name: str, namespace: str) -> Object | None:
        try:
            return self._client.get(resource, name, namespace)
        except StatusError as exc:
            if exc.code == 404:
                return None
            raise

    def sync(self, key: str) -> SyncResult:
        budget = self._budgets.indexer.get(key)
        if budget is None:
            return None
        namespace = str(budget["metadata"]["namespace"])
        pods = [
            p for p in self._pods.indexer.by_index(NAMESPACE_INDEX, namespace) if selects(budget, p)
        ]
        spec = budget.get("spec") or {}
        needs_controllers = spec.get("maxUnavailable") is not None or isinstance(
            spec.get("minAvailable"), str
        )
        expected = self._expected_from_controllers(namespace, pods) if needs_controllers else 0
        if needs_controllers and expected is None:
            self._events.event(
                budget,
                WARNING,
                "NoControllers",
                "found no controllers for a pod the budget selects: with maxUnavailable or a "
                "percentage, only pods of a ReplicaSet, Deployment, StatefulSet or "
                "ReplicationController can be counted",
            )
        now = self._clock.utcnow()
        status = budget_status(budget, pods, expected, now)
        if status != (budget.get("status") or {}):
            updated = copy.deepcopy(budget)
            updated["status"] = status
            self._client.update_status(BUDGETS, updated)
            log.info(
                "budget %s: %d/%d healthy (%d desired), %d disruptions allowed",
                key,
                status["currentHealthy"],
                status["expectedPods"],
                status["desiredHealthy"],
                status["disruptionsAllowed"],
            )
        pending = status.get("disruptedPods") or {}
        if pending:
            oldest = min(parse_time(str(at)) for at in pending.values())
            return max(0.1, DELETION_TIMEOUT - (now - oldest).total_seconds())
        return None
