"""The default storage add-on `labadm init` installs, as kind and k3s ship one: the
StorageClass `standard`, the cluster's default class (DefaultStorageClass admission
gives it to claims that name none), whose volumes the controller-manager's local-path
provisioner makes in a directory of the node the claim's first pod is scheduled to
(`volumeBindingMode: WaitForFirstConsumer`) and deletes with the claim
(`reclaimPolicy: Delete`). docs/architecture.md, "Storage"."""

from __future__ import annotations

from typing import Any

from controlplane.controllers.localpath import PROVISIONER
from kubelab.api.claims import DEFAULT_CLASS, WAIT_FOR_FIRST_CONSUMER
from kubelab.client import RestClient, resource_for
from lab.labadm import tokens
from lab.labadm.workflow import say

NAME = "standard"
STORAGE_CLASSES = resource_for("storage.k8s.io/v1", "StorageClass")


def storage_class() -> dict[str, Any]:
    return {
        "apiVersion": STORAGE_CLASSES.api_version,
        "kind": STORAGE_CLASSES.kind,
        "metadata": {"name": NAME, "annotations": {DEFAULT_CLASS: "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": WAIT_FOR_FIRST_CONSUMER,
    }


def deploy(client: RestClient | None) -> None:
    """Create the class, leaving one that exists (a re-run of the phase); a None client
    is a dry run."""
    say("addons", f'Creating StorageClass "{NAME}" (default, provisioner {PROVISIONER})')
    if client is not None:
        tokens.create_or_keep(client, STORAGE_CLASSES, storage_class())
    say("addons", f"Applied essential addon: default StorageClass {NAME}")
