"""Field validation with the real kubectl against the real apiserver (in-process): a
typo in a manifest is an error under kubectl's default (Strict), a warning with
``--validate=warn``, silent with ``--validate=false``; never stored in any case."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from lab.testenv import Environment

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"


def _kubectl(env: Environment, *args: str, body: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(env.kubeconfig), *args],
        input=json.dumps(body),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _pod(name: str) -> dict[str, object]:
    container = {"name": "c", "image": "busybox:1.36", "imagePullPolizy": "Always"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container]},
    }


def test_a_typo_is_refused_warned_or_dropped_never_stored(
    apiserver: Environment, namespace: str
) -> None:
    strict = _kubectl(apiserver, "create", "-n", namespace, "-f", "-", body=_pod("strict"))
    assert strict.returncode != 0
    assert (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown '
        'field "spec.containers[0].imagePullPolizy"' in strict.stderr
    )

    warn = _kubectl(
        apiserver, "create", "--validate=warn", "-n", namespace, "-f", "-", body=_pod("warn")
    )
    assert warn.returncode == 0, warn.stderr
    assert 'Warning: unknown field "spec.containers[0].imagePullPolizy"' in warn.stderr

    ignore = _kubectl(
        apiserver, "create", "--validate=false", "-n", namespace, "-f", "-", body=_pod("ignore")
    )
    assert ignore.returncode == 0 and "Warning" not in ignore.stderr, ignore.stderr

    for name in ("warn", "ignore"):
        got = subprocess.run(
            [
                KUBECTL,
                "--kubeconfig",
                str(apiserver.kubeconfig),
                "get",
                "pod",
                name,
                "-n",
                namespace,
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        container = json.loads(got.stdout)["spec"]["containers"][0]
        assert "imagePullPolizy" not in container
        assert container["imagePullPolicy"] == "IfNotPresent", "the real field is defaulted"


def test_a_stray_status_on_a_configmap_is_not_kept(apiserver: Environment, namespace: str) -> None:
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "with-status"},
        "data": {"a": "1"},
        "status": {"phase": "Ready"},
    }
    done = _kubectl(
        apiserver, "create", "--validate=warn", "-n", namespace, "-f", "-", body=configmap
    )
    assert done.returncode == 0 and 'unknown field "status"' in done.stderr
    got = _kubectl(
        apiserver, "get", "configmap", "with-status", "-n", namespace, "-o", "json", body={}
    )
    assert "status" not in json.loads(got.stdout)
