"""The apiserver's parts, put together: configuration, store, watch cache, registry, the
request chain (authn, authz, admission), metrics, audit, and the start-up hooks.

Start-up, as kube-apiserver's post-start hooks do it:

1. connect to the store and fill the watch cache (list ``/registry/``, then watch);
2. create what a cluster cannot work without, if missing: the namespaces ``default``,
   ``kube-system``, ``kube-public`` and ``kube-node-lease``; the RBAC bootstrap policy
   (default ClusterRoles and bindings); the PriorityClasses ``system-cluster-critical``
   and ``system-node-critical``; an Available APIService per group version; the
   ``kubernetes`` Service (the first address of
   the service range) and its Endpoints, pointing at this apiserver.

``/readyz`` reports ready only after both; ``/livez`` only checks that the process can
answer and reach the store.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter

from kubelab import fastjson, storeclient, tracing
from kubelab.api import errors, resources
from kubelab.api.conversion import VIEWS
from kubelab.api.resources import RESOURCES, Resource
from kubelab.storeclient import KVStore

from . import apiservices, authz, componentstatus, kubelet, subresources
from .admission import SYSTEM_NAMESPACES, Chain
from .admission.priority import system_classes
from .audit import AuditLog
from .authn import (
    SERVICE_ACCOUNT_ISSUER,
    Authenticator,
    TokenIssuer,
    UserInfo,
    load_token_file,
)
from .authz import BOOTSTRAP_POLICY, Authorizer
from .crds import CRDController
from .metrics import Metrics
from .metricscache import PERIOD, MetricsCache
from .registry import STATUS, Registry
from .served import ServedAPI
from .services import ServiceAllocator
from .storage import KeyNotFound, RevisionConflict, Storage
from .strategies import now_rfc3339
from .views import ConvertedView
from .watchcache import Cacher

log = logging.getLogger("kubelab.apiserver")
Object = dict[str, Any]

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-kubelab",
    "gitCommit": "kubelab",
    "gitTreeState": "clean",
    "buildDate": "2026-11-01T00:00:00Z",
    "goVersion": "python3",
    "compiler": "cpython",
    "platform": "linux/amd64",
}
SYSTEM = UserInfo("system:apiserver", groups=("system:masters",))


@dataclass
class Config:
    etcd_servers: list[str]
    etcd_cafile: Path | None = None
    etcd_certfile: Path | None = None
    etcd_keyfile: Path | None = None
    advertise_address: str = "127.0.0.1"
    secure_port: int = 6443
    service_cluster_ip_range: str = "10.96.0.0/12"
    service_node_port_range: tuple[int, int] = (30000, 32767)
    admission_plugins: tuple[str, ...] = Chain.ALL
    audit_log_path: Path | None = None
    token_auth_file: Path | None = None
    anonymous_auth: bool = True
    service_account_signing_key: Any = None
    service_account_public_keys: list[Any] = field(default_factory=list)
    service_account_issuer: str = SERVICE_ACCOUNT_ISSUER
    kubelet_auth: kubelet.KubeletAuth = field(default_factory=kubelet.KubeletAuth)
    node_authorizer: bool = True
    tracing_endpoint: str = ""
    """`--tracing-endpoint` (`kubelab.tracing`); empty: the standard variables, or off."""
    metric_resolution: float = PERIOD
    """`--metric-resolution`: seconds between scrapes of the kubelets (metricscache.py)."""


def _resource(name: str) -> Resource:
    """A stored resource by plural ("pods", "roles": core and RBAC names are unique among
    those) or by plural.group ("deployments.apps")."""
    plural, _, group = name.partition(".")
    for r in RESOURCES:
        if r.plural != plural or not r.stored or r.converted_from:
            continue
        if r.group == group if group else r.group in ("", "rbac.authorization.k8s.io"):
            return r
    raise KeyError(name)


def _served_as(r: Resource) -> str:
    """A served resource's key: versions of one group resource may be served apart
    (autoscaling/v1 HPAs through a view, autoscaling/v2 from the registry)."""
    return f"{r.group_version}/{r.plural}"


class APIServer:
    def __init__(
        self,
        config: Config,
        client: KVStore | None = None,
        span_exporter: SpanExporter | None = None,
    ) -> None:
        """`span_exporter` takes the spans instead of the OTLP exporter (tests: the
        SDK's `InMemorySpanExporter`), turning tracing on."""
        self.config = config
        self.metrics = Metrics()
        self.tracing = tracing.setup(
            "apiserver",
            socket.gethostname(),
            self.metrics.registry,
            config.tracing_endpoint,
            exporter=span_exporter,
        )
        self.client: KVStore = client or storeclient.StoreClient(
            config.etcd_servers,
            ca_file=config.etcd_cafile,
            cert_file=config.etcd_certfile,
            key_file=config.etcd_keyfile,
            timeout=10.0,
        )
        self.storage = Storage(self.client, self.tracing)
        self.cacher = Cacher(self.storage, self.tracing)
        self.allocator = ServiceAllocator(
            config.service_cluster_ip_range, config.service_node_port_range
        )
        self.authz = Authorizer(self.cached_list, self.cached, config.node_authorizer)
        self.admission = Chain(
            self.cached,
            self.cached_list,
            self.authz,
            config.admission_plugins,
            live_get=self.stored,
            charge=functools.partial(self.swap, "resourcequotas"),
            traced=self.tracing,
        )
        # What this apiserver serves: built-in resources, and custom ones as CRDs come.
        self.api = ServedAPI()
        self.registry = Registry(
            self.storage, self.cacher, self.api, self.admission, self.allocator, self.tracing
        )
        # Resources served from another's objects (events.k8s.io/v1 Events).
        self.views = {
            _served_as(r): ConvertedView(
                self.registry,
                r,
                resources.by_group_resource(r.converted_from),
                *VIEWS[r.api_version, r.kind],
            )
            for r in RESOURCES
            if r.converted_from
        }
        # Custom resources come and go with their CustomResourceDefinitions.
        self.crds = CRDController(self.api, self.registry, self.cacher, self.views, SYSTEM)
        self.issuer = TokenIssuer(
            config.service_account_signing_key,
            config.service_account_public_keys,
            config.service_account_issuer,
        )
        static = load_token_file(config.token_auth_file) if config.token_auth_file else {}
        self.authn = Authenticator(
            issuer=self.issuer,
            lookup=self.cached,
            static_tokens=static,
            anonymous=config.anonymous_auth,
        )
        self.kubelets = kubelet.KubeletClient(config.kubelet_auth, self.tracing)
        # The scraper's own client, untraced (metricscache.py says why).
        self.resource_usage = MetricsCache(
            kubelet.KubeletClient(config.kubelet_auth), self.cached_list, config.metric_resolution
        )
        self.subresources = subresources.storage(self)
        self.audit = AuditLog(config.audit_log_path)
        self.bootstrapped = False

    def registry_for(self, r: Resource) -> Registry | ConvertedView:
        """What serves `r`'s verbs: the registry, or the conversion view for a resource
        served from another's objects."""
        return self.views.get(_served_as(r)) or self.registry

    # -- cache lookups for the request chain ---------------------------------------------

    def cached(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        r = _resource(plural)
        return self.cacher.get(r, r.key(namespace, name))

    def stored(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """Read through to the store (linearizable), for lookups the cache may lag on."""
        r = _resource(plural)
        return self.storage.get(r.key(namespace, name))

    def swap(
        self,
        plural: str,
        namespace: str,
        name: str,
        change: Callable[[dict[str, Any]], dict[str, Any] | None],
    ) -> dict[str, Any] | None:
        """Compare-and-swap `change` into an object in the store until it sticks (the
        apiserver's own writes: a ResourceQuota's charged usage, a disruption budget's
        taken disruption); None if the object is gone."""
        r = _resource(plural)
        try:
            stored, _ = self.storage.guaranteed_update(r.key(namespace, name), change)
        except KeyNotFound:
            return None
        except RevisionConflict:
            raise errors.conflict(r.plural, name, r.group) from None
        return stored

    def cached_list(self, plural: str, namespace: str) -> list[dict[str, Any]]:
        r = _resource(plural)
        items, _ = self.cacher.list_objects(r, r.collection_prefix(namespace), lambda o: True)
        return items

    # -- lifecycle -----------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        self.cacher.start()
        if not self.cacher.ready.wait(timeout):
            raise RuntimeError(
                f"the watch cache could not list the store at {self.config.etcd_servers} "
                f"within {timeout:.0f}s; is the store up and reachable?"
            )
        with self.tracing.span("APIServer.bootstrap"):  # one trace, not one per write
            self.bootstrap()
        self.crds.start()
        self.resource_usage.start()

    def stop(self) -> None:
        self.resource_usage.stop()
        self.crds.stop()
        self.cacher.stop()
        self.audit.close()
        self.client.close()
        self.tracing.shutdown()

    def bootstrap(self) -> None:
        """Create the objects every cluster has (see the module doc); idempotent."""
        for ns in SYSTEM_NAMESPACES:
            self._ensure(
                _resource("namespaces"),
                "",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            )
        for obj in BOOTSTRAP_POLICY:
            self._reconcile_policy(_resource(obj["kind"].lower() + "s"), fastjson.copy(obj))
        for ns in SYSTEM_NAMESPACES:
            self._ensure(
                _resource("serviceaccounts"),
                ns,
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": ns},
                },
            )
        for priority_class in system_classes():
            self._ensure(_resource("priorityclasses.scheduling.k8s.io"), "", priority_class)
        self._register_local_apis()
        ip = self.allocator.kubernetes_ip()
        port = self.config.secure_port
        self._ensure(
            _resource("services"),
            "default",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": "kubernetes",
                    "namespace": "default",
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                },
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": ip,
                    "sessionAffinity": "None",
                    "ports": [
                        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}
                    ],
                },
            },
        )
        if ipaddress.ip_address(self.config.advertise_address).is_loopback:
            # Endpoints may not point at loopback (no pod could reach it); a local plane
            # advertises 127.0.0.1, so its kubernetes Service has no endpoints.
            log.info(
                "apiserver: advertise address %s is loopback: no endpoints for the "
                "kubernetes service",
                self.config.advertise_address,
            )
        else:
            self._ensure(
                _resource("endpoints"),
                "default",
                {
                    "apiVersion": "v1",
                    "kind": "Endpoints",
                    "metadata": {
                        "name": "kubernetes",
                        "namespace": "default",
                        "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
                    },
                    "subsets": [
                        {
                            "addresses": [{"ip": self.config.advertise_address}],
                            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
                        }
                    ],
                },
            )
            # Its EndpointSlice too, as kube-apiserver's endpoint reconciler writes both
            # (the Endpoints are labelled for the mirroring controller to skip).
            family = ipaddress.ip_address(self.config.advertise_address).version
            self._ensure(
                _resource("endpointslices.discovery.k8s.io"),
                "default",
                {
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {
                        "name": "kubernetes",
                        "namespace": "default",
                        "labels": {"kubernetes.io/service-name": "kubernetes"},
                    },
                    "addressType": f"IPv{family}",
                    "endpoints": [
                        {
                            "addresses": [self.config.advertise_address],
                            "conditions": {"ready": True},
                        }
                    ],
                    "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
                },
            )
        self.bootstrapped = True
        log.info(
            "apiserver: bootstrap objects in place (namespaces, RBAC policy, kubernetes "
            "service at %s)",
            ip,
        )

    def _ensure(self, r: Resource, namespace: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if self.storage.get(r.key(namespace, name)) is not None:
            return
        try:
            self.registry.create(r, namespace, obj, SYSTEM)
            log.info(
                "apiserver: created %s %s",
                r.group_resource,
                f"{namespace}/{name}" if namespace else name,
            )
        except errors.StatusError as exc:
            if exc.code != 409:
                raise

    def _register_local_apis(self) -> None:
        """An Available APIService for every group version served here (`apiservices`)."""
        r = _resource("apiservices.apiregistration.k8s.io")
        for service in apiservices.local_api_services():
            name = service["metadata"]["name"]
            self._ensure(r, "", service)
            current = self.storage.get(r.key("", name)) or {}
            if any(
                c.get("type") == "Available" and c.get("status") == "True"
                for c in (current.get("status") or {}).get("conditions") or []
            ):
                continue
            self.registry.update_with(
                r,
                "",
                name,
                lambda obj: apiservices.available(obj, now_rfc3339()),
                SYSTEM,
                STATUS,
            )

    def _reconcile_policy(self, r: Resource, wanted: dict[str, Any]) -> None:
        """Create a bootstrap role or binding, or add to it what this version's policy has
        and it lacks (`authz.reconcile`)."""
        name = wanted["metadata"]["name"]
        # The filled cache, not ~60 store reads at every start: a stale answer is safe,
        # since the update reconciles the stored value and the create checks the store.
        existing = self.cacher.get(r, r.key("", name))
        if existing is None:
            self._ensure(r, "", wanted)
            return
        if "roleRef" in wanted and existing.get("roleRef") != wanted["roleRef"]:
            log.warning(
                "apiserver: %s %s refers to %s, not %s as the default policy does; left as "
                "it is (delete it to have it recreated)",
                r.group_resource,
                name,
                existing.get("roleRef"),
                wanted["roleRef"],
            )
            return
        if authz.reconcile(existing, wanted) is None:
            return

        def change(current: dict[str, Any]) -> dict[str, Any]:
            return authz.reconcile(current, wanted) or current

        self.registry.update_with(r, "", name, change, SYSTEM)
        log.info("apiserver: reconciled %s %s with the default policy", r.group_resource, name)

    # -- what the app serves -------------------------------------------------------------

    def health_checks(self, ready: bool) -> dict[str, bool]:
        checks = {"ping": True, "etcd": self._store_healthy()}
        if ready:
            checks["informer-sync"] = self.cacher.ready.is_set()
            checks["poststarthook/rbac/bootstrap-roles"] = self.bootstrapped
            checks["poststarthook/crd-informer-synced"] = self.crds.synced.is_set()
        return checks

    def _store_healthy(self) -> bool:
        try:
            self.storage.check_health()
            return True
        except storeclient.StoreError:
            return False

    def component_statuses(self, name: str) -> Object:
        """`kubectl get componentstatuses` (`componentstatus`): one, or the list."""
        known = componentstatus.names()
        if name and name not in known:
            raise errors.internal_error(f"Component not found: {name}")

        def store_failure() -> str | None:
            try:
                self.storage.check_health()
            except storeclient.StoreError as exc:
                return str(exc)
            return None

        found = componentstatus.statuses(store_failure, [name] if name else known)
        if name:
            return found[0]
        return {"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": found}

    @staticmethod
    def version_info() -> dict[str, str]:
        return dict(KUBERNETES_VERSION)

    def resource_metrics(
        self, r: Resource, namespace: str, name: str, label_selector: str, field_selector: str
    ) -> Object:
        """metrics.k8s.io, from the kubelets' figures the scraper keeps (metricscache.py)."""
        return self.resource_usage.get(r, namespace, name, label_selector, field_selector)
