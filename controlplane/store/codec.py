"""Binary encoding of Raft values for the wire (peer transport) and the disk (WAL, snapshots).

msgpack arrays in a fixed field order: compact, fast, and version-tolerant enough for a
lab (a field is only ever appended). The Raft core never sees bytes from here; the
runtime encodes what a `Ready` hands it and decodes what peers send.
"""

from __future__ import annotations

from typing import Any

import msgpack

from controlplane.store.raft.types import (
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
)


class CodecError(ValueError):
    """Bytes that do not decode to the expected Raft value."""


def _entry_fields(e: Entry) -> list[Any]:
    return [e.term, e.index, int(e.type), e.data]


def _entry_from(f: list[Any]) -> Entry:
    return Entry(term=f[0], index=f[1], type=EntryType(f[2]), data=f[3])


def _snapshot_fields(s: Snapshot) -> list[Any]:
    m = s.metadata
    return [m.index, m.term, list(m.conf_state.voters), list(m.conf_state.learners), s.data]


def _snapshot_from(f: list[Any]) -> Snapshot:
    conf = ConfState(voters=tuple(f[2]), learners=tuple(f[3]))
    return Snapshot(SnapshotMetadata(index=f[0], term=f[1], conf_state=conf), data=f[4])


def _pack(obj: Any) -> bytes:
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


def _unpack(data: bytes, what: str) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise CodecError(f"cannot decode {what}: {exc}") from exc


def encode_entry(e: Entry) -> bytes:
    return _pack(_entry_fields(e))


def decode_entry(data: bytes) -> Entry:
    try:
        return _entry_from(_unpack(data, "entry"))
    except (TypeError, IndexError, KeyError, ValueError) as exc:
        raise CodecError(f"malformed entry: {exc}") from exc


def encode_hard_state(hs: HardState) -> bytes:
    return _pack([hs.term, hs.vote, hs.commit])


def decode_hard_state(data: bytes) -> HardState:
    try:
        f = _unpack(data, "hard state")
        return HardState(term=f[0], vote=f[1], commit=f[2])
    except (TypeError, IndexError, KeyError, ValueError) as exc:
        raise CodecError(f"malformed hard state: {exc}") from exc


def encode_snapshot(s: Snapshot) -> bytes:
    return _pack(_snapshot_fields(s))


def decode_snapshot(data: bytes) -> Snapshot:
    try:
        return _snapshot_from(_unpack(data, "snapshot"))
    except (TypeError, IndexError, KeyError, ValueError) as exc:
        raise CodecError(f"malformed snapshot: {exc}") from exc


def encode_message(m: Message) -> bytes:
    return _pack(
        [
            int(m.type),
            m.to,
            m.frm,
            m.term,
            m.log_term,
            m.index,
            [_entry_fields(e) for e in m.entries],
            m.commit,
            _snapshot_fields(m.snapshot) if m.snapshot is not None else None,
            m.reject,
            m.reject_hint,
            m.context,
        ]
    )


def decode_message(data: bytes) -> Message:
    try:
        f = _unpack(data, "message")
        return Message(
            type=MessageType(f[0]),
            to=f[1],
            frm=f[2],
            term=f[3],
            log_term=f[4],
            index=f[5],
            entries=tuple(_entry_from(e) for e in f[6]),
            commit=f[7],
            snapshot=_snapshot_from(f[8]) if f[8] is not None else None,
            reject=f[9],
            reject_hint=f[10],
            context=f[11],
        )
    except (TypeError, IndexError, KeyError, ValueError) as exc:
        raise CodecError(f"malformed message: {exc}") from exc
