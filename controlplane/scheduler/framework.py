"""The scheduling framework: the values plugins exchange and the extension points they
implement, as kube-scheduler's `framework` package defines them.

The seeds' scheduling flow ("Filtering removes unsuitable nodes ... Scoring ranks
remaining nodes ... binds pod to Node 3") is a pipeline of extension points; a plugin is
a small object implementing some of them:

    queue-sort  less(a, b)                        which pending pod goes first
    pre-filter  pre_filter(state, pod, snapshot)  compute once per pod, write CycleState
    filter      filter(state, pod, node)          can the pod run on this node?
    post-filter post_filter(state, pod, statuses) no node fits: preempt to make room
    pre-score   pre_score(state, pod, nodes)      compute once for the feasible nodes
    score       score(state, pod, node) 0..100    rank one node; normalize_score after
    reserve     reserve / unreserve               claim (release) per-node state
    permit      permit(state, pod, node)          last veto before binding
    pre-bind    pre_bind(state, pod, node)        what must be written before the pod
                                                  is bound (its volumes), in the
                                                  binding cycle
    bind        bind(state, pod, node)            write the decision to the apiserver

Plugins never raise: they return a `Status`. `UNSCHEDULABLE` means the pod does not fit
this node now but might once the cluster changes (preemption may help);
`UNSCHEDULABLE_AND_UNRESOLVABLE` means removing pods cannot help (a node selector, a
taint). A `SKIP` from pre-filter (or pre-score) says the plugin has nothing to check for
this pod, so its filter (score) is not run. Scores are integers in 0..100
(`MAX_NODE_SCORE`); a plugin's `normalize_score` maps its raw scores onto that range.

`CycleState` is the scratch space of one scheduling cycle: pre-filter writes what
filter and score read, so that per-pod work (parsing affinity terms, counting matching
pods per topology domain) is done once and not once per node.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kubelab.api.podscheduling import Resources, pod_requests, resource_list
from kubelab.api.resources import Resource
from kubelab.client import SharedInformer

Pod = Mapping[str, Any]
Node = Mapping[str, Any]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


@dataclass(frozen=True)
class Status:
    """A plugin's answer: a code, the reasons a user reads (in FailedScheduling's
    summary), and which plugin gave it (set by the framework)."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def by(self, plugin: str) -> Status:
        return self if self.plugin else Status(self.code, self.reasons, plugin)


SUCCESS = Status()
SKIP = Status(Code.SKIP)


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


def error(message: str) -> Status:
    return Status(Code.ERROR, (message,))


class CycleState:
    """Per-pod, per-cycle scratch data, keyed by the writing plugin's name."""

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        self.skip_pre_bind: set[str] = set()
        """Pre-bind plugins with nothing to write for this pod (no span, no call)."""

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        return self._data.get(key)


def pod_key(pod: Pod) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_uid(pod: Pod) -> str:
    return str((pod.get("metadata") or {}).get("uid", ""))


def pod_priority(pod: Pod) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def pod_labels(pod: Pod) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
"""What scoring counts for a container that requests nothing (kube-scheduler's
`schedutil.DefaultMilliCPURequest` / `DefaultMemoryRequest`), so that best-effort pods
still spread."""


@dataclass
class PodInfo:
    """A pod with what the scheduler computes from it once (its requests, and the
    names of the resources it asks for)."""

    pod: Pod
    requests: Resources
    requested_names: tuple[str, ...] = ()
    non_zero: tuple[int, int] = (0, 0)
    """CPU (millicores) and memory as scoring counts them: nothing requested counts as
    the defaults above."""
    label_key: tuple[str, frozenset[tuple[str, str]]] = ("", frozenset())
    """(namespace, labels): what a pod selector looks at. Pods of one workload share it,
    so a selector's verdict can be remembered per key within a cycle."""
    terminating: bool = False
    parsed: dict[str, Any] = field(default_factory=dict)
    """What plugins parse from the pod once and keep (affinity terms), by plugin name."""

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        requests = pod_requests(pod)
        non_zero = (
            requests.milli_cpu or DEFAULT_MILLI_CPU_REQUEST,
            requests.memory or DEFAULT_MEMORY_REQUEST,
        )
        meta = pod.get("metadata") or {}
        label_key = (
            str(meta.get("namespace") or ""),
            frozenset((meta.get("labels") or {}).items()),
        )
        return cls(
            pod,
            requests,
            tuple(requests.names()),
            non_zero,
            label_key,
            bool(meta.get("deletionTimestamp")),
        )

    @property
    def key(self) -> str:
        return pod_key(self.pod)

    @property
    def uid(self) -> str:
        return pod_uid(self.pod)

    @property
    def priority(self) -> int:
        return pod_priority(self.pod)

    @property
    def has_affinity(self) -> bool:
        affinity = (self.pod.get("spec") or {}).get("affinity") or {}
        return bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity"))


@dataclass
class NodeInfo:
    """A node and the pods on it (bound, or assumed by this scheduler), with their
    summed requests, host ports and images: what filters and scores look at."""

    node: Node
    pods: dict[str, PodInfo] = field(default_factory=dict)
    """By pod uid."""
    requested: Resources = field(default_factory=Resources)
    non_zero_cpu: int = 0
    non_zero_memory: int = 0
    used_ports: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """(hostIP, protocol, hostPort) -> how many pods use it."""
    allocatable: Resources = field(default_factory=Resources)
    images: dict[str, int] = field(default_factory=dict)
    """Image name -> size in bytes, from `status.images`."""
    name: str = field(init=False)
    labels: Mapping[str, str] = field(init=False)
    taints: list[Mapping[str, Any]] = field(init=False)
    """The node's name, labels and taints, read once: filters ask on every node."""

    def __post_init__(self) -> None:
        meta = self.node.get("metadata") or {}
        self.name = str(meta.get("name", ""))
        self.labels = meta.get("labels") or {}
        self.taints = list((self.node.get("spec") or {}).get("taints") or [])

    def set_node(self, node: Node) -> None:
        self.node = node
        self.__post_init__()
        status = node.get("status") or {}
        self.allocatable = resource_list(status.get("allocatable") or status.get("capacity"))
        self.images = {}
        for image in status.get("images") or []:
            for name in image.get("names") or []:
                self.images[name] = int(image.get("sizeBytes") or 0)

    def add_pod(self, info: PodInfo) -> None:
        self._account(info, 1)
        self.pods[info.uid] = info

    def remove_pod(self, uid: str) -> PodInfo | None:
        info = self.pods.pop(uid, None)
        if info is not None:
            self._account(info, -1)
        return info

    def _account(self, info: PodInfo, sign: int) -> None:
        self.requested.add(info.requests, sign)
        cpu, memory = info.non_zero
        self.non_zero_cpu += sign * cpu
        self.non_zero_memory += sign * memory
        for port in host_ports(info.pod):
            count = self.used_ports.get(port, 0) + sign
            if count:
                self.used_ports[port] = count
            else:
                self.used_ports.pop(port, None)

    def clone(self) -> NodeInfo:
        """A copy whose pods can be changed (preemption's what-if) without touching
        this one; the node, allocatable and images are shared (never changed in place)."""
        twin = copy.copy(self)
        twin.pods = dict(self.pods)
        twin.requested = self.requested.copy()
        twin.used_ports = dict(self.used_ports)
        return twin


def host_ports(pod: Pod) -> Iterator[tuple[str, str, int]]:
    """The (hostIP, protocol, hostPort) the pod's containers claim; hostIP "" is any."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                ip = port.get("hostIP") or ""
                yield (
                    "" if ip == "0.0.0.0" else ip,
                    port.get("protocol") or "TCP",
                    port["hostPort"],
                )


class Snapshot(Protocol):
    """The cluster as this cycle sees it (the scheduler cache, read under its lock)."""

    def node_infos(self) -> list[NodeInfo]: ...

    def get(self, node_name: str) -> NodeInfo | None: ...

    def node_count(self) -> int: ...

    def nodes_with_image(self, image: str) -> int: ...

    def pods_with_affinity(self) -> list[tuple[NodeInfo, PodInfo]]:
        """The placed pods that have pod (anti-)affinity terms, with their nodes."""
        ...


# -- extension points ---------------------------------------------------------------------


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: QueuedPod, b: QueuedPod) -> bool: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[str, Status]:
        """Returns the node nominated for the pod (or "") and the outcome."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int: ...

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        """Rewrite `scores` (node name -> raw score) in place onto 0..100."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


EXTENSION_POINTS: dict[str, Any] = {
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
}
"""Extension points by their KubeSchedulerConfiguration name, and what a plugin must
implement to be enabled there."""


@dataclass
class QueuedPod:
    """A pending pod as the scheduling queue holds it."""

    info: PodInfo
    timestamp: float
    """When it was (re)added to the queue: ties of priority go to the older."""
    attempts: int = 0
    initial_attempt: float | None = None
    rejected_by: frozenset[str] = frozenset()
    """The plugins that found it unschedulable last time (the queueing hints' input)."""


def normalize_reverse(scores: dict[str, int], reverse: bool) -> None:
    """kube-scheduler's DefaultNormalizeScore: scale so the highest is 100 (all 0 stay
    0, or all 100 if reversed), then flip if `reverse` (a lower raw score is better)."""
    top = max(scores.values(), default=0)
    if top == 0:
        if reverse:
            for name in scores:
                scores[name] = MAX_NODE_SCORE
        return
    for name, value in scores.items():
        value = MAX_NODE_SCORE * value // top
        scores[name] = MAX_NODE_SCORE - value if reverse else value


class Handle(Protocol):
    """What the framework gives plugins that act beyond one node: the binder and
    preemption write to the apiserver; preemption re-runs the filters on a node
    without its victims."""

    @property
    def client(self) -> Any: ...

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def recorder(self) -> Any:
        """The `kubelab.client.record.EventRecorder` Events go through."""
        ...

    def run_filters(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status: ...

    def informer(self, resource: Resource) -> SharedInformer:
        """The scheduler's cache of `resource` (claims, volumes, classes), started and
        synced with its pods and nodes; a plugin asks for it when it is built."""
        ...
