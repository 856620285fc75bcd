"""The kubelet against the real apiserver (in-process, `lab.testenv`), with the in-memory
runtime: registration, heartbeat, and the pod worker's logic (the seeds' busybox pod,
restarts and back-off, probes, graceful deletion, adoption after a restart). The same
tests' Docker twins are in test_kubelet_docker.py."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import FixedMachine, Pressure
from agents.kubelet.runtime import POD_NAME, ExecResult, RuntimeFailure, State
from agents.kubelet.runtime.memory import MemoryRuntime
from kubelab import pki
from kubelab.api.errors import StatusError
from kubelab.api.quantity import parse_quantity
from kubelab.client import resource_for
from tests.kubelet.kubelet_fixture import (
    PODS,
    Cluster,
    fast_config,
    node_client,
    start_kubelet,
    until,
)


def _liveness(container: Any, command: list[str]) -> ExecResult:
    """Exec probes: `cat /tmp/healthy` fails, anything else succeeds."""
    return ExecResult(1 if command == ["cat", "/tmp/healthy"] else 0, b"")


@pytest.fixture
def node() -> str:
    return f"mem-{uuid.uuid4().hex[:6]}"


OFFLINE_IMAGE = "foo:1.0"
"""An image no registry of the lab holds: its pull reaches no registry."""


@pytest.fixture
def runtime(node: str) -> MemoryRuntime:
    return MemoryRuntime(node, exec_handler=_liveness, unreachable=frozenset({OFFLINE_IMAGE}))


@pytest.fixture
def kubelet(
    cluster: Cluster, node: str, runtime: MemoryRuntime, tmp_path: Path
) -> Iterator[Kubelet]:
    k = start_kubelet(cluster, fast_config(node, tmp_path), runtime)
    yield k
    k.stop()
    cluster.delete_node(node)


def _pod(cluster: Cluster, namespace: str, node: str, name: str, **spec: Any) -> None:
    containers = spec.pop("containers", None) or [
        {
            "name": "hello",
            "image": "busybox:1.36",
            "command": spec.pop("command", ["sh", "-c", 'echo "Hello Kubernetes!"']),
        }
    ]
    cluster.create_pod(namespace, node, name, containers=containers, **spec)


def test_node_registers_heartbeats_and_is_held_to_itself(
    cluster: Cluster, kubelet: Kubelet
) -> None:
    name = kubelet.name
    node = cluster.kubectl_json("get", "node", name)
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == name
    assert (labels["kubernetes.io/os"], labels["kubernetes.io/arch"]) == ("linux", "amd64")
    status = node["status"]
    assert status["capacity"] == {
        "cpu": "4",
        "memory": "16Gi",
        "ephemeral-storage": "100Gi",
        "pods": "110",
    }
    # allocatable: memory minus the 100Mi hard eviction threshold
    assert parse_quantity(status["allocatable"]["memory"]) == parse_quantity("16284Mi")
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "Ready": "True",
        "MemoryPressure": "False",
        "DiskPressure": "False",
        "PIDPressure": "False",
    }
    assert status["addresses"][0] == {"type": "InternalIP", "address": "127.0.0.1"}
    assert status["nodeInfo"]["containerRuntimeVersion"] == "memory://0.1.0"
    assert "kubeletEndpoint" in status["daemonEndpoints"]
    lease = cluster.kubectl_json("get", "lease", "-n", "kube-node-lease", name)
    assert lease["spec"]["holderIdentity"] == name
    first = lease["spec"]["renewTime"]
    until(
        lambda: (
            cluster.kubectl_json("get", "lease", "-n", "kube-node-lease", name)["spec"]["renewTime"]
            != first
        ),
        "the lease to be renewed",
        timeout=10,
    )
    # The Node authorizer: this kubelet's credentials cannot touch another node.
    with pytest.raises(StatusError) as refused:
        kubelet.client.request("PATCH", "/api/v1/nodes/some-other-node", body={})
    assert refused.value.code == 403


def test_the_seeds_busybox_pod_completes(
    cluster: Cluster, namespace: str, kubelet: Kubelet
) -> None:
    _pod(cluster, namespace, kubelet.name, "hello", restartPolicy="Never")
    pod = until(
        lambda: (p := cluster.pod(namespace, "hello"))["status"].get("phase") == "Succeeded" and p,
        "the pod to succeed",
    )
    (status,) = pod["status"]["containerStatuses"]
    assert status["state"]["terminated"]["reason"] == "Completed"
    assert status["state"]["terminated"]["exitCode"] == 0
    assert status["imageID"] and status["containerID"].startswith("memory://")
    assert pod["status"]["hostIP"] == "127.0.0.1" and pod["status"]["startTime"]
    # Events are written by a thread of their own, and may land after the status.
    until(
        lambda: (
            {"Pulling", "Pulled", "Created", "Started"} <= set(cluster.reasons(namespace, "hello"))
        ),
        "the pod's Events",
    )


def test_an_image_not_in_the_lab_says_how_to_load_it(
    cluster: Cluster, namespace: str, kubelet: Kubelet
) -> None:
    containers = [{"name": "app", "image": OFFLINE_IMAGE}]
    _pod(cluster, namespace, kubelet.name, "offline", containers=containers)
    expected = (
        'image "foo:1.0" is not in the lab: this lab has no internet access; '
        'load it with "labctl load-image foo:1.0"'
    )
    until(
        lambda: {"Failed", "BackOff"} <= set(cluster.reasons(namespace, "offline")),
        "the pull's Failed and BackOff Events",
    )
    events = cluster.admin.list(resource_for("v1", "Event"), namespace)["items"]
    failed = {e["message"] for e in events if e["reason"] == "Failed"}
    assert failed == {expected}
    waiting = until(
        lambda: [
            s["state"]["waiting"]
            for s in cluster.status(namespace, "offline").get("containerStatuses") or []
            if "waiting" in s["state"] and s["state"]["waiting"].get("message") == expected
        ],
        "the container to wait with the message",
    )
    assert waiting[0]["reason"] == "ErrImagePull"


def test_a_crashing_container_backs_off_longer_each_time(
    cluster: Cluster, namespace: str, kubelet: Kubelet
) -> None:
    _pod(cluster, namespace, kubelet.name, "crash", command=["sh", "-c", "exit 1"])

    def backing_off() -> Any:
        # Between an exit and the next sync the container is briefly `terminated`.
        pod = cluster.pod(namespace, "crash")
        status = pod["status"].get("containerStatuses", [{}])[0]
        return status.get("restartCount", 0) >= 3 and "terminated" not in status["state"] and pod

    pod = until(backing_off, "three restarts", timeout=40)
    (status,) = pod["status"]["containerStatuses"]
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert status["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff" or (
        "running" in status["state"]
    )
    runtime = kubelet.runtime
    assert isinstance(runtime, MemoryRuntime)
    starts = sorted(c.started_at or 0 for c in runtime.list_containers() if c.name == "hello")
    # Only the last two containers are kept; their starts are at least 2 s apart (the
    # back-off has doubled from 1 s).
    assert starts[-1] - starts[-2] >= 2.0
    assert "BackOff" in cluster.reasons(namespace, "crash")


def test_a_failing_liveness_probe_restarts_the_container(
    cluster: Cluster, namespace: str, kubelet: Kubelet
) -> None:
    probe = {
        "exec": {"command": ["cat", "/tmp/healthy"]},
        "periodSeconds": 1,
        "failureThreshold": 2,
    }
    container = {
        "name": "app",
        "image": "busybox:1.36",
        "command": ["nginx"],
        "livenessProbe": probe,
    }
    _pod(cluster, namespace, kubelet.name, "sick", containers=[container])
    until(
        lambda: (
            cluster.pod(namespace, "sick")["status"]
            .get("containerStatuses", [{}])[0]
            .get("restartCount", 0)
            >= 1
        ),
        "a restart",
    )
    reasons = cluster.reasons(namespace, "sick")
    assert "Unhealthy" in reasons and "Killing" in reasons


def test_deleting_a_pod_stops_it_and_the_kubelet_confirms(
    cluster: Cluster, namespace: str, kubelet: Kubelet, runtime: MemoryRuntime
) -> None:
    _pod(cluster, namespace, kubelet.name, "web", command=["nginx"])
    until(lambda: cluster.pod(namespace, "web")["status"].get("phase") == "Running", "Running")
    cluster.kubectl("delete", "pod", "web", "-n", namespace, "--wait=false")
    until(
        lambda: not cluster.pod_exists(namespace, "web"),
        "the kubelet to confirm the deletion",
        timeout=20,
    )
    until(lambda: not runtime.list_containers(), "the containers to be removed", timeout=10)


def test_a_restarted_kubelet_adopts_its_containers(
    cluster: Cluster, namespace: str, node: str, runtime: MemoryRuntime, tmp_path: Path
) -> None:
    first = start_kubelet(cluster, fast_config(node, tmp_path), runtime)
    try:
        _pod(cluster, namespace, node, "keep", command=["nginx"])
        until(lambda: cluster.pod(namespace, "keep")["status"].get("phase") == "Running", "Running")
        before = {c.id for c in runtime.list_containers()}
        sandboxes = {s.id for s in runtime.list_sandboxes()}
    finally:
        first.stop()
    # While the kubelet is down, one of its pods is deleted for good.
    cluster.admin.delete(PODS, "keep", namespace, grace_period_seconds=0)
    _pod(cluster, namespace, node, "again", command=["nginx"])
    second = start_kubelet(cluster, fast_config(node, tmp_path), runtime)
    try:
        until(
            lambda: cluster.pod(namespace, "again")["status"].get("phase") == "Running", "Running"
        )
        until(
            lambda: not (before & {c.id for c in runtime.list_containers()}),
            "the deleted pod's container to be removed",
        )
        assert not sandboxes & {s.id for s in runtime.list_sandboxes()}
        running = [c for c in runtime.list_containers() if c.state == State.RUNNING]
        assert len(running) == 1
    finally:
        second.stop()
        cluster.delete_node(node)


def test_env_from_configmap_and_a_missing_one(
    cluster: Cluster, namespace: str, kubelet: Kubelet
) -> None:
    container = {
        "name": "app",
        "image": "busybox:1.36",
        "command": ["nginx"],
        "env": [
            {
                "name": "GREETING",
                "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}},
            },
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "MSG", "value": "$(GREETING) from $(POD)"},
        ],
    }
    _pod(cluster, namespace, kubelet.name, "configured", containers=[container])
    waiting = until(
        lambda: (
            cluster.pod(namespace, "configured")["status"]
            .get("containerStatuses", [{}])[0]
            .get("state", {})
            .get("waiting", {})
            .get("reason")
            == "CreateContainerConfigError"
        ),
        "CreateContainerConfigError",
    )
    assert waiting
    cluster.kubectl(
        "create", "configmap", "settings", "-n", namespace, "--from-literal=greeting=hello"
    )
    until(
        lambda: cluster.pod(namespace, "configured")["status"].get("phase") == "Running", "Running"
    )
    runtime = kubelet.runtime
    assert isinstance(runtime, MemoryRuntime)
    (c,) = [c for c in runtime._containers.values() if c.config.name == "app"]
    assert dict(c.config.env)["MSG"] == "hello from configured"


def test_containers_get_the_services_variables(
    cluster: Cluster, namespace: str, kubelet: Kubelet, runtime: MemoryRuntime
) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "my-db"},
        "spec": {"ports": [{"name": "sql", "port": 5432, "targetPort": 5432}]},
    }
    ip = cluster.admin.create(resource_for("v1", "Service"), service, namespace)["spec"][
        "clusterIP"
    ]
    until(
        lambda: any(s["metadata"]["name"] == "my-db" for s in kubelet.services.indexer.list()),
        "the kubelet to see the Service",
    )
    app = {
        "name": "app",
        "image": "busybox:1.36",
        "command": ["nginx"],
        "env": [{"name": "DB", "value": "$(MY_DB_SERVICE_HOST):$(MY_DB_SERVICE_PORT_SQL)"}],
    }
    _pod(cluster, namespace, kubelet.name, "linked", containers=[app])
    _pod(cluster, namespace, kubelet.name, "unlinked", containers=[app], enableServiceLinks=False)
    until(
        lambda: all(
            cluster.pod(namespace, n)["status"].get("phase") == "Running"
            for n in ("linked", "unlinked")
        ),
        "Running",
    )

    def env_of(pod: str) -> dict[str, str]:
        (c,) = [c for c in runtime._containers.values() if c.status.labels[POD_NAME] == pod]
        return dict(c.config.env)

    linked, unlinked = env_of("linked"), env_of("unlinked")
    master = cluster.admin.get(resource_for("v1", "Service"), "kubernetes", "default")["spec"]
    for env in (linked, unlinked):
        assert env["KUBERNETES_SERVICE_HOST"] == master["clusterIP"]
        assert env["KUBERNETES_SERVICE_PORT"] == "443"
        assert env["KUBERNETES_PORT_443_TCP"] == f"tcp://{master['clusterIP']}:443"
    assert linked["MY_DB_SERVICE_HOST"] == ip
    assert linked["MY_DB_SERVICE_PORT"] == linked["MY_DB_SERVICE_PORT_SQL"] == "5432"
    assert linked["MY_DB_PORT"] == f"tcp://{ip}:5432"
    assert linked["MY_DB_PORT_5432_TCP_ADDR"] == ip
    assert linked["DB"] == f"{ip}:5432"
    assert not any(k.startswith("MY_DB_") for k in unlinked)
    assert unlinked["DB"] == "$(MY_DB_SERVICE_HOST):$(MY_DB_SERVICE_PORT_SQL)"


@dataclasses.dataclass(frozen=True)
class Squeezable(FixedMachine):
    """A fixed node whose memory runs short while `squeezed` is set."""

    squeezed: threading.Event = dataclasses.field(default_factory=threading.Event)

    def pressure(self) -> Pressure:
        if self.squeezed.is_set():
            return Pressure(50 * 1024 * 1024, 1.0, 0.0)
        return super().pressure()


def test_memory_pressure_evicts_the_besteffort_pod_first(
    cluster: Cluster, namespace: str, node: str, runtime: MemoryRuntime, tmp_path: Path
) -> None:
    machine = Squeezable()
    config = fast_config(node, tmp_path, eviction_monitoring_interval=2.0)
    kubelet = Kubelet(config, node_client(cluster, node), runtime, machine)
    kubelet.start()
    try:
        limits = {"cpu": "100m", "memory": "64Mi"}
        guaranteed = {
            "name": "app",
            "image": "busybox:1.36",
            "command": ["nginx"],
            "resources": {"limits": limits, "requests": limits},
        }
        besteffort = {"name": "app", "image": "busybox:1.36", "command": ["nginx"]}
        _pod(cluster, namespace, node, "guaranteed", containers=[guaranteed])
        _pod(cluster, namespace, node, "besteffort", containers=[besteffort])
        until(
            lambda: all(
                cluster.pod(namespace, n)["status"].get("phase") == "Running"
                for n in ("guaranteed", "besteffort")
            ),
            "Running",
        )
        machine.squeezed.set()
        pressure_seen = []

        def evicted() -> Any:
            node_obj = cluster.admin.get(resource_for("v1", "Node"), node)
            conditions = {c["type"]: c["status"] for c in node_obj["status"]["conditions"]}
            pressure_seen.append(conditions["MemoryPressure"] == "True")
            status = cluster.pod(namespace, "besteffort")["status"]
            return status.get("reason") == "Evicted" and status

        status = until(evicted, "the BestEffort pod to be evicted", timeout=20)
        machine.squeezed.clear()
        assert status["phase"] == "Failed"
        assert status["message"].startswith("The node was low on resource: memory.")
        assert any(pressure_seen)
        assert "Evicted" in cluster.reasons(namespace, "besteffort")
        # The pod is stopped and stays stopped; the Guaranteed one runs on.
        until(
            lambda: all(
                c.state != State.RUNNING
                for c in runtime.list_containers()
                if c.labels[POD_NAME] == "besteffort"
            ),
            "the evicted pod's containers to stop",
        )
        time.sleep(config.eviction_monitoring_interval + 0.5)
        assert cluster.pod(namespace, "guaranteed")["status"]["phase"] == "Running"
        assert cluster.pod(namespace, "besteffort")["status"]["phase"] == "Failed"
    finally:
        kubelet.stop()
        cluster.delete_node(node)


class _FlakyList(MemoryRuntime):
    """Listing containers fails four times right after each start (engine calls that timed
    out under load): the relists a worker asks for after its start get nothing newer."""

    def __init__(self, node: str) -> None:
        super().__init__(node)
        self.failures = 0
        self._fail_next = 0

    def start_container(self, container_id: str) -> None:
        super().start_container(container_id)
        self._fail_next = 4

    def list_containers(self) -> list[Any]:
        if self._fail_next:
            self._fail_next -= 1
            self.failures += 1
            raise RuntimeFailure("listing containers: read timed out")
        return super().list_containers()


@pytest.mark.parametrize("policy", ["Never", "OnFailure"])
def test_a_failed_relist_after_a_start_never_creates_the_container_twice(
    cluster: Cluster, namespace: str, node: str, tmp_path: Path, policy: str
) -> None:
    runtime = _FlakyList(node)
    k = start_kubelet(cluster, fast_config(node, tmp_path), runtime)
    try:
        _pod(cluster, namespace, node, "once", restartPolicy=policy, command=["echo", "hi"])
        pod = until(
            lambda: (
                (p := cluster.pod(namespace, "once"))["status"].get("phase") == "Succeeded" and p
            ),
            "the pod to succeed",
        )
        assert runtime.failures >= 1
        (status,) = pod["status"]["containerStatuses"]
        assert status["restartCount"] == 0
        assert status["state"]["terminated"]["reason"] == "Completed"
        assert len([c for c in runtime.list_containers() if c.name == "hello"]) == 1
    finally:
        k.stop()
        cluster.delete_node(node)


class _FirstStartFails(MemoryRuntime):
    """The engine refuses each container's first start (a mount or cgroup error, say),
    leaving it created and never started, as Docker does."""

    def __init__(self, node: str) -> None:
        super().__init__(node)
        self.refused: list[str] = []

    def start_container(self, container_id: str) -> None:
        if not self.refused:
            self.refused.append(container_id)
            raise RuntimeFailure("starting container: OCI runtime create failed")
        super().start_container(container_id)


def test_a_container_whose_start_failed_is_made_anew(
    cluster: Cluster, namespace: str, node: str, tmp_path: Path
) -> None:
    runtime = _FirstStartFails(node)
    k = start_kubelet(cluster, fast_config(node, tmp_path), runtime)
    try:
        _pod(cluster, namespace, node, "retry", restartPolicy="Never", command=["echo", "hi"])
        until(
            lambda: cluster.pod(namespace, "retry")["status"].get("phase") == "Succeeded",
            "the pod to succeed after its container's failed start",
        )
        assert len(runtime.refused) == 1
        names = [c.id for c in runtime.list_containers() if c.name == "hello"]
        assert runtime.refused[0] not in names and len(names) == 1
    finally:
        k.stop()
        cluster.delete_node(node)


def test_a_static_pod_runs_and_its_mirror_pod_is_kept_from_the_informer(
    cluster: Cluster, node: str, runtime: MemoryRuntime, tmp_path: Path
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\n"
        "spec:\n  containers:\n  - name: web\n    image: nginx:1.21\n"
    )
    config = fast_config(node, tmp_path / "root", pod_manifest_path=manifests)
    kubelet = start_kubelet(cluster, config, runtime)
    name, key = f"web-{node}", f"default/web-{node}"
    try:
        until(lambda: cluster.pod_exists("default", name), "the static pod's mirror pod")
        until(
            lambda: cluster.status("default", name).get("phase") == "Running",
            "the static pod Running",
        )
        until(lambda: kubelet.informer.indexer.get(key), "the mirror in the kubelet's informer")

        # A mirror the informer holds, with the manifest's digest, costs no request.
        asked: list[tuple[Any, ...]] = []
        read = kubelet.client.get

        def counted_get(*args: Any, **kwargs: Any) -> Any:
            asked.append(args)
            return read(*args, **kwargs)

        kubelet.client.get = counted_get  # type: ignore[method-assign]
        kubelet.sync_static_pods()
        assert asked == []

        # `kubectl delete` of a mirror pod returns (the kubelet deletes the terminating
        # mirror and makes it anew, as Kubernetes' kubelet does) and a new mirror follows.
        uid = cluster.pod("default", name)["metadata"]["uid"]
        cluster.kubectl("delete", "pod", name, "-n", "default")
        until(
            lambda: (
                cluster.pod_exists("default", name)
                and cluster.pod("default", name)["metadata"]["uid"] != uid
            ),
            "a new mirror pod",
        )
        # The static pod itself ran on: one sandbox, never stopped.
        assert [sb.ready for sb in runtime.list_sandboxes()] == [True]
    finally:
        kubelet.stop()
        cluster.delete_node(node)


class _EngineDown(MemoryRuntime):
    """An engine that stops answering (dockerd restarting) while `down` is set."""

    down = False

    def ping(self) -> None:
        if self.down:
            raise RuntimeFailure("connecting to the engine: connection refused")


def test_a_node_is_not_ready_while_its_engine_does_not_answer(
    cluster: Cluster, node: str, tmp_path: Path
) -> None:
    runtime = _EngineDown(node)
    k = start_kubelet(cluster, fast_config(node, tmp_path), runtime)

    def ready() -> dict[str, str]:
        conditions = cluster.kubectl_json("get", "node", node)["status"]["conditions"]
        return next(c for c in conditions if c["type"] == "Ready")

    try:
        until(lambda: ready()["status"] == "True", "the node to be Ready")
        runtime.down = True
        down = until(lambda: (r := ready())["status"] == "False" and r, "the node NotReady")
        assert "container runtime is down" in down["message"]
        assert "connection refused" in down["message"]
        runtime.down = False
        until(lambda: ready()["status"] == "True", "the node Ready again")
    finally:
        k.stop()
        cluster.delete_node(node)


def test_the_kubelet_server_serves_only_whom_the_apiserver_authorizes(
    cluster: Cluster, node: str, runtime: MemoryRuntime, tmp_path: Path
) -> None:
    """No anonymous callers (401), unknown tokens (401); a caller the apiserver
    authenticates needs `nodes/<sub>` of this node (403 without it)."""
    ca = pki.load_pair(cluster.pki_dir, "ca")
    serving = pki.issue(ca, node, server=True, ip_addresses=["127.0.0.1"])
    cert_file, key_file = pki.write_pair(serving, tmp_path, "kubelet")
    context = pki.server_ssl_context(cluster.ca_file, cert_file, key_file, False)
    kubelet = Kubelet(
        fast_config(node, tmp_path, address="127.0.0.1"),
        node_client(cluster, node),
        runtime,
        FixedMachine(),
        serving=context,
    )
    kubelet.start()
    try:
        base = f"https://127.0.0.1:{kubelet.config.port}"

        def get(path: str, token: str = "", user: str = "") -> requests.Response:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            cert = None
            if user:
                pair = pki.issue(ca, user, organizations=["system:masters"], client=True)
                cert = tuple(str(p) for p in pki.write_pair(pair, tmp_path, "caller"))
            return requests.get(
                base + path, headers=headers, cert=cert, verify=str(cluster.ca_file), timeout=10
            )

        assert get("/healthz").status_code == 401
        assert get("/healthz", token="not-a-token").status_code == 401
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": node}}
        cluster.admin.create(resource_for("v1", "ServiceAccount"), account, "default")
        token = cluster.admin.request(
            "POST",
            f"/api/v1/namespaces/default/serviceaccounts/{node}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )["status"]["token"]
        refused = get("/metrics", token=token)
        assert refused.status_code == 403
        assert refused.text == (
            f"Forbidden (user=system:serviceaccount:default:{node}, verb=get, "
            "resource=nodes, subresource=metrics)\n"
        )
        allowed = get("/healthz", user="kubernetes-admin")
        assert (allowed.status_code, allowed.text) == (200, "ok")
    finally:
        kubelet.stop()
        cluster.delete_node(node)
