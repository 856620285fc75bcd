"""`labctl store` loads the client library only; the offline snapshot verbs are labutl's.

etcd split etcdutl out of etcdctl so that the client need not carry the server's storage
engine; `labctl store put` must likewise not load aiohttp, Raft or the WAL, nor the lab's
modules (Docker's SDK, fabric), which only the lab's commands import. `labctl store
snapshot status|restore` still parse their arguments and answer with the labutl command
line that does the job.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from lab.labctl.cli import main


def test_labctl_loads_the_client_library_only() -> None:
    heavy = ("controlplane", "aiohttp", "docker", "fabric", "paramiko", "lab.cluster")
    probe = (
        "import sys, lab.labctl.cli; "
        "lab.labctl.cli.build_parser(); "
        f"print(sorted(m for m in sys.modules if m.startswith({heavy!r})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"


def test_snapshot_restore_names_the_labutl_command(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["store", "snapshot", "restore", "--name", "m1", "--data-dir", "/srv/m 1", "b.snap"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "Error: `labctl store snapshot restore` works on files offline and moved to labutl "
        "(as etcdctl's moved to etcdutl): run "
        "`labutl snapshot restore b.snap --name m1 --data-dir '/srv/m 1'`\n"
    )


def test_snapshot_status_keeps_the_output_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "-w", "table", "snapshot", "status", "b.snap"]) == 1
    assert "run `labutl snapshot status b.snap -w table`" in capsys.readouterr().err
