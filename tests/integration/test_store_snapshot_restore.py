"""Snapshot save, restore into a fresh 3-member cluster: all the data is there.

The flow of the seeds' "etcd backup" section, on kubelab's store: `labctl store snapshot
save` against the running cluster, then offline `labutl snapshot status` and `labutl
snapshot restore` once per member of a new cluster (same --initial-cluster), start it, and
read everything back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controlplane.store import labutl
from lab.labctl.cli import main as labctl
from lab.localcluster import LocalCluster


def _labctl(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = labctl(["store", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _labutl(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = labutl.main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_snapshot_save_restore_into_a_new_cluster_keeps_every_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = LocalCluster(tmp_path / "old", 3)
    old.start_all()
    try:
        leader = old.wait_leader()
        for i in range(200):
            old.put(leader, f"/registry/pods/default/p{i:03d}", f"spec-{i}")
        endpoints = ",".join(m.client_url for m in old.members)
        backup = tmp_path / "backup.snap"
        _labctl(capsys, "--endpoints", endpoints, "snapshot", "save", str(backup))
    finally:
        old.stop_all()

    status = json.loads(_labutl(capsys, "snapshot", "status", str(backup), "-w", "json"))
    assert status["totalKey"] == 200 and status["revision"] == 201

    new = LocalCluster(tmp_path / "new", 3)
    initial = ",".join(f"{m.name}={m.peer_url}" for m in new.members)
    for m in new.members:
        _labutl(
            capsys,
            "snapshot", "restore", str(backup),
            "--name", m.name,
            "--data-dir", str(new.dir / m.name),
            "--initial-cluster", initial,
        )  # fmt: skip
    new.start_all()
    try:
        new.wait_leader()
        for m in new.members:
            new.wait_serving(m)
            assert new.get(m, "/registry/pods/default/p000") == "spec-0"
            assert new.get(m, "/registry/pods/default/p199") == "spec-199"
        leader = new.wait_leader()
        new.put(leader, "after-restore", "yes")
        assert all(new.get(m, "after-restore") == "yes" for m in new.members)
    finally:
        new.stop_all()
