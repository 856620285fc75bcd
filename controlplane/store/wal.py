"""Write-ahead log of the store: Raft hard state and log entries, made durable before use.

A Raft member may only send a vote or acknowledge an append once the state behind it is on
stable storage. This module is that storage: an append-only log of records, split into
segment files, that the runtime writes on every `Ready` and replays on restart.

Layout
------
A WAL directory holds segment files named ``{seq:016x}-{first_index:016x}.wal``: ``seq``
counts segments from 0 without gaps and ``first_index`` is the index the next entry was
expected to have when the segment was started. When the current segment reaches
`segment_bytes` after a write, it is synced and closed and a new one is started
("rotation"); a segment may overshoot the limit by one batch. Older segments are deleted
with `WAL.release_to` once a snapshot covers them.

Record framing (all integers big-endian)::

    [u32 payload length][u32 crc][u8 record type][payload]

``crc = zlib.crc32(type byte + payload)``. The crc is *not* chained across records: every
record can be checked on its own, which is what lets a segment be validated alone and lets
recovery look for valid records past a damaged one (see below). Ordering and completeness
are guaranteed elsewhere: records within a segment are contiguous (a lost record would
break the framing of the next), and segments carry their sequence number.

Record types (`RecordType`): SEGMENT_HEADER (magic, format version, seq, first_index),
METADATA (opaque bytes given to `WAL.create`, e.g. node and cluster id), ENTRY (a codec
entry), HARD_STATE (a codec hard state) and SNAPSHOT_MARKER (u64 index, u64 term of a
snapshot that was saved: replay drops entries at or below it).

Every segment starts with a preamble: SEGMENT_HEADER, METADATA, the current
SNAPSHOT_MARKER and the current HARD_STATE. The header lets a segment be checked on its
own (its seq and first_index must match its file name). Repeating metadata, marker and
hard state means deleting old segments never loses them: replay can start from whichever
segment is now the oldest. Segments are written whole to a temporary name, fsynced, then
renamed into place, so a segment file that exists always has a complete preamble.

Recovery: torn tail versus corruption
-------------------------------------
A crash while appending leaves the last segment with a partial final record: a short
header, a short payload, a crc mismatch on the final record, or a tail of zeros where the
filesystem extended the file but the data never reached the disk. That data was never
synced, so no peer was ever told about it; recovery drops it (truncating the file, with a
WARNING naming the file and offset) and appends continue from there.

Anything else is corruption, and `WAL.open` refuses with `WALCorruptionError`: a damaged
record in a segment that is not the last (it was synced before the next one was started),
or a damaged record anywhere that is followed by at least one valid record (data after it
was written, so it was not the tail of an interrupted write; most likely it was synced,
acknowledged, and has since rotted). Silently truncating there would drop acknowledged
entries and let the member vote or ack against a log it no longer has, which breaks
Raft's safety. The message names the file and byte offset; the way out is to restore the
member from a snapshot or to remove it from the cluster and re-add it with an empty data
dir.

"Followed by a valid record" is decided by scanning every later offset for a record whose
type, length and crc check out. The error is on the safe side: a torn tail whose bytes
happen to contain a valid-looking record makes the open refuse rather than lose data.

Durability
----------
`save` only buffers records; `sync` writes them and fdatasyncs the segment, returning the
time the fdatasync took (the runtime exports it as a metric). Group commit is the caller's
job: several `save` calls, then one `sync`. Creating, renaming or deleting a file changes
the *directory*, and that change is not durable until the directory itself is fsynced, so
the WAL fsyncs the directory after each of those; otherwise a crash could lose a new
segment (and the entries in it) even though the segment file had been fsynced.

A failed write or fsync (ENOSPC, EIO, ...) raises `WALWriteError` with a message saying
what to do, and the WAL refuses any further `save`/`sync`: after a failed fsync the kernel
may have dropped the dirty pages, so a later successful fsync would not prove that the
earlier records are on disk. Restarting the member recovers from what actually is.

A `WAL` is not thread-safe: the runtime drives it from a single storage thread.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import logging
import os
import re
import struct
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from controlplane.store import codec
from controlplane.store.raft.types import EMPTY_HARD_STATE, Entry, HardState

logger = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
"""Rotate to a new segment once the current one reaches this size."""

_WRITE_BUFFER_BYTES = 1024 * 1024
"""`save` hands its buffer to the OS once it holds this much, without waiting for `sync`."""

_RECORD_HEADER = struct.Struct(">IIB")
_TYPE_BYTE_OFFSET = 8
_SEGMENT_HEADER = struct.Struct(">4sBQQ")
_SEGMENT_MAGIC = b"KLWL"
_FORMAT_VERSION = 1
_SNAPSHOT_MARKER = struct.Struct(">QQ")
_SEGMENT_NAME = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{16})\.wal$")
_TMP_SUFFIX = ".tmp"


class RecordType(enum.IntEnum):
    SEGMENT_HEADER = 1
    METADATA = 2
    ENTRY = 3
    HARD_STATE = 4
    SNAPSHOT_MARKER = 5


_RECORD_TYPES = frozenset(int(t) for t in RecordType)
_TYPE_BYTE = re.compile(b"[" + b"".join(re.escape(bytes((t,))) for t in RecordType) + b"]")


class StoreStorageError(Exception):
    """The store's durable storage (WAL or snapshot files) cannot be used as asked."""


class WALExistsError(StoreStorageError):
    """`WAL.create` was pointed at a directory that already holds a WAL."""


class WALNotFoundError(StoreStorageError):
    """`WAL.open` was pointed at a directory without WAL segments."""


class WALWriteError(StoreStorageError):
    """Writing or syncing failed; the WAL accepts no more writes."""


class WALCorruptionError(StoreStorageError):
    """The WAL on disk is damaged somewhere other than an interrupted final write."""

    def __init__(self, path: Path, offset: int, reason: str) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        super().__init__(
            f"wal: {path} is corrupt at byte offset {offset}: {reason}. Entries past this "
            "point may have been acknowledged, so the log cannot be repaired by truncating "
            "it: restore this member from a snapshot, or remove it from the cluster and "
            "re-add it with an empty data dir"
        )


def describe_os_error(exc: OSError, action: str, what: str, path: Path) -> str:
    """A message for an I/O failure on a store file that tells the operator what to do."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"no space left on device while {action} {what} {path}: free space or move --data-dir"
        )
    return (
        f"I/O error while {action} {what} {path}: {exc.strerror or exc}; "
        "check the disk and the kernel log"
    )


def fsync_dir(path: Path) -> None:
    """fsync a directory, making file creations, renames and removals in it durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """Create `path` and any missing parents, fsyncing each parent that gained an entry."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        fsync_dir(directory.parent)


@dataclass(frozen=True, slots=True)
class Recovered:
    """What `WAL.open` read back.

    `entries` is the log after the snapshot marker, conflicting suffixes already replaced
    by the entries written later; `hard_state` is the last one saved (empty if none).
    """

    metadata: bytes
    hard_state: HardState
    entries: list[Entry]
    snapshot_index: int
    snapshot_term: int


@dataclass(slots=True)
class _Segment:
    seq: int
    first_index: int
    path: Path
    max_index: int
    """Highest entry index written to this segment (first_index - 1 if it holds none)."""


@dataclass(frozen=True, slots=True)
class _Record:
    offset: int
    type: RecordType
    payload: bytes

    @property
    def end(self) -> int:
        return self.offset + _RECORD_HEADER.size + len(self.payload)


@dataclass(frozen=True, slots=True)
class _SegmentScan:
    records: list[_Record]
    valid_end: int
    torn: str | None
    """Why the bytes past `valid_end` were judged a torn tail, or None if there are none."""


def _frame(rtype: RecordType, payload: bytes) -> bytes:
    crc = zlib.crc32(payload, zlib.crc32(bytes((rtype,))))
    return _RECORD_HEADER.pack(len(payload), crc, rtype) + payload


def _parse_at(data: bytes, offset: int) -> _Record | str:
    """The record starting at `offset`, or why there is no valid record there."""
    left = len(data) - offset
    if left < _RECORD_HEADER.size:
        return f"short record header ({left} of {_RECORD_HEADER.size} bytes)"
    length, crc, rtype = _RECORD_HEADER.unpack_from(data, offset)
    start = offset + _RECORD_HEADER.size
    if length > len(data) - start:
        return f"record length {length} runs past the end of the file ({len(data) - start} bytes)"
    payload = memoryview(data)[start : start + length]
    if zlib.crc32(payload, zlib.crc32(bytes((rtype,)))) != crc:
        return "checksum mismatch"
    if rtype not in _RECORD_TYPES:
        return f"unknown record type {rtype}"
    return _Record(offset, RecordType(rtype), bytes(payload))


def _next_valid_record(data: bytes, offset: int) -> int | None:
    """Offset of the first valid record starting after `offset`, if there is one."""
    for match in _TYPE_BYTE.finditer(data, offset + 1 + _TYPE_BYTE_OFFSET):
        candidate = match.start() - _TYPE_BYTE_OFFSET
        if isinstance(_parse_at(data, candidate), _Record):
            return candidate
    return None


def _scan_segment(path: Path, data: bytes, is_last: bool) -> _SegmentScan:
    """Split a segment into records, telling a torn tail apart from corruption."""
    records: list[_Record] = []
    offset = 0
    while offset < len(data):
        parsed = _parse_at(data, offset)
        if isinstance(parsed, _Record):
            records.append(parsed)
            offset = parsed.end
            continue
        if not is_last:
            raise WALCorruptionError(path, offset, f"{parsed} in a segment that is not the last")
        follower = _next_valid_record(data, offset)
        if follower is not None:
            raise WALCorruptionError(
                path, offset, f"{parsed}, and a valid record follows at offset {follower}"
            )
        if data.count(0, offset) == len(data) - offset:
            parsed += "; the rest of the file is zero-filled"
        return _SegmentScan(records, offset, parsed)
    return _SegmentScan(records, offset, None)


class _Replay:
    """Folds the records of consecutive segments into the state `WAL.open` returns."""

    def __init__(self) -> None:
        self.metadata = b""
        self.seen_metadata = False
        self.hard_state = EMPTY_HARD_STATE
        self.entries: list[Entry] = []
        self.snapshot_index = 0
        self.snapshot_term = 0

    def segment(self, segment: _Segment, records: list[_Record]) -> None:
        self._check_preamble(segment, records)
        for record in records[1:]:
            try:
                entry_index = self._apply(record)
            except (codec.CodecError, struct.error) as exc:
                raise WALCorruptionError(
                    segment.path, record.offset, f"undecodable {record.type.name} record: {exc}"
                ) from exc
            except ValueError as exc:
                raise WALCorruptionError(segment.path, record.offset, str(exc)) from exc
            if entry_index is not None:
                segment.max_index = max(segment.max_index, entry_index)

    def _check_preamble(self, segment: _Segment, records: list[_Record]) -> None:
        if not records or records[0].type is not RecordType.SEGMENT_HEADER:
            raise WALCorruptionError(segment.path, 0, "the segment does not start with a header")
        header = records[0].payload
        if len(header) != _SEGMENT_HEADER.size:
            raise WALCorruptionError(segment.path, 0, "malformed segment header")
        magic, version, seq, first_index = _SEGMENT_HEADER.unpack(header)
        if magic != _SEGMENT_MAGIC or version != _FORMAT_VERSION:
            raise WALCorruptionError(
                segment.path, 0, f"not a kubelab WAL segment of format {_FORMAT_VERSION}"
            )
        if (seq, first_index) != (segment.seq, segment.first_index):
            raise WALCorruptionError(
                segment.path,
                0,
                f"the header says segment {seq:016x} starting at index {first_index}, "
                "which does not match the file name",
            )
        if len(records) < 2 or records[1].type is not RecordType.METADATA:
            raise WALCorruptionError(
                segment.path, records[0].end, "the segment header is not followed by metadata"
            )

    def _apply(self, record: _Record) -> int | None:
        """Fold one record in; return the index if it was an entry."""
        match record.type:
            case RecordType.METADATA:
                if not self.seen_metadata:
                    self.metadata, self.seen_metadata = record.payload, True
                elif record.payload != self.metadata:
                    raise ValueError("metadata differs from earlier segments (mixed-up WALs?)")
            case RecordType.ENTRY:
                entry = codec.decode_entry(record.payload)
                self._entry(entry)
                return entry.index
            case RecordType.HARD_STATE:
                self.hard_state = codec.decode_hard_state(record.payload)
            case RecordType.SNAPSHOT_MARKER:
                index, term = _SNAPSHOT_MARKER.unpack(record.payload)
                self.snapshot_index, self.snapshot_term = index, term
                self.entries = [e for e in self.entries if e.index > index]
            case RecordType.SEGMENT_HEADER:
                raise ValueError("a segment header in the middle of a segment")
        return None

    def _entry(self, entry: Entry) -> None:
        if entry.index <= self.snapshot_index:
            return
        if self.entries:
            first, last = self.entries[0].index, self.entries[-1].index
            if entry.index > last + 1:
                raise ValueError(f"entry {entry.index} leaves a gap after entry {last}")
            del self.entries[max(entry.index - first, 0) :]
        self.entries.append(entry)


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _list_segments(directory: Path) -> list[_Segment]:
    if not directory.is_dir():
        return []
    segments = []
    for name in os.listdir(directory):
        match = _SEGMENT_NAME.match(name)
        if match:
            seq, first_index = int(match[1], 16), int(match[2], 16)
            segments.append(_Segment(seq, first_index, directory / name, first_index - 1))
    return sorted(segments, key=lambda s: s.seq)


def _remove_stale_tmp(directory: Path) -> None:
    for path in directory.glob(f"*.wal{_TMP_SUFFIX}"):
        logger.warning("wal: removing %s, left behind by a crash while creating a segment", path)
        path.unlink()


class WAL:
    """An open write-ahead log: append with `save`, make durable with `sync`.

    Construct with `WAL.create` (new member) or `WAL.open` (restart).
    """

    def __init__(self, directory: Path, metadata: bytes, segment_bytes: int) -> None:
        """Internal: use `WAL.create` or `WAL.open`."""
        if segment_bytes <= 0:
            raise ValueError(f"wal: segment_bytes must be positive, not {segment_bytes}")
        self._dir = directory
        self._metadata = metadata
        self._segment_bytes = segment_bytes
        self._segments: list[_Segment] = []
        self._fd = -1
        self._segment_size = 0
        self._buffer = bytearray()
        self._unsynced = False
        self._unsynced_bytes = 0
        self._failure: str | None = None
        self._closed = False
        self._hard_state = EMPTY_HARD_STATE
        self._last_index = 0
        self._snapshot_index = 0
        self._snapshot_term = 0
        self._durable_snapshot_index = 0

    @classmethod
    def create(cls, dir: Path, metadata: bytes, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> WAL:
        """Start a new WAL in `dir` (created if missing) holding `metadata`.

        Raises `WALExistsError` if `dir` already holds WAL segments: opening a member's
        existing log as a new one would throw its state away.
        """
        ensure_dir(dir)
        existing = _list_segments(dir)
        if existing:
            raise WALExistsError(
                f"wal: {dir} already holds a WAL ({existing[0].path.name} ...); open it "
                "with WAL.open, or point --data-dir at an empty directory for a new member"
            )
        _remove_stale_tmp(dir)
        wal = cls(dir, metadata, segment_bytes)
        wal._start_segment(seq=0, first_index=1)
        logger.info("wal: created %s", wal._segments[0].path)
        return wal

    @classmethod
    def open(cls, dir: Path, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> tuple[WAL, Recovered]:
        """Replay the WAL in `dir` and open it for appending after its last valid record.

        A torn final record is truncated away (WARNING logged); any other damage raises
        `WALCorruptionError`. Raises `WALNotFoundError` if `dir` holds no segments.
        """
        segments = _list_segments(dir)
        if not segments:
            raise WALNotFoundError(
                f"wal: no WAL segments in {dir}; a new member starts with WAL.create"
            )
        for prev, cur in pairwise(segments):
            if cur.seq != prev.seq + 1:
                raise WALCorruptionError(
                    cur.path, 0, f"expected segment {prev.seq + 1:016x} after {prev.path.name}"
                )
        _remove_stale_tmp(dir)
        replay = _Replay()
        data = b""
        scan = _SegmentScan([], 0, None)
        for segment in segments:
            try:
                data = segment.path.read_bytes()
            except OSError as exc:
                raise StoreStorageError(
                    "wal: " + describe_os_error(exc, "reading", "WAL", segment.path)
                ) from exc
            scan = _scan_segment(segment.path, data, segment is segments[-1])
            replay.segment(segment, scan.records)

        last = segments[-1]
        if scan.torn is not None:
            logger.warning(
                "wal: torn record at the tail of %s at offset %d (%s): truncating %d byte(s) "
                "left by a write that a crash interrupted",
                last.path,
                scan.valid_end,
                scan.torn,
                len(data) - scan.valid_end,
            )
        try:
            fd = os.open(last.path, os.O_WRONLY | os.O_APPEND)
            if scan.torn is not None:
                os.ftruncate(fd, scan.valid_end)
                os.fsync(fd)
        except OSError as exc:
            raise StoreStorageError(
                "wal: " + describe_os_error(exc, "opening", "WAL", last.path)
            ) from exc

        wal = cls(dir, replay.metadata, segment_bytes)
        wal._segments = segments
        wal._fd = fd
        wal._segment_size = scan.valid_end
        wal._hard_state = replay.hard_state
        wal._snapshot_index = wal._durable_snapshot_index = replay.snapshot_index
        wal._snapshot_term = replay.snapshot_term
        wal._last_index = replay.entries[-1].index if replay.entries else replay.snapshot_index
        recovered = Recovered(
            metadata=replay.metadata,
            hard_state=replay.hard_state,
            entries=replay.entries,
            snapshot_index=replay.snapshot_index,
            snapshot_term=replay.snapshot_term,
        )
        logger.info(
            "wal: opened %s: %d segment(s), %d entries after snapshot index %d",
            dir,
            len(segments),
            len(recovered.entries),
            recovered.snapshot_index,
        )
        return wal, recovered

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def last_index(self) -> int:
        """Index of the last entry saved (or of the snapshot marker, if beyond it)."""
        return self._last_index

    def save(self, hard_state: HardState | None, entries: Sequence[Entry]) -> None:
        """Append `entries`, then `hard_state` if given. Buffered: durable after `sync`.

        `entries` must be consecutive and the first may not leave a gap after the log
        (`first.index <= last_index + 1`); an index at or below `last_index` replaces the
        saved entries from there on, as a Raft follower's conflicting suffix is.
        Entries go before the hard state, so a torn tail can lose the hard state's commit
        index but never leave it pointing past the entries.
        """
        self._check_writable()
        if entries:
            first = entries[0].index
            if not 1 <= first <= self._last_index + 1:
                raise ValueError(
                    f"wal: entry {first} would leave a gap after the last entry {self._last_index}"
                )
            for prev, cur in pairwise(entries):
                if cur.index != prev.index + 1:
                    raise ValueError(f"wal: entries not consecutive: {prev.index}, {cur.index}")
        segment = self._segments[-1]
        for entry in entries:
            self._append(_frame(RecordType.ENTRY, codec.encode_entry(entry)))
            segment.max_index = max(segment.max_index, entry.index)
        if entries:
            self._last_index = entries[-1].index
        if hard_state is not None:
            self._append(_frame(RecordType.HARD_STATE, codec.encode_hard_state(hard_state)))
            self._hard_state = hard_state
        self._maybe_rotate()

    def save_snapshot_marker(self, index: int, term: int) -> None:
        """Record that a snapshot at (`index`, `term`) is saved; replay starts after it.

        Save the snapshot file itself first. Buffered like `save`.
        """
        self._check_writable()
        if index < self._snapshot_index:
            raise ValueError(
                f"wal: snapshot marker {index} is older than the current one {self._snapshot_index}"
            )
        self._append(_frame(RecordType.SNAPSHOT_MARKER, _SNAPSHOT_MARKER.pack(index, term)))
        self._snapshot_index, self._snapshot_term = index, term
        self._last_index = max(self._last_index, index)
        self._maybe_rotate()

    @property
    def unsynced_bytes(self) -> int:
        """Bytes of records saved since the last sync: what the next `sync` makes durable."""
        return self._unsynced_bytes

    def sync(self) -> float:
        """Write out everything saved and fdatasync it; return the fdatasync's seconds.

        Returns 0.0 without syncing if nothing was saved since the last sync. Raises
        `WALWriteError` (and refuses further writes) if writing or syncing fails.
        """
        self._check_writable()
        self._flush()
        if not self._unsynced:
            return 0.0
        return self._sync_segment()

    def release_to(self, index: int) -> list[Path]:
        """Delete the oldest segments whose entries are all at or below `index`.

        `index` may not exceed the snapshot marker made durable by `sync`: only entries a
        snapshot covers can go. The current segment is never deleted. Returns the paths
        removed, oldest first (deleting in that order keeps the remaining sequence
        contiguous if a crash interrupts it).
        """
        self._check_writable()
        if index > self._durable_snapshot_index:
            raise ValueError(
                f"wal: cannot release entries up to {index}: the newest durable snapshot "
                f"marker is at {self._durable_snapshot_index} (save_snapshot_marker, then sync)"
            )
        removed: list[Path] = []
        try:
            while len(self._segments) > 1 and self._segments[0].max_index <= index:
                self._segments[0].path.unlink()
                removed.append(self._segments.pop(0).path)
            if removed:
                fsync_dir(self._dir)
        except OSError as exc:
            raise StoreStorageError(
                "wal: " + describe_os_error(exc, "removing segments of", "WAL", self._dir)
            ) from exc
        if removed:
            logger.info("wal: released %d segment(s) up to index %d", len(removed), index)
        return removed

    def close(self) -> None:
        """Write out and sync what is still buffered, then close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._failure is None:
                self._flush()
                if self._unsynced:
                    self._sync_segment()
        finally:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreStorageError(f"wal: {self._dir} is closed")
        if self._failure is not None:
            raise WALWriteError(
                f"{self._failure} (an earlier write failed; this WAL accepts no more writes "
                "because records it buffered may not be on disk: restart the member)"
            )

    def _fail(self, exc: OSError, action: str, path: Path) -> WALWriteError:
        self._failure = "wal: " + describe_os_error(exc, action, "WAL", path)
        logger.error("%s", self._failure)
        return WALWriteError(self._failure)

    def _append(self, record: bytes) -> None:
        self._buffer += record
        self._segment_size += len(record)
        self._unsynced_bytes += len(record)
        self._unsynced = True
        if len(self._buffer) >= _WRITE_BUFFER_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        try:
            _write_all(self._fd, self._buffer)
        except OSError as exc:
            raise self._fail(exc, "writing", self._segments[-1].path) from exc
        self._buffer.clear()

    def _sync_segment(self) -> float:
        start = time.perf_counter()
        try:
            os.fdatasync(self._fd)
        except OSError as exc:
            raise self._fail(exc, "syncing", self._segments[-1].path) from exc
        elapsed = time.perf_counter() - start
        self._unsynced = False
        self._unsynced_bytes = 0
        self._durable_snapshot_index = self._snapshot_index
        return elapsed

    def _maybe_rotate(self) -> None:
        if self._segment_size < self._segment_bytes:
            return
        self._flush()
        self._sync_segment()
        current = self._segments[-1]
        fd, self._fd = self._fd, -1
        try:
            os.close(fd)
        except OSError as exc:
            raise self._fail(exc, "closing", current.path) from exc
        self._start_segment(current.seq + 1, self._last_index + 1)

    def _start_segment(self, seq: int, first_index: int) -> None:
        """Create a segment with its preamble (tmp file, fsync, rename, dir fsync)."""
        path = self._dir / f"{seq:016x}-{first_index:016x}.wal"
        tmp = path.with_name(path.name + _TMP_SUFFIX)
        header = _SEGMENT_HEADER.pack(_SEGMENT_MAGIC, _FORMAT_VERSION, seq, first_index)
        marker = _SNAPSHOT_MARKER.pack(self._snapshot_index, self._snapshot_term)
        preamble = b"".join(
            (
                _frame(RecordType.SEGMENT_HEADER, header),
                _frame(RecordType.METADATA, self._metadata),
                _frame(RecordType.SNAPSHOT_MARKER, marker),
                _frame(RecordType.HARD_STATE, codec.encode_hard_state(self._hard_state)),
            )
        )
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                _write_all(fd, preamble)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, path)
            fsync_dir(self._dir)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise self._fail(exc, "creating", path) from exc
        self._segments.append(_Segment(seq, first_index, path, first_index - 1))
        self._segment_size = len(preamble)
        self._unsynced = False
