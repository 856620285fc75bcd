"""Errors shaped as Kubernetes shapes them, down to what clients print: the status line's
reason phrase, a cause's message without its field path, the Status body's field order
and its trailing newline."""

from __future__ import annotations

import json

from tests.integration.controlplane_fixture import Lab, lab, namespace

__all__ = ["lab", "namespace"]  # pytest fixtures used below


def _configmap(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def test_status_lines_and_bodies_are_written_as_go_writes_them(lab: Lab, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    assert lab.api("POST", path, json=_configmap("twice")).status_code == 201
    r = lab.api("POST", path, json=_configmap("twice"))
    assert (r.status_code, r.reason) == (409, "Conflict")
    assert r.content.endswith(b"}\n")
    assert list(json.loads(r.content)) == [
        "kind",
        "apiVersion",
        "metadata",
        "status",
        "message",
        "reason",
        "details",
        "code",
    ]
    r = lab.api("GET", path + "/missing")
    assert (r.status_code, r.reason) == (404, "Not Found")
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"configmaps \\"missing\\" not found","reason":"NotFound",'
        b'"details":{"name":"missing","kind":"configmaps"},"code":404}\n'
    )
    r = lab.api("POST", path, json={"kind": "ConfigMap", "apiVersion": "v1", "metadata": {}})
    assert (r.status_code, r.reason) == (422, "Unprocessable Entity")


def test_kubectl_prints_an_invalid_field_once(lab: Lab, namespace: str) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "bad"},
        "spec": {"ports": [{"port": 70000}], "selector": {"app": "x"}},
    }
    done = lab.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(service), check=False)
    assert done.returncode != 0
    assert "spec.ports[0].port: Invalid value: 70000" in done.stderr
    assert "spec.ports[0].port: spec.ports[0].port" not in done.stderr
    cause = lab.api("POST", f"/api/v1/namespaces/{namespace}/services", json=service).json()[
        "details"
    ]["causes"][0]
    assert cause["field"] == "spec.ports[0].port"
    assert cause["message"].startswith("Invalid value: 70000")
