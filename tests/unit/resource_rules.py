"""The rules of a resource as the registry applies them (its strategy's defaulter and
validator), for the unit tests of defaulting and validation: resources are named by group
and resource, as the strategies key them, never by kind."""

from __future__ import annotations

from typing import Any

from controlplane.apiserver.strategies import Strategies, Strategy
from kubelab.api.errors import FieldError
from kubelab.api.resources import Resource, by_group_resource

Object = dict[str, Any]

WIDGETS = Resource("example.com", "v1", "Widget", "widgets", True)
"""A custom resource: metadata rules only, no defaults."""
_STRATEGIES = Strategies()


def strategy(resource: str) -> Strategy:
    """The strategy of a built-in resource ("pods", "jobs.batch"), or the default one of
    the custom resource "widgets.example.com"."""
    if resource == WIDGETS.group_resource:
        return Strategy(WIDGETS)
    return _STRATEGIES.for_resource(by_group_resource(resource))


def apply_defaults(resource: str, obj: Object) -> None:
    strategy(resource).default(obj)


def validate(resource: str, obj: Object, old: Object | None = None) -> list[FieldError]:
    rules = strategy(resource)
    return rules.validate(obj) if old is None else rules.validate_update(obj, old)
