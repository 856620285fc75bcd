"""metrics.k8s.io from kept figures: the kubelets scraped on a period, as metrics-server does.

Asking every kubelet's ``/stats/summary`` when `kubectl top` asks costs the sum of the
kubelets' answers (seconds each on the Docker lab, where a summary asks Docker for every
container's stats) on every request, and the HPA controller would pay it every 15 s per
autoscaler. Instead a scraper thread asks all registered nodes at once, every `period`
seconds (metrics-server's default ``--metric-resolution`` is 15 s), each with its own
`timeout`, and keeps the last answer of each node; requests are answered from what is
kept, joined with the cached Node and Pod objects so that label and field selectors
(``kubectl top pods -l app=web``) select on the objects' own labels.

A node that does not answer keeps no figures (its NodeMetrics and its pods' PodMetrics
are left out, as metrics-server leaves them out), and a node removed from the cluster is
forgotten on the next pass.

The passes are untraced (the scraper's `KubeletClient` has tracing off, so the kubelets
get no `traceparent` and make no span either), as the apiserver leaves health checks and
Lease renewals untraced: they are the idle lab's background, three apiservers times the
nodes every 15 s, and no user's request waits on them. A request for metrics.k8s.io is
traced as every request is; a pass's outcome is a log line (a node without figures at
info, each pass at debug).
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubelab.api import errors, selectors
from kubelab.api.resources import Resource

from . import kubelet

log = logging.getLogger("kubelab.apiserver.metrics")

Object = dict[str, Any]

PERIOD = 15.0
"""Seconds between scrapes (metrics-server's --metric-resolution)."""
TIMEOUT = 10.0
"""Seconds one kubelet may take to answer before the pass goes on without it."""


@dataclass(frozen=True)
class Scraped:
    """One node's last answer: its /stats/summary and when it came."""

    summary: Object
    at: datetime.datetime


class MetricsCache:
    """The scraper and its kept figures (module docstring)."""

    def __init__(
        self,
        client: kubelet.KubeletClient,
        cached_list: Callable[[str, str], list[Object]],
        period: float = PERIOD,
    ) -> None:
        self.client = client
        self.cached_list = cached_list
        self.period = period
        self._kept: dict[str, Scraped] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._scraped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="metrics-scraper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=TIMEOUT)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.scrape()
            except Exception:  # the scraper must outlive any one bad pass
                log.exception("metrics: scrape pass failed")
            self._stop.wait(self.period)

    def scrape(self) -> None:
        """Ask every registered node's kubelet at once; keep each answer that comes."""
        nodes = self.cached_list("nodes", "")
        if not nodes:
            with self._lock:
                self._kept.clear()
            self._scraped.set()
            return
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=min(len(nodes), 16)) as pool:
            answers = list(zip(nodes, pool.map(self._ask, nodes), strict=True))
        names = {n["metadata"]["name"] for n in nodes}
        with self._lock:
            for node, summary in answers:
                if summary is not None:
                    self._kept[node["metadata"]["name"]] = Scraped(
                        summary, datetime.datetime.now(datetime.UTC)
                    )
            for gone in set(self._kept) - names:
                del self._kept[gone]
            kept = len(self._kept)
        self._scraped.set()
        log.debug(
            "metrics: scraped %d of %d nodes in %.2fs",
            kept,
            len(nodes),
            time.monotonic() - started,
        )

    def _ask(self, node: Object) -> Object | None:
        name = node["metadata"]["name"]
        try:
            return self.client.get_json(node, "/stats/summary")
        except errors.StatusError as exc:
            log.info("metrics: node %s kept no figures this pass: %s", name, exc.message)
            with self._lock:
                self._kept.pop(name, None)
            return None

    def get(
        self, r: Resource, namespace: str, name: str, label_selector: str, field_selector: str
    ) -> Object:
        """A NodeMetrics or PodMetrics, or their list, from the kept figures."""
        labels = selectors.parse_label_selector(label_selector)
        fields = selectors.parse_field_selector(field_selector, r)
        if not self._scraped.is_set():  # just started: the first pass is under way
            self._scraped.wait(TIMEOUT)
        with self._lock:
            kept = dict(self._kept)
        items = self._nodes(kept) if r.plural == "nodes" else self._pods(kept, namespace)
        if name:
            for item in items:
                if item["metadata"]["name"] == name:
                    return item
            raise errors.not_found(r.plural, name, r.group)
        items = [i for i in items if labels.matches(i["metadata"]["labels"]) and fields.matches(i)]
        return {"kind": r.list_kind, "apiVersion": r.api_version, "metadata": {}, "items": items}

    def _nodes(self, kept: dict[str, Scraped]) -> list[Object]:
        return [
            kubelet.node_metrics(node, kept[node["metadata"]["name"]].summary)
            for node in self.cached_list("nodes", "")
            if node["metadata"]["name"] in kept
        ]

    def _pods(self, kept: dict[str, Scraped], namespace: str) -> list[Object]:
        pods = {
            (p["metadata"].get("namespace", ""), p["metadata"]["name"]): p
            for p in self.cached_list("pods", namespace)
        }
        out = []
        for scraped in kept.values():
            for item in kubelet.pod_metrics(scraped.summary, namespace):
                pod = pods.get((item["metadata"]["namespace"], item["metadata"]["name"]))
                if pod is None:  # deleted since the scrape
                    continue
                item["metadata"]["labels"] = pod["metadata"].get("labels") or {}
                # When the figures were taken: the HPA sets aside a starting pod's
                # figures taken before its last readiness change.
                item["timestamp"] = scraped.at.strftime("%Y-%m-%dT%H:%M:%SZ")
                out.append(item)
        return out
