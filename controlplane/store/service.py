"""The store's replicated state machine: the MVCC store plus alarms, and its snapshots.

Every Raft entry the store replicates is an envelope `[kind, payload, needs_space]`:

* `"mvcc"`: an MVCC command (`mvcc.encode_command`);
* `"alarm"`: activate or deactivate an alarm (only NOSPACE exists).

The space quota works as etcd's does: when the MVCC store grows past
`--quota-backend-bytes`, the NOSPACE alarm is raised, and from then on every request
that could grow the store (puts, txns that write, lease grants) is refused with
"etcdserver: mvcc: database space exceeded", while reads, deletes and compaction still
work. After compacting (our compaction frees space at once; there is nothing to
defragment), `alarm disarm` lifts it. Size, quota and alarm are all functions of the
applied log, so every member raises and enforces the alarm at the same index.

A snapshot *file* (`labctl store snapshot save`) is the MVCC snapshot in a small
container with a sha256 trailer; `restore_data_dir` turns one into the data dir of the
first member of a new cluster, the way `etcdctl snapshot restore` does.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from controlplane.store import mvcc
from kubelab.grpccodes import GrpcCode

log = logging.getLogger(__name__)

NOSPACE = "NOSPACE"
ERR_NO_SPACE = "etcdserver: mvcc: database space exceeded"
DEFAULT_QUOTA_BYTES = 2 * 1024 * 1024 * 1024  # etcd's default --quota-backend-bytes

SNAPSHOT_MAGIC = b"KUBELAB-STORE-SNAPSHOT\n"


class NoSpaceError(mvcc.MVCCError):
    grpc_code = GrpcCode.RESOURCE_EXHAUSTED

    def __init__(self) -> None:
        super().__init__(ERR_NO_SPACE)


class SnapshotFileError(ValueError):
    """A snapshot file that is not one, or whose checksum does not match."""


def needs_space(req: mvcc.Request) -> bool:
    """Could this request grow the store? (refused while NOSPACE is raised)"""
    if isinstance(req, mvcc.PutRequest | mvcc.LeaseGrantRequest):
        return True
    if isinstance(req, mvcc.TxnRequest):
        return not mvcc.is_read_only(req)
    return False


def mvcc_command(req: mvcc.Request) -> bytes:
    data: bytes = msgpack.packb(["mvcc", mvcc.encode_command(req), needs_space(req)])
    return data


def attributes_command(member_id: int, name: str, client_urls: list[str]) -> bytes:
    """A member's name and client URLs, published through Raft when it starts (etcd's
    `publish`), so every member can list them: `endpoint status --cluster` needs them."""
    data: bytes = msgpack.packb(["attributes", [member_id, name, client_urls], False])
    return data


def alarm_command(activate: bool, alarm: str = NOSPACE) -> bytes:
    data: bytes = msgpack.packb(["alarm", [activate, alarm], False])
    return data


class StoreStateMachine:
    """What the Raft runtime applies entries to (the `StateMachine` protocol)."""

    def __init__(
        self,
        quota_bytes: int = DEFAULT_QUOTA_BYTES,
        min_lease_ttl: int = mvcc.DEFAULT_MIN_LEASE_TTL,
    ) -> None:
        self.mvcc = mvcc.MVCCStore(min_lease_ttl=min_lease_ttl)
        self.quota_bytes = quota_bytes
        self.alarms: set[str] = set()
        # Member id -> (name, client URLs), as the members published them.
        self.attributes: dict[int, tuple[str, list[str]]] = {}
        # Called after a snapshot replaced the whole state (the lessor resets from it).
        self.on_restore: Callable[[], None] | None = None

    def apply(self, index: int, command: bytes) -> Any:
        try:
            kind, payload, grows = msgpack.unpackb(command, raw=False)
        except (ValueError, TypeError) as exc:
            raise mvcc.CorruptDataError(f"undecodable entry at index {index}: {exc}") from exc
        if kind == "attributes":
            member_id, name, client_urls = payload
            self.attributes[int(member_id)] = (str(name), [str(u) for u in client_urls])
            return None
        if kind == "alarm":
            # Answered as etcd's AlarmResponse: the alarm changed, which an activation
            # always names and a deactivation only if the alarm was raised.
            activate, alarm = payload
            changed = activate or alarm in self.alarms
            if activate:
                self.alarms.add(alarm)
            else:
                self.alarms.discard(alarm)
            return [alarm] if changed else []
        if grows and NOSPACE in self.alarms:
            raise NoSpaceError()
        result = self.mvcc.apply(index, payload)
        if self.quota_bytes and self.mvcc.size_bytes() > self.quota_bytes:
            if NOSPACE not in self.alarms:
                log.warning(
                    "store: database size %d exceeds the quota %d: raising the NOSPACE alarm; "
                    "compact the store, then `labctl store alarm disarm`",
                    self.mvcc.size_bytes(),
                    self.quota_bytes,
                )
            self.alarms.add(NOSPACE)
        return result

    def snapshot(self) -> bytes:
        attributes = [[mid, name, urls] for mid, (name, urls) in sorted(self.attributes.items())]
        data: bytes = msgpack.packb([self.mvcc.snapshot(), sorted(self.alarms), attributes])
        return data

    def restore(self, data: bytes) -> None:
        if not data:
            self.mvcc.restore(mvcc.MVCCStore().snapshot())
            self.alarms = set()
            self.attributes = {}
        else:
            # Snapshots from before members published attributes have two parts.
            store_data, alarms, *rest = msgpack.unpackb(data, raw=False)
            self.mvcc.restore(store_data)
            self.alarms = set(alarms)
            self.attributes = {int(m): (str(n), list(u)) for m, n, u in (rest[0] if rest else [])}
        if self.on_restore is not None:
            self.on_restore()


def snapshot_file_bytes(state: bytes) -> bytes:
    """A state machine snapshot in the snapshot-file container (sha256 trailer)."""
    return SNAPSHOT_MAGIC + state + hashlib.sha256(state).digest()


def read_snapshot_file(path: Path) -> bytes:
    data = path.read_bytes()
    if not data.startswith(SNAPSHOT_MAGIC) or len(data) < len(SNAPSHOT_MAGIC) + 32:
        raise SnapshotFileError(f"{path} is not a kubelab store snapshot")
    state, digest = data[len(SNAPSHOT_MAGIC) : -32], data[-32:]
    if hashlib.sha256(state).digest() != digest:
        raise SnapshotFileError(
            f"{path}: sha256 mismatch; the file is truncated or corrupted, save it again"
        )
    return state


def snapshot_file_status(path: Path) -> dict[str, Any]:
    """Hash, revision, total keys and size, as `etcdctl snapshot status` reports them."""
    state = read_snapshot_file(path)
    sm = StoreStateMachine()
    sm.restore(state)
    keys = sm.mvcc.range(mvcc.RangeRequest(b"\0", b"\0", count_only=True)).count
    return {
        "hash": hashlib.sha256(state).hexdigest()[:8],
        "revision": sm.mvcc.revision,
        "totalKey": keys,
        "totalSize": path.stat().st_size,
    }
