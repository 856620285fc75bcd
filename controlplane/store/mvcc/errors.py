"""The MVCC store's errors: what etcd answers when it refuses a request, with its gRPC
code and its message verbatim (clients, the apiserver among them, match on messages)."""

from __future__ import annotations

from kubelab.grpccodes import GrpcCode

# etcd's messages for InvalidArgument errors, verbatim (clients match on them).
ERR_EMPTY_KEY = "etcdserver: key is not provided"
ERR_KEY_NOT_FOUND = "etcdserver: key not found"
ERR_VALUE_PROVIDED = "etcdserver: value is provided"
ERR_LEASE_PROVIDED = "etcdserver: lease is provided"
ERR_TOO_MANY_OPS = "etcdserver: too many operations in txn request"
ERR_DUPLICATE_KEY = "etcdserver: duplicate key given in txn request"


class MVCCError(Exception):
    """A request the store refused. `grpc_code` and `message` are what etcd would answer."""

    grpc_code = GrpcCode.UNKNOWN

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequestError(MVCCError):
    """A malformed request or one that contradicts the data (etcd's InvalidArgument)."""

    grpc_code = GrpcCode.INVALID_ARGUMENT


class CompactedError(MVCCError):
    """The revision asked for is before the compaction point (watchers: cancel with it)."""

    grpc_code = GrpcCode.OUT_OF_RANGE

    def __init__(self, compact_revision: int) -> None:
        super().__init__("etcdserver: mvcc: required revision has been compacted")
        self.compact_revision = compact_revision


class FutureRevisionError(MVCCError):
    grpc_code = GrpcCode.OUT_OF_RANGE

    def __init__(self) -> None:
        super().__init__("etcdserver: mvcc: required revision is a future revision")


class LeaseNotFoundError(MVCCError):
    grpc_code = GrpcCode.NOT_FOUND

    def __init__(self) -> None:
        super().__init__("etcdserver: requested lease not found")


class LeaseExistsError(MVCCError):
    grpc_code = GrpcCode.FAILED_PRECONDITION

    def __init__(self) -> None:
        super().__init__("etcdserver: lease already exists")


class LeaseTTLTooLargeError(MVCCError):
    grpc_code = GrpcCode.OUT_OF_RANGE

    def __init__(self) -> None:
        super().__init__("etcdserver: too large lease TTL")


class CorruptDataError(MVCCError):
    """A command or snapshot this module did not produce: a bug or corruption, not a client
    error (the WAL and snapshot files have their own checksums)."""

    grpc_code = GrpcCode.INTERNAL
