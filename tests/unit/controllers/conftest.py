"""Fixtures of the controllers' tests: the real apiserver in-process (`lab.testenv`), a
fresh one per test, and controllers running against it with real informers.

A fresh apiserver per test (it starts in a few tens of milliseconds) rather than the
session's: the garbage collector and the namespace controller act on the whole cluster,
so one test's objects must not be another's garbage. The controllers authenticate as
kube-controller-manager does (`system:kube-controller-manager`, authorized by the
bootstrap RBAC policy). The ServiceAccount admission plugin is off: pods need no
`default` ServiceAccount, since the controller that makes those is itself under test
here.

`Cluster` is what a test does around the controllers: an admin client with the
(namespace, name) argument order of the old fake, a log of every request, and the
faults of `lab.faults`. It holds no semantics of its own; deletion rules, finalizers and
grace periods are the apiserver's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.apiserver.admission import Chain
from controlplane.controllers.base import Controller, ControllerContext, InformerFactory
from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource
from kubelab.client import ClientConfig, RestClient, resource_for
from lab.faults import Request, RequestLog
from lab.testenv import Environment
from tests.unit.client.conftest import FAST_BACKOFF

Object = dict[str, Any]

NAMESPACES = resource_for("v1", "Namespace")
PODS = resource_for("v1", "Pod")
CONTROLLER_MANAGER = "system:kube-controller-manager"
_CONTAINERS = [{"name": "c", "image": "nginx"}]
_TEST_AGENT = "controller-test"


class Cluster:
    """The test's apiserver, seen by the test (not by the controllers)."""

    def __init__(self, env: Environment, log: RequestLog) -> None:
        self.env = env
        self.faults = env.faults
        self.admin = RestClient(env.client_config(), user_agent=_TEST_AGENT, qps=None)
        self._log = log
        self._namespaces: set[str] = set()

    def config(self) -> ClientConfig:
        """What kube-controller-manager's kubeconfig would say."""
        return self.env.client_config(CONTROLLER_MANAGER, ())

    def calls(self, method: str | None = None, path: str | None = None) -> list[Request]:
        """The requests of the controllers (not the test's own)."""
        calls = self._log.calls(method, path)
        return [r for r in calls if r.headers.get("User-Agent") != _TEST_AGENT]

    def create(self, resource: Resource, obj: Object, namespace: str = "") -> Object:
        """Create `obj`, and its namespace first if no object of the test made it yet."""
        if resource.namespaced and namespace not in self._namespaces:
            self._namespaces.add(namespace)
            if not self.exists(NAMESPACES, "", namespace):
                body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                self.admin.create(NAMESPACES, body)
        return self.admin.create(resource, obj, namespace)

    def get(self, resource: Resource, namespace: str, name: str) -> Object:
        return self.admin.get(resource, name, namespace)

    def exists(self, resource: Resource, namespace: str, name: str) -> bool:
        try:
            self.admin.get(resource, name, namespace)
        except StatusError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def update(self, resource: Resource, obj: Object) -> Object:
        return self.admin.update(resource, obj)

    def delete(
        self, resource: Resource, namespace: str, name: str, options: Object | None = None
    ) -> Object:
        policy = (options or {}).get("propagationPolicy")
        return self.admin.delete(resource, name, namespace, propagation_policy=policy)

    def confirm(self, resource: Resource, namespace: str, name: str) -> Object:
        """Delete at once, grace period over: a kubelet confirming a pod has stopped."""
        return self.admin.delete(resource, name, namespace, grace_period_seconds=0)

    def close(self) -> None:
        self.admin.close()


def owner_ref(owner: Object, *, block: bool = True, controller: bool = True) -> Object:
    """An ownerReference to `owner` (as a controller would set it; an object has at
    most one controller)."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": block,
    }


def _valid_spec(resource: Resource, name: str, spec: Object) -> Object:
    """`spec` completed with what validation requires of pods and their controllers."""
    if resource.kind == "Pod":
        return {"containers": _CONTAINERS, **spec}
    if resource.kind in ("Deployment", "ReplicaSet"):
        labels = {"app": name}
        template = {"metadata": {"labels": labels}, "spec": {"containers": _CONTAINERS}}
        return {"selector": {"matchLabels": labels}, "template": template, **spec}
    return spec


def new_object(
    cluster: Cluster,
    resource: Resource,
    name: str,
    namespace: str = "ns",
    *,
    owners: list[Object] | None = None,
    **fields: Any,
) -> Object:
    """Create an object of `resource` in the cluster, owned by `owners`."""
    meta: Object = {"name": name}
    if owners:
        meta["ownerReferences"] = owners
    spec = _valid_spec(resource, name, fields.pop("spec", {}))
    if spec:
        fields["spec"] = spec
    body = {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta, **fields}
    return cluster.create(resource, body, namespace if resource.namespaced else "")


class Harness:
    """Controllers built from one context and run against the cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        config = cluster.config()
        self.informer_client = RestClient(config, qps=None, backoff=FAST_BACKOFF)
        self.informers = InformerFactory(self.informer_client)
        self.ctx = ControllerContext(
            config, self.informers, root_ca=b"--- the cluster CA ---\n", qps=None, burst=1
        )
        self.stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def sync_caches(self) -> None:
        """Start the informers and wait until they have listed."""
        self.informers.start(self.stop)
        assert self.informers.wait_for_sync(self.stop)

    def run(self, controller: Controller, workers: int = 2) -> None:
        """Start the informers if need be and run `controller` in a thread."""
        if not self._threads:
            self.sync_caches()
        thread = threading.Thread(target=controller.run, args=(workers, self.stop), daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(10)
            assert not thread.is_alive(), "a controller did not stop"
        self.informers.join(5)
        self.ctx.close()
        self.informer_client.close()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    admission = tuple(p for p in Chain.ALL if p != "ServiceAccount")
    with Environment.start(admission_plugins=admission) as env, env.record() as log:
        c = Cluster(env, log)
        try:
            yield c
        finally:
            c.close()


@pytest.fixture
def harness(cluster: Cluster) -> Iterator[Harness]:
    h = Harness(cluster)
    try:
        yield h
    finally:
        h.close()
