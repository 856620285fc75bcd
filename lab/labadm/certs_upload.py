"""The control plane's shared certificates and keys, handed to joining control-plane
nodes through the cluster (kubeadm's `--upload-certs` and `--certificate-key`).

Every control-plane node needs the same CAs (cluster, front proxy, store) with their
keys, and the service-account key pair; the rest of its certificates it makes itself.
`labadm init --upload-certs` (or `labadm init phase upload-certs --upload-certs`)
encrypts those files with a random 32-byte certificate key, AES-256-GCM from
`cryptography` (a fresh 12-byte nonce before each ciphertext), and stores them in the
Secret `kube-system/kubeadm-certs`. The key is printed, never stored in the cluster: a
holder of a bootstrap token alone may read the Secret (a Role allows exactly that) but
not decrypt it. The Secret is owned by a bootstrap token with no usages that expires in
two hours, so the token cleaner removes the token and the garbage collector the Secret:
the certs are in the cluster only while joins are expected, as kubeadm arranges it.
`labadm join --control-plane --certificate-key KEY` downloads and decrypts them.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import secrets
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kubelab import pki
from kubelab.client import RestClient, StatusError
from lab.labadm import tokens
from lab.labadm.workflow import PhaseError, say

SECRET_NAME = "kubeadm-certs"
TTL = datetime.timedelta(hours=2)
SHARED_FILES = (
    "ca.crt",
    "ca.key",
    "sa.key",
    "sa.pub",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "store/ca.crt",
    "store/ca.key",
)
"""What every control-plane node shares, relative to /etc/kubelab/pki."""
NONCE_BYTES = 12


def new_key() -> str:
    """A certificate key: 32 random bytes, hex-encoded (64 characters), as kubeadm's."""
    return secrets.token_hex(32)


def _aead(key: str) -> AESGCM:
    try:
        raw = bytes.fromhex(key)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise PhaseError(
            "--certificate-key must be 64 hex characters (32 bytes), as `labadm init "
            "--upload-certs` or `labadm init phase upload-certs --upload-certs` printed it"
        )
    return AESGCM(raw)


def encrypt(data: bytes, key: str) -> bytes:
    nonce = secrets.token_bytes(NONCE_BYTES)
    return nonce + _aead(key).encrypt(nonce, data, None)


def decrypt(sealed: bytes, key: str) -> bytes:
    try:
        return _aead(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], None)
    except InvalidTag:
        raise PhaseError(
            f"cannot decrypt the Secret {SECRET_NAME}: the --certificate-key is not the one "
            "it was uploaded with; on a control-plane node run `labadm init phase "
            "upload-certs --upload-certs` and use the key it prints"
        ) from None


def _data_key(relative: str) -> str:
    """A Secret key for a file (keys may not hold '/')."""
    return relative.replace("/", "-")


def upload(client: RestClient, pki_dir: Path, key: str) -> None:
    """Encrypt the shared files into kube-system/kubeadm-certs (replacing an older
    upload), owned by a usage-less bootstrap token that expires in `TTL`."""
    owner = tokens.create(
        client,
        ttl=TTL,
        usages=(),
        description=f"Proxy for managing TTL for the {SECRET_NAME} secret",
    )
    owner_name = f"bootstrap-token-{tokens.parse(owner)[0]}"
    owner_uid = client.get(tokens.SECRETS, owner_name, "kube-system")["metadata"]["uid"]
    data = {
        _data_key(relative): base64.b64encode(
            encrypt((pki_dir / relative).read_bytes(), key)
        ).decode()
        for relative in SHARED_FILES
    }
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": SECRET_NAME,
            "namespace": "kube-system",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "name": owner_name,
                    "uid": owner_uid,
                    "blockOwnerDeletion": True,
                    "controller": True,
                }
            ],
        },
        "data": data,
    }
    try:
        client.create(tokens.SECRETS, body)
    except StatusError as exc:
        if exc.code != 409:
            raise
        current = client.get(tokens.SECRETS, SECRET_NAME, "kube-system")
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        client.update(tokens.SECRETS, body)
    allow_bootstrappers(client)


def allow_bootstrappers(client: RestClient) -> None:
    """A Role letting joining nodes (their bootstrap token) read the Secret, and only it."""
    tokens.allow_get(
        client, f"kubeadm:{SECRET_NAME}", "kube-system", "secrets", SECRET_NAME,
        tokens.DEFAULT_GROUP,
    )  # fmt: skip


def download(client: RestClient, pki_dir: Path, key: str) -> None:
    """Fetch kube-system/kubeadm-certs, decrypt every shared file with `key` and write
    them under `pki_dir` (private keys mode 0600)."""
    try:
        secret = client.get(tokens.SECRETS, SECRET_NAME, "kube-system")
    except StatusError as exc:
        if exc.code == 404:
            raise PhaseError(
                f"the Secret kube-system/{SECRET_NAME} is not there: it expires {TTL} after "
                "upload; on a control-plane node run `labadm init phase upload-certs "
                "--upload-certs` and join with the key it prints"
            ) from None
        raise
    stored = secret.get("data") or {}
    decrypted: dict[str, bytes] = {}
    for relative in SHARED_FILES:
        if _data_key(relative) not in stored:
            raise PhaseError(f"the Secret {SECRET_NAME} lacks {relative}: upload the certs again")
        try:
            sealed = base64.b64decode(stored[_data_key(relative)])
        except binascii.Error:
            raise PhaseError(f"the Secret {SECRET_NAME} holds no base64 for {relative}") from None
        decrypted[relative] = decrypt(sealed, key)
    for relative, content in decrypted.items():
        path = pki_dir / relative
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = 0o600 if relative.endswith(".key") else 0o644
        pki.write_atomic(path, content, mode)
        say("download-certs", f'Saved "{relative}"')
