"""A profile's framework: its plugins instantiated and ordered per extension point, and
the code that runs an extension point's plugins, times it (the metric
`scheduler_framework_extension_point_duration_seconds`) and combines their answers.

The algorithm of one scheduling cycle (`find_nodes`) is kube-scheduler's:

1. pre-filter: each plugin computes its per-pod state; a rejection here rejects every
   node (with that plugin's reasons).
2. filter: nodes are tried round robin from where the last cycle stopped, until
   `num_feasible_nodes_to_find` nodes fit or every node was tried; each node's first
   failing filter is its status (its reasons go into FailedScheduling's summary).
   Pods nominated to a node (by preemption) with a priority at least the pod's are
   counted on that node, so that a lower pod does not take the room preemption made.
3. pre-score and score: each score plugin rates each feasible node 0..100, normalizes,
   and the weighted sum ranks them; ties go to a random one of the best (reservoir
   sampling, as kube-scheduler does), so equal nodes share the load.

Tracing (docs/architecture.md, "Tracing"): with a tracer, pre-filter and filter are the
span `Scheduler.filter` and scoring `Scheduler.score`, children of the scheduling
cycle's. Filters run node by node, each node's plugins in order up to the first that
rejects it, so one span per plugin per node would be thousands per pod at 500 nodes and
no truer a picture; the filter span carries the verdicts as attributes instead (the
collector and `labctl trace` keep attributes, not span events):
`kubelab.scheduler.filter.<Plugin>.rejected`, one "node: reasons" per node that plugin
rejected (the control-plane taint: "cp-1: node(s) had untolerated taint {...}"), and
the counts of nodes evaluated and feasible. Every other evaluated node passed every
filter (it is among the scored nodes, or the chosen one); a rejected node passed the
plugins before the one that rejected it and was not shown to those after.
`Scheduler.score` has each plugin's weighted score and the total for the best
`TRACED_SCORES` nodes (`kubelab.scheduler.score.nodes`, `...score.<Plugin>`,
`...score.total`, arrays in that order): writing all of them, 230 nodes of a
500-node cluster, cost more than the 5 % the scheduler may lose to tracing.
"""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from .config import REGISTRY, ProfileConfig, num_feasible_nodes_to_find
from .framework import (
    SUCCESS,
    BindPlugin,
    Code,
    CycleState,
    FilterPlugin,
    Handle,
    NodeInfo,
    PermitPlugin,
    Plugin,
    PodInfo,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueuedPod,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    Snapshot,
    Status,
)
from .metrics import Metrics

FILTER_ATTRIBUTE = "kubelab.scheduler.filter"
SCORE_ATTRIBUTE = "kubelab.scheduler.score"
EVALUATED_ATTRIBUTE = "kubelab.scheduler.nodes.evaluated"
FEASIBLE_ATTRIBUTE = "kubelab.scheduler.nodes.feasible"
PLUGIN_ATTRIBUTE = "kubelab.scheduler.plugin"
TRACED_SCORES = 20
"""The best-scored nodes whose scores a `Scheduler.score` span carries (module
docstring)."""

NO_NODES = "no nodes available to schedule pods"


def _first_failure(
    filters: list[FilterPlugin], state: CycleState, pod: PodInfo, node: NodeInfo
) -> Status:
    for plugin in filters:
        status = plugin.filter(state, pod, node)
        if status is not SUCCESS and not status.ok:
            return status.by(plugin.name)
    return SUCCESS


class FitError(Exception):
    """No node fits the pod: the statuses of the nodes tried, by node name."""

    def __init__(self, pod: PodInfo, total: int, statuses: dict[str, Status]) -> None:
        super().__init__(summary(total, statuses))
        self.pod = pod
        self.total = total
        self.statuses = statuses

    @property
    def rejected_by(self) -> frozenset[str]:
        return frozenset(s.plugin for s in self.statuses.values() if s.plugin)


def summary(total: int, statuses: Mapping[str, Status]) -> str:
    """Kubernetes' "0/5 nodes are available: 2 Insufficient memory, 3 node(s) had
    untolerated taint {...}." (each reason counted over the nodes, sorted)."""
    if total == 0:
        return NO_NODES
    counts: dict[str, int] = {}
    for status in statuses.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


def verdict_attributes(statuses: Mapping[str, Status]) -> dict[str, list[str]]:
    """The rejections of a filter span (module docstring): per plugin, "node: reasons"."""
    rejected: dict[str, list[str]] = {}
    for node, status in statuses.items():
        key = f"{FILTER_ATTRIBUTE}.{status.plugin or 'unknown'}.rejected"
        rejected.setdefault(key, []).append(f"{node}: {status.message()}")
    return rejected


def score_attributes(
    scores: Mapping[str, Mapping[str, int]], totals: Mapping[str, int]
) -> dict[str, list[str] | list[int]]:
    """The scores of a score span (module docstring): the best `TRACED_SCORES` nodes,
    and each plugin's weighted score and the total of each, in that order."""
    best = heapq.nlargest(TRACED_SCORES, totals, key=totals.__getitem__)
    attributes: dict[str, list[str] | list[int]] = {f"{SCORE_ATTRIBUTE}.nodes": best}
    for plugin, by_node in scores.items():
        attributes[f"{SCORE_ATTRIBUTE}.{plugin}"] = [by_node[n] for n in best]
    attributes[f"{SCORE_ATTRIBUTE}.total"] = [totals[n] for n in best]
    return attributes


@dataclass
class ScheduleResult:
    node: str
    evaluated: int
    feasible: int


class Framework:
    """One profile's plugins, ready to run (module docstring)."""

    def __init__(
        self,
        profile: ProfileConfig,
        handle: Handle,
        metrics: Metrics,
        percentage_of_nodes_to_score: int = 0,
        rng: random.Random | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.profile = profile.scheduler_name
        self.tracer = tracer or trace.NoOpTracer()
        self.handle = handle
        self.metrics = metrics
        self.percentage = (
            profile.percentage_of_nodes_to_score
            if profile.percentage_of_nodes_to_score is not None
            else percentage_of_nodes_to_score
        )
        self.rng = rng or random.Random()
        instances: dict[str, Plugin] = {}
        for names in profile.points.values():
            for name in names:
                if name not in instances:
                    instances[name] = REGISTRY[name](profile.args.get(name, {}), handle)
        self.plugins = instances

        def at(point: str) -> list[Any]:
            return [instances[n] for n in profile.points[point]]

        self.queue_sort: QueueSortPlugin = at("queueSort")[0]
        self.pre_filter: list[PreFilterPlugin] = at("preFilter")
        self.filters: list[FilterPlugin] = at("filter")
        self.post_filters: list[PostFilterPlugin] = at("postFilter")
        self.pre_score: list[PreScorePlugin] = at("preScore")
        self.scores: list[ScorePlugin] = at("score")
        self.weights = dict(profile.weights)
        self.reserve: list[ReservePlugin] = at("reserve")
        self.permit: list[PermitPlugin] = at("permit")
        self.pre_bind: list[PreBindPlugin] = at("preBind")
        self.bind: list[BindPlugin] = at("bind")
        self.next_start = 0

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        return self.queue_sort.less(a, b)

    @contextmanager
    def _timed(self, point: str) -> Iterator[list[str]]:
        """Time an extension point; the caller puts its outcome in the yielded list."""
        outcome = ["Success"]
        started = time.perf_counter()
        try:
            yield outcome
        finally:
            self.metrics.extension_point_duration.labels(point, outcome[0], self.profile).observe(
                time.perf_counter() - started
            )

    # -- the scheduling cycle ------------------------------------------------------------

    def run_pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status:
        """Every pre-filter plugin; the first rejection, or success."""
        with self._timed("PreFilter") as outcome:
            for plugin in self.pre_filter:
                status = plugin.pre_filter(state, pod, snapshot)
                if status.code == Code.SKIP:
                    continue
                if not status.ok:
                    outcome[0] = "Unschedulable" if status.rejected else "Error"
                    return status.by(plugin.name)
        return SUCCESS

    def run_filters(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """The first failing filter's status, or success."""
        return _first_failure(self._active_filters(state), state, pod, node)

    def _active_filters(self, state: CycleState) -> list[FilterPlugin]:
        return [p for p in self.filters if p.name not in state.skip_filter]

    def _filter_with_nominated(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, nominated: list[PodInfo]
    ) -> Status:
        others = [n for n in nominated if n.uid != pod.uid and n.priority >= pod.priority]
        if others:
            trial = node.clone()
            for other in others:
                trial.add_pod(other)
            status = self.run_filters(state, pod, trial)
            if not status.ok:
                return status
        return self.run_filters(state, pod, node)

    def find_nodes(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        nominated: Mapping[str, list[PodInfo]],
    ) -> ScheduleResult:
        """Pre-filter, filter, score: the node to bind to, or FitError."""
        nodes = snapshot.node_infos()
        if not nodes:
            raise FitError(pod, 0, {})
        with self.tracer.start_as_current_span("Scheduler.filter") as span:
            feasible, statuses, tried = self._filter(state, pod, snapshot, nodes, nominated)
            if span.is_recording():
                span.set_attributes(verdict_attributes(statuses))
                span.set_attributes({EVALUATED_ATTRIBUTE: tried, FEASIBLE_ATTRIBUTE: len(feasible)})
        if not feasible:
            raise FitError(pod, len(nodes), statuses)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, tried, 1)
        totals = self.score_nodes(state, pod, feasible)
        return ScheduleResult(self._select(totals), tried, len(feasible))

    def _filter(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        nodes: list[NodeInfo],
        nominated: Mapping[str, list[PodInfo]],
    ) -> tuple[list[NodeInfo], dict[str, Status], int]:
        """Pre-filter and filter: (the feasible nodes, the statuses of those rejected,
        how many nodes were evaluated)."""
        status = self.run_pre_filter(state, pod, snapshot)
        if status.code == Code.ERROR:
            raise RuntimeError(status.message())
        if not status.ok:
            return [], {n.name: status for n in nodes}, len(nodes)
        wanted = num_feasible_nodes_to_find(len(nodes), self.percentage)
        feasible: list[NodeInfo] = []
        statuses: dict[str, Status] = {}
        filters = self._active_filters(state)
        with self._timed("Filter"):
            start = self.next_start % len(nodes)
            tried = 0
            for i in range(len(nodes)):
                node = nodes[(start + i) % len(nodes)]
                tried += 1
                node_nominated = nominated.get(node.name)
                if node_nominated:
                    status = self._filter_with_nominated(state, pod, node, node_nominated)
                else:
                    status = _first_failure(filters, state, pod, node)
                if status is SUCCESS or status.ok:
                    feasible.append(node)
                    if len(feasible) >= wanted:
                        break
                elif status.code == Code.ERROR:
                    raise RuntimeError(status.message())
                else:
                    statuses[node.name] = status
            self.next_start = start + tried
        return feasible, statuses, tried

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> dict[str, int]:
        """The weighted sum of every score plugin's normalized score, per node."""
        with self._timed("PreScore"):
            for plugin in self.pre_score:
                plugin.pre_score(state, pod, nodes)
        totals = {n.name: 0 for n in nodes}
        with self.tracer.start_as_current_span("Scheduler.score") as span, self._timed("Score"):
            weighted: dict[str, dict[str, int]] = {}
            for scorer in self.scores:
                if scorer.name in state.skip_score:
                    continue
                scores = {n.name: scorer.score(state, pod, n) for n in nodes}
                scorer.normalize_score(state, pod, scores)
                weight = self.weights.get(scorer.name, 1)
                for name, value in scores.items():
                    scores[name] = value * weight
                    totals[name] += value * weight
                weighted[scorer.name] = scores
            if span.is_recording():
                span.set_attributes(score_attributes(weighted, totals))
        return totals

    def _select(self, totals: dict[str, int]) -> str:
        best, chosen, ties = -1, "", 0
        for name, total in totals.items():
            if total > best:
                best, chosen, ties = total, name, 1
            elif total == best:
                ties += 1
                if self.rng.randrange(ties) == 0:
                    chosen = name
        return chosen

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, error: FitError
    ) -> tuple[str, Status]:
        """Preemption: the nominated node ("" if none) and the plugins' outcome."""
        last = Status(Code.UNSCHEDULABLE)
        with self._timed("PostFilter") as outcome:
            for plugin in self.post_filters:
                node, status = plugin.post_filter(state, pod, error.statuses)
                if status.ok:
                    return node, status
                last = status.by(plugin.name)
            outcome[0] = "Unschedulable"
        return "", last

    # -- reserve, permit, bind -----------------------------------------------------------

    def run_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        with self._timed("Reserve") as outcome:
            for plugin in self.reserve:
                status = plugin.reserve(state, pod, node)
                if not status.ok:
                    outcome[0] = "Error"
                    return status.by(plugin.name)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for plugin in reversed(self.reserve):
            plugin.unreserve(state, pod, node)

    def run_permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        with self._timed("Permit") as outcome:
            for plugin in self.permit:
                status = plugin.permit(state, pod, node)
                if not status.ok:
                    outcome[0] = "Unschedulable" if status.rejected else "Error"
                    return status.by(plugin.name)
        return SUCCESS

    def run_pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Every pre-bind plugin with something to write, in order, up to the first that
        fails; each is a span `Scheduler.preBind` (its writes, and its wait for what
        they set off, such as a claim's volume, are in it)."""
        with self._timed("PreBind") as outcome:
            for plugin in self.pre_bind:
                if plugin.name in state.skip_pre_bind:
                    continue
                with self.tracer.start_as_current_span("Scheduler.preBind") as span:
                    span.set_attribute(PLUGIN_ATTRIBUTE, plugin.name)
                    status = plugin.pre_bind(state, pod, node)
                    if not status.ok and status.code != Code.SKIP:
                        span.set_status(trace.Status(trace.StatusCode.ERROR, status.message()))
                        outcome[0] = "Unschedulable" if status.rejected else "Error"
                        return status.by(plugin.name)
        return SUCCESS

    def run_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """The first bind plugin that does not SKIP binds."""
        with self._timed("Bind") as outcome:
            for plugin in self.bind:
                status = plugin.bind(state, pod, node)
                if status.code == Code.SKIP:
                    continue
                if not status.ok:
                    outcome[0] = "Error"
                return status.by(plugin.name)
        return Status(Code.ERROR, ("no bind plugin bound the pod",))
