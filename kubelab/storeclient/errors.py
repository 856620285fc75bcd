"""The store's errors: gRPC status codes, as etcd's JSON gateway reports them, and one
exception class per code that callers catch (`CompactedError`, `Unavailable`, ...).

Several conditions share a code, so the message tells them apart: "required revision has
been compacted" and "required revision is a future revision" are both OUT_OF_RANGE, and
become `CompactedError` and `FutureRevisionError`.
"""

from __future__ import annotations

from typing import Any

from kubelab.grpccodes import GrpcCode


class StoreError(Exception):
    """An error answered by the store (or standing in for one), with its gRPC code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidArgument(StoreError):
    """The request is malformed (e.g. "etcdserver: key is not provided")."""


class DeadlineExceeded(StoreError):
    """No answer in time; a write may or may not have been applied."""


class NotFound(StoreError):
    """A lease or member that does not exist."""


class PermissionDenied(StoreError):
    """Authenticated, but not allowed."""


class Unauthenticated(StoreError):
    """Credentials missing or invalid."""


class ResourceExhausted(StoreError):
    """The store is out of space ("database space exceeded") or overloaded."""


class FailedPrecondition(StoreError):
    """The request conflicts with the current state (e.g. promoting a lagging learner)."""


class OutOfRange(StoreError):
    """A revision outside what the store holds."""


class CompactedError(OutOfRange):
    """The revision asked for has been compacted away."""


class FutureRevisionError(OutOfRange):
    """The revision asked for is newer than the store's current revision."""


class Unimplemented(StoreError):
    """The store does not serve this call (kubelab's store grows into the full API)."""


class Internal(StoreError):
    """The store failed internally."""


class Unavailable(StoreError):
    """No endpoint could serve the request: unreachable, or without a leader."""


class Unreachable(Unavailable):
    """Every endpoint failed; the message names each one and why (refused, TLS, ...)."""


_ERROR_CLASSES: dict[int, type[StoreError]] = {
    GrpcCode.INVALID_ARGUMENT: InvalidArgument,
    GrpcCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    GrpcCode.NOT_FOUND: NotFound,
    GrpcCode.PERMISSION_DENIED: PermissionDenied,
    GrpcCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    GrpcCode.FAILED_PRECONDITION: FailedPrecondition,
    GrpcCode.OUT_OF_RANGE: OutOfRange,
    GrpcCode.UNIMPLEMENTED: Unimplemented,
    GrpcCode.INTERNAL: Internal,
    GrpcCode.UNAVAILABLE: Unavailable,
    GrpcCode.UNAUTHENTICATED: Unauthenticated,
}


def error_from(code: int, message: str) -> StoreError:
    """The most specific `StoreError` for a gRPC code and message.

    OUT_OF_RANGE covers both a compacted and a future revision, so the message decides;
    callers (the apiserver's 410 Gone, a watcher's re-list) need to tell them apart.
    """
    if code == GrpcCode.OUT_OF_RANGE:
        if "required revision has been compacted" in message:
            return CompactedError(code, message)
        if "required revision is a future revision" in message:
            return FutureRevisionError(code, message)
    return _ERROR_CLASSES.get(code, StoreError)(code, message)


def error_from_body(body: Any, http_status: int, where: str) -> StoreError:
    """The error in a gateway error body, either shape (see the module docstring)."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):  # an error frame inside a stream
            code = err.get("grpc_code", GrpcCode.UNKNOWN)
            return error_from(int(code), str(err.get("message", "")))
        if "code" in body:
            return error_from(int(body["code"]), str(body.get("message") or err or ""))
    if http_status in (404, 405):
        return Unimplemented(
            GrpcCode.UNIMPLEMENTED, f"{where} is not served here (HTTP {http_status})"
        )
    code = GrpcCode.UNAVAILABLE if http_status in (502, 503, 504) else GrpcCode.UNKNOWN
    return error_from(code, f"{where}: HTTP {http_status} without an error body")
