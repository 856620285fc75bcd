"""`labctl flows` on the Docker lab (issue 23), as a user runs it: the create it always
makes, a get and the real-time path (logs, exec), the seeds' table printed from the
lab's traces, and its namespace deleted at the end. (Update, delete and top cost a
rolling update, a pod's start and the kubelets' stats: docs/flows.md has a whole run;
tests/integration/test_labctl_flows.py checks create, update, delete and get.)"""

from __future__ import annotations

import os
import subprocess
import sys

from lab.cluster import Lab
from tests.e2e.test_lab import KUBECTL


def test_flows_prints_the_seeds_table_from_the_labs_traces(lab: Lab) -> None:
    assert lab.collector, "the e2e lab traces by default"
    command = [sys.executable, "-m", "lab.labctl", "flows", "create", "get", "logs", "exec"]
    command += ["--kubeconfig", str(lab.kubeconfig), "--collector", lab.collector]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=400, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for fragment in (
        "The seeds' operation table, measured on the lab",
        "deployment-controller",
        "replicaset-controller",
        "watch cache (apiserver)",
        "Query (real-time): logs",
        "Query (real-time): exec",
        "(proxied by the apiserver)",
        "Kubelet.containerLogs",
        "Kubelet.exec",
        "Where the seeds simplify",
    ):
        assert fragment in out, fragment
    namespace = next(w for w in out.split() if w.startswith("kubelab-flows-"))
    phase = subprocess.run(
        [KUBECTL, "--kubeconfig", str(lab.kubeconfig), "get", "namespace", namespace,
         "-o", "jsonpath={.status.phase}", "--ignore-not-found"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert phase in ("", "Terminating")
