"""Round trips of the Raft values through the wire/disk codec."""

import pytest

from controlplane.store.codec import (
    CodecError,
    decode_entry,
    decode_hard_state,
    decode_message,
    decode_snapshot,
    encode_entry,
    encode_hard_state,
    encode_message,
    encode_snapshot,
)
from controlplane.store.raft.types import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
)


def test_message_with_entries_and_snapshot_round_trips() -> None:
    snap = Snapshot(SnapshotMetadata(10, 3, ConfState((1, 2, 3), (4,))), b"state")
    msg = Message(
        MessageType.APP,
        to=2,
        frm=1,
        term=3,
        log_term=2,
        index=9,
        entries=(Entry(3, 10, EntryType.NORMAL, b"x"), Entry(3, 11, EntryType.CONF_CHANGE, b"")),
        commit=8,
        snapshot=snap,
        reject=True,
        reject_hint=7,
        context=b"ctx",
    )
    assert decode_message(encode_message(msg)) == msg


def test_entry_hard_state_snapshot_round_trip() -> None:
    e = Entry(5, 6, EntryType.NORMAL, b"\x00\xff")
    assert decode_entry(encode_entry(e)) == e
    hs = HardState(4, 2, 17)
    assert decode_hard_state(encode_hard_state(hs)) == hs
    s = Snapshot(SnapshotMetadata(3, 1, ConfState((1,), ())), b"")
    assert decode_snapshot(encode_snapshot(s)) == s


def test_conf_change_round_trips() -> None:
    cc = ConfChange(ConfChangeType.ADD_LEARNER_NODE, 4, b"https://127.0.0.1:2380")
    assert ConfChange.decode(cc.encode()) == cc


@pytest.mark.parametrize("garbage", [b"", b"\xc1", b"\x93\x01\x02"])
def test_garbage_is_a_codec_error(garbage: bytes) -> None:
    with pytest.raises(CodecError):
        decode_message(garbage)
