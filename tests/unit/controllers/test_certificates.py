"""The CSR controllers' pure parts: what counts as a kubelet client (or serving) request,
and what the signer puts in a certificate (the request's subject and names, the spec's
usages, backdated, never outliving the CA)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controlplane.controllers.certificates import (
    KUBELET_CLIENT,
    KUBELET_SERVING,
    kubelet_client_problem,
    kubelet_serving_problem,
    parse_request,
    sign,
)
from kubelab import pki

CLIENT = ["digital signature", "client auth"]


def csr(
    cn: str = "system:node:n1",
    orgs: tuple[str, ...] = ("system:nodes",),
    *,
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    signer: str = KUBELET_CLIENT,
    usages: list[str] = CLIENT,
) -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attrs))
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    pem = builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    return {
        "spec": {
            "request": base64.b64encode(pem).decode(),
            "signerName": signer,
            "usages": usages,
        }
    }


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        (csr(), ""),
        (csr(usages=["digital signature", "key encipherment", "client auth"]), ""),
        (csr(signer="kubernetes.io/kube-apiserver-client"), "the signer is"),
        (csr(orgs=("system:masters",)), "organization must be exactly [system:nodes]"),
        (csr(orgs=("system:nodes", "x")), "organization must be exactly"),
        (csr(cn="alice"), "common name must be system:node:<node name>"),
        (csr(cn="system:node:"), "common name must be"),
        (csr(dns=("n1.example",)), "no DNS, IP, e-mail or URI names"),
        (csr(usages=["digital signature", "server auth"]), "usages must be"),
        (csr(usages=["client auth"]), "usages must be"),
    ],
)
def test_kubelet_client_requests(request_: dict[str, Any], problem: str) -> None:
    found = kubelet_client_problem(request_, parse_request(request_))
    assert (problem in found) if problem else found == ""


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        (csr(ips=("10.0.0.5",), usages=["digital signature", "server auth"]), ""),
        (csr(usages=["digital signature", "server auth"]), "at least one DNS name or IP"),
        (csr(dns=("n1",), usages=CLIENT), "usages must be"),
    ],
)
def test_kubelet_serving_requests(request_: dict[str, Any], problem: str) -> None:
    request_["spec"]["signerName"] = KUBELET_SERVING
    found = kubelet_serving_problem(request_, parse_request(request_))
    assert (problem in found) if problem else found == ""


def test_the_signed_certificate() -> None:
    ca = pki.new_ca("test-ca", valid_days=1)
    now = datetime.datetime.now(datetime.UTC)
    request_ = csr(ips=("10.0.0.5",), usages=["digital signature", "server auth"])
    cert = sign(
        ca,
        parse_request(request_),
        request_["spec"]["usages"],
        datetime.timedelta(days=365),
        now,
    )
    cert.verify_directly_issued_by(ca.cert)
    assert cert.subject.rfc4514_string() == "CN=system:node:n1,O=system:nodes"
    assert cert.not_valid_before_utc <= now - datetime.timedelta(minutes=5)
    assert cert.not_valid_after_utc == ca.cert.not_valid_after_utc, "capped at the CA"
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(i) for i in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.5"]
    basic = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert not basic.ca
