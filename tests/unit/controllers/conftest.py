"""Fixtures of the controllers' tests: the client library's fake API server, taught the
apiserver's deletion rules, and controllers running against it with real informers.

`FakeCluster` adds what the controllers act on to `FakeApiServer`:

* a delete with `propagationPolicy` Foreground or Orphan, or of an object that has
  finalizers, only marks the object (deletionTimestamp) and adds the policy's
  finalizer; so does deleting a Namespace (phase Terminating), and a Pod bound to a
  node lingers in its grace period until the test plays its kubelet (`confirm`);
* a write that leaves a marked object without finalizers (for a Namespace, without
  `spec.finalizers` too) removes it;
* an update replaces the metadata (a merge patch with `null` removes a field) except
  for the server-owned fields; deletecollection; the `finalize` subresource.
"""

from __future__ import annotations

import copy
import datetime
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.controllers.base import Controller, ControllerContext, InformerFactory
from kubelab.api import errors
from kubelab.api.resources import Resource
from kubelab.client import ClientConfig, RestClient, resource_for
from tests.unit.client.conftest import FAST_BACKOFF
from tests.unit.client.fakeapi import FakeApiServer

Object = dict[str, Any]

NAMESPACES = resource_for("v1", "Namespace")
PODS = resource_for("v1", "Pod")

_SERVER_OWNED = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
_POLICY_FINALIZERS = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _lingers(resource: Resource, obj: Object) -> bool:
    """A pod bound to a node waits for its kubelet."""
    return resource == PODS and bool((obj.get("spec") or {}).get("nodeName"))


def _ready_to_go(resource: Resource, obj: Object) -> bool:
    meta = obj["metadata"]
    if not meta.get("deletionTimestamp") or meta.get("finalizers"):
        return False
    if resource == NAMESPACES and (obj.get("spec") or {}).get("finalizers"):
        return False
    return not (resource == PODS and meta.get("deletionGracePeriodSeconds"))


class FakeCluster(FakeApiServer):
    """`FakeApiServer` with the deletion rules of the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        # The informers of a controller-manager connect all at once; with socketserver's
        # backlog of 5 the kernel drops some of their SYNs, which costs a second each.
        self.httpd.socket.listen(128)

    def _store(self, resource: Resource, obj: Object) -> Object:
        """Store a changed `obj` (MODIFIED), or remove it if its deletion can complete."""
        meta = obj["metadata"]
        namespace = meta.get("namespace", "") if resource.namespaced else ""
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        self.objects[(resource.group_resource, namespace, meta["name"])] = obj
        self._record(resource, namespace, "MODIFIED", obj)
        if _ready_to_go(resource, obj):
            return self.confirm(resource, namespace, meta["name"])
        return copy.deepcopy(obj)

    def update(self, resource: Resource, obj: Object, subresource: str = "") -> Object:
        with self.cond:
            meta = obj.get("metadata") or {}
            namespace = meta.get("namespace", "") if resource.namespaced else ""
            current = self.get(resource, namespace, meta.get("name", ""))
            wanted = meta.get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise errors.conflict(resource.plural, meta["name"], resource.group)
            new = copy.deepcopy(current)
            if subresource == "status":
                new["status"] = obj.get("status")
            elif subresource == "finalize":
                new.setdefault("spec", {})["finalizers"] = (obj.get("spec") or {}).get(
                    "finalizers"
                ) or []
            else:
                new = copy.deepcopy(obj)
                if "status" in current:
                    new["status"] = current["status"]
                new_meta = new.setdefault("metadata", {})
                for owned in _SERVER_OWNED:
                    new_meta.pop(owned, None)
                    if owned in current["metadata"]:
                        new_meta[owned] = current["metadata"][owned]
                if namespace:
                    new_meta["namespace"] = namespace
            return self._store(resource, new)

    def delete(
        self, resource: Resource, namespace: str, name: str, options: Object | None = None
    ) -> Object:
        if not name:
            return self.delete_collection(resource, namespace, options)
        options = options or {}
        with self.cond:
            current = self.get(resource, namespace, name)
            meta = current["metadata"]
            uid = (options.get("preconditions") or {}).get("uid")
            if uid is not None and uid != meta["uid"]:
                raise errors.conflict(resource.plural, name, resource.group, "precondition failed")
            finalizer = _POLICY_FINALIZERS.get(options.get("propagationPolicy", ""))
            held = bool(meta.get("finalizers")) or finalizer is not None
            if not held and not _lingers(resource, current) and resource != NAMESPACES:
                return super().delete(resource, namespace, name, options)
            meta.setdefault("deletionTimestamp", _now())
            if finalizer is not None and finalizer not in meta.setdefault("finalizers", []):
                meta["finalizers"].append(finalizer)
            if _lingers(resource, current):
                grace = current["spec"].get("terminationGracePeriodSeconds", 30)
                meta.setdefault("deletionGracePeriodSeconds", grace)
            if resource == NAMESPACES:
                current.setdefault("status", {})["phase"] = "Terminating"
            return self._store(resource, current)

    def delete_collection(
        self, resource: Resource, namespace: str, options: Object | None = None
    ) -> Object:
        with self.cond:
            names = [
                n
                for (r, ns, n) in self.objects
                if r == resource.group_resource and (not namespace or ns == namespace)
            ]
            items = [self.delete(resource, namespace, n, options) for n in names]
        return {"kind": resource.list_kind, "apiVersion": resource.api_version, "items": items}

    def confirm(self, resource: Resource, namespace: str, name: str) -> Object:
        """Remove an object whatever holds it: a kubelet confirming a pod's termination."""
        return super().delete(resource, namespace, name)

    def exists(self, resource: Resource, namespace: str, name: str) -> bool:
        with self.cond:
            return (resource.group_resource, namespace, name) in self.objects


def owner_ref(owner: Object, *, block: bool = True) -> Object:
    """An ownerReference to `owner` (as a controller would set it)."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": block,
    }


def new_object(
    cluster: FakeCluster,
    resource: Resource,
    name: str,
    namespace: str = "ns",
    *,
    owners: list[Object] | None = None,
    **fields: Any,
) -> Object:
    """Create an object of `resource` in the fake cluster, owned by `owners`."""
    meta: Object = {"name": name}
    if owners:
        meta["ownerReferences"] = owners
    body = {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta, **fields}
    return cluster.create(resource, body, namespace if resource.namespaced else "")


class Harness:
    """Controllers built from one context and run against the fake cluster."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        config = ClientConfig(server=cluster.url)
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
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster() as server:
        yield server


@pytest.fixture
def harness(cluster: FakeCluster) -> Iterator[Harness]:
    h = Harness(cluster)
    try:
        yield h
    finally:
        h.close()
