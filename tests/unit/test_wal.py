"""The write-ahead log: round trips, rotation, release, and recovery from damaged files.

Record offsets are found from the documented framing (9-byte header before each codec
payload), so the tests also pin the on-disk format.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from controlplane.store import codec
from controlplane.store.raft.types import Entry, EntryType, HardState
from controlplane.store.wal import (
    WAL,
    RecordType,
    StoreStorageError,
    WALCorruptionError,
    WALExistsError,
    WALNotFoundError,
    WALWriteError,
)

HEADER = 9  # u32 length, u32 crc, u8 type
META = b"node=1;cluster=c0ffee"


def entries(first: int, last: int, term: int = 1, size: int = 20) -> list[Entry]:
    return [
        Entry(term, i, EntryType.NORMAL, bytes([i % 251]) * size) for i in range(first, last + 1)
    ]


def segment_files(d: Path) -> list[Path]:
    return sorted(d.glob("*.wal"))


def record_span(data: bytes, entry: Entry) -> tuple[int, int]:
    """(start, end) of the ENTRY record holding `entry` in a segment's bytes."""
    payload = codec.encode_entry(entry)
    at = data.find(payload)
    assert at >= HEADER
    return at - HEADER, at + len(payload)


def raw_record(rtype: RecordType, payload: bytes) -> bytes:
    """A record framed exactly as the module docstring documents it."""
    crc = zlib.crc32(bytes([rtype]) + payload)
    return struct.pack(">IIB", len(payload), crc, rtype) + payload


def reopen(d: Path, **kwargs: int) -> tuple[WAL, list[Entry], HardState]:
    wal, rec = WAL.open(d, **kwargs)
    return wal, rec.entries, rec.hard_state


# A WAL whose last record is ENTRY 4; used by the torn-tail and flipped-byte tests.
LAST = entries(1, 4)[-1]
LAST_RECORD_LEN = HEADER + len(codec.encode_entry(LAST))
MIDDLE = entries(1, 4)[1]
MIDDLE_RECORD_LEN = HEADER + len(codec.encode_entry(MIDDLE))


def four_entry_wal(d: Path) -> Path:
    wal = WAL.create(d, META)
    wal.save(HardState(1, 1, 2), entries(1, 3))
    wal.save(None, [LAST])
    wal.sync()
    wal.close()
    (segment,) = segment_files(d)
    return segment


# --- round trips -----------------------------------------------------------------------


def test_round_trip_metadata_hard_state_and_entries(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path / "wal", META)
    wal.save(HardState(1, 2, 0), entries(1, 5))
    wal.save(HardState(2, 2, 4), entries(6, 8, term=2))
    assert wal.sync() >= 0.0
    wal.close()

    wal, rec = WAL.open(tmp_path / "wal")
    assert rec.metadata == META
    assert rec.hard_state == HardState(2, 2, 4)
    assert rec.entries == entries(1, 5) + entries(6, 8, term=2)
    assert (rec.snapshot_index, rec.snapshot_term) == (0, 0)
    assert wal.last_index == 8
    wal.close()


def test_first_segment_name_and_no_leftover_tmp(tmp_path: Path) -> None:
    (tmp_path / "0000000000000000-0000000000000001.wal.tmp").write_bytes(b"half a segment")
    WAL.create(tmp_path, META).close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0000000000000000-0000000000000001.wal"]


def test_close_without_sync_makes_saved_records_durable(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META)
    wal.save(HardState(3, 1, 2), entries(1, 2))
    wal.close()
    _, got, hs = reopen(tmp_path)
    assert got == entries(1, 2)
    assert hs == HardState(3, 1, 2)


def test_sync_with_nothing_saved_returns_zero(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META)
    assert wal.sync() == 0.0
    wal.save(None, entries(1, 1))
    assert wal.sync() >= 0.0
    assert wal.sync() == 0.0
    wal.close()


def test_create_refuses_an_existing_wal(tmp_path: Path) -> None:
    WAL.create(tmp_path, META).close()
    with pytest.raises(WALExistsError, match="already holds a WAL"):
        WAL.create(tmp_path, b"other")
    _, rec = WAL.open(tmp_path)
    assert rec.metadata == META


def test_open_without_wal_raises(tmp_path: Path) -> None:
    with pytest.raises(WALNotFoundError, match="no WAL segments"):
        WAL.open(tmp_path)


def test_save_rejects_a_gap_and_non_consecutive_entries(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META)
    wal.save(None, entries(1, 3))
    with pytest.raises(ValueError, match="gap"):
        wal.save(None, entries(5, 6))
    with pytest.raises(ValueError, match="consecutive"):
        wal.save(None, [entries(4, 4)[0], entries(6, 6)[0]])
    wal.close()


# --- conflicting suffixes --------------------------------------------------------------


def test_entries_overwrite_a_conflicting_suffix_across_reopen(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META)
    wal.save(HardState(1, 1, 3), entries(1, 10))
    wal.close()

    wal, got, _ = reopen(tmp_path)
    assert got == entries(1, 10)
    wal.save(HardState(2, 2, 3), entries(6, 7, term=2))
    assert wal.last_index == 7
    wal.close()

    wal, got, hs = reopen(tmp_path)
    assert got == entries(1, 5) + entries(6, 7, term=2)
    assert hs == HardState(2, 2, 3)
    wal.save(None, entries(8, 8, term=2))  # appends follow the new suffix
    wal.close()
    _, got, _ = reopen(tmp_path)
    assert got == entries(1, 5) + entries(6, 8, term=2)


def test_overwrite_reaching_back_into_an_older_segment(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META, segment_bytes=512)
    for first in range(1, 100, 5):
        wal.save(None, entries(first, first + 4))
    assert len(segment_files(tmp_path)) > 3
    wal.save(None, entries(12, 14, term=3))
    wal.close()
    _, got, _ = reopen(tmp_path)
    assert got == entries(1, 11) + entries(12, 14, term=3)


# --- rotation and release --------------------------------------------------------------


def test_rotation_at_a_small_segment_size_and_replay_across_segments(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META, segment_bytes=4096)
    for first in range(1, 200, 5):
        wal.save(HardState(1, 1, first), entries(first, first + 4, size=100))
        wal.sync()
    wal.close()

    files = segment_files(tmp_path)
    assert len(files) >= 5
    seqs = [int(p.name[:16], 16) for p in files]
    firsts = [int(p.name[17:33], 16) for p in files]
    assert seqs == list(range(len(files)))
    assert firsts[0] == 1
    assert firsts == sorted(firsts)
    for path, first in zip(files, firsts, strict=True):
        # Each segment starts with the entry its name announces.
        data = path.read_bytes()
        if first > 1:
            assert codec.encode_entry(entries(first - 1, first - 1, size=100)[0]) not in data
        if first <= 200:
            assert record_span(data, entries(first, first, size=100)[0])
    assert all(p.stat().st_size < 4096 + 5 * 200 for p in files)

    _, rec = WAL.open(tmp_path, segment_bytes=4096)
    assert rec.entries == entries(1, 200, size=100)
    assert rec.hard_state == HardState(1, 1, 196)
    assert rec.metadata == META


def test_release_to_removes_only_fully_covered_segments(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META, segment_bytes=512)
    wal.save(HardState(4, 2, 1), [])  # only in the first segment's records
    for first in range(1, 100, 5):
        wal.save(None, entries(first, first + 4))
    wal.save_snapshot_marker(60, 1)
    wal.sync()
    before = segment_files(tmp_path)
    firsts = [int(p.name[17:33], 16) for p in before]
    # Segment k holds entries firsts[k] .. firsts[k+1]-1; the last one is current.
    covered = [p for p, nxt in zip(before, firsts[1:], strict=False) if nxt - 1 <= 60]
    assert covered
    assert len(covered) < len(before) - 1  # some segment holds entries past 60 too

    assert wal.release_to(60) == covered
    assert segment_files(tmp_path) == [p for p in before if p not in covered]
    wal.save(None, entries(101, 102))
    wal.close()

    _, rec = WAL.open(tmp_path, segment_bytes=512)
    assert rec.metadata == META
    assert rec.hard_state == HardState(4, 2, 1)
    assert (rec.snapshot_index, rec.snapshot_term) == (60, 1)
    assert rec.entries == entries(61, 102)


def test_release_to_never_removes_the_current_segment(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META)
    wal.save(None, entries(1, 5))
    wal.save_snapshot_marker(5, 1)
    wal.sync()
    assert wal.release_to(5) == []
    assert len(segment_files(tmp_path)) == 1
    wal.close()


def test_release_to_requires_a_durable_snapshot_marker(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META, segment_bytes=1024)
    for first in range(1, 60, 5):
        wal.save(None, entries(first, first + 4))
    wal.save_snapshot_marker(40, 1)  # buffered, not synced
    with pytest.raises(ValueError, match="durable snapshot marker is at 0"):
        wal.release_to(40)
    wal.sync()
    with pytest.raises(ValueError, match="durable snapshot marker is at 40"):
        wal.release_to(41)
    assert wal.release_to(40)
    wal.close()


# --- snapshot markers ------------------------------------------------------------------


def test_snapshot_marker_makes_replay_skip_earlier_entries(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META)
    wal.save(None, entries(1, 10))
    wal.save_snapshot_marker(5, 1)
    wal.save(None, entries(11, 12))
    wal.close()
    wal, rec = WAL.open(tmp_path)
    assert (rec.snapshot_index, rec.snapshot_term) == (5, 1)
    assert rec.entries == entries(6, 12)
    wal.close()


def test_snapshot_marker_past_the_log_starts_an_empty_log_after_it(tmp_path: Path) -> None:
    wal = WAL.create(tmp_path, META)
    wal.save(None, entries(1, 3))
    wal.save_snapshot_marker(100, 7)  # a snapshot installed from the leader
    wal.save(None, entries(101, 101, term=7))
    with pytest.raises(ValueError, match="older than the current one"):
        wal.save_snapshot_marker(50, 7)
    wal.close()
    _, rec = WAL.open(tmp_path)
    assert (rec.snapshot_index, rec.snapshot_term) == (100, 7)
    assert rec.entries == entries(101, 101, term=7)


# --- torn tails ------------------------------------------------------------------------


@pytest.mark.parametrize("keep", range(1, LAST_RECORD_LEN))
def test_torn_last_record_at_every_offset_is_truncated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, keep: int
) -> None:
    segment = four_entry_wal(tmp_path)
    size = segment.stat().st_size
    start = size - LAST_RECORD_LEN
    assert record_span(segment.read_bytes(), LAST) == (start, size)
    os.truncate(segment, start + keep)

    with caplog.at_level(logging.WARNING, logger="controlplane.store.wal"):
        wal, rec = WAL.open(tmp_path)
    wal.close()
    assert rec.entries == entries(1, 3)
    assert rec.hard_state == HardState(1, 1, 2)
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = warning.getMessage()
    assert message.startswith("wal: torn record")
    assert str(segment) in message
    assert f"offset {start}" in message
    assert segment.stat().st_size == start


def test_clean_end_opens_without_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    segment = four_entry_wal(tmp_path)
    size = segment.stat().st_size
    with caplog.at_level(logging.WARNING):
        wal, rec = WAL.open(tmp_path)
    wal.close()
    assert rec.entries == entries(1, 4)
    assert not caplog.records
    assert segment.stat().st_size == size


def test_flipped_byte_in_the_last_record_is_a_torn_tail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    segment = four_entry_wal(tmp_path)
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF
    segment.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        _, rec = WAL.open(tmp_path)
    assert rec.entries == entries(1, 3)
    assert "checksum mismatch" in caplog.text


@pytest.mark.parametrize("zeros_from", [0, 5, LAST_RECORD_LEN - 1, LAST_RECORD_LEN])
def test_zeroed_tail_is_truncated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, zeros_from: int
) -> None:
    """Zeros over the end of the last record and past it, as after a crash on ext4/xfs."""
    segment = four_entry_wal(tmp_path)
    data = segment.read_bytes()
    start = len(data) - LAST_RECORD_LEN
    segment.write_bytes(data[: start + zeros_from] + bytes(8192))
    with caplog.at_level(logging.WARNING):
        wal, rec = WAL.open(tmp_path)
    wal.close()
    expected_end = len(data) if zeros_from == LAST_RECORD_LEN else start
    assert rec.entries == (entries(1, 4) if zeros_from == LAST_RECORD_LEN else entries(1, 3))
    assert f"offset {expected_end}" in caplog.text
    assert ("zero-filled" in caplog.text) == (zeros_from in (0, LAST_RECORD_LEN))
    assert segment.stat().st_size == expected_end


def test_appending_after_a_truncated_tail_then_reopening(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    segment = four_entry_wal(tmp_path)
    os.truncate(segment, segment.stat().st_size - 4)
    wal, rec = WAL.open(tmp_path)
    assert rec.entries == entries(1, 3)
    assert wal.last_index == 3
    replacement = entries(4, 5, term=2)
    wal.save(HardState(2, 1, 4), replacement)
    wal.sync()
    wal.close()

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _, rec = WAL.open(tmp_path)
    assert not caplog.records
    assert rec.entries == entries(1, 3) + replacement
    assert rec.hard_state == HardState(2, 1, 4)


# --- corruption ------------------------------------------------------------------------


@pytest.mark.parametrize("at", range(MIDDLE_RECORD_LEN))
def test_flipped_byte_in_a_middle_record_refuses_to_open(tmp_path: Path, at: int) -> None:
    segment = four_entry_wal(tmp_path)
    data = bytearray(segment.read_bytes())
    start, end = record_span(bytes(data), MIDDLE)
    assert end - start == MIDDLE_RECORD_LEN
    data[start + at] ^= 0xFF
    segment.write_bytes(bytes(data))
    with pytest.raises(WALCorruptionError) as info:
        WAL.open(tmp_path)
    assert info.value.path == segment
    assert info.value.offset == start
    message = str(info.value)
    assert f"{segment} is corrupt at byte offset {start}" in message
    assert "restore this member from a snapshot" in message
    assert len(segment.read_bytes()) == len(data)  # nothing was truncated


def _multi_segment_wal(d: Path) -> list[Path]:
    wal = WAL.create(d, META, segment_bytes=1024)
    for first in range(1, 60, 5):
        wal.save(None, entries(first, first + 4))
    wal.close()
    files = segment_files(d)
    assert len(files) >= 3
    return files


def test_flipped_byte_in_a_non_last_segment_refuses_to_open(tmp_path: Path) -> None:
    files = _multi_segment_wal(tmp_path)
    victim = files[1]
    data = bytearray(victim.read_bytes())
    data[-2] ^= 0x01  # inside that segment's last record
    victim.write_bytes(bytes(data))
    with pytest.raises(WALCorruptionError, match="not the last") as info:
        WAL.open(tmp_path)
    assert info.value.path == victim


def test_torn_non_last_segment_refuses_to_open(tmp_path: Path) -> None:
    files = _multi_segment_wal(tmp_path)
    os.truncate(files[0], files[0].stat().st_size - 3)
    with pytest.raises(WALCorruptionError, match=files[0].name):
        WAL.open(tmp_path)


def test_missing_middle_segment_refuses_to_open(tmp_path: Path) -> None:
    files = _multi_segment_wal(tmp_path)
    files[1].unlink()
    with pytest.raises(WALCorruptionError, match="expected segment 0000000000000001"):
        WAL.open(tmp_path)


def test_segment_renamed_out_of_place_refuses_to_open(tmp_path: Path) -> None:
    files = _multi_segment_wal(tmp_path)
    files[-1].rename(files[-1].with_name(f"{len(files) - 1:016x}-{999:016x}.wal"))
    with pytest.raises(WALCorruptionError, match="does not match the file name"):
        WAL.open(tmp_path)


def test_record_in_the_documented_format_is_replayed(tmp_path: Path) -> None:
    segment = four_entry_wal(tmp_path)
    extra = Entry(1, 5, EntryType.NORMAL, b"handmade")
    with segment.open("ab") as f:
        f.write(raw_record(RecordType.ENTRY, codec.encode_entry(extra)))
    _, rec = WAL.open(tmp_path)
    assert rec.entries == [*entries(1, 4), extra]


def test_valid_record_with_an_entry_gap_refuses_to_open(tmp_path: Path) -> None:
    segment = four_entry_wal(tmp_path)
    size = segment.stat().st_size
    with segment.open("ab") as f:
        f.write(raw_record(RecordType.ENTRY, codec.encode_entry(Entry(1, 9, data=b"x"))))
    with pytest.raises(WALCorruptionError, match=f"offset {size}: entry 9 leaves a gap"):
        WAL.open(tmp_path)


def test_segment_from_another_wal_refuses_to_open(tmp_path: Path) -> None:
    ours = _multi_segment_wal(tmp_path / "a")
    wal = WAL.create(tmp_path / "b", b"another member", segment_bytes=1024)
    for first in range(1, 60, 5):
        wal.save(None, entries(first, first + 4))
    wal.close()
    theirs = segment_files(tmp_path / "b")
    shutil.copyfile(theirs[1], ours[1])
    with pytest.raises(WALCorruptionError, match="metadata differs"):
        WAL.open(tmp_path / "a")


# --- write failures --------------------------------------------------------------------


def _enospc(*_args: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_enospc_on_fsync_surfaces_and_poisons_the_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wal = WAL.create(tmp_path, META)
    (segment,) = segment_files(tmp_path)
    wal.save(HardState(1, 1, 1), entries(1, 2))
    with monkeypatch.context() as m:
        m.setattr(os, "fdatasync", _enospc)
        with pytest.raises(WALWriteError) as info:
            wal.sync()
    assert str(info.value) == (
        f"wal: no space left on device while syncing WAL {segment}: free space or move --data-dir"
    )
    # The disk is fine again, but the records may have been dropped from the page cache:
    # the WAL must not report them durable.
    with pytest.raises(WALWriteError, match="accepts no more writes"):
        wal.sync()
    with pytest.raises(WALWriteError, match="accepts no more writes"):
        wal.save(None, entries(3, 3))
    wal.close()


def test_enospc_on_write_surfaces_and_poisons_the_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wal = WAL.create(tmp_path, META)
    (segment,) = segment_files(tmp_path)
    wal.save(None, entries(1, 2))
    with monkeypatch.context() as m:
        m.setattr(os, "write", _enospc)
        with pytest.raises(WALWriteError, match="no space left on device while writing WAL"):
            wal.sync()
    with pytest.raises(WALWriteError, match=str(segment)):
        wal.sync()
    wal.close()
    with pytest.raises(StoreStorageError, match="closed"):
        wal.save(None, [])
