"""What the controller-manager's `/metrics` shows (served by `kubelab.serving` on
`--secure-port`, 10257): whether this instance leads, and the depth of each running
controller's work queue, under the names kube-controller-manager uses
(`leader_election_master_status`, `workqueue_depth`), so that a dashboard made for it
reads these too. A queue that keeps growing is a controller falling behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kubelab.client import WorkQueue

from .base import Controller

COMPONENT = "kube-controller-manager"


class ManagerMetrics(Collector):
    """The registry of `/metrics`; `ControllerManager` reports each term to it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._leader = Gauge(
            "leader_election_master_status",
            "1 while this instance holds the lease and runs the controllers, else 0.",
            ["name"],
            registry=self.registry,
        )
        self._leader.labels(COMPONENT).set(0)
        self._lock = threading.Lock()
        self._controllers: list[Controller] = []
        self.registry.register(self)

    def term_started(self, controllers: Sequence[Controller]) -> None:
        with self._lock:
            self._controllers = list(controllers)
        self._leader.labels(COMPONENT).set(1)

    def term_ended(self) -> None:
        with self._lock:
            self._controllers = []
        self._leader.labels(COMPONENT).set(0)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            "workqueue_depth", "Keys waiting in each controller's work queue.", labels=["name"]
        )
        with self._lock:
            controllers = list(self._controllers)
        for controller in controllers:
            queue = getattr(controller, "queue", None)
            if isinstance(queue, WorkQueue):
                depth.add_metric([controller.name], len(queue))
        yield depth
