"""API errors as Kubernetes reports them: a `Status` object with a reason, an HTTP code
and, for invalid objects, one cause per bad field.

Every error the apiserver returns goes through `StatusError`, so a client (kubectl, the
official client, our own) always gets the shape it knows how to print, never a traceback.
Field errors mirror apimachinery's `field.Error`: the `type` strings and the rendered
messages ("spec.containers[0].name: Required value") are the ones users already know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class FieldErrorType(StrEnum):
    """The `reason` of a cause; the detail words are what Kubernetes prints."""

    NOT_FOUND = "FieldValueNotFound"
    REQUIRED = "FieldValueRequired"
    DUPLICATE = "FieldValueDuplicate"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"
    TYPE_INVALID = "FieldValueTypeInvalid"
    INTERNAL = "InternalError"


_WORDS = {
    FieldErrorType.NOT_FOUND: "Not found",
    FieldErrorType.REQUIRED: "Required value",
    FieldErrorType.DUPLICATE: "Duplicate value",
    FieldErrorType.INVALID: "Invalid value",
    FieldErrorType.NOT_SUPPORTED: "Unsupported value",
    FieldErrorType.FORBIDDEN: "Forbidden",
    FieldErrorType.TOO_LONG: "Too long",
    FieldErrorType.TOO_MANY: "Too many",
    FieldErrorType.TYPE_INVALID: "Invalid value",
    FieldErrorType.INTERNAL: "Internal error",
}

_NO_VALUE = object()


@dataclass(frozen=True)
class FieldError:
    """One problem with one field: `field` is the JSON path ("spec.containers[0].image")."""

    type: FieldErrorType
    field: str
    detail: str = ""
    value: Any = _NO_VALUE

    def message(self) -> str:
        """ "spec.replicas: Invalid value: -1: must be greater than or equal to 0"."""
        return f"{self.field}: {self.body()}"

    def body(self) -> str:
        """The message without the field path ("Invalid value: -1: must be ..."): a
        cause's message, since the cause names its field apart (kubectl prints
        "<field>: <message>", so a path in both would print twice)."""
        parts = [_WORDS[self.type]]
        if (
            self.type
            in (
                FieldErrorType.INVALID,
                FieldErrorType.NOT_SUPPORTED,
                FieldErrorType.DUPLICATE,
                FieldErrorType.TYPE_INVALID,
                FieldErrorType.NOT_FOUND,
            )
            and self.value is not _NO_VALUE
        ):
            parts.append(_render(self.value))
        if self.detail:
            parts.append(self.detail)
        return ": ".join(parts)

    def cause(self) -> dict[str, str]:
        return {"reason": str(self.type), "message": self.body(), "field": self.field}


def _render(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(FieldErrorType.REQUIRED, path, detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(FieldErrorType.INVALID, path, detail, value)


def not_supported(path: str, value: Any, supported: list[str]) -> FieldError:
    quoted = ", ".join(json.dumps(s) for s in supported)
    return FieldError(FieldErrorType.NOT_SUPPORTED, path, f"supported values: {quoted}", value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(FieldErrorType.FORBIDDEN, path, detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(FieldErrorType.DUPLICATE, path, "", value)


def too_long(path: str, limit: int) -> FieldError:
    return FieldError(FieldErrorType.TOO_LONG, path, f"may not be more than {limit} bytes")


@dataclass
class StatusError(Exception):
    """An API error; `status()` is the body the apiserver sends."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    retry_after: int | None = None

    def __str__(self) -> str:
        return self.message

    def status(self) -> dict[str, Any]:
        """The Status, its fields in the order Kubernetes writes them (details before
        code), so that a client comparing bodies byte for byte sees the same."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        details = dict(self.details)
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        if details:
            body["details"] = in_go_order(details)
        body["code"] = self.code
        return body


DETAILS_ORDER = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")
"""StatusDetails' fields in the order Go declares them, so the order it writes them in."""


def in_go_order(details: dict[str, Any]) -> dict[str, Any]:
    """`details` with StatusDetails' fields in Go's order, whatever order they were built
    (or, from an admission webhook, received) in: the official client's create_from_yaml
    tests compare a refused create's body as a string. Fields StatusDetails has no room
    for are dropped, as kube-apiserver drops them when it decodes a webhook's Status."""
    return {key: details[key] for key in DETAILS_ORDER if key in details}


def _details(kind: str, name: str, group: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    out["kind"] = kind
    return out


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> StatusError:
    return StatusError(
        404,
        "NotFound",
        f'{_qualified(resource, group)} "{name}" not found',
        _details(resource, name, group),
    )


def already_exists(resource: str, name: str, group: str = "") -> StatusError:
    return StatusError(
        409,
        "AlreadyExists",
        f'{_qualified(resource, group)} "{name}" already exists',
        _details(resource, name, group),
    )


def conflict(resource: str, name: str, group: str = "", why: str = "") -> StatusError:
    why = why or (
        "the object has been modified; please apply your changes to the latest "
        "version and try again"
    )
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
        _details(resource, name, group),
    )


def invalid_object(kind: str, name: str, errors: list[FieldError], group: str = "") -> StatusError:
    """422 Invalid listing every bad field, e.g. 'Pod "x" is invalid: [a: ..., b: ...]'."""
    messages = [e.message() for e in errors]
    summary = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    details = _details(kind, name, group)
    details["causes"] = [e.cause() for e in errors]
    return StatusError(422, "Invalid", f'{kind} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def gone(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def unauthorized(message: str = "Unauthorized") -> StatusError:
    return StatusError(401, "Unauthorized", message)


def forbidden_request(
    user: str,
    verb: str,
    resource: str,
    group: str,
    namespace: str,
    name: str = "",
    subresource: str = "",
) -> StatusError:
    """403 worded like the RBAC authorizer's refusal."""
    what = _qualified(resource + (f"/{subresource}" if subresource else ""), group)
    target = f'{what} "{name}"' if name else what
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    api_group = f'in API group "{group}"'
    message = (
        f'{target} is forbidden: User "{user}" cannot {verb} resource "{what}" {api_group} {scope}'
    )
    return StatusError(403, "Forbidden", message, _details(resource, name, group))


def forbidden_path(user: str, verb: str, path: str) -> StatusError:
    """403 for a non-resource path (`/metrics`, `/healthz/etcd`), worded as the
    apiserver's refusal; the Go components that delegate authorization word it alike."""
    return StatusError(403, "Forbidden", f'forbidden: User "{user}" cannot {verb} path "{path}"')


def forbidden_object(resource: str, name: str, why: str, group: str = "") -> StatusError:
    """403 for a write refused by policy rather than by RBAC (admission's NewForbidden):
    'nodes "n1" is forbidden: <why>'."""
    target = f'{_qualified(resource, group)} "{name}"' if name else _qualified(resource, group)
    return StatusError(
        403, "Forbidden", f"{target} is forbidden: {why}", _details(resource, name, group)
    )


def method_not_allowed(message: str) -> StatusError:
    return StatusError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media "
        f'types include: application/json, application/yaml (got "{content_type}")',
    )


def too_many_requests(message: str, retry_after: int = 1) -> StatusError:
    return StatusError(429, "TooManyRequests", message, retry_after=retry_after)


def internal_error(message: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {message}")


def service_unavailable(message: str, retry_after: int = 1) -> StatusError:
    return StatusError(503, "ServiceUnavailable", message, retry_after=retry_after)


def timeout(message: str) -> StatusError:
    return StatusError(504, "Timeout", message)
