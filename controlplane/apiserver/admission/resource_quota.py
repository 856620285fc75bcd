"""ResourceQuota: a create that would push a namespace over a quota's ``hard`` limits is
refused with the quota's numbers (what counts: `kubelab.api.quota`).

The create is charged to the quota first, as Kubernetes does: its ``status.used`` is
raised with a compare-and-swap on the quota object in the store (`Lookup.charge`), so of
two creates racing for the last unit one writes first and the other, retrying on the new
value, is refused. A key the quota's status does not know yet (the controller has not
counted it) is counted from the watch cache. What a create was charged for is given back
only when the resourcequota controller recounts (after a failed create, or a delete).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from fractions import Fraction

from kubelab.api import errors, quota, resources
from kubelab.api.resources import Resource

from ..registry import Attributes
from .interfaces import Lookup, Object, ValidationInterface


class ResourceQuota(ValidationInterface):
    NAME = "ResourceQuota"
    OPERATIONS = frozenset({"CREATE"})

    def __init__(self, lookup: Lookup) -> None:
        super().__init__(lookup)
        self.list_objects = lookup.list_objects
        self.charge = lookup.charge

    def validate(self, attrs: Attributes) -> None:
        if attrs.subresource or attrs.object is None or not attrs.resource.namespaced:
            return
        quotas = self.list_objects("resourcequotas", attrs.namespace)
        if not quotas:
            return
        adding = quota.usage(attrs.resource, attrs.object or {})
        counted: dict[str, Fraction] = {}

        def cache_usage() -> dict[str, Fraction]:
            if not counted:
                counted.update(self._namespace_usage(attrs.namespace, attrs.resource))
            return counted

        for q in quotas:
            hard = q.get("spec", {}).get("hard") or {}
            if not any(k in adding for k in hard):
                continue
            name = q["metadata"]["name"]

            def charged(stored: Object, name: str = name) -> Object | None:
                return _charged(attrs, stored, name, adding, cache_usage)

            if self.charge is None or attrs.dry_run:
                charged(copy.deepcopy(q))
            else:
                self.charge(attrs.namespace, name, charged)

    def _namespace_usage(self, namespace: str, creating: Resource) -> dict[str, Fraction]:
        """What the namespace uses now: the core kinds quotas know by name, and the kind
        being created (for its ``count/<resource>.<group>``)."""
        total: dict[str, Fraction] = {}
        kinds = [resources.lookup("", "v1", plural) for plural in quota.CORE_COUNTED]
        if creating.plural not in quota.CORE_COUNTED or creating.group:
            kinds.append(creating)
        for r in kinds:
            assert r is not None
            plural = f"{r.plural}.{r.group}" if r.group else r.plural
            for k, v in quota.total(r, self.list_objects(plural, namespace)).items():
                total[k] = total.get(k, Fraction(0)) + v
        return total


def _charged(
    attrs: Attributes,
    stored: Object,
    name: str,
    adding: dict[str, Fraction],
    cache_usage: Callable[[], dict[str, Fraction]],
) -> Object | None:
    """`stored` (a quota) charged with `adding`, or a 403 if that is over its hard
    limits."""
    hard = (stored.get("spec") or {}).get("hard") or {}
    relevant = {k: v for k, v in hard.items() if k in adding}
    if not relevant:
        return None
    status = stored.setdefault("status", {})
    used = status.setdefault("used", {})
    current = {
        k: quota.quantity(used[k]) if k in used else cache_usage().get(k, Fraction(0))
        for k in relevant
    }
    over = [k for k, v in relevant.items() if current[k] + adding[k] > quota.quantity(v)]
    if over:
        requested = ",".join(f"{k}={quota.fmt(adding[k])}" for k in over)
        in_use = ",".join(f"{k}={quota.fmt(current[k])}" for k in over)
        limited = ",".join(f"{k}={relevant[k]}" for k in over)
        raise errors.StatusError(
            403,
            "Forbidden",
            f'{attrs.resource.plural} "{attrs.name}" is forbidden: exceeded quota: '
            f"{name}, requested: {requested}, used: {in_use}, limited: {limited}",
        )
    for k in relevant:
        used[k] = quota.fmt(current[k] + adding[k])
    status["hard"] = dict(hard)
    return stored
