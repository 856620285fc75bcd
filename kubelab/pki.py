"""A small X.509 toolkit for the lab: a cluster CA, the certificates it issues, TLS contexts.

The store members authenticate each other with mutual TLS, and later `labadm certs` and the
apiserver use the same helpers, so everything certificate-shaped lives here.

Choices, and why:

* ECDSA P-256 keys and SHA-256 signatures. Key generation is instant (an RSA-2048 key can
  take a noticeable fraction of a second, which adds up in tests that mint many pairs) and
  every TLS 1.2+ stack accepts them.
* Issued certificates are explicit about what they are for: `BasicConstraints(ca=False)`,
  `KeyUsage(digitalSignature)` and an `ExtendedKeyUsage` listing serverAuth and/or clientAuth.
  OpenSSL checks the extended key usage against the role a certificate plays in a handshake,
  so a client-only certificate cannot be served by a listener, and the reverse.
* Subject and authority key identifiers are always present, so chains build unambiguously
  even after a CA has been re-issued under the same name.
* A leaf never outlives its CA: its `notAfter` is capped at the CA's. Validity starts a few
  minutes in the past to absorb clock skew between the machines of the lab.
* Private keys are written unencrypted (the daemons read them unattended), as PKCS#8 PEM, with
  mode 0600, through a temporary file and a rename, so a crash never leaves half a key behind
  and the key is never readable by others, not even briefly.
* Client TLS contexts check the server's name against its subject alternative names only,
  never the legacy common name. A store member's certificate must therefore list every address
  its peers dial (typically its IP address) as a SAN, as etcd's peer certificates do; then a
  certificate taken from one member cannot be used to answer at another member's address.

Errors that an operator can cause (a missing or unreadable file, a key that belongs to another
certificate) raise `PKIError` subclasses whose message says what to regenerate.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificateIssuerPrivateKeyTypes,
    CertificatePublicKeyTypes,
)
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

REGENERATE_HINT = "regenerate it with `labadm certs`"
"""The remedy quoted by error messages about certificate files."""

CLOCK_SKEW = datetime.timedelta(minutes=5)
"""How far in the past a new certificate's validity starts."""

_SUPPORTED_KEY_TYPES = (
    ec.EllipticCurvePrivateKey,
    rsa.RSAPrivateKey,
    ed25519.Ed25519PrivateKey,
    ed448.Ed448PrivateKey,
)
"""Key types `load_key` accepts: ours (P-256), and what other tools (kubeadm: RSA) make."""


class PKIError(Exception):
    """A certificate or key cannot be used; the message says why and what to do."""


class PKIFileError(PKIError):
    """A certificate or key file is missing, unreadable or not in the expected format."""


class KeyMismatchError(PKIError):
    """A private key does not belong to the certificate it is paired with."""


@dataclass(frozen=True, slots=True)
class CertKey:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: CertificateIssuerPrivateKeyTypes

    def cert_pem(self) -> bytes:
        """The certificate, PEM-encoded."""
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        """The private key, unencrypted PKCS#8 PEM."""
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _signature_hash(key: CertificateIssuerPrivateKeyTypes) -> hashes.SHA256 | None:
    # Edwards-curve keys sign the message itself; every other key type signs a digest. Our
    # own keys are always P-256, but a CA loaded from disk may have been made elsewhere.
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return None
    return hashes.SHA256()


def _subject(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def new_ca(common_name: str, valid_days: int = 3650) -> CertKey:
    """Create a self-signed certificate authority with a fresh P-256 key.

    The CA may sign leaf certificates only (`pathLength=0`): the lab has no intermediates.
    """
    if valid_days <= 0:
        raise ValueError(f"valid_days must be positive, got {valid_days}")
    key = ec.generate_private_key(ec.SECP256R1())
    name = _subject(common_name)
    now = _now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=valid_days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    return CertKey(cert, key)


def issue(
    ca: CertKey,
    common_name: str,
    *,
    organizations: Sequence[str] = (),
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    server: bool = False,
    client: bool = False,
    valid_days: int = 365,
) -> CertKey:
    """Issue a leaf certificate, with a fresh P-256 key, signed by `ca`.

    `common_name` and `organizations` become the subject's CN and O attributes (Kubernetes
    reads a client certificate's CN as the user name and its O values as groups).
    `dns_names` and `ip_addresses` become the subject alternative names a client checks a
    server against. `server` and `client` select the extended key usages; at least one is
    required, and a server certificate needs at least one SAN to be verifiable at all.
    """
    if not (server or client):
        raise ValueError("a certificate must be issued for server use, client use, or both")
    if server and not (dns_names or ip_addresses):
        raise ValueError(
            f"server certificate {common_name!r} needs at least one DNS name or IP address"
        )
    if valid_days <= 0:
        raise ValueError(f"valid_days must be positive, got {valid_days}")
    try:
        ips = [ipaddress.ip_address(a) for a in ip_addresses]
    except ValueError as exc:
        raise ValueError(f"invalid IP address for {common_name!r}: {exc}") from exc

    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans.extend(x509.IPAddress(ip) for ip in ips)
    cert = sign_leaf(
        ca,
        _subject(common_name, organizations),
        key.public_key(),
        not_before=now - CLOCK_SKEW,
        not_after=now + datetime.timedelta(days=valid_days),
        extended_usages=usages,
        sans=sans,
    )
    return CertKey(cert, key)


def sign_leaf(
    ca: CertKey,
    subject: x509.Name,
    public_key: CertificatePublicKeyTypes,
    *,
    not_before: datetime.datetime,
    not_after: datetime.datetime,
    extended_usages: Sequence[x509.ObjectIdentifier],
    sans: Sequence[x509.GeneralName] = (),
    key_encipherment: bool = False,
) -> x509.Certificate:
    """A leaf certificate for `public_key`, signed by `ca`, as the module docstring says
    every issued one is (not a CA, key identifiers, `notAfter` capped at the CA's); the
    CSR signer of the controller-manager signs kubelets' requests with it."""
    ca_ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(min(not_after, ca.cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=key_encipherment,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
    )
    if extended_usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended_usages), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca.key, _signature_hash(ca.key))


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write `data` to `path` via a temporary file in the same directory and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates the file 0600; widen it (never narrow the key's) before renaming.
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_pair(ck: CertKey, directory: Path, name: str) -> tuple[Path, Path]:
    """Write `<directory>/<name>.crt` (mode 0644) and `<name>.key` (mode 0600).

    Each file is replaced atomically. The directory is created (mode 0700) if needed.
    Returns the certificate and key paths.
    """
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    cert_path = directory / f"{name}.crt"
    key_path = directory / f"{name}.key"
    # Key first: a reader that finds the new certificate then also finds the new key.
    write_atomic(key_path, ck.key_pem(), 0o600)
    write_atomic(cert_path, ck.cert_pem(), 0o644)
    return cert_path, key_path


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise PKIFileError(f"{what} file {path} does not exist; {REGENERATE_HINT}") from None
    except OSError as exc:
        raise PKIFileError(f"cannot read {what} file {path}: {exc.strerror}") from exc


def load_cert(path: Path) -> x509.Certificate:
    """Load a PEM certificate (the first one, if the file holds a bundle)."""
    data = _read(path, "certificate")
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError as exc:
        raise PKIFileError(f"{path} is not a PEM certificate ({exc}); {REGENERATE_HINT}") from exc


def load_key(path: Path) -> CertificateIssuerPrivateKeyTypes:
    """Load an unencrypted PEM private key: EC, RSA, Ed25519 or Ed448."""
    data = _read(path, "private key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        # TypeError: the key is encrypted; the lab's daemons cannot prompt for a password.
        raise PKIFileError(
            f"{path} is not an unencrypted PEM private key ({exc}); {REGENERATE_HINT}"
        ) from exc
    if not isinstance(key, _SUPPORTED_KEY_TYPES):
        raise PKIFileError(f"{path} holds an unsupported {type(key).__name__}; {REGENERATE_HINT}")
    return key


def _public_der(cert_or_key: x509.Certificate | CertificateIssuerPrivateKeyTypes) -> bytes:
    public = cert_or_key.public_key()
    return public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _load_checked_pair(cert_path: Path, key_path: Path) -> CertKey:
    ck = CertKey(load_cert(cert_path), load_key(key_path))
    if _public_der(ck.cert) != _public_der(ck.key):
        raise KeyMismatchError(
            f"private key {key_path} does not match certificate {cert_path}: "
            f"regenerate both files together with `labadm certs`"
        )
    return ck


def load_pair(directory: Path, name: str) -> CertKey:
    """Load `<directory>/<name>.crt` and `<name>.key`, checking that they belong together."""
    return _load_checked_pair(directory / f"{name}.crt", directory / f"{name}.key")


def ca_cert_hash(cert: x509.Certificate) -> str:
    """`sha256:<hex>` of the DER SubjectPublicKeyInfo: kubeadm's discovery CA pin format.

    Hashing the public key rather than the whole certificate keeps the pin valid across a
    re-issue of the CA certificate with the same key.
    """
    return "sha256:" + hashlib.sha256(_public_der(cert)).hexdigest()


def _new_context(purpose: int, ca_file: Path) -> ssl.SSLContext:
    load_cert(ca_file)  # a clear error for a missing or malformed CA, before OpenSSL's
    ctx = ssl.SSLContext(purpose)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_verify_locations(cafile=str(ca_file))
    except ssl.SSLError as exc:
        raise PKIFileError(f"CA file {ca_file} cannot be used: {exc}") from exc
    return ctx


def _load_chain(ctx: ssl.SSLContext, cert_file: Path, key_file: Path) -> None:
    _load_checked_pair(cert_file, key_file)
    try:
        ctx.load_cert_chain(certfile=str(cert_file), keyfile=str(key_file))
    except ssl.SSLError as exc:
        raise PKIFileError(f"cannot use {cert_file} with {key_file}: {exc}") from exc


def server_ssl_context(
    ca_file: Path, cert_file: Path, key_file: Path, require_client_cert: bool = True
) -> ssl.SSLContext:
    """A TLS 1.2+ server context presenting `cert_file`, verifying clients against `ca_file`.

    With `require_client_cert` (mutual TLS, as between store members) a client without a
    certificate signed by the CA is refused during the handshake. Without it a client may
    present no certificate (it authenticates some other way, e.g. a bearer token), but one
    it does present must still verify.
    """
    ctx = _new_context(ssl.PROTOCOL_TLS_SERVER, ca_file)
    _load_chain(ctx, cert_file, key_file)
    ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    return ctx


def client_ssl_context(
    ca_file: Path, cert_file: Path | None, key_file: Path | None
) -> ssl.SSLContext:
    """A TLS 1.2+ client context that verifies the server against `ca_file`.

    The server's certificate must carry the dialled host name or IP address as a subject
    alternative name (the common name is ignored; see the module docstring). `cert_file`
    and `key_file`, given together or not at all, are the client's own certificate.
    """
    if (cert_file is None) != (key_file is None):
        raise ValueError("cert_file and key_file must be given together")
    ctx = _new_context(ssl.PROTOCOL_TLS_CLIENT, ca_file)
    ctx.check_hostname = True
    ctx.hostname_checks_common_name = False
    if cert_file is not None and key_file is not None:
        _load_chain(ctx, cert_file, key_file)
    return ctx
