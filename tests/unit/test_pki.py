"""The PKI helpers: chains verify, extensions are right, files are safe, errors are clear."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import shutil
import ssl
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, ServerVerifier, Store, VerificationError

from kubelab import pki


@pytest.fixture(scope="module")
def ca() -> pki.CertKey:
    return pki.new_ca("kubelab-ca")


def _server_verifier(ca: pki.CertKey, name: x509.DNSName | x509.IPAddress) -> ServerVerifier:
    return PolicyBuilder().store(Store([ca.cert])).build_server_verifier(name)


def test_ca_is_a_self_signed_leaf_only_ca(ca: pki.CertKey) -> None:
    ca.cert.verify_directly_issued_by(ca.cert)
    bc = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca and bc.value.path_length == 0
    ku = ca.cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.key_cert_sign and ku.crl_sign
    cn = ca.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    assert cn[0].value == "kubelab-ca"


def test_issued_server_cert_verifies_against_the_ca(ca: pki.CertKey) -> None:
    leaf = pki.issue(
        ca, "store-1", dns_names=["store-1.lab"], ip_addresses=["10.0.0.1"], server=True
    )
    leaf.cert.verify_directly_issued_by(ca.cert)
    chain = _server_verifier(ca, x509.DNSName("store-1.lab")).verify(leaf.cert, [])
    assert chain[-1] == ca.cert
    ip = x509.IPAddress(ipaddress.ip_address("10.0.0.1"))
    _server_verifier(ca, ip).verify(leaf.cert, [])
    with pytest.raises(VerificationError):
        _server_verifier(ca, x509.DNSName("other.lab")).verify(leaf.cert, [])


def test_cert_from_another_ca_does_not_verify(ca: pki.CertKey) -> None:
    other = pki.new_ca("kubelab-ca")  # same name, different key
    leaf = pki.issue(other, "intruder", ip_addresses=["127.0.0.1"], server=True)
    ip = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    with pytest.raises(VerificationError):
        _server_verifier(ca, ip).verify(leaf.cert, [])


def test_issued_cert_has_sans_usages_and_key_ids(ca: pki.CertKey) -> None:
    leaf = pki.issue(
        ca,
        "kube-apiserver",
        organizations=["system:masters", "lab"],
        dns_names=["kubernetes", "kubernetes.default"],
        ip_addresses=["127.0.0.1", "::1"],
        server=True,
        client=True,
    )
    ext = leaf.cert.extensions
    san = ext.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["kubernetes", "kubernetes.default"]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    eku = ext.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    ku = ext.get_extension_for_class(x509.KeyUsage)
    assert ku.critical and ku.value.digital_signature and not ku.value.key_cert_sign
    bc = ext.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and not bc.value.ca
    ski = ext.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert ski == x509.SubjectKeyIdentifier.from_public_key(leaf.cert.public_key())
    aki = ext.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ca_ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ca_ski.digest
    orgs = [a.value for a in leaf.cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters", "lab"]


def test_client_only_cert_has_only_client_auth_and_no_san(ca: pki.CertKey) -> None:
    leaf = pki.issue(ca, "admin", organizations=["system:masters"], client=True)
    eku = leaf.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        leaf.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_issue_rejects_meaningless_requests(ca: pki.CertKey) -> None:
    with pytest.raises(ValueError, match="server use, client use"):
        pki.issue(ca, "nothing")
    with pytest.raises(ValueError, match="at least one DNS name or IP"):
        pki.issue(ca, "server", server=True)
    with pytest.raises(ValueError, match="invalid IP address"):
        pki.issue(ca, "server", ip_addresses=["not-an-ip"], server=True)


def test_leaf_validity_is_capped_at_the_ca() -> None:
    short_ca = pki.new_ca("short", valid_days=10)
    leaf = pki.issue(short_ca, "x", client=True, valid_days=365)
    assert leaf.cert.not_valid_after_utc == short_ca.cert.not_valid_after_utc
    assert leaf.cert.not_valid_before_utc < datetime.datetime.now(datetime.UTC)


def test_ca_cert_hash_is_sha256_of_the_spki_and_stable(ca: pki.CertKey, tmp_path: Path) -> None:
    h = pki.ca_cert_hash(ca.cert)
    assert h.startswith("sha256:") and len(h) == len("sha256:") + 64
    int(h.removeprefix("sha256:"), 16)
    spki = ca.cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert h == "sha256:" + hashlib.sha256(spki).hexdigest()
    # Stable across a round trip through disk, and differs for another CA.
    pki.write_pair(ca, tmp_path, "ca")
    assert pki.ca_cert_hash(pki.load_cert(tmp_path / "ca.crt")) == h
    assert pki.ca_cert_hash(pki.new_ca("kubelab-ca").cert) != h


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
def test_ca_cert_hash_matches_the_kubeadm_documented_openssl_pipeline(
    ca: pki.CertKey, tmp_path: Path
) -> None:
    cert_path, _ = pki.write_pair(ca, tmp_path, "ca")
    pubkey = subprocess.run(
        ["openssl", "x509", "-pubkey", "-noout", "-in", str(cert_path)],
        check=True,
        capture_output=True,
    ).stdout
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "der"],
        input=pubkey,
        check=True,
        capture_output=True,
    ).stdout
    assert pki.ca_cert_hash(ca.cert) == "sha256:" + hashlib.sha256(der).hexdigest()


def test_write_pair_modes_and_round_trip(ca: pki.CertKey, tmp_path: Path) -> None:
    leaf = pki.issue(ca, "store-1", ip_addresses=["127.0.0.1"], server=True, client=True)
    directory = tmp_path / "pki" / "store"
    cert_path, key_path = pki.write_pair(leaf, directory, "peer")
    assert (cert_path, key_path) == (directory / "peer.crt", directory / "peer.key")
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(cert_path.stat().st_mode) == 0o644
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert sorted(p.name for p in directory.iterdir()) == ["peer.crt", "peer.key"]  # no temps
    loaded = pki.load_pair(directory, "peer")
    assert loaded.cert == leaf.cert
    assert loaded.key_pem() == leaf.key_pem()
    # Overwriting keeps the modes and replaces the content.
    again = pki.issue(ca, "store-1", ip_addresses=["127.0.0.1"], server=True)
    pki.write_pair(again, directory, "peer")
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert pki.load_pair(directory, "peer").cert == again.cert


def test_key_cert_mismatch_is_reported(ca: pki.CertKey, tmp_path: Path) -> None:
    pki.write_pair(ca, tmp_path, "ca")
    a = pki.issue(ca, "a", client=True)
    b = pki.issue(ca, "b", client=True)
    pki.write_pair(a, tmp_path, "a")
    pki.write_pair(b, tmp_path, "b")
    (tmp_path / "a.key").write_bytes((tmp_path / "b.key").read_bytes())
    with pytest.raises(pki.KeyMismatchError, match=r"a\.key does not match .*regenerate"):
        pki.load_pair(tmp_path, "a")
    with pytest.raises(pki.KeyMismatchError):
        pki.server_ssl_context(tmp_path / "ca.crt", tmp_path / "a.crt", tmp_path / "a.key")


def test_missing_and_malformed_files_are_reported(ca: pki.CertKey, tmp_path: Path) -> None:
    with pytest.raises(pki.PKIFileError, match=r"missing\.crt does not exist.*labadm certs"):
        pki.load_pair(tmp_path, "missing")
    (tmp_path / "junk.crt").write_text("not a certificate")
    with pytest.raises(pki.PKIFileError, match="not a PEM certificate"):
        pki.load_cert(tmp_path / "junk.crt")
    pki.write_pair(ca, tmp_path, "ca")
    (tmp_path / "ca.key").write_text("not a key")
    with pytest.raises(pki.PKIFileError, match="not an unencrypted PEM private key"):
        pki.load_pair(tmp_path, "ca")
    with pytest.raises(pki.PKIFileError, match="does not exist"):
        pki.client_ssl_context(tmp_path / "nope.crt", None, None)


def test_ssl_contexts(ca: pki.CertKey, tmp_path: Path) -> None:
    ca_file, _ = pki.write_pair(ca, tmp_path, "ca")
    leaf = pki.issue(ca, "n", ip_addresses=["127.0.0.1"], server=True, client=True)
    cert_file, key_file = pki.write_pair(leaf, tmp_path, "n")

    server = pki.server_ssl_context(ca_file, cert_file, key_file)
    assert server.verify_mode == ssl.CERT_REQUIRED
    assert server.minimum_version == ssl.TLSVersion.TLSv1_2
    optional = pki.server_ssl_context(ca_file, cert_file, key_file, require_client_cert=False)
    assert optional.verify_mode == ssl.CERT_OPTIONAL

    client = pki.client_ssl_context(ca_file, cert_file, key_file)
    assert client.check_hostname and not client.hostname_checks_common_name
    assert client.verify_mode == ssl.CERT_REQUIRED
    assert client.minimum_version == ssl.TLSVersion.TLSv1_2
    anonymous = pki.client_ssl_context(ca_file, None, None)
    assert anonymous.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ValueError, match="together"):
        pki.client_ssl_context(ca_file, cert_file, None)


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, hostname: str) -> None:
    """Run a TLS handshake between the two contexts in memory; raise ssl.SSLError on refusal."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(to_client, to_server, server_hostname=hostname)
    server = server_ctx.wrap_bio(to_server, to_client, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for side, obj in (("client", client), ("server", server)):
            if not done[side]:
                try:
                    obj.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
        if all(done.values()):
            return
    raise AssertionError(f"handshake did not finish: {done}")


def test_mutual_tls_handshakes(ca: pki.CertKey, tmp_path: Path) -> None:
    ca_file, _ = pki.write_pair(ca, tmp_path, "ca")
    server_files = pki.write_pair(
        pki.issue(ca, "store-1", ip_addresses=["127.0.0.1"], server=True), tmp_path, "server"
    )
    client_files = pki.write_pair(pki.issue(ca, "admin", client=True), tmp_path, "client")
    server_ctx = pki.server_ssl_context(ca_file, *server_files)
    _handshake(server_ctx, pki.client_ssl_context(ca_file, *client_files), "127.0.0.1")

    # The server's certificate does not name the dialled address.
    with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch"):
        _handshake(server_ctx, pki.client_ssl_context(ca_file, *client_files), "127.0.0.2")
    # No client certificate, with the server requiring one.
    with pytest.raises(ssl.SSLError, match="did not return a certificate"):
        _handshake(server_ctx, pki.client_ssl_context(ca_file, None, None), "127.0.0.1")
    optional = pki.server_ssl_context(ca_file, *server_files, require_client_cert=False)
    _handshake(optional, pki.client_ssl_context(ca_file, None, None), "127.0.0.1")
    # A client certificate from another CA is refused even when client certs are optional.
    other = pki.new_ca("kubelab-ca")
    rogue_files = pki.write_pair(pki.issue(other, "admin", client=True), tmp_path, "rogue")
    with pytest.raises(ssl.SSLError, match="unable to get local issuer"):
        _handshake(optional, pki.client_ssl_context(ca_file, *rogue_files), "127.0.0.1")
    # A server-only certificate is not accepted as a client certificate (extended key usage).
    with pytest.raises(ssl.SSLError, match="unsuitable certificate purpose"):
        _handshake(server_ctx, pki.client_ssl_context(ca_file, *server_files), "127.0.0.1")
