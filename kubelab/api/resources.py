"""The built-in resources the apiserver serves: one table drives routing, discovery
(`kubectl api-resources`), storage keys, RBAC resource names and the client library.

Names, short names, categories and verbs are Kubernetes' own, so that what a user types
(`kubectl get po,svc,deploy`) resolves the same way here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    categories: tuple[str, ...] = ()
    # Subresource name -> the kind its body is ("Scale", "Binding", ...; "" for none).
    subresources: dict[str, str] = field(default_factory=dict)
    # False for resources that are not kept in the store (metrics, tokens).
    stored: bool = True
    # Served from another resource's objects through a conversion: that resource's
    # group_resource (events.k8s.io/v1 Events are core Events; see kubelab.api.conversion).
    converted_from: str = ""

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def group_resource(self) -> str:
        """ "deployments.apps", "pods": how errors and RBAC name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def registry_prefix(self) -> str:
        """Storage key prefix, as the seeds draw it: /registry/<resource>/..."""
        if self.converted_from:
            return by_group_resource(self.converted_from).registry_prefix()
        if self.group in ("", "apps", "batch", "policy", "rbac.authorization.k8s.io"):
            return f"/registry/{self.plural}/"
        return f"/registry/{self.group}/{self.plural}/"

    def collection_prefix(self, namespace: str = "") -> str:
        """The storage prefix of the objects in `namespace` ("" for all of them)."""
        if self.namespaced and namespace:
            return f"{self.registry_prefix()}{namespace}/"
        return self.registry_prefix()

    def key(self, namespace: str, name: str) -> str:
        if self.namespaced:
            return f"{self.registry_prefix()}{namespace}/{name}"
        return f"{self.registry_prefix()}{name}"

    def path(self, namespace: str = "", name: str = "") -> str:
        """The REST path, e.g. /apis/apps/v1/namespaces/default/deployments/web."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        ns = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        tail = f"/{name}" if name else ""
        return f"{root}{ns}/{self.plural}{tail}"


def _r(
    group: str,
    version: str,
    kind: str,
    plural: str,
    namespaced: bool,
    short: tuple[str, ...] = (),
    *,
    verbs: tuple[str, ...] = ALL_VERBS,
    categories: tuple[str, ...] = (),
    sub: dict[str, str] | None = None,
    stored: bool = True,
    converted_from: str = "",
) -> Resource:
    return Resource(
        group,
        version,
        kind,
        plural,
        namespaced,
        short,
        verbs,
        categories,
        sub or {},
        stored,
        converted_from,
    )


_ALL = ("all",)
_STATUS = {"status": ""}

RESOURCES: tuple[Resource, ...] = (
    # core/v1
    _r(
        "",
        "v1",
        "Namespace",
        "namespaces",
        False,
        ("ns",),
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        sub={"status": "", "finalize": ""},
    ),
    _r(
        "",
        "v1",
        "Pod",
        "pods",
        True,
        ("po",),
        categories=_ALL,
        sub={
            "status": "",
            "binding": "Binding",
            "log": "",
            "exec": "",
            "attach": "",
            "portforward": "",
            "proxy": "",
            "eviction": "Eviction",
            "ephemeralcontainers": "",
        },
    ),
    _r("", "v1", "Node", "nodes", False, ("no",), sub={"status": "", "proxy": ""}),
    # deprecated since 1.19, still answered: probed when asked, never stored
    _r(
        "",
        "v1",
        "ComponentStatus",
        "componentstatuses",
        False,
        ("cs",),
        verbs=READ_VERBS[:2],
        stored=False,
    ),
    _r(
        "",
        "v1",
        "Service",
        "services",
        True,
        ("svc",),
        categories=_ALL,
        verbs=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"),
        sub={"status": "", "proxy": ""},
    ),
    _r("", "v1", "Endpoints", "endpoints", True, ("ep",)),
    _r("", "v1", "ConfigMap", "configmaps", True, ("cm",)),
    _r("", "v1", "Secret", "secrets", True),
    _r("", "v1", "ServiceAccount", "serviceaccounts", True, ("sa",), sub={"token": "TokenRequest"}),
    _r("", "v1", "Event", "events", True, ("ev",)),
    _r("", "v1", "LimitRange", "limitranges", True, ("limits",)),
    _r("", "v1", "ResourceQuota", "resourcequotas", True, ("quota",), sub=_STATUS),
    _r("", "v1", "PersistentVolume", "persistentvolumes", False, ("pv",), sub=_STATUS),
    _r("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("pvc",), sub=_STATUS),
    _r(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        True,
        ("rc",),
        categories=_ALL,
        sub={"status": "", "scale": "Scale"},
    ),
    # apps/v1
    _r(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        True,
        ("deploy",),
        categories=_ALL,
        sub={"status": "", "scale": "Scale"},
    ),
    _r(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        True,
        ("rs",),
        categories=_ALL,
        sub={"status": "", "scale": "Scale"},
    ),
    _r("apps", "v1", "DaemonSet", "daemonsets", True, ("ds",), categories=_ALL, sub=_STATUS),
    _r(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        True,
        ("sts",),
        categories=_ALL,
        sub={"status": "", "scale": "Scale"},
    ),
    _r("apps", "v1", "ControllerRevision", "controllerrevisions", True),
    # batch/v1
    _r("batch", "v1", "Job", "jobs", True, categories=_ALL, sub=_STATUS),
    _r("batch", "v1", "CronJob", "cronjobs", True, ("cj",), categories=_ALL, sub=_STATUS),
    # coordination, discovery, rbac, certificates, events
    _r("coordination.k8s.io", "v1", "Lease", "leases", True),
    _r("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",), sub=_STATUS),
    _r("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True),
    _r("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    _r("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    _r("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    _r("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    _r(
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        False,
        ("csr",),
        sub={"status": "", "approval": ""},
    ),
    _r("events.k8s.io", "v1", "Event", "events", True, ("ev",), converted_from="events"),
    _r(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        ("crd", "crds"),
        categories=("api-extensions",),
        sub=_STATUS,
    ),
    # the groups charts and operators use
    _r("networking.k8s.io", "v1", "Ingress", "ingresses", True, ("ing",), sub=_STATUS),
    _r("networking.k8s.io", "v1", "IngressClass", "ingressclasses", False),
    _r("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, ("netpol",)),
    _r("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, ("pc",)),
    # autoscaling/v2 is the stored form; v1 serves the same objects converted.
    _r(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        True,
        ("hpa",),
        categories=_ALL,
        sub=_STATUS,
    ),
    _r(
        "autoscaling",
        "v1",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        True,
        ("hpa",),
        categories=_ALL,
        sub=_STATUS,
        converted_from="horizontalpodautoscalers.autoscaling",
    ),
    _r("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, ("sc",)),
    _r("storage.k8s.io", "v1", "CSIDriver", "csidrivers", False),
    _r("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", False, sub=_STATUS),
    _r("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", False),
    _r(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
    ),
    _r(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
    ),
    _r("apiregistration.k8s.io", "v1", "APIService", "apiservices", False, sub=_STATUS),
    # authorization and authentication: create-only reviews, never stored
    _r(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        False,
        verbs=("create",),
        stored=False,
    ),
    _r(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        False,
        verbs=("create",),
        stored=False,
    ),
    _r(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        False,
        verbs=("create",),
        stored=False,
    ),
    _r(
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        "tokenreviews",
        False,
        verbs=("create",),
        stored=False,
    ),
    _r(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        False,
        verbs=("create",),
        stored=False,
    ),
    # metrics, served from the kubelets' stats
    _r("metrics.k8s.io", "v1beta1", "PodMetrics", "pods", True, verbs=READ_VERBS[:2], stored=False),
    _r(
        "metrics.k8s.io",
        "v1beta1",
        "NodeMetrics",
        "nodes",
        False,
        verbs=READ_VERBS[:2],
        stored=False,
    ),
)


@dataclass(frozen=True)
class ResourceTable:
    """The resources one apiserver serves: the built-in ones, then the custom ones of the
    CustomResourceDefinitions it serves (`controlplane.apiserver.crds`), so a CRD can
    never shadow a built-in resource. A value: the apiserver replaces its table as CRDs
    come and go, so whoever holds one sees one consistent set, and two apiservers in one
    process never see each other's."""

    custom: tuple[Resource, ...] = ()
    """One entry per served version of each custom resource."""

    def served(self) -> tuple[Resource, ...]:
        """The built-in resources, then the custom ones."""
        return RESOURCES + self.custom

    def groups(self) -> list[tuple[str, list[str]]]:
        """API groups in discovery order (core first), each with its versions."""
        seen: dict[str, list[str]] = {}
        for r in self.served():
            versions = seen.setdefault(r.group, [])
            if r.version not in versions:
                versions.append(r.version)
        return list(seen.items())

    def in_group_version(self, group: str, version: str) -> list[Resource]:
        return [r for r in self.served() if r.group == group and r.version == version]

    def lookup(self, group: str, version: str, plural: str) -> Resource | None:
        for r in self.served():
            if r.group == group and r.version == version and r.plural == plural:
                return r
        return None

    def by_kind(self, api_version: str, kind: str) -> Resource | None:
        """The resource an object of this apiVersion and kind is stored as."""
        for r in self.served():
            if r.api_version == api_version and r.kind == kind:
                return r
        return None


BUILT_IN = ResourceTable()
"""The built-in resources alone: what clients and controllers know in advance (custom
resources they find through discovery)."""
groups = BUILT_IN.groups
in_group_version = BUILT_IN.in_group_version
lookup = BUILT_IN.lookup
by_kind = BUILT_IN.by_kind


def by_group_resource(group_resource: str) -> Resource:
    """The stored resource named "plural.group" ("events" for core): the one a converted
    view's objects are kept as."""
    for r in RESOURCES:
        if r.group_resource == group_resource and r.stored and not r.converted_from:
            return r
    raise KeyError(group_resource)
