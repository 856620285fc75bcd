"""kopf, the operator framework, runs an operator on a custom resource unmodified: a
create handler sees the object and its status write comes back through the API."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any

import kopf
from kubernetes import client, config

from lab.testenv import Environment

from .test_crds import crd_manifest, kubectl, wait_established, widget


def _login(env: Environment) -> kopf.ConnectionInfo:
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(env.kubeconfig), client_configuration=cfg)
    token = (cfg.api_key or {}).get("authorization", "").removeprefix("Bearer ").strip()
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        scheme="Bearer" if token else None,
        token=token or None,
    )


def test_kopf_operator_sets_status_on_create(apiserver: Environment, namespace: str) -> None:
    group = f"k{uuid.uuid4().hex[:8]}.example.com"
    kubectl(apiserver, "apply", "-f", "-", stdin=json.dumps(crd_manifest(group)))
    wait_established(apiserver, f"widgets.{group}")

    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return _login(apiserver)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = True
        settings.watching.server_timeout = 10

    @kopf.on.create(group, "v1", "widgets", registry=registry)
    def created(spec: dict[str, Any], patch: kopf.Patch, **_: Any) -> None:
        patch.status["phase"] = f"Sized{spec['size']}"

    ready, stop = threading.Event(), threading.Event()

    def run() -> None:
        asyncio.run(
            kopf.operator(
                registry=registry,
                standalone=True,
                namespaces=[namespace],
                ready_flag=ready,
                stop_flag=stop,
            )
        )

    thread = threading.Thread(target=run, name="kopf", daemon=True)
    thread.start()
    try:
        assert ready.wait(30), "kopf did not start"
        ns = f"--namespace={namespace}"
        kubectl(apiserver, ns, "create", "-f", "-", stdin=widget("op", group, size=7))
        deadline = time.monotonic() + 30
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            got = json.loads(kubectl(apiserver, ns, "get", f"widgets.{group}", "op", "-o", "json"))
            status = got.get("status") or {}
            if status.get("phase"):
                break
            time.sleep(0.5)
        assert status.get("phase") == "Sized7"
        # kopf's finalizer lets it see the deletion; the object goes when it is done.
        kubectl(apiserver, ns, "delete", f"widgets.{group}", "op", "--timeout=30s")
    finally:
        stop.set()
        thread.join(30)
        kubectl(apiserver, "delete", "crd", f"widgets.{group}", "--wait=false", check=False)
