"""LimitRanger: containers without requests/limits get their namespace's LimitRange
defaults; values outside its min/max are refused."""

from __future__ import annotations

from kubelab.api import errors
from kubelab.api.quota import quantity

from ..registry import Attributes
from .interfaces import MutationInterface, created_pod


class LimitRanger(MutationInterface):
    NAME = "LimitRanger"
    OPERATIONS = frozenset({"CREATE"})

    def admit(self, attrs: Attributes) -> None:
        pod = created_pod(attrs)
        if pod is None:
            return
        for lr in self.lookup.list_objects("limitranges", attrs.namespace):
            for item in lr.get("spec", {}).get("limits", []):
                if item.get("type") != "Container":
                    continue
                for c in pod.get("spec", {}).get("containers", []):
                    res = c.setdefault("resources", {})
                    for field, default in (
                        ("limits", item.get("default")),
                        ("requests", item.get("defaultRequest") or item.get("default")),
                    ):
                        for name, value in (default or {}).items():
                            res.setdefault(field, {}).setdefault(name, value)
                    for name, low in (item.get("min") or {}).items():
                        got = res.get("requests", {}).get(name)
                        if got is not None and quantity(got) < quantity(low):
                            raise errors.StatusError(
                                403,
                                "Forbidden",
                                f"minimum {name} usage per Container is "
                                f"{low}, but request is {got}",
                            )
                    for name, high in (item.get("max") or {}).items():
                        got = res.get("limits", {}).get(name)
                        if got is not None and quantity(got) > quantity(high):
                            raise errors.StatusError(
                                403,
                                "Forbidden",
                                f"maximum {name} usage per Container is {high}, but limit is {got}",
                            )
