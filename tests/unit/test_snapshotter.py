"""Snapshot files: atomic save, newest-intact load with fallback, purge."""

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
from controlplane.store.raft.types import ConfState, Snapshot, SnapshotMetadata
from controlplane.store.snapshotter import Snapshotter
from controlplane.store.wal import StoreStorageError


def snap(term: int, index: int, data: bytes = b"state") -> Snapshot:
    return Snapshot(SnapshotMetadata(index, term, ConfState((1, 2, 3), (4,))), data)


def test_save_writes_named_file_with_crc_and_loads_back(tmp_path: Path) -> None:
    snapper = Snapshotter(tmp_path / "snap")
    s = snap(3, 0x1234, b"x" * 1000)
    path = snapper.save(s)
    assert path == tmp_path / "snap" / "0000000000000003-0000000000001234.snap"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no .tmp left
    raw = path.read_bytes()
    body = codec.encode_snapshot(s)
    assert raw == struct.pack(">I", zlib.crc32(body)) + body
    assert Snapshotter(tmp_path / "snap").load_newest() == s


def test_load_newest_orders_by_term_then_index(tmp_path: Path) -> None:
    snapper = Snapshotter(tmp_path)
    for term, index in [(1, 900), (2, 100), (2, 50), (1, 1000)]:
        snapper.save(snap(term, index))
    assert snapper.load_newest() == snap(2, 100)


def test_load_newest_of_empty_or_missing_dir_is_none(tmp_path: Path) -> None:
    assert Snapshotter(tmp_path).load_newest() is None
    assert Snapshotter(tmp_path / "absent").load_newest() is None


def test_save_refuses_an_empty_snapshot(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty snapshot"):
        Snapshotter(tmp_path).save(Snapshot())


@pytest.mark.parametrize("damage", ["flip", "truncate", "tiny", "renamed"])
def test_corrupt_newest_falls_back_to_older_and_is_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    snapper = Snapshotter(tmp_path)
    older = snap(1, 10, b"old")
    snapper.save(older)
    newest = snapper.save(snap(2, 20, b"new state"))
    raw = bytearray(newest.read_bytes())
    if damage == "flip":
        raw[-2] ^= 0x40
        newest.write_bytes(bytes(raw))
    elif damage == "truncate":
        newest.write_bytes(bytes(raw[:-5]))
    elif damage == "tiny":
        newest.write_bytes(bytes(raw[:3]))
    else:  # intact contents under a newer name than they hold
        newest.unlink()
        newest = tmp_path / "0000000000000003-0000000000000030.snap"
        shutil.copyfile(snapper.save(snap(2, 20)), newest)
        (tmp_path / "0000000000000002-0000000000000014.snap").unlink()

    with caplog.at_level(logging.WARNING, logger="controlplane.store.snapshotter"):
        assert snapper.load_newest() == older
    assert not newest.exists()
    assert newest.with_name(newest.name + ".broken").exists()
    assert str(newest) in caplog.text
    assert caplog.text.count("unusable") == 1
    # The broken file is never tried again.
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert snapper.load_newest() == older
    assert not caplog.records


def test_valid_crc_over_undecodable_body_is_broken(tmp_path: Path) -> None:
    snapper = Snapshotter(tmp_path)
    snapper.save(snap(1, 1))
    body = b"\xc1 not msgpack"
    (tmp_path / "0000000000000001-0000000000000002.snap").write_bytes(
        struct.pack(">I", zlib.crc32(body)) + body
    )
    assert snapper.load_newest() == snap(1, 1)
    assert (tmp_path / "0000000000000001-0000000000000002.snap.broken").exists()


def test_all_corrupt_gives_none(tmp_path: Path) -> None:
    snapper = Snapshotter(tmp_path)
    for index in (1, 2):
        snapper.save(snap(1, index)).write_bytes(b"garbage!")
    assert snapper.load_newest() is None
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".broken", ".broken"]


def test_load_newest_removes_leftover_tmp_from_a_crashed_save(tmp_path: Path) -> None:
    snapper = Snapshotter(tmp_path)
    snapper.save(snap(1, 5))
    leftover = tmp_path / "0000000000000001-0000000000000009.snap.tmp"
    leftover.write_bytes(b"half a snapshot")
    assert snapper.load_newest() == snap(1, 5)
    assert not leftover.exists()


def test_purge_keeps_the_newest(tmp_path: Path) -> None:
    snapper = Snapshotter(tmp_path)
    paths = [snapper.save(snap(1, i)) for i in range(1, 9)]
    broken = tmp_path / "0000000000000000-0000000000000001.snap.broken"
    broken.write_bytes(b"kept for inspection")
    removed = snapper.purge(keep=3)
    assert sorted(removed) == paths[:5]
    assert sorted(tmp_path.glob("*.snap")) == paths[5:]
    assert broken.exists()
    assert snapper.purge(keep=3) == []
    assert snapper.purge() == []
    with pytest.raises(ValueError):
        snapper.purge(keep=0)


def test_save_failure_surfaces_clearly_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def enospc(_fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    snapper = Snapshotter(tmp_path)
    with monkeypatch.context() as m:
        m.setattr(os, "fsync", enospc)
        with pytest.raises(StoreStorageError) as info:
            snapper.save(snap(1, 7))
    target = tmp_path / "0000000000000001-0000000000000007.snap"
    assert str(info.value) == (
        f"snap: no space left on device while writing snapshot {target}: "
        "free space or move --data-dir"
    )
    assert list(tmp_path.iterdir()) == []
    assert snapper.load_newest() is None


def test_load_newest_at_most_skips_snapshots_the_wal_does_not_reference(tmp_path: Path) -> None:
    snapper = Snapshotter(tmp_path)
    snapper.save(Snapshot(SnapshotMetadata(5, 1, ConfState((1,))), b"old"))
    snapper.save(Snapshot(SnapshotMetadata(9, 1, ConfState((1,))), b"new"))
    loaded = snapper.load_newest(at_most=5)
    assert loaded is not None and loaded.data == b"old"
    newest = snapper.load_newest()
    assert newest is not None and newest.data == b"new"
