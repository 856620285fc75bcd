"""The workload controllers' test bed: the real apiserver in-process (`lab.testenv`),
the controller-manager's workload controllers running in this process against it (as
`ControllerManager` runs them in a term of leadership, with the controller-manager's
identity), and the real kubectl. There is no scheduler and no kubelet: the tests play
both (`bind`, `set_ready`, `Kubelet`) through the apiserver, and watch pods to check
invariants on every event (`PodWatch`).

`WorkloadLab` has the interface of `controlplane_fixture.Lab` (which runs the real
processes), so that a scenario can run against either.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import pytest
import requests

from controlplane.controllers import daemonset, deployment, replicaset, statefulset
from controlplane.controllers.manager import Options
from lab.testenv import Environment
from tests.conftest import new_namespace
from tests.integration.incluster_controllers import (
    CONTROLLER_MANAGER,
    Cluster,
    controller_manager,
)

CONTROLLERS = (
    replicaset.REPLICASET_CONTROLLER,
    replicaset.REPLICATION_CONTROLLER,
    deployment.NAME,
    statefulset.NAME,
    daemonset.NAME,
)


class ApiLab(Protocol):
    """What the helpers below need of a lab."""

    @property
    def server(self) -> str: ...

    def api(self, method: str, path: str, **kwargs: Any) -> Any: ...

    def session(self) -> requests.Session: ...


WorkloadLab = Cluster
"""A test apiserver with the workload controllers running against it (the `lab`
fixture)."""


@pytest.fixture(scope="module")
def lab() -> Iterator[WorkloadLab]:
    # The controllers log what they did: shown with a failing test's output.
    logging.getLogger("kubelab.controllers").setLevel(logging.INFO)
    with Environment.start() as env:
        options = Options(controllers=CONTROLLERS, root_ca=b"", workers={}, qps=1000.0, burst=1000)
        workload_lab = WorkloadLab(env)
        try:
            config = env.client_config(CONTROLLER_MANAGER, ())
            with controller_manager(config, options):
                yield workload_lab
        finally:
            workload_lab.http.close()


@pytest.fixture
def namespace(lab: WorkloadLab, request: pytest.FixtureRequest) -> str:
    """A namespace of the test's own, with its `default` ServiceAccount."""
    return new_namespace(lab.env, request.node.name)


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pods(lab: ApiLab, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    """The pods of `namespace` (matching the label `selector`), not being deleted."""
    params = {"labelSelector": selector} if selector else {}
    r = lab.api("GET", f"/api/v1/namespaces/{namespace}/pods", params=params)
    assert r.status_code == 200, r.text
    return [p for p in r.json()["items"] if not p["metadata"].get("deletionTimestamp")]


def bind(lab: ApiLab, namespace: str, name: str, node: str) -> None:
    """What the scheduler does: bind the pod to `node`."""
    r = lab.api(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
        json={
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )
    assert r.status_code == 201, r.text


def set_ready(lab: ApiLab, namespace: str, name: str, ready: bool = True) -> bool:
    """What the kubelet does: report the pod Running and Ready (or not ready). False if
    the pod is gone or changed under us."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    r = lab.api("GET", path)
    if r.status_code != 200:
        return False
    pod = r.json()
    status = "True" if ready else "False"
    pod["status"] = {
        **pod.get("status", {}),
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
            {"type": "Ready", "status": status, "lastTransitionTime": now()},
            {"type": "ContainersReady", "status": status, "lastTransitionTime": now()},
        ],
    }
    return lab.api("PUT", path + "/status", json=pod).status_code == 200


def delete_pod_now(lab: ApiLab, namespace: str, name: str) -> None:
    """Delete a pod at once (grace 0), as a kubelet would confirm it."""
    lab.api(
        "DELETE",
        f"/api/v1/namespaces/{namespace}/pods/{name}",
        json={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
    )


def get(lab: ApiLab, path: str) -> dict[str, Any]:
    r = lab.api("GET", path)
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


class Kubelet:
    """Plays the scheduler and kubelets of a namespace in a thread: each pod that exists
    for `delay` seconds is reported Running and Ready, first bound to the node its
    affinity pins (a DaemonSet's pods), else to `node` if given. A context manager;
    `paused` holds it back."""

    def __init__(self, lab: ApiLab, namespace: str, delay: float = 0.0, node: str = "") -> None:
        self.lab = lab
        self.namespace = namespace
        self.delay = delay
        self.node = node
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._seen: dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Kubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            if self.paused.is_set():
                continue
            r = self.lab.api("GET", f"/api/v1/namespaces/{self.namespace}/pods")
            for pod in r.json()["items"]:
                name = pod["metadata"]["name"]
                if pod["metadata"].get("deletionTimestamp"):
                    # A bound pod being deleted: its containers stop, the kubelet confirms.
                    delete_pod_now(self.lab, self.namespace, name)
                    continue
                first = self._seen.setdefault(pod["metadata"]["uid"], time.monotonic())
                conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
                if conditions.get("Ready") == "True" or time.monotonic() - first < self.delay:
                    continue
                target = daemonset.target_node(pod) or self.node
                if target and not pod["spec"].get("nodeName"):
                    bind(self.lab, self.namespace, name, target)
                set_ready(self.lab, self.namespace, name)
                if self.delay:
                    break  # one at a time: a slow node


class PodWatch:
    """Watches the pods of a namespace in a thread and calls `check(pods)` with every
    pod that exists after each event (the test's invariants). Short watches, each
    resumed from the last resourceVersion, so that the thread ends soon after the test
    is done with it."""

    def __init__(
        self,
        lab: ApiLab,
        namespace: str,
        check: Callable[[dict[str, Any]], None] = lambda pods: None,
    ) -> None:
        self.lab = lab
        self.namespace = namespace
        self.check = check
        self.events = 0
        self.failures: list[str] = []
        self.log: list[tuple[str, str]] = []
        """(event type, pod name) of each ADDED and DELETED event, in order."""
        r = lab.api("GET", f"/api/v1/namespaces/{namespace}/pods")
        self.pods: dict[str, Any] = {p["metadata"]["name"]: p for p in r.json()["items"]}
        self._rv = r.json()["metadata"]["resourceVersion"]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PodWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.5)  # the last events
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        with self.lab.session() as http:
            while not self._stop.is_set():
                with http.get(
                    f"{self.lab.server}/api/v1/namespaces/{self.namespace}/pods",
                    params={"watch": "1", "resourceVersion": self._rv, "timeoutSeconds": "2"},
                    stream=True,
                    timeout=(10, 30),
                ) as response:
                    for line in response.iter_lines():
                        if line:
                            self._apply(json.loads(line))

    def _apply(self, event: dict[str, Any]) -> None:
        pod = event["object"]
        self._rv = pod["metadata"]["resourceVersion"]
        if event["type"] in ("ADDED", "DELETED"):
            self.log.append((event["type"], pod["metadata"]["name"]))
        if event["type"] == "DELETED":
            self.pods.pop(pod["metadata"]["name"], None)
        elif event["type"] in ("ADDED", "MODIFIED"):
            self.pods[pod["metadata"]["name"]] = pod
        else:
            return
        self.events += 1
        try:
            self.check(self.pods)
        except AssertionError as exc:
            self.failures.append(str(exc))
