"""Building blocks shared by every validator: field paths, safe readers for plain JSON
objects, and the checks many kinds repeat (labels, selectors, counts, quantities,
immutable fields).

Objects reach validation as decoded JSON, not typed structs, so a field can be missing
or of the wrong type. The readers here return an empty value in that case, and the few
checks that need a number report a wrong type as an error rather than raising: a bad
request must become a 422 listing every problem, never a 500.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from kubelab.api.errors import FieldError, FieldErrorType, invalid, required
from kubelab.api.quantity import Quantity, parse_quantity
from kubelab.api.validation import formats

Errors = list[FieldError]

IMMUTABLE = "field is immutable"
NEGATIVE = "must be greater than or equal to 0"


class Path(str):
    """A field path rendered the way apimachinery renders it: spec.containers[0].image,
    metadata.annotations[example.com/key]."""

    __slots__ = ()

    def child(self, *names: str) -> Path:
        text = ".".join(names)
        return Path(f"{self}.{text}" if self else text)

    def item(self, i: int) -> Path:
        return Path(f"{self}[{i}]")

    def key(self, key: str) -> Path:
        return Path(f"{self}[{key}]")


ROOT = Path("")


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def dicts(value: Any) -> list[dict[str, Any]]:
    """The entries of a list of objects; a non-object entry reads as an empty object."""
    return [mapping(entry) for entry in items(value)]


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def integer(obj: dict[str, Any], key: str, path: Path, errors: Errors) -> int | None:
    """obj[key] as an int, None when absent; a non-integer is reported, not raised."""
    value = obj.get(key)
    if value is None or is_int(value):
        return value
    errors.append(FieldError(FieldErrorType.TYPE_INVALID, path, "must be an integer", value))
    return None


def non_negative(obj: dict[str, Any], key: str, path: Path, errors: Errors) -> int | None:
    value = integer(obj, key, path, errors)
    if value is not None and value < 0:
        errors.append(invalid(path, value, NEGATIVE))
    return value


def names(entries: list[dict[str, Any]]) -> set[str]:
    return {text(entry.get("name")) for entry in entries}


def messages(path: Path, value: Any, problems: list[str]) -> Errors:
    """One Invalid error per problem a `formats.is_*` check found."""
    return [invalid(path, value, problem) for problem in problems]


def label_key(key: str, path: Path) -> Errors:
    return messages(path, key, formats.is_qualified_name(key))


def labels(value: Any, path: Path) -> Errors:
    """Keys and values of a label map; like Kubernetes, errors point at the map itself."""
    errors: Errors = []
    for key, val in mapping(value).items():
        errors += label_key(key, path)
        errors += messages(path, val, formats.is_label_value(text(val)))
    return errors


def set_operator_values(operator: Any, values: list[Any], at: Path) -> Errors | None:
    """The values a set-based requirement at `at` has against its operator: In and
    NotIn need some, Exists and DoesNotExist none. None for another operator (label
    selectors refuse it; node selectors also know Gt and Lt)."""
    if operator in ("In", "NotIn"):
        detail = "must be specified when `operator` is 'In' or 'NotIn'"
        return [] if values else [required(at.child("values"), detail)]
    if operator in ("Exists", "DoesNotExist"):
        detail = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        return [FieldError(FieldErrorType.FORBIDDEN, at.child("values"), detail)] if values else []
    return None


def label_selector(value: Any, path: Path) -> Errors:
    selector = mapping(value)
    errors = labels(selector.get("matchLabels"), path.child("matchLabels"))
    for i, expr in enumerate(dicts(selector.get("matchExpressions"))):
        at = path.child("matchExpressions").item(i)
        operator, values = expr.get("operator"), items(expr.get("values"))
        checked = set_operator_values(operator, values, at)
        if checked is None:
            checked = [invalid(at.child("operator"), operator, "not a valid selector operator")]
        errors += checked
        errors += label_key(text(expr.get("key")), at.child("key"))
    return errors


def selector_matches(selector: dict[str, Any], target: dict[str, Any]) -> bool:
    """Whether a label selector selects a label set (an empty selector selects all)."""
    for key, val in mapping(selector.get("matchLabels")).items():
        if target.get(key) != val:
            return False
    for expr in dicts(selector.get("matchExpressions")):
        key, operator = text(expr.get("key")), expr.get("operator")
        values = items(expr.get("values"))
        present = key in target
        if operator == "In" and not (present and target[key] in values):
            return False
        if operator == "NotIn" and present and target[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def immutable(new: Any, old: Any, path: Path) -> Errors:
    return [] if new == old else [invalid(path, new, IMMUTABLE)]


def quantity(value: Any, path: Path, errors: Errors) -> Quantity | None:
    """Parse a quantity field; a malformed one is reported with Kubernetes' parse error."""
    try:
        return parse_quantity(value)
    except ValueError as exc:
        errors.append(invalid(path, value, str(exc)))
        return None


def resource_quantity(value: Any, path: Path, errors: Errors) -> Quantity | None:
    """A resource amount: well formed and not negative (ValidateResourceQuantityValue)."""
    amount = quantity(value, path, errors)
    if amount is not None and amount.value < 0:
        errors.append(invalid(path, str(amount), NEGATIVE))
    return amount
