"""Errors of the Raft core.

RaftError
 +-- ProposalDroppedError     a proposal or read was not accepted (no leader, leader
 |    |                       transfer in progress, node removed); the caller may retry
 |    +-- ConfChangePendingError   a configuration change is already in flight
 +-- ConfChangeError          the change itself is invalid (remove the last voter, ...)
 +-- StorageError             the log cannot serve the request
      +-- CompactedError      the index is below the snapshot: send a snapshot instead
      +-- UnavailableError    the index is beyond the last entry
      +-- SnapOutOfDateError  a snapshot older than the current one
      +-- SnapshotTemporarilyUnavailableError

Every message says what happened and what the caller can do about it.
"""

from __future__ import annotations


class RaftError(Exception):
    """Base of every error the core raises."""


class ProposalDroppedError(RaftError):
    """The proposal was not appended to any log; nothing happened, retrying is safe."""


class ConfChangePendingError(ProposalDroppedError):
    """Only one membership change may be in flight (not yet applied) at a time."""


class ConfChangeError(RaftError):
    """A membership change that would leave the configuration invalid."""


class StorageError(RaftError):
    pass


class CompactedError(StorageError):
    def __init__(self, index: int) -> None:
        super().__init__(f"requested index {index} is unavailable due to compaction")
        self.index = index


class UnavailableError(StorageError):
    def __init__(self, index: int) -> None:
        super().__init__(f"requested entry at index {index} is unavailable")
        self.index = index


class SnapOutOfDateError(StorageError):
    def __init__(self, index: int) -> None:
        super().__init__(f"snapshot at index {index} is older than the existing snapshot")
        self.index = index


class SnapshotTemporarilyUnavailableError(StorageError):
    def __init__(self) -> None:
        super().__init__("snapshot is temporarily unavailable")
