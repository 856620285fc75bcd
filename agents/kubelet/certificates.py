"""The kubelet's client certificate: TLS bootstrap and rotation (Kubernetes' kubelet
certificate manager). The seeds' node-join flow: a new node holds only a bootstrap token
(`labadm join --token`), and its kubelet turns it into a certificate of its own, so that
from then on it is `system:node:<name>` in `system:nodes` (Node authorizer, NodeRestriction).

Bootstrap (`bootstrap`), when `--kubeconfig` does not hold a usable certificate yet:

1. authenticate with `--bootstrap-kubeconfig` (the token: `system:bootstrap:<id>` in
   `system:bootstrappers`);
2. make a fresh P-256 key and a CertificateSigningRequest for it: subject
   `CN=system:node:<name>, O=system:nodes`, signer
   `kubernetes.io/kube-apiserver-client-kubelet`, usages digital signature and client
   auth;
3. wait until the request is approved and signed (the controller-manager's csrapproving
   and csrsigning), or denied/failed (an error that says so);
4. keep certificate and key in `<cert-dir>/kubelet-client-<time>.pem`, point the link
   `kubelet-client-current.pem` at it, and write `--kubeconfig` referring to that link.

Rotation (`Rotator`): at a random moment between 70 % and 90 % of the certificate's
lifetime (so that the nodes of a cluster do not all ask at once), the kubelet asks again
with its current identity (a node may request its own client certificate:
`selfnodeclient`), stores the new pair the same way and switches its client to it. A
failed attempt is retried every few seconds.
"""

from __future__ import annotations

import base64
import datetime
import logging
import os
import random
import threading
import time
from pathlib import Path

import yaml  # type: ignore[import-untyped,unused-ignore]
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubelab import pki
from kubelab.api.errors import StatusError
from kubelab.client import ClientConfig, RestClient, ServerUnreachable, load_config, resource_for

log = logging.getLogger("kubelab.kubelet.certificates")

CSRS = resource_for("certificates.k8s.io/v1", "CertificateSigningRequest")
SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
CURRENT = "kubelet-client-current.pem"
ROTATE_AT = (0.7, 0.9)
"""Rotation happens at a random fraction of the lifetime in this range (as Kubernetes)."""


class CertificateError(Exception):
    """The kubelet could not get a client certificate; the message says why and what to do."""


def store_pair(cert_dir: Path, cert_pem: bytes, key_pem: bytes) -> Path:
    """Write `kubelet-client-<time>.pem` (0600) and point `kubelet-client-current.pem` at
    it atomically: a reader sees the old pair or the new one, never half of each."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d-%H-%M-%S-%f")
    path = cert_dir / f"kubelet-client-{stamp}.pem"
    pki.write_atomic(path, cert_pem + key_pem, 0o600)
    link = cert_dir / f".{CURRENT}.{os.getpid()}"
    link.unlink(missing_ok=True)
    link.symlink_to(path.name)
    os.replace(link, cert_dir / CURRENT)
    return cert_dir / CURRENT


def write_kubeconfig(path: Path, bootstrap: ClientConfig, node: str, current: Path) -> None:
    """The kubelet's kubeconfig: the bootstrap kubeconfig's server and CA, and the
    rotated pair by reference (so that a restarted kubelet reads the newest one)."""
    if bootstrap.ca_data is None:
        raise CertificateError(
            f"the bootstrap kubeconfig ({bootstrap.source}) has no certificate-authority-data: "
            "the kubelet could not check the apiserver it joins"
        )
    user = f"system:node:{node}"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "default-cluster",
                "cluster": {
                    "server": bootstrap.server,
                    "certificate-authority-data": base64.b64encode(bootstrap.ca_data).decode(),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(current), "client-key": str(current)},
            }
        ],
        "contexts": [
            {"name": "default-context", "context": {"cluster": "default-cluster", "user": user}}
        ],
        "current-context": "default-context",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    pki.write_atomic(path, yaml.safe_dump(doc, sort_keys=False).encode(), 0o600)


def request_certificate(
    client: RestClient,
    node: str,
    *,
    timeout: float = 900.0,
    poll: float = 0.5,
    stop: threading.Event | None = None,
) -> tuple[bytes, bytes]:
    """Ask for a client certificate for `node` with a fresh key; wait until it is signed
    (or refused) and return (certificate PEM, key PEM). The kubelet's bootstrap and
    rotation use it, and `labadm join` on the kubelet's behalf."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node}"),
        ]
    )
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    body = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"generateName": "node-csr-"},
        "spec": {
            "request": base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode(),
            "signerName": SIGNER,
            "usages": ["digital signature", "client auth"],
        },
    }
    name = client.create(CSRS, body)["metadata"]["name"]
    log.info("kubelet %s: certificate signing request %s created, waiting for it", node, name)
    deadline = time.monotonic() + timeout
    while True:
        found = client.get(CSRS, name)
        status = found.get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("type") in ("Denied", "Failed") and cond.get("status", "True") == "True":
                raise CertificateError(
                    f"certificate signing request {name} was {cond['type'].lower()} "
                    f"({cond.get('reason', '')}: {cond.get('message', '')}); ask an "
                    "administrator to approve a new one (`kubectl certificate approve`)"
                )
        if status.get("certificate"):
            cert_pem = base64.b64decode(status["certificate"])
            cert = x509.load_pem_x509_certificate(cert_pem)
            if cert.public_key() != key.public_key():
                raise CertificateError(
                    f"certificate signing request {name} was answered with a certificate "
                    "for another key"
                )
            key_pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            log.info(
                "kubelet %s: certificate signing request %s signed (serial %x, valid until %s)",
                node,
                name,
                cert.serial_number,
                cert.not_valid_after_utc.isoformat(),
            )
            return cert_pem, key_pem
        if time.monotonic() > deadline:
            raise CertificateError(
                f"certificate signing request {name} was not signed within {timeout:.0f}s: "
                "is the controller-manager running with csrapproving and csrsigning (which "
                "signs only with --cluster-signing-cert-file), or must an administrator "
                "approve it (`kubectl certificate approve " + name + "`)?"
            )
        if stop is None:
            time.sleep(poll)
        elif stop.wait(poll):
            raise CertificateError(f"stopped while waiting for {name}")


def bootstrap(
    kubeconfig: Path,
    bootstrap_kubeconfig: Path | None,
    cert_dir: Path,
    node: str,
    *,
    timeout: float = 900.0,
) -> ClientConfig:
    """The kubelet's credentials: `kubeconfig` if its certificate is still good, else a
    new certificate through the bootstrap kubeconfig (module docstring)."""
    if kubeconfig.exists():
        config = load_config(kubeconfig)
        cert = config.client_cert_data
        if cert is None or x509.load_pem_x509_certificate(
            cert
        ).not_valid_after_utc > datetime.datetime.now(datetime.UTC):
            return config
        log.warning("kubelet %s: the certificate of %s has expired", node, kubeconfig)
    if bootstrap_kubeconfig is None:
        raise CertificateError(
            f"{kubeconfig} is missing or its certificate has expired, and no "
            "--bootstrap-kubeconfig was given to get a new one"
        )
    boot = load_config(bootstrap_kubeconfig)
    with RestClient(boot, qps=None) as client:
        cert_pem, key_pem = request_certificate(client, node, timeout=timeout)
    current = store_pair(cert_dir, cert_pem, key_pem)
    write_kubeconfig(kubeconfig, boot, node, current)
    log.info("kubelet %s: bootstrapped; wrote %s", node, kubeconfig)
    return load_config(kubeconfig)


class Rotator:
    """Renews the client certificate of `client` before it expires (module docstring)."""

    def __init__(
        self,
        client: RestClient,
        node: str,
        cert_dir: Path,
        *,
        rng: random.Random | None = None,
        retry: float = 5.0,
    ) -> None:
        self.client = client
        self.node = node
        self.cert_dir = cert_dir
        self.rng = rng or random.Random()
        self.retry = retry
        self.rotations = 0

    def _certificate(self) -> x509.Certificate | None:
        data = self.client.config.client_cert_data
        return x509.load_pem_x509_certificate(data) if data else None

    def deadline(self, cert: x509.Certificate) -> float:
        """When to rotate `cert` (epoch seconds)."""
        start = cert.not_valid_before_utc.timestamp()
        lifetime = cert.not_valid_after_utc.timestamp() - start
        return start + lifetime * self.rng.uniform(*ROTATE_AT)

    def rotate(self, stop: threading.Event | None = None) -> None:
        cert_pem, key_pem = request_certificate(self.client, self.node, stop=stop)
        store_pair(self.cert_dir, cert_pem, key_pem)
        self.client.use_client_certificate(cert_pem, key_pem)
        self.rotations += 1

    def run(self, stop: threading.Event) -> None:
        cert = self._certificate()
        if cert is None:
            log.warning("kubelet %s: no client certificate to rotate", self.node)
            return
        when = self.deadline(cert)
        while not stop.wait(max(0.0, when - time.time())):
            try:
                self.rotate(stop)
            except (CertificateError, StatusError, ServerUnreachable) as exc:
                if stop.is_set():
                    return
                log.warning("kubelet %s: rotating the client certificate: %s", self.node, exc)
                when = time.time() + self.retry
                continue
            cert = self._certificate()
            assert cert is not None
            when = self.deadline(cert)
            log.info(
                "kubelet %s: client certificate rotated; next rotation at %s",
                self.node,
                datetime.datetime.fromtimestamp(when, datetime.UTC).isoformat(),
            )
