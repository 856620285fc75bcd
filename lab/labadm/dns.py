"""The cluster DNS add-on `labadm init` deploys, as kubeadm deploys CoreDNS.

A Deployment `kube-system/coredns`-like (`kube-dns` here, one replica) runs
`python -m agents.dns` from the node image, with a ServiceAccount allowed to list and
watch Services and EndpointSlices, behind the Service `kube-system/kube-dns` at the
fixed ClusterIP every kubelet writes into pods' resolv.conf (`--cluster-dns`,
`layout.CLUSTER_DNS`). Its pod tolerates the control-plane taint and is placed on
control-plane nodes: they hold the node image already (their static pods run it), so
the add-on costs no large pull on workers, and a worker that stops does not take
cluster DNS with it. Its own resolv.conf is the node's (`dnsPolicy: Default`): it
cannot ask itself.
"""

from __future__ import annotations

from typing import Any

from kubelab.api.resources import Resource
from kubelab.client import RestClient
from lab.labadm import addon
from lab.labadm.addon import CLUSTER_ROLES, SERVICE_ACCOUNTS, SERVICES
from lab.labadm.layout import CLUSTER_DNS, NODE_IMAGE_PYTHON, tracing_flags
from lab.labadm.workflow import say

NAME = "kube-dns"
NAMESPACE = "kube-system"
LABELS = {"k8s-app": NAME}
ROLE = "system:kube-dns"


def objects(image: str, tracing_endpoint: str = "") -> list[tuple[Resource, dict[str, Any]]]:
    """The add-on's objects in the order they are created; the server sends spans to
    `tracing_endpoint` when one is given (`InitData.tracing_endpoint`)."""
    meta = {"name": NAME, "namespace": NAMESPACE, "labels": LABELS}
    pod = {
        "serviceAccountName": NAME,
        "priorityClassName": "system-cluster-critical",
        "dnsPolicy": "Default",
        **addon.on_control_plane(),
        "containers": [
            {
                "name": "dns",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": [
                    *(NODE_IMAGE_PYTHON, "-m", "agents.dns", "--listen", "0.0.0.0:53"),
                    *tracing_flags(tracing_endpoint),
                ],
                "ports": [
                    {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
                ],
                "resources": {"requests": {"cpu": "50m", "memory": "40Mi"}},
            }
        ],
    }
    return [
        (SERVICE_ACCOUNTS, {"metadata": {"name": NAME, "namespace": NAMESPACE}}),
        (
            CLUSTER_ROLES,
            {
                "metadata": {"name": ROLE},
                "rules": [
                    {"apiGroups": [""], "resources": ["services"], "verbs": ["list", "watch"]},
                    {
                        "apiGroups": ["discovery.k8s.io"],
                        "resources": ["endpointslices"],
                        "verbs": ["list", "watch"],
                    },
                ],
            },
        ),
        addon.role_binding(ROLE, NAME, NAMESPACE),
        addon.deployment(meta, pod),
        (
            SERVICES,
            {
                "metadata": meta,
                "spec": {
                    "selector": LABELS,
                    "clusterIP": CLUSTER_DNS,
                    "ports": [
                        {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                        {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                    ],
                },
            },
        ),
    ]


def deploy(client: RestClient | None, image: str, tracing_endpoint: str = "") -> None:
    """Create the add-on's objects, leaving those that exist (a re-run of the phase);
    a None client is a dry run."""
    addon.create(client, objects(image, tracing_endpoint), "cluster DNS")
    say("addons", f"Applied essential addon: cluster DNS at {CLUSTER_DNS}")
