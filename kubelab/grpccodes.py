"""gRPC status codes, the one table of them: etcd's JSON gateway carries them in its error
bodies (``"code"``, or ``"grpc_code"`` inside a stream), the store answers with them and
the store client reads them.

`http_status` is grpc-gateway's HTTPStatusFromCode, the HTTP status etcd 3.4's gateway
answers an error with (a FAILED_PRECONDITION is a 412, an UNAVAILABLE a 503).
"""

from __future__ import annotations

import enum


class GrpcCode(enum.IntEnum):
    """gRPC status codes, as carried in the gateway's error bodies."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


_HTTP_STATUS: dict[int, int] = {
    GrpcCode.OK: 200,
    GrpcCode.CANCELLED: 408,
    GrpcCode.UNKNOWN: 500,
    GrpcCode.INVALID_ARGUMENT: 400,
    GrpcCode.DEADLINE_EXCEEDED: 504,
    GrpcCode.NOT_FOUND: 404,
    GrpcCode.ALREADY_EXISTS: 409,
    GrpcCode.PERMISSION_DENIED: 403,
    GrpcCode.RESOURCE_EXHAUSTED: 429,
    GrpcCode.FAILED_PRECONDITION: 412,
    GrpcCode.ABORTED: 409,
    GrpcCode.OUT_OF_RANGE: 400,
    GrpcCode.UNIMPLEMENTED: 501,
    GrpcCode.INTERNAL: 500,
    GrpcCode.UNAVAILABLE: 503,
    GrpcCode.DATA_LOSS: 500,
    GrpcCode.UNAUTHENTICATED: 401,
}


def http_status(code: int) -> int:
    """The HTTP status grpc-gateway answers an error with this code with (500 if unknown)."""
    return _HTTP_STATUS.get(code, 500)
