"""TLS bootstrap and rotation of the kubelet's client certificate, against the real
apiserver (in-process): a bootstrap token gets the node a certificate of its own through
a CertificateSigningRequest, and the kubelet renews it before it expires.

The controller-manager's csrapproving/csrsigning are not part of these tests: the test
approves and signs the requests itself through the API (`approval` and `status`
subresources of certificates.k8s.io/v1), with the test cluster's CA, and signs for a
few seconds only so that rotation happens while the test watches.
"""

from __future__ import annotations

import base64
import datetime
import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from agents.kubelet import certificates
from agents.kubelet.kubelet import Kubelet
from agents.kubelet.machine import FixedMachine
from agents.kubelet.runtime.memory import MemoryRuntime
from kubelab import pki
from kubelab.api.errors import StatusError
from kubelab.client import RestClient, load_config, resource_for, write_kubeconfig
from lab.faults import Request
from lab.testenv import Environment
from tests.kubelet.kubelet_fixture import Cluster, fast_config, until

log = logging.getLogger("tests.kubelet.certificates")

CSRS = certificates.CSRS
LIFETIME = datetime.timedelta(seconds=20)


class Signer:
    """The test's csrapproving + csrsigning: approves or denies every kubelet client
    request, and signs the approved ones for `LIFETIME`."""

    def __init__(self, cluster: Cluster, approve: bool = True) -> None:
        self.cluster = cluster
        self.approve = approve
        self.ca = pki.load_pair(cluster.pki_dir, "ca")
        self.seen: dict[str, dict[str, Any]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            for csr in self.cluster.admin.list(CSRS)["items"]:
                if csr["spec"]["signerName"] == certificates.SIGNER:
                    try:
                        self._handle(csr)
                    except StatusError as exc:  # a conflict: handled again next round
                        log.warning("test signer: %s: %s", csr["metadata"]["name"], exc)

    def _handle(self, csr: dict[str, Any]) -> None:
        name = csr["metadata"]["name"]
        path = f"/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}"
        conditions = (csr.get("status") or {}).get("conditions") or []
        if not conditions:
            self.seen[name] = csr
            kind = "Approved" if self.approve else "Denied"
            csr.setdefault("status", {})["conditions"] = [
                {"type": kind, "status": "True", "reason": "KubeletTest", "message": "test"}
            ]
            self.cluster.admin.request("PUT", f"{path}/approval", body=csr)
            return
        if conditions[0]["type"] != "Approved" or csr["status"].get("certificate"):
            return
        request = x509.load_pem_x509_csr(base64.b64decode(csr["spec"]["request"]))
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(request.subject)
            .issuer_name(self.ca.cert.subject)
            .public_key(request.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + LIFETIME)
            .sign(self.ca.key, hashes.SHA256())  # type: ignore[arg-type]
        )
        pem = cert.public_bytes(serialization.Encoding.PEM)
        csr["status"]["certificate"] = base64.b64encode(pem).decode()
        self.cluster.admin.request("PUT", f"{path}/status", body=csr)

    def __enter__(self) -> Signer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def bootstrap_token(apiserver: Environment) -> str:
    """A bootstrap token, and what kubeadm binds for its group: creating CSRs."""
    admin = RestClient(apiserver.client_config(), qps=None)
    token_id, secret = uuid.uuid4().hex[:6], uuid.uuid4().hex[:16]
    admin.create(
        resource_for("v1", "Secret"),
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"bootstrap-token-{token_id}"},
            "type": "bootstrap.kubernetes.io/token",
            "stringData": {
                "token-id": token_id,
                "token-secret": secret,
                "usage-bootstrap-authentication": "true",
            },
        },
        "kube-system",
    )
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        # Its own name: tests/unit/test_labadm.py makes kubeadm's binding (for kubeadm's
        # token group) in the same test apiserver.
        "metadata": {"name": f"kubelet-bootstrap-{token_id}"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:node-bootstrapper",
        },
        "subjects": [
            {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": "system:bootstrappers",
            }
        ],
    }
    admin.create(resource_for("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), binding)
    return f"{token_id}.{secret}"


@pytest.fixture
def bootstrap_kubeconfig(cluster: Cluster, bootstrap_token: str, tmp_path: Path) -> Path:
    return write_kubeconfig(
        tmp_path / "bootstrap-kubelet.conf",
        cluster_name="kubernetes",
        server=cluster.server,
        ca_data=cluster.ca_file.read_bytes(),
        user_name="tls-bootstrap-token-user",
        token=bootstrap_token,
    )


@pytest.fixture
def node() -> Iterator[str]:
    yield f"boot-{uuid.uuid4().hex[:6]}"


def _subject(config_cert: bytes | None) -> str:
    assert config_cert is not None
    return x509.load_pem_x509_certificate(config_cert).subject.rfc4514_string()


def _authorization(request: Request) -> str:
    return next((v for k, v in request.headers.items() if k.lower() == "authorization"), "")


def test_a_bootstrap_token_becomes_a_rotated_client_certificate(
    apiserver: Environment,
    cluster: Cluster,
    node: str,
    bootstrap_token: str,
    bootstrap_kubeconfig: Path,
    tmp_path: Path,
) -> None:
    kubeconfig, cert_dir = tmp_path / "kubelet.conf", tmp_path / "pki"
    with Signer(cluster) as signer, apiserver.record() as requests:
        credentials = certificates.bootstrap(
            kubeconfig, bootstrap_kubeconfig, cert_dir, node, timeout=30
        )
        (first,) = signer.seen.values()
        (asked,) = requests.calls("POST", "certificatesigningrequests")
        assert _authorization(asked) == f"Bearer {bootstrap_token}"
        token_id = bootstrap_token.split(".")[0]
        assert first["spec"]["username"] == f"system:bootstrap:{token_id}"
        assert first["spec"]["usages"] == ["digital signature", "client auth"]
        assert _subject(credentials.client_cert_data) == f"CN=system:node:{node},O=system:nodes"
        # The kubeconfig refers to the rotated file, which a restarted kubelet reads again
        # instead of asking for another certificate.
        assert (cert_dir / certificates.CURRENT).is_symlink()
        assert str(cert_dir / certificates.CURRENT) in kubeconfig.read_text()
        again = certificates.bootstrap(kubeconfig, bootstrap_kubeconfig, cert_dir, node)
        assert again.client_cert_data == credentials.client_cert_data
        assert len(signer.seen) == 1

        config = fast_config(node, tmp_path / "root", rotate_certificates=True, cert_dir=cert_dir)
        client = RestClient(load_config(kubeconfig), qps=None)
        kubelet = Kubelet(config, client, MemoryRuntime(node), FixedMachine())
        kubelet.start()
        try:
            # Registered as itself: the Node authorizer took the certificate's identity.
            cluster.admin.get(resource_for("v1", "Node"), node)
            assert kubelet.rotator is not None
            until(lambda: kubelet.rotator and kubelet.rotator.rotations >= 1, "a rotation", 30)
            # The renewal was asked for with the node's certificate, not the token.
            renewal = requests.calls("POST", "certificatesigningrequests")[1]
            assert _authorization(renewal) == ""
            (renewed_csr,) = [c for n, c in signer.seen.items() if n != first["metadata"]["name"]]
            assert renewed_csr["spec"]["username"] == f"system:node:{node}"
            assert client.config.client_cert_data != credentials.client_cert_data
            # Once the first certificate has expired, the node still renews its Lease
            # (every request of the test apiserver is a new TLS connection).
            first_cert = x509.load_pem_x509_certificate(credentials.client_cert_data or b"")
            expired = first_cert.not_valid_after_utc.timestamp()
            until(
                lambda: datetime.datetime.now(datetime.UTC).timestamp() > expired + 1,
                "the first certificate to expire",
                30,
            )
            leases = resource_for("coordination.k8s.io/v1", "Lease")
            renewed = cluster.admin.get(leases, node, "kube-node-lease")["spec"]["renewTime"]
            until(
                lambda: (
                    cluster.admin.get(leases, node, "kube-node-lease")["spec"]["renewTime"]
                    != renewed
                ),
                "a lease renewal with the new certificate",
                10,
            )
        finally:
            kubelet.stop()
            cluster.delete_node(node)


def test_a_denied_request_is_an_error_that_says_so(
    cluster: Cluster, node: str, bootstrap_kubeconfig: Path, tmp_path: Path
) -> None:
    with Signer(cluster, approve=False), pytest.raises(certificates.CertificateError) as err:
        certificates.bootstrap(
            tmp_path / "kubelet.conf", bootstrap_kubeconfig, tmp_path / "pki", node, timeout=30
        )
    assert "denied" in str(err.value) and "kubectl certificate approve" in str(err.value)
    assert not (tmp_path / "kubelet.conf").exists()


def test_without_credentials_the_kubelet_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(certificates.CertificateError, match="--bootstrap-kubeconfig"):
        certificates.bootstrap(tmp_path / "kubelet.conf", None, tmp_path / "pki", "n1")
