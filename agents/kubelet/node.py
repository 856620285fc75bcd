"""The kubelet's Node: registration, status and the heartbeat Lease (the seeds' node
lifecycle: a node that stops renewing its Lease is NotReady to the node controller).

* Registration creates the Node with labels (`kubernetes.io/hostname|os|arch`, plus
  `--node-labels`), taints (`--register-with-taints`) and a full status; a Node that
  already exists (a restart) keeps its spec and gets its status brought up to date.
* Status: capacity (CPU, memory, ephemeral storage, `--max-pods`), allocatable
  (capacity minus kube/system reservations and, for memory, the hard eviction
  threshold), addresses (InternalIP from `--node-ip`, Hostname), the
  `daemonEndpoints.kubeletEndpoint.Port` the apiserver dials for logs and exec, nodeInfo
  (kernel, OS image, `<runtime>://<version>`, kubelet version) and the four conditions,
  each true to the machine. It is posted when it changes, and at least every
  `node_status_report_frequency` even when it does not (lastHeartbeatTime).
* The Lease `kube-node-lease/<node>`, owned by the Node (so the garbage collector
  deletes it with the Node), is renewed every quarter of its duration.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from agents.kubelet.config import KubeletConfig
from agents.kubelet.machine import Machine
from agents.kubelet.runtime import Runtime
from kubelab.api.errors import StatusError
from kubelab.client import RestClient, resource_for
from kubelab.client.rest import Object, PatchType

log = logging.getLogger("kubelab.kubelet.node")

NODES = resource_for("v1", "Node")
LEASES = resource_for("coordination.k8s.io/v1", "Lease")
LEASE_NAMESPACE = "kube-node-lease"
KUBELET_VERSION = "v1.31.0-kubelab"


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NodeStatus:
    """Registers the node, keeps its status and renews its Lease (module docstring).
    `sync()` is called by the kubelet's heartbeat loop; it does no sleeping itself."""

    def __init__(
        self,
        config: KubeletConfig,
        client: RestClient,
        runtime: Runtime,
        machine: Machine,
    ) -> None:
        self.config = config
        self.client = client
        self.runtime = runtime
        self.machine = machine
        self.node: Object | None = None
        """The Node as last written or read."""
        self._last_posted: Object | None = None
        self._last_post_at = 0.0
        self._last_lease: Object | None = None
        self._transitions: dict[str, tuple[str, str]] = {}
        """Condition type -> (status, lastTransitionTime)."""
        self.runtime_error = ""
        """Why the runtime is not ready ("" when it is)."""

    @property
    def name(self) -> str:
        return self.config.node_name

    def labels(self) -> dict[str, str]:
        info = self.machine.info()
        return {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": info["operatingSystem"],
            "kubernetes.io/arch": info["architecture"],
            "beta.kubernetes.io/os": info["operatingSystem"],
            "beta.kubernetes.io/arch": info["architecture"],
            **self.config.node_labels,
        }

    def capacity(self) -> dict[str, str]:
        return {
            "cpu": str(self.machine.cpus()),
            "memory": f"{self.machine.memory() // 1024}Ki",
            "ephemeral-storage": f"{self.machine.ephemeral_storage() // 1024}Ki",
            "pods": str(self.config.max_pods),
        }

    def allocatable(self) -> dict[str, str]:
        reserved = self.config.reserved
        cpu_milli = max(0, self.machine.cpus() * 1000 - reserved.cpu_milli)
        memory = self.machine.memory() - reserved.memory - self.memory_threshold()
        return {
            "cpu": f"{cpu_milli}m" if cpu_milli % 1000 else str(cpu_milli // 1000),
            "memory": f"{max(0, memory) // 1024}Ki",
            "ephemeral-storage": f"{self.machine.ephemeral_storage() * 9 // 10 // 1024}Ki",
            "pods": str(self.config.max_pods),
        }

    def _condition(self, kind: str, true: bool, reason: str, message: str) -> Object:
        status = "True" if true else "False"
        previous = self._transitions.get(kind)
        since = previous[1] if previous and previous[0] == status else now_rfc3339()
        self._transitions[kind] = (status, since)
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since,
            "lastHeartbeatTime": now_rfc3339(),
        }

    def memory_threshold(self) -> int:
        threshold = self.config.eviction_hard.get("memory.available")
        return threshold.of(self.machine.memory()) if threshold else 0

    def under_pressure(self) -> tuple[bool, bool]:
        """(memory, disk): whether `--eviction-hard`'s thresholds are met now."""
        p = self.machine.pressure()
        memory = p.memory_available < self.memory_threshold()
        nodefs = self.config.eviction_hard.get("nodefs.available")
        storage = self.machine.ephemeral_storage()
        disk = nodefs is not None and p.disk_available_fraction * storage < nodefs.of(storage)
        return memory, disk

    def conditions(self) -> list[Object]:
        p = self.machine.pressure()
        memory, disk = self.under_pressure()
        pids = p.pids_used_fraction > 0.90
        try:
            self.runtime.ping()
            self.runtime_error = ""
        except Exception as exc:
            self.runtime_error = f"container runtime is down: {exc}"
        ready = not self.runtime_error
        return [
            self._condition(
                "MemoryPressure",
                memory,
                "KubeletHasInsufficientMemory" if memory else "KubeletHasSufficientMemory",
                "kubelet has insufficient memory available"
                if memory
                else "kubelet has sufficient memory available",
            ),
            self._condition(
                "DiskPressure",
                disk,
                "KubeletHasDiskPressure" if disk else "KubeletHasNoDiskPressure",
                "kubelet has disk pressure" if disk else "kubelet has no disk pressure",
            ),
            self._condition(
                "PIDPressure",
                pids,
                "KubeletHasInsufficientPID" if pids else "KubeletHasSufficientPID",
                "kubelet has insufficient PID available"
                if pids
                else "kubelet has sufficient PID available",
            ),
            self._condition(
                "Ready",
                ready,
                "KubeletReady" if ready else "KubeletNotReady",
                "kubelet is posting ready status" if ready else self.runtime_error,
            ),
        ]

    def status(self) -> Object:
        addresses = [{"type": "Hostname", "address": self.name}]
        if self.config.node_ip:
            addresses.insert(0, {"type": "InternalIP", "address": self.config.node_ip})
        try:
            runtime_version = f"{self.runtime.name}://{self.runtime.version()}"
        except Exception:
            runtime_version = f"{self.runtime.name}://unknown"
        return {
            "capacity": self.capacity(),
            "allocatable": self.allocatable(),
            "conditions": self.conditions(),
            "addresses": addresses,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.config.port}},
            "nodeInfo": {
                **self.machine.info(),
                "containerRuntimeVersion": runtime_version,
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
            },
        }

    def register(self) -> Object:
        """Create the Node, or bring an existing one's status up to date; returns it."""
        body: Object = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": self.labels()},
            "spec": {"taints": list(self.config.register_with_taints)}
            if self.config.register_with_taints
            else {},
            "status": self.status(),
        }
        try:
            node = self.client.create(NODES, body)
            log.info("kubelet %s: registered node (uid %s)", self.name, node["metadata"]["uid"])
        except StatusError as exc:
            if exc.code != 409:
                raise
            node = self.client.patch(
                NODES,
                self.name,
                {"metadata": {"labels": self.labels()}},
                patch_type=PatchType.MERGE,
            )
            log.info("kubelet %s: node already registered; updating it", self.name)
        self.node = node
        self.post_status(force=True)
        return self.node

    def post_status(self, *, force: bool = False, now: float = 0.0) -> None:
        """Patch the Node's status if it changed (ignoring heartbeat times), or when a
        report is due."""
        status = self.status()
        comparable = _without_heartbeats(status)
        due = now - self._last_post_at >= self.config.node_status_report_frequency
        if not force and not due and comparable == self._last_posted:
            return
        self.node = self.client.patch(
            NODES, self.name, {"status": status}, patch_type=PatchType.MERGE, subresource="status"
        )
        self._last_posted = comparable
        self._last_post_at = now

    def renew_lease(self) -> None:
        """Create or renew `kube-node-lease/<node>`."""
        spec = {
            "holderIdentity": self.name,
            "leaseDurationSeconds": self.config.node_lease_duration_seconds,
            "renewTime": now_micro(),
        }
        lease = self._last_lease
        if lease is not None:
            try:
                self._last_lease = self.client.update(LEASES, {**lease, "spec": spec})
                return
            except StatusError as exc:
                if exc.code not in (404, 409):
                    raise
        try:
            current = self.client.get(LEASES, self.name, LEASE_NAMESPACE)
            self._last_lease = self.client.update(LEASES, {**current, "spec": spec})
        except StatusError as exc:
            if exc.code != 404:
                raise
            owner = []
            if self.node is not None:
                owner = [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": self.name,
                        "uid": self.node["metadata"]["uid"],
                    }
                ]
            self._last_lease = self.client.create(
                LEASES,
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": self.name,
                        "namespace": LEASE_NAMESPACE,
                        "ownerReferences": owner,
                    },
                    "spec": {**spec, "acquireTime": spec["renewTime"]},
                },
            )

    def pod_cidr(self) -> str:
        return str(((self.node or {}).get("spec") or {}).get("podCIDR") or "")

    def refresh(self) -> Object:
        """Read the Node again (its podCIDR is set by node IPAM after registration)."""
        self.node = self.client.get(NODES, self.name)
        return self.node


def _without_heartbeats(status: Object) -> Any:
    return {
        **status,
        "conditions": [
            {k: v for k, v in c.items() if k != "lastHeartbeatTime"} for c in status["conditions"]
        ],
    }
