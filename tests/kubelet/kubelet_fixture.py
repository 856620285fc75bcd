"""A kubelet of the tests' own against the real apiserver: its client certificate says
`system:node:<name>` in `system:nodes` (so the Node authorizer and NodeRestriction
apply), and its runtime is the one the test passes (in memory, or Docker)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.kubelet.config import KubeletConfig
from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import FixedMachine
from agents.kubelet.runtime import Runtime
from kubelab import pki
from kubelab.client import ClientConfig, RestClient
from tests.integration.controlplane_fixture import Lab


def node_client(lab: Lab, node: str) -> RestClient:
    ca = pki.load_pair(lab.plane.pki, "ca")
    cert = pki.issue(ca, f"system:node:{node}", organizations=["system:nodes"], client=True)
    config = ClientConfig(
        server=lab.server,
        ca_data=ca.cert_pem(),
        client_cert_data=cert.cert_pem(),
        client_key_data=cert.key_pem(),
    )
    return RestClient(config, qps=50, burst=100)


def fast_config(node: str, root: Path, **overrides: Any) -> KubeletConfig:
    """Short periods, so that a test sees restarts and heartbeats in seconds."""
    config = KubeletConfig(
        node_name=node,
        node_ip="127.0.0.1",
        root_dir=root,
        node_status_update_frequency=1.0,
        node_lease_duration_seconds=4,
        crash_loop_backoff=1.0,
        crash_loop_backoff_cap=8.0,
        image_pull_backoff=1.0,
        relist_period=0.5,
        cgroup_root="",
        port=0,
    )
    return dataclasses.replace(config, **overrides)


def start_kubelet(lab: Lab, config: KubeletConfig, runtime: Runtime) -> Kubelet:
    kubelet = Kubelet(config, node_client(lab, config.node_name), runtime, FixedMachine())
    kubelet.start()
    return kubelet


def until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"still waiting for {what} after {timeout:.0f}s")
