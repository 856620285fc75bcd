"""The kubelet: one node's agent, put together from its parts.

    API pods (watch, spec.nodeName=<node>) --+
    static pods (manifest folder, polled) ---+--> PodWorkers --(runtime)--> containers
    PLEG (relist + engine events) -----------+        |
                                                      +--> pod status, Events, mirror pods
    heartbeat: Node status when it changes, Lease every 10 s
    client certificate: renewed before it expires (agents.kubelet.certificates)
    node pressure: pods evicted below --eviction-hard (agents.kubelet.eviction)
    HTTPS :10250: logs, exec, attach, port-forward, stats (agents.kubelet.server)
    tracing: pod syncs and live-data requests continue their traces (agents.kubelet.podtrace)

`Kubelet` is the same code on a real node (DockerRuntime, HostMachine, volumes on disk,
the HTTPS server) and on a hollow node (MemoryRuntime, FixedMachine, no volumes, no
server, no Events): many hollow kubelets share one process and one client.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from agents.kubelet.certificates import Rotator
from agents.kubelet.config import KubeletConfig
from agents.kubelet.eviction import EvictionManager
from agents.kubelet.machine import Machine
from agents.kubelet.node import NodeStatus
from agents.kubelet.pods import MIRROR, PODS, PodWorkers, mirror_pod, static_pods
from agents.kubelet.runtime import Runtime
from agents.kubelet.server import Authorizer, KubeletServer
from agents.kubelet.volumes import VolumeManager
from kubelab.api.errors import StatusError
from kubelab.client import (
    DeletedFinalStateUnknown,
    Preconditions,
    RestClient,
    ServerUnreachable,
    SharedInformer,
    object_key,
    resource_for,
)
from kubelab.client.record import EventRecorder
from kubelab.client.rest import Object
from kubelab.tracing import Tracing

log = logging.getLogger("kubelab.kubelet")

SERVICES = resource_for("v1", "Service")
STATIC_POD_PERIOD = 20.0
"""How often the manifest folder is read (`--file-check-frequency`, 20 s)."""


class Kubelet:
    def __init__(
        self,
        config: KubeletConfig,
        client: RestClient,
        runtime: Runtime,
        machine: Machine,
        *,
        events: bool = True,
        volumes: bool = True,
        serving: ssl.SSLContext | None = None,
        services: SharedInformer | None = None,
        stop_event: threading.Event | None = None,
        tracing: Tracing | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        """`services` and `stop_event` are for many kubelets in one process (hollow
        nodes): one Services informer the caller runs for them all, instead of a watch
        each, and one stop event for them all. `tracing` is the kubelet's
        (`kubelab.tracing.setup`, its counters in `registry`, the server's `/metrics`);
        None: it does not trace."""
        self.config = config
        self.tracing = tracing
        tracer = tracing.tracer if tracing is not None and tracing.enabled else None
        self.client = client
        self.runtime = runtime
        self.machine = machine
        self.node_status = NodeStatus(config, client, runtime, machine)
        self.recorder = EventRecorder(
            client if events else None,
            "kubelet",
            host=config.node_name,
            object_type=("v1", "Pod"),
        )
        volume_manager = None
        self.workers = PodWorkers(
            config,
            client,
            runtime,
            self.recorder,
            None,
            self.node_status.allocatable(),
            tracer,
        )
        if volumes:
            volume_manager = VolumeManager(
                config.root_dir, client, config.node_name, self.workers._lookup
            )
            self.workers.volumes = volume_manager
        self.informer = SharedInformer(
            client, PODS, field_selector=f"spec.nodeName={config.node_name}"
        )
        # Every Service, for the containers' variables (`KUBERNETES_SERVICE_HOST`, ...).
        self._own_services = services is None
        self.services = services or SharedInformer(client, SERVICES)
        self.workers.services = self.services.indexer.list
        self.informer.add_event_handler(
            on_add=self.workers.upsert,
            on_update=lambda _old, new: self.workers.upsert(new),
            on_delete=self._pod_deleted,
        )
        self.informer.add_event_handler(
            on_update=lambda _old, new: self._mirror_changed(new),
            on_delete=self._mirror_changed,
        )
        self.eviction = EvictionManager(self.node_status, self.workers)
        self.rotator: Rotator | None = None
        if config.rotate_certificates:
            cert_dir = config.cert_dir or config.root_dir / "pki"
            self.rotator = Rotator(client, config.node_name, cert_dir)
        self.server: KubeletServer | None = None
        if serving is not None:
            self.server = KubeletServer(
                (config.address, config.port),
                serving,
                self.workers,
                Authorizer(client, config.node_name),
                lambda: _usage(machine),
                tracer=tracer,
                registry=registry,
            )
            # Port 0 (tests): the Node advertises the port the server got.
            self.config = dataclasses.replace(config, port=self.server.port)
            self.node_status.config = self.config
        self.stop_event = stop_event or threading.Event()
        self.threads: list[threading.Thread] = []
        self._static: dict[str, Object] = {}
        self._static_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.config.node_name

    def _thread(self, target: Callable[[], None], what: str) -> None:
        t = threading.Thread(target=target, name=f"kubelet {self.name} {what}", daemon=True)
        t.start()
        self.threads.append(t)

    def start(self, timeout: float = 30.0) -> None:
        """Register the node, then run everything in background threads."""
        self.recorder.start()
        deadline = time.monotonic() + timeout
        pods_running = False
        while True:
            try:
                self.node_status.register()
                self.node_status.renew_lease()
                break
            except (StatusError, ServerUnreachable) as exc:
                if time.monotonic() > deadline:
                    raise
                log.warning("kubelet %s: registering: %s; retrying", self.name, exc)
                # Static pods need no apiserver, and on a control-plane node the apiserver
                # is one of them: run them while registration waits for it.
                if not pods_running and self.config.pod_manifest_path is not None:
                    self._run_pods()
                    pods_running = True
                if pods_running:
                    self.sync_static_pods()
                time.sleep(1.0)
        if self._own_services:
            self.services.start(self.stop_event)
        # As the kubelet does, containers start only once the Services are known, so
        # that none misses its variables (static pods, run above while the apiserver was
        # away, are the exception, as in Kubernetes).
        if not self.services.wait_for_sync(timeout=max(1.0, deadline - time.monotonic())):
            log.warning("kubelet %s: Services not listed yet; starting pods anyway", self.name)
        if not pods_running:
            self._run_pods()
        self.informer.start(self.stop_event)
        if self.server is not None:
            self.threads.append(self.server.start())
        self._thread(self._heartbeat, "heartbeat")
        if self.rotator is not None:
            rotator = self.rotator
            self._thread(lambda: rotator.run(self.stop_event), "certificate rotation")
        log.info("kubelet %s: started (runtime %s)", self.name, self.runtime.name)

    def _run_pods(self) -> None:
        """The PLEG and the pod workers, which act on pods from any source."""
        self.workers.pleg.relist()
        self._thread(lambda: self.workers.pleg.run(self.stop_event), "pleg")
        for i in range(self.config.workers):
            self._thread(self.workers.run_worker, f"worker {i}")

    def _heartbeat(self) -> None:
        next_status = next_lease = next_static = 0.0
        next_eviction = time.monotonic() + self.config.eviction_monitoring_interval
        lease_every = self.config.node_lease_duration_seconds / 4
        while not self.stop_event.is_set():
            now = time.monotonic()
            try:
                if now >= next_static:
                    self.sync_static_pods()
                    next_static = now + STATIC_POD_PERIOD
                if not self.workers.sources_ready.is_set() and self.informer.has_synced():
                    self.workers.sources_ready.set()
                    for uid in self.workers.pleg.uids() - self.workers.known_uids():
                        self.workers.queue.add(uid)  # orphans: pods gone while we were down
                if now >= next_lease:
                    self.node_status.renew_lease()
                    next_lease = now + lease_every
                if now >= next_status:
                    self.node_status.post_status(now=now)
                    next_status = now + self.config.node_status_update_frequency
                if now >= next_eviction and self.workers.sources_ready.is_set():
                    self.eviction.check()
                    next_eviction = now + self.config.eviction_monitoring_interval
            except (StatusError, ServerUnreachable) as exc:
                log.warning("kubelet %s: heartbeat: %s", self.name, exc)
            wait = min(next_static, next_lease, next_status, next_eviction) - time.monotonic()
            self.stop_event.wait(max(0.05, wait))

    def sync_static_pods(self) -> None:
        """Read the manifest folder; start new static pods, stop removed ones, and keep
        a mirror pod in the API for each."""
        folder = self.config.pod_manifest_path
        if folder is None:
            return
        with self._static_lock:
            current = {p["metadata"]["uid"]: p for p in static_pods(folder, self.name)}
            for uid in set(self._static) - set(current):
                self.workers.remove(uid)
                self._delete_mirror(self._static[uid])
            for uid, pod in current.items():
                if uid not in self._static:
                    self.workers.upsert(pod, static=True)
            self._static = current
            node = self.node_status.node
            if node is None:
                return
            for pod in current.values():
                self._ensure_mirror(pod, node["metadata"]["uid"])

    def _pod_deleted(self, pod: Object | DeletedFinalStateUnknown) -> None:
        """A pod of this node deleted: its workers tear it down. Deleted while the watch
        was down (`DeletedFinalStateUnknown`), it is still this pod, by the uid of the
        last state the cache had."""
        final = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        self.workers.remove(final["metadata"]["uid"], final)

    def _mirror_changed(self, pod: object) -> None:
        """A mirror pod deleted or being deleted (`kubectl delete pod kube-apiserver-cp1`)
        is made anew at once, as the kubelet's pod sync does, not at the next read of the
        folder."""
        if not isinstance(pod, dict) or MIRROR not in (pod["metadata"].get("annotations") or {}):
            return
        gone = self.informer.indexer.get(object_key(pod)) is None
        if gone or pod["metadata"].get("deletionTimestamp"):
            try:
                self.sync_static_pods()
            except (StatusError, ServerUnreachable) as exc:
                log.warning("kubelet %s: mirror pods: %s", self.name, exc)

    def _ensure_mirror(self, pod: Object, node_uid: str) -> None:
        """Create the static pod's mirror unless it is there, current and not being
        deleted. The pod informer (this node's pods, mirrors included) answers for the
        usual case, as Kubernetes' pod manager does; only a missing or stale mirror costs
        a GET. A stale mirror, or one being deleted, is deleted at once (grace 0, its uid
        as precondition) and made anew."""
        meta = pod["metadata"]
        digest = meta["annotations"][MIRROR]
        if self.informer.has_synced() and _current_mirror(
            self.informer.indexer.get(object_key(pod)), digest
        ):
            return
        try:
            found = self.client.get(PODS, meta["name"], meta["namespace"])
        except StatusError as exc:
            if exc.code != 404:
                raise
            found = None
        if found is not None:
            if _current_mirror(found, digest):
                return
            try:
                self.client.delete(
                    PODS,
                    meta["name"],
                    meta["namespace"],
                    grace_period_seconds=0,
                    preconditions=Preconditions(uid=found["metadata"]["uid"]),
                )
            except StatusError as exc:
                if exc.code not in (404, 409):
                    raise
        self.client.create(PODS, mirror_pod(pod, node_uid))
        log.info("kubelet %s: mirror pod %s/%s created", self.name, meta["namespace"], meta["name"])

    def _delete_mirror(self, pod: Object) -> None:
        meta = pod["metadata"]
        try:
            self.client.delete(PODS, meta["name"], meta["namespace"], grace_period_seconds=0)
        except StatusError as exc:
            if exc.code != 404:
                raise

    def stop(self) -> None:
        """Stop the kubelet's threads; the pods' containers keep running (as when the
        kubelet service stops on a node)."""
        self.stop_event.set()
        self.workers.queue.shut_down()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        for t in self.threads:
            t.join(timeout=10)
        self.recorder.stop(timeout=2.0)
        if self.tracing is not None:
            self.tracing.shutdown()


def _usage(machine: Machine) -> tuple[int, int]:
    usage = machine.usage()
    return usage.cpu_usage_ns, usage.memory_working_set


def _current_mirror(found: Object | None, digest: str) -> bool:
    """`found` is a mirror of the manifest with `digest`, and not being deleted."""
    if found is None or found["metadata"].get("deletionTimestamp"):
        return False
    return (found["metadata"].get("annotations") or {}).get(MIRROR) == digest
