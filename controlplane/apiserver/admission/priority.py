"""Priority: the admission plugin, and the built-in PriorityClasses.

The scheduler orders and preempts pods by the integer ``spec.priority``, which users do
not write: they name a class (``priorityClassName``) and admission resolves it, so that
the number always comes from a PriorityClass an administrator controls. A pod without a
class gets the class marked ``globalDefault`` (or priority 0 when there is none); a pod
naming a class that does not exist is refused, as is a pod whose own ``priority`` or
``preemptionPolicy`` disagrees with its class. On update, the values set at creation are
kept when a client's full replacement leaves them out.

For PriorityClasses themselves: only one may be the global default, and the two system
classes the apiserver creates at start (`SYSTEM_CLASSES`; nodes' critical daemons and
cluster add-ons use them) cannot be deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubelab.api import errors
from kubelab.api.validation.classes import SYSTEM_PRIORITY_CLASSES

from ..registry import Attributes
from .interfaces import PODS, WRITES, MutationInterface, ValidationInterface

Object = dict[str, Any]
ListClasses = Callable[[], list[Object]]

PRIORITY_CLASSES = "priorityclasses.scheduling.k8s.io"

PREEMPT_LOWER = "PreemptLowerPriority"
NO_DEFAULT_PRIORITY = 0

_DESCRIPTIONS = {
    "system-cluster-critical": (
        "Used for system critical pods that must run in the cluster, but can be moved to "
        "another node if necessary."
    ),
    "system-node-critical": (
        "Used for system critical pods that must not be moved from their current node."
    ),
}


def system_classes() -> list[Object]:
    """The built-in PriorityClasses, as the apiserver creates them at start."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "description": _DESCRIPTIONS[name],
            "preemptionPolicy": PREEMPT_LOWER,
        }
        for name, value in SYSTEM_PRIORITY_CLASSES.items()
    ]


def _forbidden(attrs: Attributes, why: str) -> errors.StatusError:
    r = attrs.resource
    return errors.StatusError(
        403,
        "Forbidden",
        f'{r.group_resource} "{attrs.name}" is forbidden: {why}',
        details={"name": attrs.name, "group": r.group, "kind": r.plural},
    )


def admit_pod(attrs: Attributes, classes: ListClasses) -> None:
    """Fill a new pod's ``spec.priority`` and ``preemptionPolicy`` from its class."""
    pod = attrs.object
    if pod is None or attrs.subresource:
        return
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    if attrs.operation == "UPDATE":
        old_spec = (attrs.old or {}).get("spec") or {}
        for key in ("priority", "preemptionPolicy"):
            if spec.get(key) is None and old_spec.get(key) is not None:
                spec[key] = old_spec[key]
        return
    if attrs.operation != "CREATE":
        return
    name = spec.get("priorityClassName") or ""
    if name:
        found = next((c for c in classes() if c["metadata"]["name"] == name), None)
        if found is None:
            raise _forbidden(attrs, f"no PriorityClass with name {name} was found")
        priority, policy = found.get("value", 0), found.get("preemptionPolicy", PREEMPT_LOWER)
    else:
        default = _global_default(classes())
        if default is None:
            priority, policy = NO_DEFAULT_PRIORITY, PREEMPT_LOWER
        else:
            spec["priorityClassName"] = default["metadata"]["name"]
            priority = default.get("value", 0)
            policy = default.get("preemptionPolicy", PREEMPT_LOWER)
    given = spec.get("priority")
    if given is not None and given != priority:
        raise _forbidden(
            attrs,
            f"the integer value of priority ({given}) must not be provided in pod spec; "
            f"priority admission controller computed {priority} from the given "
            "PriorityClass name",
        )
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise _forbidden(
            attrs,
            f"the string value of PreemptionPolicy ({given_policy}) must not be provided in "
            f"pod spec; priority admission controller computed {policy} from the given "
            "PriorityClass name",
        )
    spec["priority"], spec["preemptionPolicy"] = priority, policy


def _global_default(classes: list[Object]) -> Object | None:
    """The default class; if several claim it (written before this check existed, or
    racing), the lowest value wins, as in Kubernetes."""
    defaults = [c for c in classes if c.get("globalDefault") is True]
    return min(defaults, key=lambda c: c.get("value", 0), default=None)


def validate_priority_class(attrs: Attributes, classes: ListClasses) -> None:
    """One global default at a time; the system classes stay."""
    if attrs.operation == "DELETE":
        if attrs.name in SYSTEM_PRIORITY_CLASSES:
            raise _forbidden(attrs, "this is a system priority class and cannot be deleted")
        return
    obj = attrs.object
    if obj is None or attrs.operation not in ("CREATE", "UPDATE"):
        return
    if obj.get("globalDefault") is not True:
        return
    for other in classes():
        name = other["metadata"]["name"]
        if name != attrs.name and other.get("globalDefault") is True:
            raise _forbidden(
                attrs,
                f"PriorityClass {name} is already marked as default. Only one default can exist",
            )


class Priority(MutationInterface, ValidationInterface):
    NAME = "Priority"
    OPERATIONS = WRITES

    def _classes(self) -> list[Object]:
        return self.lookup.list_objects(PRIORITY_CLASSES, "")

    def admit(self, attrs: Attributes) -> None:
        if attrs.resource.group_resource == PODS:
            admit_pod(attrs, self._classes)

    def validate(self, attrs: Attributes) -> None:
        if attrs.resource.group_resource == PRIORITY_CLASSES:
            validate_priority_class(attrs, self._classes)
