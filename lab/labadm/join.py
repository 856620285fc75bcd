"""`labadm join`: a worker joins with a bootstrap token (seeds: a worker joining with
kubeadm).

Discovery: the public `cluster-info` ConfigMap is read without trusting the server yet;
its `jws-kubeconfig-<token-id>` signature (made by the controller-manager's bootstrap
signer with the token's secret) must verify with our token, and its CA is accepted only
if the hash of its public key matches `--discovery-token-ca-cert-hash` (the pin `labadm
init` printed); from then on the
apiserver is verified with that CA. TLS bootstrap: with the token, the node posts a
CertificateSigningRequest for `system:node:<name>` in `system:nodes` (signer
`kubernetes.io/kube-apiserver-client-kubelet`), which the controller-manager approves
(RBAC lets bootstrappers' `nodeclient` requests through) and signs; the signed
certificate becomes the kubelet's kubeconfig and the kubelet is started.

The request is the kubelet's own TLS bootstrap code (`agents.kubelet.certificates`),
run by labadm before the kubelet starts: kubelet.conf must hold the certificate itself,
since the node agents start with a copy of it. (kubeadm instead writes
bootstrap-kubelet.conf and waits for the kubelet to bootstrap; kubelab's kubelet can,
with `--bootstrap-kubeconfig`, and rotates the certificate later either way.)
"""

from __future__ import annotations

import base64
import hmac
import time
from dataclasses import dataclass

import requests
import yaml
from cryptography import x509

from agents.kubelet import certificates
from kubelab import jws, pki
from kubelab.client import ClientConfig, RestClient, ServerUnreachable, StatusError
from lab.labadm import controlplane_join, tokens
from lab.labadm.init import InitData, addons, start_kube_proxy, start_kubelet, start_network_agent
from lab.labadm.layout import Layout, write_kubeconfig
from lab.labadm.workflow import Phase, PhaseError, Workflow, check, say


@dataclass
class JoinData:
    layout: Layout
    endpoint: str
    token: str
    ca_cert_hashes: tuple[str, ...]
    node_name: str
    node_ip: str
    dry_run: bool = False
    timeout: float = 120.0
    ca_pem: bytes = b""
    pod_subnet: str = "10.244.0.0/16"
    """From the cluster's kubelab-config, read with the token."""
    control_plane: InitData | None = None
    """With --control-plane: what this node's control plane is made from (the same
    data `labadm init` fills; `lab.labadm.controlplane_join`)."""
    tracing_endpoint: str = ""
    """The kubelet's and kube-proxy's `--tracing-endpoint` (`InitData.tracing_endpoint`);
    empty: the cluster's, from its kubelab-config (`labadm init --collector`)."""

    @property
    def server(self) -> str:
        return self.endpoint if "://" in self.endpoint else f"https://{self.endpoint}"


def preflight(data: JoinData) -> None:
    failed: list[str] = []
    try:
        tokens.parse(data.token)
    except tokens.TokenError as exc:
        failed.append(str(exc))
    if not data.ca_cert_hashes:
        failed.append(
            "--discovery-token-ca-cert-hash is required (sha256:<hex>, printed by `labadm "
            "init` and `labadm token create --print-join-command`): without it the CA "
            "could not be trusted"
        )
    failed += controlplane_join.problems(data)
    if data.layout.kubeconfig("kubelet").exists():
        failed.append(
            f"{data.layout.kubeconfig('kubelet')} exists: this node already joined a "
            "cluster; run `labadm reset` first"
        )
    check(failed, "join")


def fetch_cluster_info(data: JoinData) -> dict[str, str]:
    """The data of the public cluster-info ConfigMap, read without trusting the server."""
    url = f"{data.server}/api/v1/namespaces/kube-public/configmaps/cluster-info"
    session = requests.Session()
    session.trust_env = False
    try:
        # Not verified on purpose: the signature and the pin are what make it trustworthy.
        response = session.get(url, verify=False, timeout=10)
    except requests.RequestException as exc:
        raise PhaseError(
            f"cannot reach the apiserver at {data.server}: {exc.__class__.__name__}; check "
            "the endpoint (host:port as `labadm init` printed it), that this node can "
            "route to it, and that the control plane is up"
        ) from None
    if response.status_code != 200:
        raise PhaseError(
            f"{data.server} answered {response.status_code} for the cluster-info ConfigMap: "
            "is this a kubelab apiserver, and did `labadm init` finish its bootstrap-token phase?"
        )
    found: dict[str, str] = response.json().get("data") or {}
    return found


def token_refused(data: JoinData) -> bool:
    """Whether the apiserver answers 401 to the token (unknown or expired): then no
    signature for it will come, and waiting for one is pointless."""
    session = requests.Session()
    session.trust_env = False
    url = f"{data.server}/api/v1/namespaces/kube-public/configmaps/cluster-info"
    headers = {"Authorization": f"Bearer {data.token}"}
    try:
        return session.get(url, headers=headers, verify=False, timeout=10).status_code == 401
    except requests.RequestException:
        return False


def signed_cluster_info(data: JoinData) -> str:
    """cluster-info's kubeconfig, once its `jws-kubeconfig-<token-id>` signature made
    with our token verifies (kubeadm's token discovery). The controller-manager's
    bootstrap signer adds it shortly after a token is made, so its absence is waited
    out, unless the apiserver refuses the token itself; a signature that does not
    verify is an error at once."""
    token_id, token_secret = tokens.parse(data.token)
    key = f"{jws.SIGNATURE_PREFIX}{token_id}"
    deadline = time.monotonic() + data.timeout
    while True:
        found = fetch_cluster_info(data)
        content, signature = found.get("kubeconfig"), found.get(key)
        if content is not None and signature is not None:
            if not jws.verify_detached(signature, content, token_id, token_secret):
                raise PhaseError(
                    f"cluster-info's signature for token id {token_id!r} does not verify "
                    "with this token's secret: the token is wrong (check it) or someone "
                    "other than the cluster answered at this endpoint"
                )
            return content
        if token_refused(data):
            raise PhaseError(
                f"the apiserver refused the bootstrap token {token_id!r}: it is unknown or "
                "expired; on a control-plane node run `labadm token create "
                "--print-join-command` and use the command it prints"
            )
        if time.monotonic() > deadline:
            raise PhaseError(
                f"cluster-info has no signature for token id {token_id!r} after "
                f"{data.timeout:.0f}s: the token is unknown or expired (`labadm token list` "
                "on a control-plane node; `labadm token create --print-join-command` makes "
                "a new one), or the controller-manager's bootstrap signer is not running"
            )
        time.sleep(1.0)


def discover(data: JoinData) -> None:
    """The cluster's CA from cluster-info, trusted only if its public key's hash matches."""
    say("discovery", f"Reading the cluster-info ConfigMap from {data.server}")
    if data.dry_run:
        return
    content = signed_cluster_info(data)
    config = yaml.safe_load(content)
    ca_pem = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
    actual = pki.ca_cert_hash(x509.load_pem_x509_certificate(ca_pem))
    if not any(hmac.compare_digest(actual, wanted) for wanted in data.ca_cert_hashes):
        raise PhaseError(
            f"the cluster CA's public key hash is {actual}, not the "
            f"--discovery-token-ca-cert-hash given ({', '.join(data.ca_cert_hashes)}): check "
            "the hash (labadm init printed it) and that the endpoint is the right cluster"
        )
    say("discovery", f"Cluster info signature and contents are valid: CA pinned ({actual})")
    data.ca_pem = ca_pem
    data.layout.pki.mkdir(mode=0o700, parents=True, exist_ok=True)
    pki.write_atomic(data.layout.pki / "ca.crt", ca_pem, 0o644)


def tls_bootstrap(data: JoinData) -> None:
    """A client certificate for the kubelet, asked for with the bootstrap token through
    the kubelet's own certificate request (`agents.kubelet.certificates`)."""
    say("kubelet-start", "Requesting a client certificate for the kubelet (TLS bootstrap)")
    if data.dry_run:
        return
    config = ClientConfig(server=data.server, ca_data=data.ca_pem, token=data.token)
    with RestClient(config, qps=None) as client:
        try:
            cert_pem, key_pem = certificates.request_certificate(
                client, data.node_name, timeout=data.timeout
            )
            settings = tokens.read_cluster_config(client)
            data.pod_subnet = settings.get("podSubnet", data.pod_subnet)
            # The collector `labadm init --collector` started, unless the flag names another.
            data.tracing_endpoint = data.tracing_endpoint or settings.get("tracingEndpoint", "")
        except StatusError as exc:
            if exc.code != 401:
                raise
            raise PhaseError(
                f"the apiserver refused the bootstrap token ({exc}): it is unknown or "
                "expired; on a control-plane node run `labadm token create "
                "--print-join-command` and use the command it prints"
            ) from None
        except ServerUnreachable as exc:
            raise PhaseError(f"cannot reach the apiserver at {data.server}: {exc}") from None
        except certificates.CertificateError as exc:
            raise PhaseError(str(exc)) from None
    user = f"system:node:{data.node_name}"
    write_kubeconfig(data.layout, "kubelet", data.server, user, data.ca_pem, cert_pem, key_pem)
    say("kubelet-start", f"The kubelet's client certificate for {user} is signed")


def kubelet_start(data: JoinData) -> None:
    start_kubelet(
        data.layout,
        data.node_name,
        data.node_ip,
        dry_run=data.dry_run,
        manifests=data.control_plane is not None,
        tracing_endpoint=data.tracing_endpoint,
    )


def show_joined(data: JoinData) -> None:
    print(
        "\nThis node has joined the cluster:\n"
        "* A certificate signing request was sent to the apiserver and a response was received.\n"
        "* The kubelet was informed of the new secure connection details.\n\n"
        "Run 'kubectl get nodes' on the control-plane to see this node join the cluster."
    )


JOIN = Workflow[JoinData](
    (
        Phase("preflight", "Checks before changing anything", preflight),
        Phase("discovery", "The cluster's CA, pinned by its public key's hash", discover),
        controlplane_join.PREPARE,
        Phase("kubelet-tls-bootstrap", "A client certificate for the kubelet", tls_bootstrap),
        Phase("kubelet-start", "Writes the kubelet's flags and starts it", kubelet_start),
        controlplane_join.JOIN,
        addons(
            lambda d: start_network_agent(d.layout, dry_run=d.dry_run),
            lambda d: start_kube_proxy(
                d.layout, d.pod_subnet, dry_run=d.dry_run, tracing_endpoint=d.tracing_endpoint
            ),
        ),
        Phase("show-joined", "Says what happened", show_joined),
    )
)
