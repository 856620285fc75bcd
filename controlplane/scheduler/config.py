"""The scheduler's configuration: a `KubeSchedulerConfiguration`
(`kubescheduler.config.k8s.io/v1`, the file `--config` names), the registry of plugins
by name, and the number of nodes to score.

Profiles. Each profile is a scheduler name (`spec.schedulerName` of the pods it
serves) with its own plugin set. A profile starts from the default plugins, enabled at
every extension point they implement (`multiPoint`), with kube-scheduler's default score
weights; the file then adjusts them, as kube-scheduler's v1 merge does:

* `multiPoint.disabled` removes default plugins (`*`: all of them), `multiPoint.enabled`
  adds plugins (or changes a default's weight) at every point they implement;
* `<point>.disabled` removes plugins at that point only (`*`: every multiPoint one),
  `<point>.enabled` adds plugins there (for `score`, with a `weight`);
* `pluginConfig` passes `args` to a plugin's factory (NodeResourcesFit's
  `scoringStrategy`, for one).

Unknown fields, plugins and extension points are refused with a message saying what
is accepted: a typo in a scheduler configuration should stop the scheduler, not quietly
schedule with defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .framework import EXTENSION_POINTS, Handle, Plugin
from .plugins import (
    balancedallocation,
    defaultbinder,
    defaultpreemption,
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    podtopologyspread,
    queuesort,
    tainttoleration,
    volumebinding,
)

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

Factory = Callable[[Mapping[str, Any], Handle], Plugin]

REGISTRY: dict[str, Factory] = {
    queuesort.NAME: queuesort.new,
    nodeunschedulable.NAME: nodeunschedulable.new,
    nodename.NAME: nodename.new,
    tainttoleration.NAME: tainttoleration.new,
    nodeaffinity.NAME: nodeaffinity.new,
    nodeports.NAME: nodeports.new,
    noderesources.NAME: noderesources.new,
    volumebinding.NAME: volumebinding.new,
    interpodaffinity.NAME: interpodaffinity.new,
    podtopologyspread.NAME: podtopologyspread.new,
    imagelocality.NAME: imagelocality.new,
    balancedallocation.NAME: balancedallocation.new,
    defaultpreemption.NAME: defaultpreemption.new,
    defaultbinder.NAME: defaultbinder.new,
}
"""Every plugin by name, in kube-scheduler's default order (filters run in it)."""

DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    (queuesort.NAME, 0),
    (nodeunschedulable.NAME, 0),
    (nodename.NAME, 0),
    (tainttoleration.NAME, 3),
    (nodeaffinity.NAME, 2),
    (nodeports.NAME, 0),
    (noderesources.NAME, 1),
    (volumebinding.NAME, 0),
    (interpodaffinity.NAME, 2),
    (podtopologyspread.NAME, 2),
    (imagelocality.NAME, 1),
    (balancedallocation.NAME, 1),
    (defaultpreemption.NAME, 0),
    (defaultbinder.NAME, 0),
)
"""kube-scheduler's default multiPoint plugins with their score weights."""

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50


class ConfigError(ValueError):
    """The configuration file is not a valid KubeSchedulerConfiguration."""


def num_feasible_nodes_to_find(all_nodes: int, percentage: int) -> int:
    """How many feasible nodes to look for before scoring, as kube-scheduler computes
    it: every node in clusters under 100 nodes; else `percentage` of them, or when that
    is 0 an adaptive share (50 % minus 1 % per 125 nodes, at least 5 %), never fewer
    than 100. Finding more would cost filter time for little better placement."""
    if all_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return all_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = BASE_PERCENTAGE_OF_NODES_TO_SCORE - all_nodes // 125
        adaptive = max(adaptive, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(all_nodes * adaptive // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass
class ProfileConfig:
    """One profile's resolved plugin set: plugin names per extension point (in order),
    score weights, and each plugin's args."""

    scheduler_name: str
    points: dict[str, list[str]]
    weights: dict[str, int]
    args: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None


@dataclass
class SchedulerConfig:
    profiles: list[ProfileConfig]
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    leader_election: dict[str, Any] = field(default_factory=dict)
    client_connection: dict[str, Any] = field(default_factory=dict)


_TOP_FIELDS = {
    "apiVersion",
    "kind",
    "profiles",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "leaderElection",
    "clientConnection",
    "parallelism",
}
_PROFILE_FIELDS = {"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"}


def _implements(name: str, point: str) -> bool:
    """Whether plugin `name` implements extension point `point` (by its class)."""
    plugin = _SAMPLES.get(name)
    return plugin is not None and isinstance(plugin, EXTENSION_POINTS[point])


class _NoHandle:
    """A stand-in handle, only to build one plugin of each kind and look at its type."""

    client: Any = None
    snapshot: Any = None
    recorder: Any = None

    def run_filters(self, *args: Any) -> Any:
        raise NotImplementedError

    def informer(self, resource: Any) -> Any:
        return None


_SAMPLES: dict[str, Plugin] = {name: factory({}, _NoHandle()) for name, factory in REGISTRY.items()}


def _names(entries: Any, where: str) -> list[tuple[str, int | None]]:
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: must be a list of {{name: ..., weight: ...}}")
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfigError(f"{where}: every entry needs a name, got {entry!r}")
        name = entry["name"]
        if name != "*" and name not in REGISTRY:
            raise ConfigError(f"{where}: unknown plugin {name!r}; known: {', '.join(REGISTRY)}")
        weight = entry.get("weight")
        out.append((name, int(weight) if weight is not None else None))
    return out


def resolve_profile(raw: Mapping[str, Any], where: str) -> ProfileConfig:
    unknown = set(raw) - _PROFILE_FIELDS
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {sorted(unknown)}")
    plugins = raw.get("plugins") or {}
    for point in plugins:
        if point != "multiPoint" and point not in EXTENSION_POINTS:
            raise ConfigError(
                f"{where}.plugins: unknown extension point {point!r}; known: multiPoint, "
                + ", ".join(EXTENSION_POINTS)
            )
    multi = dict(DEFAULT_PLUGINS)
    mp = plugins.get("multiPoint") or {}
    for name, _ in _names(mp.get("disabled"), f"{where}.plugins.multiPoint.disabled"):
        if name == "*":
            multi.clear()
        else:
            multi.pop(name, None)
    for name, weight in _names(mp.get("enabled"), f"{where}.plugins.multiPoint.enabled"):
        multi[name] = weight if weight is not None else multi.get(name, 1) or 1
    points: dict[str, list[str]] = {}
    weights: dict[str, int] = {}
    for point in EXTENSION_POINTS:
        spec = plugins.get(point) or {}
        disabled = {n for n, _ in _names(spec.get("disabled"), f"{where}.plugins.{point}")}
        names = (
            []
            if "*" in disabled
            else [n for n in multi if _implements(n, point) and n not in disabled]
        )
        for name, weight in _names(spec.get("enabled"), f"{where}.plugins.{point}.enabled"):
            if not _implements(name, point):
                raise ConfigError(f"{where}.plugins.{point}: {name} does not implement {point}")
            if name not in names:
                names.append(name)
            if point == "score" and weight is not None:
                weights[name] = weight
        points[point] = names
        if point == "score":
            for name in names:
                weights.setdefault(name, multi.get(name) or 1)
    if len(points["queueSort"]) != 1:
        raise ConfigError(f"{where}: exactly one queueSort plugin must be enabled")
    if not points["bind"]:
        raise ConfigError(f"{where}: at least one bind plugin must be enabled")
    args: dict[str, Mapping[str, Any]] = {}
    for entry in raw.get("pluginConfig") or []:
        plugin = entry.get("name") if isinstance(entry, dict) else None
        if plugin not in REGISTRY:
            raise ConfigError(f"{where}.pluginConfig: unknown plugin {plugin!r}")
        args[str(plugin)] = entry.get("args") or {}
    pct = raw.get("percentageOfNodesToScore")
    return ProfileConfig(
        str(raw.get("schedulerName") or DEFAULT_SCHEDULER_NAME),
        points,
        weights,
        args,
        int(pct) if pct is not None else None,
    )


def parse(doc: Mapping[str, Any]) -> SchedulerConfig:
    """A KubeSchedulerConfiguration document (already YAML-decoded)."""
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        raise ConfigError(
            f"expected apiVersion {API_VERSION} and kind {KIND}, got "
            f"{doc.get('apiVersion')!r} {doc.get('kind')!r}"
        )
    unknown = set(doc) - _TOP_FIELDS
    if unknown:
        raise ConfigError(f"unknown field(s) {sorted(unknown)}; known: {sorted(_TOP_FIELDS)}")
    raw_profiles = doc.get("profiles") or [{}]
    profiles = [resolve_profile(p, f"profiles[{i}]") for i, p in enumerate(raw_profiles)]
    names = [p.scheduler_name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(f"profiles: duplicate schedulerName in {names}")
    pct = int(doc.get("percentageOfNodesToScore") or 0)
    if not 0 <= pct <= 100:
        raise ConfigError(f"percentageOfNodesToScore: {pct} is not within 0..100")
    return SchedulerConfig(
        profiles,
        pct,
        float(doc.get("podInitialBackoffSeconds") or 1),
        float(doc.get("podMaxBackoffSeconds") or 10),
        dict(doc.get("leaderElection") or {}),
        dict(doc.get("clientConnection") or {}),
    )


def load(path: Path | None) -> SchedulerConfig:
    """The configuration in `path`, or the defaults (one default-scheduler profile)."""
    if path is None:
        return parse({"apiVersion": API_VERSION, "kind": KIND})
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a KubeSchedulerConfiguration object")
    try:
        return parse(doc)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
