"""DefaultBinder (bind): the decision reaches the apiserver as a Binding posted to the
pod's `binding` subresource, which sets `spec.nodeName` once (a second binding is a
409) and the PodScheduled condition. The seeds' step "API server updates
pod.spec.nodeName"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client import RestClient, ServerUnreachable

from ..framework import SUCCESS, CycleState, Handle, Pod, PodInfo, Status, error

NAME = "DefaultBinder"


def binding(pod: Pod, node_name: str) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }


class DefaultBinder:
    name = NAME

    def __init__(self, client: RestClient) -> None:
        self.client = client

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        meta = pod.pod.get("metadata") or {}
        path = f"/api/v1/namespaces/{meta.get('namespace')}/pods/{meta.get('name')}/binding"
        try:
            self.client.request("POST", path, body=binding(pod.pod, node_name))
        except (StatusError, ServerUnreachable) as exc:
            return error(f"binding {pod.key} to {node_name}: {exc}")
        return SUCCESS


def new(args: Mapping[str, Any], handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle.client)
