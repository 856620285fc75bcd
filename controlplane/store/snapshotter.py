"""Snapshot files of the store: the state machine image that lets the WAL be trimmed.

Each snapshot is one file ``{term:016x}-{index:016x}.snap`` in the snapshot directory,
holding ``[u32 big-endian crc32 of the rest][codec snapshot bytes]``. Fixed-width hex
names sort like the (term, index) pairs they encode.

Saving is atomic: the bytes go to ``<name>.tmp``, are fsynced, renamed to the final name,
and the directory is fsynced so that the rename itself survives a crash. A reader thus
sees either no file or a complete one; a crash mid-save leaves only a ``.tmp`` file,
which `Snapshotter.load_newest` removes.

Loading tries the newest file first. A file whose crc fails, that does not decode, or
whose contents disagree with its name is set aside as ``<name>.broken`` (kept for
inspection, never loaded again) with a WARNING, and the next older file is tried: an
older snapshot plus the WAL entries after it still rebuilds the state, as long as the WAL
has not been released past it. The caller checks that: if the snapshot returned is older
than the WAL's snapshot marker, entries between the two are gone and the member must be
restored or re-added.

Order of operations for the runtime: `Snapshotter.save`, then `WAL.save_snapshot_marker`
and `WAL.sync`, then `WAL.release_to` and `Snapshotter.purge`. A snapshot file is thus
always on disk before the WAL relies on it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
import zlib
from pathlib import Path

from controlplane.store import codec
from controlplane.store.raft.types import Snapshot
from controlplane.store.wal import StoreStorageError, describe_os_error, ensure_dir, fsync_dir

logger = logging.getLogger(__name__)

_CRC = struct.Struct(">I")
_SNAP_NAME = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{16})\.snap$")
_TMP_SUFFIX = ".tmp"
_BROKEN_SUFFIX = ".broken"


class Snapshotter:
    """Saves, loads and purges the snapshot files in one directory.

    Not thread-safe: the runtime drives it from its storage thread.
    """

    def __init__(self, dir: Path) -> None:
        self._dir = dir

    @property
    def dir(self) -> Path:
        return self._dir

    def save(self, snapshot: Snapshot) -> Path:
        """Write `snapshot` atomically and durably; return the file's path.

        Raises `ValueError` for an empty snapshot (index 0) and `StoreStorageError` if the
        write fails (no partial file is left behind).
        """
        meta = snapshot.metadata
        if snapshot.is_empty():
            raise ValueError("snap: refusing to save an empty snapshot (index 0)")
        body = codec.encode_snapshot(snapshot)
        path = self._dir / f"{meta.term:016x}-{meta.index:016x}.snap"
        tmp = path.with_name(path.name + _TMP_SUFFIX)
        try:
            ensure_dir(self._dir)
            with open(tmp, "wb") as f:
                f.write(_CRC.pack(zlib.crc32(body)))
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, path)
            fsync_dir(self._dir)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise StoreStorageError(
                "snap: " + describe_os_error(exc, "writing", "snapshot", path)
            ) from exc
        logger.info("snap: saved %s (%d bytes)", path, _CRC.size + len(body))
        return path

    def load_newest(self, at_most: int | None = None) -> Snapshot | None:
        """The newest snapshot by (term, index) that is intact, or None if there is none.

        With `at_most`, snapshots above that index are skipped: the runtime passes the
        WAL's snapshot marker, because a snapshot file saved just before a crash, whose
        marker never reached the WAL, is newer than the hard state the WAL holds and must
        not be trusted (etcd applies the same rule).

        Broken files met on the way are renamed to ``<name>.broken``; leftovers of an
        interrupted `save` are removed. Meant for startup, before any `save`.
        """
        for tmp in self._dir.glob(f"*.snap{_TMP_SUFFIX}"):
            logger.warning("snap: removing %s, left behind by a crash during a save", tmp)
            tmp.unlink()
        for path, term, index in self._files():
            if at_most is not None and index > at_most:
                logger.info("snap: skipping %s, newer than the WAL's snapshot marker", path)
                continue
            loaded = self._read(path, term, index)
            if isinstance(loaded, Snapshot):
                logger.info("snap: loaded %s", path)
                return loaded
            broken = path.with_name(path.name + _BROKEN_SUFFIX)
            logger.warning(
                "snap: %s is unusable (%s); renaming it to %s and trying an older snapshot",
                path,
                loaded,
                broken.name,
            )
            try:
                os.rename(path, broken)
                fsync_dir(self._dir)
            except OSError as exc:
                raise StoreStorageError(
                    "snap: " + describe_os_error(exc, "setting aside", "snapshot", path)
                ) from exc
        return None

    def purge(self, keep: int = 5) -> list[Path]:
        """Delete all but the newest `keep` snapshot files; return the paths removed.

        ``.broken`` files are left alone for inspection.
        """
        if keep < 1:
            raise ValueError(f"snap: keep must be at least 1, not {keep}")
        doomed = [path for path, _, _ in self._files()[keep:]]
        try:
            for path in doomed:
                path.unlink()
            if doomed:
                fsync_dir(self._dir)
        except OSError as exc:
            raise StoreStorageError(
                "snap: " + describe_os_error(exc, "purging", "snapshots in", self._dir)
            ) from exc
        if doomed:
            logger.info("snap: purged %d old snapshot(s) from %s", len(doomed), self._dir)
        return doomed

    def _files(self) -> list[tuple[Path, int, int]]:
        """(path, term, index) of each snapshot file, newest first."""
        if not self._dir.is_dir():
            return []
        found = []
        for name in os.listdir(self._dir):
            match = _SNAP_NAME.match(name)
            if match:
                found.append((self._dir / name, int(match[1], 16), int(match[2], 16)))
        return sorted(found, key=lambda f: (f[1], f[2]), reverse=True)

    @staticmethod
    def _read(path: Path, term: int, index: int) -> Snapshot | str:
        """The snapshot in `path`, or why it cannot be used."""
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise StoreStorageError(
                "snap: " + describe_os_error(exc, "reading", "snapshot", path)
            ) from exc
        if len(data) < _CRC.size:
            return f"only {len(data)} bytes long"
        (crc,) = _CRC.unpack_from(data)
        body = memoryview(data)[_CRC.size :]
        if zlib.crc32(body) != crc:
            return "checksum mismatch"
        try:
            snapshot = codec.decode_snapshot(bytes(body))
        except codec.CodecError as exc:
            return str(exc)
        meta = snapshot.metadata
        if (meta.term, meta.index) != (term, index):
            return f"it holds term {meta.term} index {meta.index}, not what its name says"
        return snapshot
