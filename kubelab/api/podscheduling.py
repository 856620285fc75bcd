"""What a pod asks of a node, as pure functions: its resource requests, whether it
tolerates a node's taints, whether a node matches its nodeSelector and required node
affinity. The scheduler filters nodes with them; the DaemonSet controller (which node
should run a copy) and the node lifecycle controller (which pods a NoExecute taint
evicts) ask the same questions, so the answers live here, in the shared library.

The rules are Kubernetes' (`k8s.io/component-helpers/scheduling/corev1` and
`k8s.io/kubernetes/pkg/api/v1/resource`):

* A pod's effective request for a resource is the larger of the sum over its app
  containers (sidecars, init containers with `restartPolicy: Always`, count as app
  containers) and the largest single init container, plus the pod's `overhead`.
* A toleration with an empty key and `Exists` tolerates every taint; an empty effect
  matches every effect; `Equal` (the default) compares values.
* nodeSelector terms are ORed, the expressions within one term ANDed; an empty term
  list matches nothing, a term without expressions matches nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubelab.api.quantity import parse_quantity
from kubelab.api.selectors import Operator, Requirement

Obj = Mapping[str, Any]

CPU, MEMORY, PODS, EPHEMERAL_STORAGE = "cpu", "memory", "pods", "ephemeral-storage"

NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"


@dataclass
class Resources:
    """Amounts of resources: CPU in millicores, everything else in its base unit (bytes,
    counts). `scalars` holds extended resources (`example.com/gpu`, hugepages)."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pods: int = 0
    scalars: dict[str, int] = field(default_factory=dict)

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.pods
        return self.scalars.get(name, 0)

    def names(self) -> Iterable[str]:
        """The resources this asks for (nonzero)."""
        for name in (CPU, MEMORY, EPHEMERAL_STORAGE):
            if self.get(name):
                yield name
        yield from (name for name, value in self.scalars.items() if value)

    def add(self, other: Resources, sign: int = 1) -> None:
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral_storage += sign * other.ephemeral_storage
        self.pods += sign * other.pods
        for name, value in other.scalars.items():
            self.scalars[name] = self.scalars.get(name, 0) + sign * value

    def copy(self) -> Resources:
        return Resources(
            self.milli_cpu, self.memory, self.ephemeral_storage, self.pods, dict(self.scalars)
        )


def _amount(name: str, quantity: object) -> int:
    value = parse_quantity(quantity).value  # type: ignore[arg-type]
    if name == CPU:
        value *= 1000
    whole = value.numerator // value.denominator
    return whole if whole == value else whole + 1  # rounded up, as Quantity.Value() does


def resource_list(spec: Obj | None) -> Resources:
    """A ResourceList (`{"cpu": "500m", "memory": "1Gi"}`) as `Resources`."""
    out = Resources()
    for name, quantity in (spec or {}).items():
        amount = _amount(name, quantity)
        if name == CPU:
            out.milli_cpu = amount
        elif name == MEMORY:
            out.memory = amount
        elif name == EPHEMERAL_STORAGE:
            out.ephemeral_storage = amount
        elif name == PODS:
            out.pods = amount
        else:
            out.scalars[name] = amount
    return out


def _maximum(a: Resources, b: Resources) -> Resources:
    scalars = {n: max(a.scalars.get(n, 0), b.scalars.get(n, 0)) for n in {*a.scalars, *b.scalars}}
    return Resources(
        max(a.milli_cpu, b.milli_cpu),
        max(a.memory, b.memory),
        max(a.ephemeral_storage, b.ephemeral_storage),
        0,
        scalars,
    )


def pod_requests(pod: Obj) -> Resources:
    """The pod's effective requests (module docstring); `pods` is 1."""
    spec = pod.get("spec") or {}
    total = Resources()
    sidecars = Resources()
    init_peak = Resources()
    for container in spec.get("initContainers") or []:
        requests = resource_list((container.get("resources") or {}).get("requests"))
        if container.get("restartPolicy") == "Always":
            sidecars.add(requests)
            init_peak = _maximum(init_peak, sidecars)
        else:
            step = sidecars.copy()
            step.add(requests)
            init_peak = _maximum(init_peak, step)
    for container in spec.get("containers") or []:
        total.add(resource_list((container.get("resources") or {}).get("requests")))
    total.add(sidecars)
    total = _maximum(total, init_peak)
    total.add(resource_list(spec.get("overhead")))
    total.pods = 1
    return total


# -- taints and tolerations ---------------------------------------------------------------


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Whether one toleration tolerates one taint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(
    taints: Iterable[Obj], tolerations: Iterable[Obj], effects: Iterable[str]
) -> Obj | None:
    """The first taint with one of `effects` that no toleration tolerates, or None."""
    wanted = set(effects)
    tolerations = list(tolerations)
    for taint in taints:
        if taint.get("effect") not in wanted:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def node_taints(node: Obj) -> list[Obj]:
    return list((node.get("spec") or {}).get("taints") or [])


def pod_tolerations(pod: Obj) -> list[Obj]:
    return list((pod.get("spec") or {}).get("tolerations") or [])


# -- node selectors and node affinity ----------------------------------------------------

_NODE_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
    "Gt": Operator.GREATER_THAN,
    "Lt": Operator.LESS_THAN,
}


def _requirement_holds(expression: Obj, values: Mapping[str, str]) -> bool:
    operator = _NODE_OPERATORS.get(expression.get("operator", ""))
    if operator is None:
        return False
    wanted = tuple(sorted(set(expression.get("values") or [])))
    return Requirement(str(expression.get("key", "")), operator, wanted).matches(values)


def node_selector_term_matches(term: Obj, node: Obj) -> bool:
    """One NodeSelectorTerm: its matchExpressions against the node's labels and its
    matchFields against `metadata.name`, all of them; a term with neither matches
    nothing."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    by_field = {"metadata.name": str(meta.get("name", ""))}
    return all(_requirement_holds(e, labels) for e in expressions) and all(
        _requirement_holds(f, by_field) for f in fields
    )


def node_selector_matches(selector: Obj, node: Obj) -> bool:
    """A NodeSelector: any of its terms."""
    return any(node_selector_term_matches(t, node) for t in selector.get("nodeSelectorTerms") or [])


def required_node_affinity_matches(pod: Obj, node: Obj) -> bool:
    """Whether `node` satisfies the pod's `nodeSelector` and its
    requiredDuringSchedulingIgnoredDuringExecution node affinity."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        if spec.get("affinity")
        else None
    )
    return required is None or node_selector_matches(required, node)
