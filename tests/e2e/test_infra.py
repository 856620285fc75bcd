"""The testinfra suite (tests/infra, `make verify`) passes on every node of the
session's lab, through the inventory and SSH config `labctl up` wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lab.cluster import Lab

ROOT = Path(__file__).resolve().parents[2]


def test_testinfra_checks_pass_on_every_node(lab: Lab) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
         str(ROOT / "tests" / "infra"), "--inventory", str(lab.inventory)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:]
    assert lab.nodes is not None
    for node in lab.nodes.nodes:  # every node was checked, none skipped
        assert f"test_services_run[{node.name}]" in done.stdout
    assert " skipped" not in done.stdout.splitlines()[-1], done.stdout[-2000:]
