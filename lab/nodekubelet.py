"""The kubelet as a service of a node container (lab.nodes), configured for an apiserver
on the host (lab.relay's `NodeAPI`): what labadm's join does on a node, for the tests and
benchmarks that bring their own apiserver.

The node's kubelet authenticates as `system:node:<name>` in `system:nodes` (a client
certificate of the apiserver's CA), serves :10250 with a certificate of the same CA for
the node's IP, puts its pods on the `kubepods` bridge in the node's podCIDR and names
the sandbox image that `lab.images` builds; then runit starts it (`sv up kubelet`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from kubelab import pki
from lab.images import PAUSE_IMAGE
from lab.nodes import Node
from lab.relay import NodeAPI

KUBECONFIG = "/etc/kubelab/kubelet.conf"
PKI = "/etc/kubelab/pki"
POD_NETWORK = "kubepods"
"""The kubelet's `--pod-network` default: the bridge in the node's podCIDR."""


def install_kubelet(api: NodeAPI, node: Node, flags: Sequence[str] = ()) -> None:
    """Credentials, serving certificate and flags of `node`'s kubelet; then start it.
    `flags` come after the ones set here (and so override them)."""
    api.install(node, KUBECONFIG, f"system:node:{node.name}", ("system:nodes",))
    ca = pki.load_pair(api.ca_dir, "ca")
    serving = pki.issue(ca, node.name, server=True, ip_addresses=[node.ip])
    node.write_file(f"{PKI}/kubelet.crt", serving.cert_pem(), 0o644)
    node.write_file(f"{PKI}/kubelet.key", serving.key_pem())
    node.write_file(f"{PKI}/ca.crt", ca.cert_pem(), 0o644)
    args = [
        f"--hostname-override={node.name}",
        f"--node-ip={node.ip}",
        f"--tls-cert-file={PKI}/kubelet.crt",
        f"--tls-private-key-file={PKI}/kubelet.key",
        f"--client-ca-file={PKI}/ca.crt",
        f"--pod-network={POD_NETWORK}",
        f"--pod-infra-container-image={PAUSE_IMAGE}",
        *flags,
    ]
    node.write_file("/etc/default/kubelet", f"ARGS={shlex.quote(' '.join(args))}\n".encode())
    node.exec("sv", "up", "kubelet")


def stop_kubelet(node: Node) -> None:
    """Stop the kubelet and remove every container it made (they carry its node label)."""
    node.exec("sv", "down", "kubelet", check=False)
    node.exec(
        "sh", "-c", "docker rm -f $(docker ps -aq --filter label=kubelab.io/node) 2>/dev/null",
        check=False,
    )  # fmt: skip
