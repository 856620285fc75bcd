"""The replicated key-value state machine (current state only, etcd-style metadata).

Each applied write bumps one global revision; each key keeps its create revision, mod
revision and version, as etcd v3 reports them. This is the state machine the Raft
runtime replicates today; the MVCC store (history, compaction, watches, leases) grows
out of it.

Commands are msgpack arrays, built with the `put`/`delete`/`cas` helpers below:
the runtime replicates opaque bytes and this module alone gives them meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int


class KVError(ValueError):
    """A command this state machine does not understand."""


def put_command(key: bytes, value: bytes) -> bytes:
    return _pack(["put", key, value])


def delete_command(key: bytes) -> bytes:
    return _pack(["del", key])


def cas_command(key: bytes, expected: bytes | None, value: bytes) -> bytes:
    """Set `key` to `value` only if it currently holds `expected` (None: absent)."""
    return _pack(["cas", key, expected, value])


def _pack(obj: Any) -> bytes:
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


@dataclass(frozen=True, slots=True)
class WriteResult:
    revision: int
    succeeded: bool = True
    prev: KeyValue | None = None
    deleted: int = 0


class KVStateMachine:
    def __init__(self) -> None:
        self.revision = 1  # etcd starts at revision 1 with an empty store
        self._data: dict[bytes, KeyValue] = {}

    def get(self, key: bytes) -> KeyValue | None:
        return self._data.get(key)

    def __len__(self) -> int:
        return len(self._data)

    def apply(self, index: int, command: bytes) -> WriteResult:
        try:
            op, *args = msgpack.unpackb(command, raw=False)
        except (ValueError, TypeError) as exc:
            raise KVError(f"undecodable command at index {index}: {exc}") from exc
        if op == "put":
            return self._put(bytes(args[0]), bytes(args[1]))
        if op == "del":
            return self._delete(bytes(args[0]))
        if op == "cas":
            key, expected, value = bytes(args[0]), args[1], bytes(args[2])
            cur = self._data.get(key)
            if (cur.value if cur is not None else None) != expected:
                return WriteResult(self.revision, succeeded=False, prev=cur)
            return self._put(key, value)
        raise KVError(f"unknown command {op!r} at index {index}")

    def _put(self, key: bytes, value: bytes) -> WriteResult:
        self.revision += 1
        prev = self._data.get(key)
        if prev is None:
            kv = KeyValue(key, value, self.revision, self.revision, 1)
        else:
            kv = KeyValue(key, value, prev.create_revision, self.revision, prev.version + 1)
        self._data[key] = kv
        return WriteResult(self.revision, prev=prev)

    def _delete(self, key: bytes) -> WriteResult:
        prev = self._data.pop(key, None)
        if prev is None:
            return WriteResult(self.revision, deleted=0)
        self.revision += 1
        return WriteResult(self.revision, prev=prev, deleted=1)

    def snapshot(self) -> bytes:
        rows = [
            [kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version]
            for kv in self._data.values()
        ]
        return _pack([self.revision, rows])

    def restore(self, data: bytes) -> None:
        if not data:
            self.revision, self._data = 1, {}
            return
        revision, rows = msgpack.unpackb(data, raw=False)
        self.revision = revision
        self._data = {
            bytes(r[0]): KeyValue(bytes(r[0]), bytes(r[1]), r[2], r[3], r[4]) for r in rows
        }
