"""ResourceQuota: a create that would push a namespace over a quota's ``hard`` limits is
refused with the quota's numbers (object counts, ``pods`` or ``count/pods`` for core
resources and ``count/deployments.apps`` for other groups; requests and limits of pods).
Usage is counted from the watch cache at admission time, so two creates racing for the
last unit can both pass; Kubernetes closes that gap by writing the quota's usage with a
compare-and-swap first."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kubelab.api import errors, resources
from kubelab.api.quantity import Quantity, parse_quantity
from kubelab.api.resources import Resource

from ..registry import Attributes
from .interfaces import Lookup, Object, ValidationInterface


class ResourceQuota(ValidationInterface):
    NAME = "ResourceQuota"
    OPERATIONS = frozenset({"CREATE"})

    def __init__(self, lookup: Lookup) -> None:
        super().__init__(lookup)
        self.list_objects = lookup.list_objects

    def validate(self, attrs: Attributes) -> None:
        if attrs.subresource or attrs.object is None or not attrs.resource.namespaced:
            return
        self._quota(attrs)

    def _quota(self, attrs: Attributes) -> None:
        quotas = self.list_objects("resourcequotas", attrs.namespace)
        if not quotas:
            return
        adding = _usage(attrs.resource, attrs.object or {})
        current: dict[str, Fraction] | None = None
        for q in quotas:
            hard = q.get("spec", {}).get("hard") or {}
            relevant = {k: v for k, v in hard.items() if k in adding}
            if not relevant:
                continue
            if current is None:
                current = self._namespace_usage(attrs.namespace, attrs.resource)
            over = [
                k for k, v in relevant.items() if current.get(k, Fraction(0)) + adding[k] > _q(v)
            ]
            if over:
                requested = ",".join(f"{k}={_fmt(adding[k])}" for k in over)
                used = ",".join(f"{k}={_fmt(current.get(k, Fraction(0)))}" for k in over)
                limited = ",".join(f"{k}={relevant[k]}" for k in over)
                raise errors.StatusError(
                    403,
                    "Forbidden",
                    f'{attrs.resource.plural} "{attrs.name}" is forbidden: exceeded quota: '
                    f"{q['metadata']['name']}, requested: {requested}, used: {used}, "
                    f"limited: {limited}",
                )

    def _namespace_usage(self, namespace: str, creating: Resource) -> dict[str, Fraction]:
        """What the namespace uses now: the core kinds quotas know by name, and the kind
        being created (for its ``count/<resource>.<group>``)."""
        total: dict[str, Fraction] = {}
        kinds = [resources.lookup("", "v1", plural) for plural in _QUOTA_CORE]
        if creating.plural not in _QUOTA_CORE or creating.group:
            kinds.append(creating)
        for r in kinds:
            assert r is not None
            for obj in self.list_objects(
                f"{r.plural}.{r.group}" if r.group else r.plural, namespace
            ):
                if r.plural == "pods" and obj.get("status", {}).get("phase") in (
                    "Succeeded",
                    "Failed",
                ):
                    continue
                for k, v in _usage(r, obj).items():
                    total[k] = total.get(k, Fraction(0)) + v
        return total


_QUOTA_CORE = (
    "pods",
    "services",
    "configmaps",
    "secrets",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "resourcequotas",
)
"""Core kinds a quota can also count by their plain name (``pods: 10``)."""


def _usage(r: Resource, obj: Object) -> dict[str, Fraction]:
    """What one object counts against a quota."""
    plural = r.plural
    # count/pods for core resources, count/deployments.apps for the others
    out = {f"count/{plural}.{r.group}" if r.group else f"count/{plural}": Fraction(1)}
    if plural in _QUOTA_CORE and not r.group:
        out[plural] = Fraction(1)
    if plural == "pods":
        for c in obj.get("spec", {}).get("containers", []):
            res = c.get("resources", {})
            for field in ("requests", "limits"):
                for name, value in (res.get(field) or {}).items():
                    key = f"{field}.{name}"
                    out[key] = out.get(key, Fraction(0)) + _q(value)
                    if field == "requests":
                        out[name] = out.get(name, Fraction(0)) + _q(value)
    return out


def _q(value: Any) -> Fraction:
    """A quantity's exact value; a malformed one (validation reports it) counts as 0."""
    try:
        return parse_quantity(value).value
    except ValueError:
        return Fraction(0)


def _fmt(value: Fraction) -> str:
    return str(Quantity(value))
