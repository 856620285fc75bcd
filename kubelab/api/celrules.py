"""CustomResourceDefinition validation rules: ``x-kubernetes-validations``, Common
Expression Language (CEL) expressions in the schema, evaluated on every write of a
custom object after the structural checks (`kubelab.api.structural`).

A rule sits on any node of the schema. It is evaluated with ``self`` bound to the value
at that node, when the object has one, and must be true; ``oldSelf`` is the value at the
same place in the object before an update. A rule that names ``oldSelf`` is a
*transition rule*: it is evaluated only on an update where the old object had a value
there (so ``self == oldSelf`` makes a field immutable once set). Old values are found
through object properties and map keys, as Kubernetes correlates them; not through list
items, which Kubernetes correlates only for ``listType: map`` lists.

A rule that fails is reported as Kubernetes reports it: ``<path>: Invalid value:
"<schema type>": <message>``, where the message is the rule's ``messageExpression``
(when it evaluates to a non-empty string), else its ``message``, else ``failed rule:
<rule>``; ``fieldPath`` (relative to the node, e.g. ``.replicas``) moves the error's
path and ``reason`` picks its type (FieldValueInvalid, FieldValueForbidden,
FieldValueRequired, FieldValueDuplicate). A rule that cannot be evaluated on a value
(a missing key without ``has()``, a type mismatch) is an Invalid error naming the rule
and the evaluation error. A rule that does not compile is refused with the CRD
(`compile_errors`).

The evaluator is cel-python (`celpy`), a pure-Python implementation of CEL's standard
definitions. Departures: Kubernetes' extension libraries (``quantity``, ``url``,
``ip``, ``cidr``, ``format``, the strings and lists extensions beyond the standard
ones, ``isSorted``) are not there, and there is no cost budget.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import celpy
from celpy import celparser, celtypes, evaluation
from celpy.adapter import json_to_cel

from kubelab.api import errors
from kubelab.api.errors import FieldError

Schema = dict[str, Any]
RULES = "x-kubernetes-validations"
_OLD_SELF = re.compile(r"\boldSelf\b")
_ENV = celpy.Environment()
_ABSENT = object()


@functools.lru_cache(maxsize=1024)
def _program(expression: str) -> celpy.Runner:
    """The compiled expression (compiling is the expensive part: once per rule)."""
    return _ENV.program(_ENV.compile(expression))


def compile_errors(schema: Schema, path: str) -> list[FieldError]:
    """The rules of `schema` (the CRD field at `path`) that do not compile."""
    found: list[FieldError] = []
    for where, node in _nodes(schema, path):
        for i, rule in enumerate(node.get(RULES) or []):
            for key in ("rule", "messageExpression"):
                expression = rule.get(key) if isinstance(rule, dict) else None
                if not isinstance(expression, str):
                    if key == "rule":
                        found.append(errors.required(f"{where}.{RULES}[{i}].rule"))
                    continue
                try:
                    _program(expression)
                except (celparser.CELParseError, evaluation.CELSyntaxError) as exc:
                    detail = f"compilation failed: {str(exc).splitlines()[0]}"
                    found.append(errors.invalid(f"{where}.{RULES}[{i}].{key}", expression, detail))
    return found


def _nodes(schema: Schema, path: str) -> Iterator[tuple[str, Schema]]:
    """Every schema node under `schema`, with its path in the CRD."""
    yield path, schema
    for name, child in (schema.get("properties") or {}).items():
        if isinstance(child, dict):
            yield from _nodes(child, f"{path}.properties[{name}]")
    for key in ("items", "additionalProperties"):
        child = schema.get(key)
        if isinstance(child, dict):
            yield from _nodes(child, f"{path}.{key}")


def validate(schema: Schema, new: Any, old: Any = _ABSENT, path: str = "") -> list[FieldError]:
    """Every rule of `schema` that `new` (at `path`) breaks; `old` is the value before an
    update (absent on a create)."""
    found: list[FieldError] = []
    if new is None:
        return found
    for rule in schema.get(RULES) or []:
        error = _check(rule, schema, new, old, path)
        if error is not None:
            found.append(error)
    properties = schema.get("properties") or {}
    if isinstance(new, dict):
        old_map = old if isinstance(old, dict) else {}
        extra = schema.get("additionalProperties")
        for key, value in new.items():
            child = properties.get(key) or (extra if isinstance(extra, dict) else None)
            if isinstance(child, dict):
                where = f"{path}.{key}" if path else key
                found += validate(child, value, old_map.get(key, _ABSENT), where)
    items = schema.get("items")
    if isinstance(new, list) and isinstance(items, dict):
        for i, value in enumerate(new):
            found += validate(items, value, _ABSENT, f"{path}[{i}]")
    return found


def _check(
    rule: dict[str, Any], schema: Schema, new: Any, old: Any, path: str
) -> FieldError | None:
    expression = str(rule.get("rule") or "")
    transition = _OLD_SELF.search(expression) is not None
    if transition and old is _ABSENT:
        return None
    activation = {"self": json_to_cel(new)}
    if transition:
        activation["oldSelf"] = json_to_cel(old)
    where = path or "<root>"
    field_path = rule.get("fieldPath")
    if isinstance(field_path, str) and field_path:
        where = (path + field_path) if path else field_path.lstrip(".")
    type_ = str(schema.get("type") or "object")
    try:
        result: object = _program(expression).evaluate(activation)
    except (celparser.CELParseError, evaluation.CELEvalError, evaluation.CELSyntaxError) as exc:
        result = exc
    if isinstance(result, Exception):
        why = result.args[0] if result.args else result
        return errors.invalid(where, type_, f"{expression}: evaluation failed: {why}")
    if isinstance(result, celtypes.BoolType) and bool(result):
        return None
    message = _message(rule, activation) or f"failed rule: {expression}"
    reason = rule.get("reason") or "FieldValueInvalid"
    if reason == "FieldValueForbidden":
        return errors.forbidden(where, message)
    if reason == "FieldValueRequired":
        return errors.required(where, message)
    if reason == "FieldValueDuplicate":
        return errors.duplicate(where, type_)
    return errors.invalid(where, type_, message)


def _message(rule: dict[str, Any], activation: dict[str, Any]) -> str:
    expression = rule.get("messageExpression")
    if isinstance(expression, str) and expression:
        try:
            text = _program(expression).evaluate(activation)
        except (celparser.CELParseError, evaluation.CELEvalError, evaluation.CELSyntaxError):
            text = None
        if isinstance(text, str) and text.strip():
            return str(text)
    message = rule.get("message")
    return str(message) if message else ""
