"""The official Python client's own end-to-end suites against the Docker lab:
kubernetes-client/python's `kubernetes/e2e_test` (sync) and `kubernetes/aio/e2e_test`
(asyncio), of the installed release, as their project runs them against a kind cluster.

Where the suites come from: neither the `kubernetes` wheel nor its sdist on PyPI ships
them (setup.py lists the packages it installs, and `e2e_test` is not among them), and no
other registry is reachable here. So they are run from the first of:

* the installed package, if a future release or an editable install carries
  `kubernetes/e2e_test`;
* `$KUBELAB_CLIENT_E2E`: a checkout of kubernetes-client/python at the installed
  release's tag (the suites read their YAML files by paths relative to its root).

Without either the test is skipped, saying so. The suites find their cluster the way
they find any (`base.get_e2e_configuration`: the kubeconfig at `$KUBECONFIG`), here the
lab's admin kubeconfig. They work in `default`; the workloads they leave there (a failed
case does not clean up) are removed, so that the e2e tests after them find the lab as
it was. The test brings the lab up only once it knows it has suites to run.

The cases that cannot pass on an offline lab are deselected, each with its reason
(`UNAVAILABLE`); every other case must pass.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import kubernetes
import pytest

from lab.cluster import Lab
from tests.e2e.test_lab import KUBECTL
from tests.waiting import until

SOURCE_VARIABLE = "KUBELAB_CLIENT_E2E"
SUITES = ("kubernetes/e2e_test", "kubernetes/aio/e2e_test")

UNAVAILABLE = {
    "kubernetes/e2e_test/test_client.py::TestClient::test_portforward_raw": (
        "its server runs in the `python` image, which the lab's registry mirror does not "
        "hold and an offline lab cannot pull"
    ),
    "kubernetes/e2e_test/test_client.py::TestClient::test_portforward_http": (
        "it port-forwards to `nginx` (latest); the lab mirrors nginx:1.21 only and "
        "cannot pull another tag"
    ),
}
"""Cases an offline lab cannot pass, by pytest node id (a file: all its cases), and why."""

SUITE_TIMEOUT = 900
"""Seconds for both suites (their cases against this lab ran in under a minute)."""

WORKLOADS = "deployments,replicasets,replicationcontrollers,daemonsets,jobs,pods"
"""What the suites run in `default` (a failed case leaves its objects behind)."""


def source_tree() -> Path | None:
    """The root of a tree holding the suites of the installed release (module
    docstring), or None."""
    installed = Path(kubernetes.__file__).parent.parent
    if (installed / SUITES[0]).is_dir():
        return installed
    named = os.environ.get(SOURCE_VARIABLE)
    if named and (Path(named) / SUITES[0]).is_dir():
        return Path(named)
    return None


def _release(root: Path) -> str:
    """The `__version__` the tree's kubernetes/__init__.py declares ("" if none)."""
    init = (root / "kubernetes" / "__init__.py").read_text()
    found = re.search(r"""__version__\s*=\s*["']([^"']+)["']""", init)
    return found.group(1) if found else ""


def _kubectl(lab: Lab, *args: str) -> str:
    command = [KUBECTL, "--kubeconfig", str(lab.kubeconfig), "-n", "default", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout


def _workloads(lab: Lab) -> set[str]:
    """The workloads in `default`, as kind/name."""
    return set(_kubectl(lab, "get", WORKLOADS, "-o", "name").split())


def _remove_what_they_left(lab: Lab, before: set[str]) -> None:
    """Delete the workloads the suites left in `default` and wait until they are gone,
    so that the e2e tests after them find the lab as it was."""
    left = sorted(_workloads(lab) - before)
    if left:
        _kubectl(lab, "delete", "--wait=false", "--ignore-not-found", *left)
    until(lambda: _workloads(lab) <= before, f"{', '.join(left)} to be gone", timeout=120)


def test_the_official_clients_e2e_suites(request: pytest.FixtureRequest) -> None:
    root = source_tree()
    installed = importlib.metadata.version("kubernetes")
    if root is None:
        pytest.skip(
            f"the official client's e2e suites are not shipped with kubernetes {installed} "
            f"(wheel or sdist): set {SOURCE_VARIABLE} to a checkout of "
            f"kubernetes-client/python at v{installed}"
        )
    assert _release(root) == installed, (
        f"{root} holds the suites of kubernetes {_release(root) or '(unknown)'}, but "
        f"{installed} is installed: check out v{installed}"
    )
    lab: Lab = request.getfixturevalue("lab")  # only now: a skip brings no lab up
    before = _workloads(lab)
    suites = [suite for suite in SUITES if (root / suite).is_dir()]
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--rootdir",
                str(root),
                "-o",
                "addopts=",
                *suites,
                *(f"--deselect={case}" for case in UNAVAILABLE),
            ],
            cwd=root,
            env={**os.environ, "KUBECONFIG": str(lab.kubeconfig), "PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            timeout=SUITE_TIMEOUT,
            check=False,
        )
    finally:
        _remove_what_they_left(lab, before)
    assert done.returncode == 0, f"the official client's e2e suites failed:\n{done.stdout}"
