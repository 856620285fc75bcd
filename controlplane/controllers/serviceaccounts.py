"""Two controllers that give every active namespace what its pods need to talk to the
apiserver (kube-controller-manager's serviceaccount-controller and
root-ca-certificate-publisher-controller):

* The ServiceAccount `default`. A pod that names no service account runs as
  `default`, and the apiserver's ServiceAccount admission plugin refuses a pod whose
  account does not exist: without this controller no such pod could be created in a
  new namespace. Deleted, it is created again.
* The ConfigMap `kube-root-ca.crt`, whose key `ca.crt` holds the cluster CA
  (`--root-ca-file`). The service-account volume of every pod projects it next to the
  token, so that a process in the pod can verify the apiserver's certificate. It is
  kept equal to the file: edited or deleted, it is written back.

Both work alike, keyed by namespace name. Namespace events queue the namespace, and so
do events of the object the controller keeps (objects of other names are none of its
business). A sync does nothing unless the cached namespace is Active: a Terminating
namespace refuses new objects and is being emptied on purpose, and a controller that
put its object back would race the namespace controller. The object is created if the
cache does not have it (409 AlreadyExists means the cache is behind, and the object's
event will bring the namespace back) and corrected if it is not what it should be.

The CA is read once, at start, as kube-controller-manager reads it: after replacing the
CA, restart the controller-manager.
"""

from __future__ import annotations

import abc
import copy
import threading

from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource
from kubelab.client import (
    DeletedFinalStateUnknown,
    Object,
    WorkQueue,
    object_key,
    resource_for,
    split_key,
)

from .base import NAMESPACES, ControllerContext, SyncResult, Workers, controller_logger

SERVICE_ACCOUNT_CONTROLLER = "serviceaccount-controller"
ROOT_CA_PUBLISHER = "root-ca-certificate-publisher-controller"

SERVICE_ACCOUNTS = resource_for("v1", "ServiceAccount")
CONFIG_MAPS = resource_for("v1", "ConfigMap")

DEFAULT_SERVICE_ACCOUNT = "default"
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
ROOT_CA_KEY = "ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
ROOT_CA_DESCRIPTION = (
    "The certificate authority of the cluster's apiserver, published in every namespace "
    "so that pods can verify it when they reach it as kubernetes.default.svc."
)


def namespace_active(namespace: Object | None) -> bool:
    """Whether objects may be added to `namespace`: it exists and is not terminating."""
    if namespace is None:
        return False
    meta = namespace.get("metadata") or {}
    phase = (namespace.get("status") or {}).get("phase") or "Active"
    return not meta.get("deletionTimestamp") and phase == "Active"


class PerNamespaceController(abc.ABC):
    """Keeps one object, `object_name` of `resource`, in every active namespace, as the
    module docstring describes; subclasses say what the object should be."""

    def __init__(
        self, ctx: ControllerContext, name: str, resource: Resource, object_name: str
    ) -> None:
        self._tracer = ctx.tracer
        self.name = name
        self._log = controller_logger(name)
        self._client = ctx.client_for(name)
        self._resource = resource
        self._object_name = object_name
        self.queue: WorkQueue[str] = WorkQueue()
        self._namespaces = ctx.informers.informer(NAMESPACES)
        self._objects = ctx.informers.informer(resource)
        self._namespaces.add_event_handler(
            on_add=self._namespace_changed,
            on_update=lambda _old, new: self._namespace_changed(new),
        )
        self._objects.add_event_handler(
            on_add=self._object_changed,
            on_update=lambda _old, new: self._object_changed(new),
            on_delete=self._object_changed,
        )

    @abc.abstractmethod
    def desired(self, namespace: str) -> Object:
        """The object to create in `namespace`."""

    @abc.abstractmethod
    def corrected(self, current: Object) -> Object | None:
        """`current` as it should be (a copy), or None if it is right as it is."""

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(
            self.name,
            self.queue,
            self.sync,
            self._log,
            tracer=self._tracer,
            objects=self._namespaces,
        ).run(workers, stop)

    def _namespace_changed(self, namespace: Object) -> None:
        if namespace_active(namespace):
            self.queue.add(object_key(namespace))

    def _object_changed(self, obj: Object | DeletedFinalStateUnknown) -> None:
        namespace, name = split_key(object_key(obj))
        if name == self._object_name:
            self.queue.add(namespace)

    def sync(self, namespace: str) -> SyncResult:
        if not namespace_active(self._namespaces.indexer.get(namespace)):
            return None
        current = self._objects.indexer.get(f"{namespace}/{self._object_name}")
        what = f"{self._resource.kind} {namespace}/{self._object_name}"
        if current is None:
            try:
                self._client.create(self._resource, self.desired(namespace), namespace)
            except StatusError as exc:
                if exc.code == 409:
                    return None
                raise
            self._log.info("created %s", what)
            return None
        fixed = self.corrected(current)
        if fixed is not None:
            self._client.update(self._resource, fixed)
            self._log.info("put %s back as it should be", what)
        return None


class ServiceAccountsController(PerNamespaceController):
    """The ServiceAccount `default` in every active namespace."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, SERVICE_ACCOUNT_CONTROLLER, SERVICE_ACCOUNTS, DEFAULT_SERVICE_ACCOUNT)

    def desired(self, namespace: str) -> Object:
        return {
            "apiVersion": SERVICE_ACCOUNTS.api_version,
            "kind": SERVICE_ACCOUNTS.kind,
            "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace},
        }

    def corrected(self, current: Object) -> Object | None:
        return None  # any account of that name serves


class RootCACertPublisher(PerNamespaceController):
    """The ConfigMap `kube-root-ca.crt` with the cluster CA in every active namespace."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, ROOT_CA_PUBLISHER, CONFIG_MAPS, ROOT_CA_CONFIG_MAP)
        self._data = {ROOT_CA_KEY: ctx.root_ca.decode()}

    def desired(self, namespace: str) -> Object:
        return {
            "apiVersion": CONFIG_MAPS.api_version,
            "kind": CONFIG_MAPS.kind,
            "metadata": {
                "name": ROOT_CA_CONFIG_MAP,
                "namespace": namespace,
                "annotations": {DESCRIPTION_ANNOTATION: ROOT_CA_DESCRIPTION},
            },
            "data": dict(self._data),
        }

    def corrected(self, current: Object) -> Object | None:
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        if current.get("data") == self._data and annotations.get(DESCRIPTION_ANNOTATION):
            return None
        fixed = copy.deepcopy(current)
        fixed["data"] = dict(self._data)
        meta = fixed.setdefault("metadata", {})
        meta["annotations"] = {**annotations, DESCRIPTION_ANNOTATION: ROOT_CA_DESCRIPTION}
        return fixed
