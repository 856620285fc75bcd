"""The apiserver's Prometheus metrics, named as kube-apiserver's so that the usual
dashboards and queries read them: requests by verb, resource and code, their latency,
requests in flight and open watches."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from .requestinfo import RequestInfo

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["verb", "group", "version", "resource", "subresource", "scope"]
        self.requests = Counter(
            "apiserver_request",
            "Requests by verb, resource and code.",
            [*labels, "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "apiserver_request_duration_seconds",
            "Request latency by verb and resource (watches excluded).",
            labels,
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.inflight = Gauge(
            "apiserver_current_inflight_requests",
            "Requests being served now.",
            registry=self.registry,
        )
        self.gc_pause = Histogram(
            "kubelab_apiserver_gc_pause_seconds",
            "Python garbage collector pauses.",
            ["generation"],
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1),
            registry=self.registry,
        )
        self.watchers = Gauge(
            "apiserver_longrunning_requests", "Open watch streams.", registry=self.registry
        )

    def observe(self, info: RequestInfo, code: int, seconds: float) -> None:
        scope = (
            ("resource" if info.name else "namespace" if info.namespace else "cluster")
            if info.is_resource
            else ""
        )
        values = [
            info.verb.upper(),
            info.group,
            info.version,
            info.resource,
            info.subresource,
            scope,
        ]
        self.requests.labels(*values, str(code)).inc()
        if info.verb != "watch":
            self.latency.labels(*values).observe(seconds)

    def observe_gc(self, generation: int, seconds: float) -> None:
        self.gc_pause.labels(str(generation)).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
