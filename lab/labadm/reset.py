"""`labadm reset`: undo `labadm init` or `labadm join` on this node, so that it can join
again: the kubelet stopped, the containers it ran removed (the static control plane
with them), certificates, kubeconfigs, manifests, the kubelet's flags and state and the
store member's data deleted, the network agent and kube-proxy stopped and their
routes and chains removed (their own `--cleanup`), the pods' bridge network removed.

On a control-plane node its store member is removed from the store first, through the
other members (`controlplane_join.leave_store`), as kubeadm removes the etcd member.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from agents.kubelet.runtime import NODE
from lab.labadm.controlplane_join import leave_store
from lab.labadm.init import SERVICE_DIR
from lab.labadm.layout import NODE_IMAGE_PYTHON, Layout
from lab.labadm.workflow import say

SERVICES = ("kubelet", "kubelab-network", "kubelab-proxy")
POD_NETWORK = "kubepods"
"""The kubelet's Docker network for pods (its --pod-network in the node image)."""


def reset(layout: Layout, *, dry_run: bool = False) -> None:
    if not dry_run:
        leave_store(layout)
    steps: list[tuple[str, list[str]]] = [
        ("Stopping the kubelet", ["sv", "down", "kubelet"]),
        ("Stopping the pod network agent", ["sv", "down", "kubelab-network"]),
        (
            "Removing the pod network's routes and chains",
            [NODE_IMAGE_PYTHON, "-m", "agents.network", "--cleanup"],
        ),
        ("Stopping kube-proxy", ["sv", "down", "kubelab-proxy"]),
        (
            "Removing kube-proxy's chains and LoadBalancer addresses",
            [NODE_IMAGE_PYTHON, "-m", "agents.proxy", "--cleanup"],
        ),
        (
            "Removing the containers the kubelet ran",
            ["sh", "-c", f"docker ps -aq --filter label={NODE} | xargs -r docker rm -f"],
        ),
        # The pods' bridge carries this node's podCIDR; joined again (a deleted Node
        # gets a new podCIDR), the kubelet makes it anew.
        ("Removing the pods' bridge network", ["docker", "network", "rm", POD_NETWORK]),
    ]
    for what, argv in steps:
        say("reset", what)
        if not dry_run:
            subprocess.run(argv, capture_output=True, check=False, timeout=120)
    say("reset", f"Disabling {', '.join(SERVICES)} (runit's down files)")
    for service in SERVICES if not dry_run else ():
        if (SERVICE_DIR / service).is_dir():
            (SERVICE_DIR / service / "down").touch()
    for path in (
        layout.manifests,
        layout.pki,
        *(layout.etc.glob("*.conf")),
        layout.kubelet_flags,
        layout.kubelet_dir,
        layout.store_data,
        layout.collector_data,
    ):
        if not path.exists():
            continue
        say("reset", f"Deleting {path}")
        if not dry_run:
            delete(path)


def delete(path: Path) -> None:
    """Delete a file or a folder; a folder that is a mount point (the lab's nodes keep
    /etc/kubelab, /var/lib/kubelet and the store's data on named volumes) is emptied."""
    if not path.is_dir() or path.is_symlink():
        path.unlink()
        return
    if not path.is_mount():
        shutil.rmtree(path)
        return
    for child in path.iterdir():
        delete(child)
