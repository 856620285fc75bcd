"""CustomResourceDefinitions: a CRD written is a resource served, within a second.

kube-apiserver's apiextensions part does this with a handful of controllers; here one
controller thread (`CRDController`) follows the CRDs in the watch cache and, for each:

* checks its names against what is already served (``NamesAccepted``) and, if they are
  free, serves every ``served`` version: the resource goes into the apiserver's table
  every lookup reads (`ServedAPI.set_custom`: routing, RBAC names, discovery), gets a
  cache of its own in the watch cache (`Cacher.serve`), a strategy with the CRD's rules
  (`CustomResourceStrategy`: structural checks and formats, then the
  ``x-kubernetes-validations`` CEL rules of `kubelab.api.celrules`), its structural
  schema for unknown-field pruning (`FieldSchemas.set_custom`), its printer columns
  (`Printers.set_custom`) and its OpenAPI v3 documents (`OpenAPIService.set_custom`);
  then writes the ``Established`` condition and ``acceptedNames`` into the CRD's status;
* on deletion (the CRD carries the ``customresourcecleanup.apiextensions.k8s.io``
  finalizer from its creation), deletes every object of the resource, then drops the
  finalizer so the CRD goes, and stops serving it when it is gone.

Objects are stored once, in the storage version (``/registry/<group>/<plural>/...``);
the other served versions are `ConvertedView`s whose conversion (strategy ``None``)
changes only the apiVersion, as Kubernetes' does, or, with strategy ``Webhook``, is
the CRD's conversion webhook's (`conversion`).

All of it goes into the apiserver's own `ServedAPI` (`controlplane.apiserver.served`),
never into module state: a second apiserver in the same process serves only its own
CRDs.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
import threading
from collections.abc import Callable
from typing import Any

from kubelab.api import celrules, errors, resources, structural
from kubelab.api.errors import FieldError
from kubelab.api.resources import ALL_VERBS, Resource

from . import conversion, strategies
from .authn import UserInfo
from .registry import STATUS, DeleteOptions, Registry
from .served import ServedAPI
from .strategies.apiextensions import FINALIZER
from .strategies.generic import Strategy
from .views import ConvertedView
from .watchcache import DELETED, Cacher

log = logging.getLogger("kubelab.apiserver.crds")

Object = dict[str, Any]
CRD = next(
    r
    for r in resources.RESOURCES
    if r.group_resource == "customresourcedefinitions.apiextensions.k8s.io"
)
_OBJECT_META = {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(name: str) -> tuple[int, int, int, str]:
    """Sort key of a version, most preferred first as Kubernetes orders them: GA by major
    version (v2 before v1), then betas, then alphas, then anything else by name."""
    m = _VERSION.match(name)
    if m is None:
        return (3, 0, 0, name)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stage, -int(m.group(1)), -int(m.group(3) or 0), name)


def _versions(crd: Object) -> list[Object]:
    versions = [v for v in crd.get("spec", {}).get("versions") or [] if isinstance(v, dict)]
    return sorted(versions, key=lambda v: version_priority(str(v.get("name", ""))))


def _schema(version: Object) -> Object:
    schema: Object = copy.deepcopy(
        (version.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}
    )
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    properties["metadata"] = _OBJECT_META
    return schema


def served_resources(crd: Object) -> list[Resource]:
    """One Resource per served version of `crd`, most preferred version first."""
    spec, names = crd["spec"], crd["spec"]["names"]
    out = []
    for version in _versions(crd):
        if not version.get("served"):
            continue
        subresources = version.get("subresources") or {}
        subs = {}
        if "status" in subresources:
            subs["status"] = ""
        if "scale" in subresources:
            subs["scale"] = "Scale"
        out.append(
            Resource(
                spec["group"],
                str(version["name"]),
                names["kind"],
                names["plural"],
                spec.get("scope") == "Namespaced",
                tuple(names.get("shortNames") or ()),
                ALL_VERBS,
                tuple(names.get("categories") or ()),
                subs,
            )
        )
    return out


def storage_version(crd: Object) -> str:
    for version in crd["spec"].get("versions") or []:
        if version.get("storage"):
            return str(version["name"])
    raise ValueError(f"CustomResourceDefinition {crd['metadata']['name']} has no storage version")


class CustomResourceStrategy(Strategy):
    """A custom resource's rules, from its CRD alone: defaults and validation by the
    version's structural schema (its metadata validated as every resource's); a status
    subresource keeps status out of main writes (and a new object's status is dropped);
    the scale subresource reads the CRD's replica paths."""

    def __init__(self, resource: Resource, crd: Object) -> None:
        super().__init__(resource)
        self.schemas = {str(v["name"]): _schema(v) for v in _versions(crd)}
        scale = (
            next(
                (
                    (v.get("subresources") or {}).get("scale")
                    for v in _versions(crd)
                    if v.get("name") == resource.version
                ),
                None,
            )
            or {}
        )
        self.spec_replicas = str(scale.get("specReplicasPath", ".spec.replicas"))
        self.status_replicas = str(scale.get("statusReplicasPath", ".status.replicas"))
        self.label_selector = str(scale.get("labelSelectorPath", ""))
        self.terminating = False
        """Set when the CRD is being deleted: no new objects then."""

    def _schema_of(self, obj: Object) -> Object:
        version = str(obj.get("apiVersion", "")).rpartition("/")[2]
        return self.schemas.get(version) or self.schemas[self.resource.version]

    def prepare_for_create(self, obj: Object, user: Any = None) -> None:
        if self.terminating:
            raise errors.method_not_allowed(
                f"create not allowed while custom resource definition "
                f"{self.resource.group_resource} is terminating"
            )
        super().prepare_for_create(obj, user)
        if self.status_subresource:
            obj.pop("status", None)

    @property
    def patch_kind(self) -> str:
        """ "Kind.group" (``Service.serving.knative.dev``), which no built-in kind is: a
        strategic merge patch is refused (415) and server-side apply merges as a merge
        patch, never by a built-in kind's list keys."""
        return f"{self.resource.kind}.{self.resource.group}"

    def default(self, obj: Object) -> None:
        """The defaults of the object's version's structural schema, nothing else: a
        custom resource never gets a built-in kind's defaults, whatever its kind."""
        structural.default(self._schema_of(obj), obj)

    def validate(self, obj: Object) -> list[FieldError]:
        schema = self._schema_of(obj)
        found = super().validate(obj) + structural.validate(schema, obj)
        # Rules assume the structure the schema describes (Kubernetes runs them only on
        # values that passed the structural checks).
        return found or celrules.validate(schema, obj)

    def validate_update(self, new: Object, old: Object) -> list[FieldError]:
        schema = self._schema_of(new)
        found = super().validate_update(new, old) + structural.validate(schema, new)
        return found or celrules.validate(schema, new, old)

    def scale_patch(self, replicas: int) -> Object:
        patch: Object = {}
        structural.set_path(patch, self.spec_replicas, replicas)
        return patch

    def to_scale(self, obj: Object) -> Object:
        scale = super().to_scale(obj)
        scale["spec"]["replicas"] = int(structural.json_path(obj, self.spec_replicas) or 0)
        scale["status"]["replicas"] = int(structural.json_path(obj, self.status_replicas) or 0)
        selector = structural.json_path(obj, self.label_selector) if self.label_selector else None
        scale["status"]["selector"] = selector if isinstance(selector, str) else ""
        return scale


def _apiversion_to(api_version: str) -> Callable[[Object], Object]:
    def convert(obj: Object) -> Object:
        return {**obj, "apiVersion": api_version}

    return convert


class CRDController:
    """Serves the custom resources of the CRDs in the watch cache (see the module doc)."""

    def __init__(
        self,
        api: ServedAPI,
        registry: Registry,
        cacher: Cacher,
        views: dict[str, ConvertedView],
        user: UserInfo,
    ) -> None:
        self.api = api
        self.registry, self.cacher, self.views, self.user = registry, cacher, views, user
        self.served: dict[str, list[Resource]] = {}
        """CRD name -> the resources served for it (one per served version)."""
        self.schemas: dict[str, dict[str, Object]] = {}
        """CRD name -> version -> the version's schema (see `_schema`)."""
        self.specs: dict[str, Object] = {}
        """CRD name -> the spec served (a change of it is served anew)."""
        self.synced = threading.Event()
        """Set once every CRD stored at start has been served (``/readyz`` waits for it,
        so that clients of a restarted apiserver never see a custom resource missing)."""
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="crd-controller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._follow()
            except Exception:
                log.exception("crds: following CustomResourceDefinitions failed; retrying")
                self._stopped.wait(1.0)

    def _follow(self) -> None:
        w, first, _ = self.cacher.watch(CRD, CRD.registry_prefix(), lambda o: True, None)
        try:
            current = {ev.object["metadata"]["name"]: ev.object for ev in first}
            for name in set(self.served) - set(current):
                self._unserve(name)
            pending = {}  # the CRDs that need another pass, by name
            for crd in current.values():
                if self._sync(crd):
                    pending[crd["metadata"]["name"]] = crd
            self.synced.set()
            for ev in self.cacher.events(w, lambda: 1.0):
                if self._stopped.is_set():
                    return
                if ev is None:  # a tick: another pass for those that need one
                    for name, crd in list(pending.items()):
                        if not self._sync(crd):
                            pending.pop(name, None)
                    continue
                name = ev.object["metadata"]["name"]
                pending.pop(name, None)
                if ev.type == DELETED:
                    self._unserve(name)
                elif self._sync(ev.object):
                    pending[name] = ev.object
        finally:
            self.cacher.unwatch(CRD, w)

    # -- one CRD -------------------------------------------------------------------------

    def _sync(self, crd: Object) -> bool:
        """Serve `crd` or clean up after it; True when it needs another pass (its
        deletion waits on objects, or a write failed): one CRD never stalls the others."""
        name = crd["metadata"]["name"]
        try:
            if crd["metadata"].get("deletionTimestamp"):
                return not self._clean_up(crd)
            conflict = self._names_conflict(crd)
            if not conflict:
                self._serve(crd)
            self._set_status(crd, conflict)
            return False
        except (KeyError, TypeError, ValueError) as exc:  # a shape validation let through
            log.warning("crds: cannot serve %s: %s", name, exc)
            return False
        except errors.StatusError as exc:
            log.warning("crds: %s: %s; trying again", name, exc)
            return True

    def _names_conflict(self, crd: Object) -> str:
        spec = crd["spec"]
        plural, group = spec["names"]["plural"], spec["group"]
        mine = self.served.get(crd["metadata"]["name"], [])
        for r in self.api.resources.served():
            if r in mine or r.group != group:
                continue
            if r.plural == plural:
                return f'"{plural}" is already in use'
            if r.kind == spec["names"]["kind"]:
                return f'"{r.kind}" is already in use'
        return ""

    def _serve(self, crd: Object) -> None:
        name = crd["metadata"]["name"]
        served = served_resources(crd)
        storage = storage_version(crd)
        stored = next(
            (r for r in served if r.version == storage),
            None,
        ) or Resource(
            crd["spec"]["group"],
            storage,
            crd["spec"]["names"]["kind"],
            crd["spec"]["names"]["plural"],
            crd["spec"].get("scope") == "Namespaced",
        )
        if self.specs.get(name) == crd["spec"]:
            return
        self._forget(name)
        self.cacher.serve(stored)
        self.api.strategies.register(CustomResourceStrategy(stored, crd))
        schemas = {str(v["name"]): _schema(v) for v in _versions(crd)}
        for version, schema in schemas.items():
            self.api.field_schemas.set_custom(stored.group, version, stored.kind, schema)
        converter = (
            functools.partial(conversion.webhook_converter, crd)
            if conversion.uses_webhook(crd)
            else _apiversion_to
        )
        for r in served:
            if r.version != storage:
                self.views[_view_key(r)] = ConvertedView(
                    self.registry,
                    r,
                    stored,
                    converter(r.api_version),
                    converter(stored.api_version),
                )
        preferred = next(v for v in _versions(crd) if v.get("served"))
        columns = preferred.get("additionalPrinterColumns") or [
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]
        self.api.printers.set_custom(stored.group_resource, columns)
        self.served[name] = served
        self.specs[name] = crd["spec"]
        self.schemas[name] = schemas
        self._publish()
        log.info(
            "crds: serving %s (versions %s, storage %s)",
            name,
            ",".join(r.version for r in served),
            storage,
        )

    def _forget(self, name: str) -> None:
        self.specs.pop(name, None)
        self.schemas.pop(name, None)
        for r in self.served.pop(name, []):
            self.api.field_schemas.set_custom(r.group, r.version, r.kind, None)
            self.views.pop(_view_key(r), None)

    def _unserve(self, name: str) -> None:
        gone = self.served.get(name, [])
        self._forget(name)
        if gone:
            self.api.strategies.unregister(gone[0].group_resource)
            self.api.printers.set_custom(gone[0].group_resource, None)
            self.cacher.unserve(gone[0])
            log.info("crds: no longer serving %s", name)
        self._publish()

    def _publish(self) -> None:
        self.api.set_custom(tuple(r for rs in self.served.values() for r in rs))
        self.api.openapi.set_custom(
            (r, self.schemas[name][r.version])
            for name, served in self.served.items()
            for r in served
        )

    def _set_status(self, crd: Object, conflict: str) -> None:
        names = crd["spec"]["names"]
        accepted = {k: v for k, v in names.items() if v}
        established = not conflict
        wanted = [
            _condition(
                "NamesAccepted",
                not conflict,
                "NoConflicts" if not conflict else "NameConflict",
                conflict or "no conflicts found",
            ),
            _condition(
                "Established",
                established,
                "InitialNamesAccepted" if established else "NotAccepted",
                "the initial names have been accepted"
                if established
                else "not all names are accepted",
            ),
        ]
        status = crd.get("status") or {}
        have = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        if all(have.get(c["type"]) == c["status"] for c in wanted) and (
            not established or status.get("acceptedNames") == accepted
        ):
            return

        def change(obj: Object) -> Object:
            new = copy.deepcopy(obj)
            st = new.setdefault("status", {})
            ours = ("NamesAccepted", "Established")
            kept = [c for c in st.get("conditions") or [] if c.get("type") not in ours]
            st["conditions"] = kept + wanted
            if established:
                st["acceptedNames"] = accepted
                st["storedVersions"] = sorted(
                    set(st.get("storedVersions") or []) | {storage_version(obj)}
                )
            return new

        try:
            self.registry.update_with(CRD, "", crd["metadata"]["name"], change, self.user, STATUS)
        except errors.StatusError as exc:
            if exc.code != 404:
                raise

    def _clean_up(self, crd: Object) -> bool:
        """Delete the CRD's objects; once none is left, drop its finalizer. True when done."""
        name = crd["metadata"]["name"]
        served = self.served.get(name)
        if served:
            r = next((x for x in served if x.version == storage_version(crd)), served[0])
            strategy = self.api.strategies.for_resource(r)
            if isinstance(strategy, CustomResourceStrategy):
                strategy.terminating = True
            items, _ = self.cacher.list_objects(r, r.registry_prefix(), lambda o: True)
            for obj in items:
                meta = obj["metadata"]
                if meta.get("deletionTimestamp"):
                    continue
                try:
                    self.registry.delete(
                        r, meta.get("namespace", ""), meta["name"], DeleteOptions(), self.user
                    )
                except errors.StatusError as exc:
                    if exc.code != 404:
                        raise
            if items:
                return False
        if FINALIZER not in (crd["metadata"].get("finalizers") or []):
            return True

        def drop(obj: Object) -> Object:
            new = copy.deepcopy(obj)
            new["metadata"]["finalizers"] = [
                f for f in new["metadata"].get("finalizers") or [] if f != FINALIZER
            ]
            return new

        try:
            self.registry.update_with(CRD, "", name, drop, self.user)
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
        log.info("crds: deleted the objects of %s; it can go", name)
        return True


def _view_key(r: Resource) -> str:
    """`APIServer.views` key of a non-storage version of a custom resource (as
    `APIServer.registry_for` looks it up: group version and plural)."""
    return f"{r.group_version}/{r.plural}"


def _condition(kind: str, ok: bool, reason: str, message: str) -> Object:
    return {
        "type": kind,
        "status": "True" if ok else "False",
        "lastTransitionTime": strategies.now_rfc3339(),
        "reason": reason,
        "message": message,
    }
