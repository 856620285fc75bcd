"""`pods/eviction`: a delete that respects the pod's PodDisruptionBudget, the way
`kubectl drain` removes pods from a node (Kubernetes' eviction REST).

An Eviction (policy/v1, with optional deleteOptions) for a pod:

* deletes it at once when no budget could object: the pod has finished (Succeeded or
  Failed), has not started (Pending), is already being deleted, or no budget of its
  namespace selects it. More than one budget selecting it is an error (500), as in
  Kubernetes.
* with one budget, takes one of the budget's `status.disruptionsAllowed` (written by the
  disruption controller) and records the pod in `status.disruptedPods`, with a
  compare-and-swap on the budget in the store, so that two evictions racing for the
  last allowed disruption cannot both have it; then deletes the pod. With none left,
  or a budget the controller has not caught up with (observedGeneration behind), the
  answer is 429 TooManyRequests "Cannot evict pod as it would violate the pod's
  disruption budget." with the reason in its causes; `kubectl drain` retries it every
  5 s until it passes or its --timeout ends.
* a pod that is not ready does not take from the budget when the budget already has
  its desired healthy pods (`unhealthyPodEvictionPolicy` IfHealthyBudget, the default),
  or whatever the budget says (AlwaysAllow): evicting a broken pod must not be blocked
  by the budget it does not help.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable
from typing import Any

from kubelab.api import errors, podutil
from kubelab.api.selectors import selector_from_label_selector
from kubelab.client import rfc3339

Object = dict[str, Any]
ChargeBudget = Callable[[str, str, Callable[[Object], Object | None]], Object | None]
"""(namespace, budget name, change) -> the budget after a compare-and-swap of `change`."""

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def may_ignore_budgets(pod: Object) -> bool:
    """Whether no budget can object to evicting `pod` (module docstring)."""
    phase = podutil.pod_phase(pod)
    return phase in ("Succeeded", "Failed", "Pending") or podutil.terminating(pod)


def budgets_of(pod: Object, budgets: list[Object]) -> list[Object]:
    """The budgets whose selector selects `pod` (an empty selector selects nothing)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    found = []
    for budget in budgets:
        selector = (budget.get("spec") or {}).get("selector")
        if not selector:
            continue
        if selector_from_label_selector(selector).matches(labels):
            found.append(budget)
    return found


def _too_many_requests(cause: str) -> errors.StatusError:
    return errors.StatusError(
        429,
        "TooManyRequests",
        VIOLATION,
        details={"causes": [{"reason": "DisruptionBudget", "message": cause}]},
    )


def take_disruption(pod_name: str, now: str) -> Callable[[Object], Object | None]:
    """The change of a budget that lets `pod_name` go, or raises 429 (module docstring)."""

    def change(budget: Object) -> Object | None:
        name = budget["metadata"]["name"]
        status = budget.setdefault("status", {})
        generation = int(budget["metadata"].get("generation") or 0)
        if int(status.get("observedGeneration") or 0) < generation:
            raise _too_many_requests(
                f"The disruption budget {name} is still being processed by the server."
            )
        allowed = int(status.get("disruptionsAllowed") or 0)
        if allowed <= 0:
            raise _too_many_requests(
                f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy "
                f"pods and has {status.get('currentHealthy', 0)} currently"
            )
        status["disruptionsAllowed"] = allowed - 1
        status.setdefault("disruptedPods", {})[pod_name] = now
        return budget

    return change


def admit_eviction(
    pod: Object, budgets: list[Object], charge: ChargeBudget, *, dry_run: bool = False
) -> None:
    """Raise unless `pod` may be evicted now, taking a disruption from its budget (a dry
    run decides on the cached budget and writes nothing)."""
    if may_ignore_budgets(pod):
        return
    mine = budgets_of(pod, budgets)
    if not mine:
        return
    if len(mine) > 1:
        raise errors.StatusError(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.",
        )
    budget = mine[0]
    spec, status = budget.get("spec") or {}, budget.get("status") or {}
    if not podutil.pod_ready(pod):
        policy = spec.get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        healthy_enough = int(status.get("currentHealthy") or 0) >= int(
            status.get("desiredHealthy") or 0
        )
        if policy == "AlwaysAllow" or healthy_enough:
            return
    now = rfc3339(datetime.datetime.now(datetime.UTC))
    meta = pod["metadata"]
    take = take_disruption(meta["name"], now)
    if dry_run:
        take(copy.deepcopy(budget))
        return
    charge(str(meta["namespace"]), str(budget["metadata"]["name"]), take)
