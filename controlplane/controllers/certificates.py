"""Node bootstrap's controllers (kube-controller-manager's
certificatesigningrequest-approving-controller, -signing-controller and
token-cleaner-controller): a new node's kubelet, holding only a bootstrap token, asks
for a client certificate with a CertificateSigningRequest; these approve it, sign it
with the cluster CA, and remove bootstrap tokens once they expire.

Approving (`CSRApprovingController`). Only kubelet client certificates are approved
automatically, and only for those RBAC allows, as Kubernetes' csrapproving does:

* the request must be one (`kubelet_client_problem`): signer
  `kubernetes.io/kube-apiserver-client-kubelet`, subject O exactly `system:nodes` and CN
  `system:node:<name>`, no DNS, IP, e-mail or URI names, usages digital signature and
  client auth (key encipherment allowed);
* the requester, as the apiserver recorded it in spec.username/groups (a requester
  cannot choose these), must be allowed to `create` `certificatesigningrequests` with
  the subresource `selfnodeclient` when it asks for its own name (a node renewing its
  certificate), else `nodeclient` (a bootstrapper asking for a new node); the
  controller asks the apiserver with a SubjectAccessReview, so what RBAC grants decides
  (kubeadm binds `nodeclient` to the group system:bootstrappers).

Approval adds the condition Approved (reason AutoApproved) through the `approval`
subresource. Anything else is left for a human (`kubectl certificate approve`).

Signing (`CSRSigningController`). An approved request of one of the signers
kube-controller-manager implements (kube-apiserver-client-kubelet, kubelet-serving,
kube-apiserver-client), not denied or failed and not signed yet, is signed with the CA
of `--cluster-signing-cert-file`/`--cluster-signing-key-file`: the subject, public key
and names of the request, the usages of its spec, valid from five minutes ago (clock
skew, as Kubernetes backdates) for the shorter of `--cluster-signing-duration` (a year)
and the request's expirationSeconds, never beyond the CA itself. A request its signer
may not sign (a kubelet client request that is not one) gets the condition Failed,
reason SignerValidationFailure, and stays unsigned.

Token cleaner (`TokenCleaner`). Bootstrap tokens are Secrets of type
`bootstrap.kubernetes.io/token` in kube-system; one whose `expiration` has passed is
deleted (the apiserver already refuses it), at the moment it expires.
"""

from __future__ import annotations

import argparse
import base64
import copy
import datetime
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubelab import pki
from kubelab.api.errors import StatusError
from kubelab.api.taints import parse_time
from kubelab.client import (
    REAL_CLOCK,
    Clock,
    DeletedFinalStateUnknown,
    Object,
    Preconditions,
    WorkQueue,
    object_key,
    resource_for,
    rfc3339,
)

from .base import ControllerContext, SyncError, SyncResult, Workers, controller_logger

APPROVING = "certificatesigningrequest-approving-controller"
SIGNING = "certificatesigningrequest-signing-controller"
TOKEN_CLEANER = "token-cleaner-controller"

CSRS = resource_for("certificates.k8s.io/v1", "CertificateSigningRequest")
SECRETS = resource_for("v1", "Secret")
SUBJECT_ACCESS_REVIEWS = resource_for("authorization.k8s.io/v1", "SubjectAccessReview")

KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
BOOTSTRAP_TOKEN_TYPE = "bootstrap.kubernetes.io/token"
BACKDATE = datetime.timedelta(minutes=5)
DEFAULT_DURATION = 365 * 24 * 3600.0

CLIENT_USAGES = (
    {"digital signature", "client auth"},
    {"digital signature", "key encipherment", "client auth"},
)
SERVING_USAGES = (
    {"digital signature", "server auth"},
    {"digital signature", "key encipherment", "server auth"},
)


def parse_request(csr: Object) -> x509.CertificateSigningRequest:
    """The PKCS#10 request of `csr` (spec.request: base64 of PEM)."""
    pem = base64.b64decode(str((csr.get("spec") or {}).get("request") or ""))
    return x509.load_pem_x509_csr(pem)


def _names(request: x509.CertificateSigningRequest) -> tuple[list[str], list[str], list[str]]:
    """DNS names, IP addresses, and e-mail or URI names of the request."""
    try:
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], [], []
    dns = list(sans.get_values_for_type(x509.DNSName))
    ips = [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    other = list(sans.get_values_for_type(x509.RFC822Name))
    other += list(sans.get_values_for_type(x509.UniformResourceIdentifier))
    return dns, ips, other


def _subject(request: x509.CertificateSigningRequest) -> tuple[str, list[str]]:
    cn = [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return (cn[0] if cn else ""), orgs


def _node_subject_problem(request: x509.CertificateSigningRequest) -> str:
    cn, orgs = _subject(request)
    if orgs != [NODES_GROUP]:
        return f"the subject's organization must be exactly [{NODES_GROUP}], not {orgs}"
    if not cn.startswith(NODE_PREFIX) or cn == NODE_PREFIX:
        return f"the subject's common name must be {NODE_PREFIX}<node name>, not {cn!r}"
    return ""


def kubelet_client_problem(csr: Object, request: x509.CertificateSigningRequest) -> str:
    """Why `csr` is not a kubelet client certificate request ("" if it is)."""
    spec = csr.get("spec") or {}
    if spec.get("signerName") != KUBELET_CLIENT:
        return f"the signer is {spec.get('signerName')!r}, not {KUBELET_CLIENT}"
    problem = _node_subject_problem(request)
    if problem:
        return problem
    if any(_names(request)):
        return "a kubelet client certificate has no DNS, IP, e-mail or URI names"
    usages = set(spec.get("usages") or [])
    if usages not in CLIENT_USAGES:
        return (
            f"usages must be digital signature and client auth (and key encipherment), "
            f"not {sorted(usages)}"
        )
    return ""


def kubelet_serving_problem(csr: Object, request: x509.CertificateSigningRequest) -> str:
    """Why `csr` is not a kubelet serving certificate request ("" if it is)."""
    problem = _node_subject_problem(request)
    if problem:
        return problem
    dns, ips, other = _names(request)
    if other:
        return "a kubelet serving certificate has no e-mail or URI names"
    if not dns and not ips:
        return "a kubelet serving certificate needs at least one DNS name or IP address"
    usages = set((csr.get("spec") or {}).get("usages") or [])
    if usages not in SERVING_USAGES:
        return (
            f"usages must be digital signature and server auth (and key encipherment), "
            f"not {sorted(usages)}"
        )
    return ""


def _condition(csr: Object, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status", "True") == "True"
        for c in (csr.get("status") or {}).get("conditions") or []
    )


def approved(csr: Object) -> bool:
    return _condition(csr, "Approved") and not _condition(csr, "Denied")


def decided(csr: Object) -> bool:
    return _condition(csr, "Approved") or _condition(csr, "Denied")


class CSRApprovingController:
    """Approves kubelet client CSRs that RBAC allows (module docstring); keyed by name."""

    name = APPROVING

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._clock = clock
        self._client = ctx.client_for(APPROVING)
        self._log = controller_logger(APPROVING)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._csrs = ctx.informers.informer(CSRS)
        self._csrs.add_event_handler(
            on_add=self._changed, on_update=lambda _old, new: self._changed(new)
        )

    def _changed(self, csr: Object) -> None:
        if not decided(csr):
            self.queue.add(object_key(csr))

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(
            APPROVING, self.queue, self.sync, self._log, tracer=self._tracer, objects=self._csrs
        ).run(workers, stop)

    def sync(self, name: str) -> SyncResult:
        csr = self._csrs.indexer.get(name)
        if csr is None or decided(csr) or (csr.get("status") or {}).get("certificate"):
            return None
        if (csr.get("spec") or {}).get("signerName") != KUBELET_CLIENT:
            return None
        try:
            request = parse_request(csr)
        except ValueError as exc:
            self._log.info("csr %s: not approving an unreadable request: %s", name, exc)
            return None
        problem = kubelet_client_problem(csr, request)
        if problem:
            self._log.info(
                "csr %s: not a kubelet client request, left for a human: %s", name, problem
            )
            return None
        spec = csr["spec"]
        cn, _ = _subject(request)
        if spec.get("username") == cn:
            subresource = "selfnodeclient"
            message = "Auto approving self kubelet client certificate after SubjectAccessReview."
        else:
            subresource = "nodeclient"
            message = "Auto approving kubelet client certificate after SubjectAccessReview."
        if not self._allowed(spec, subresource):
            self._log.info(
                "csr %s: %s may not create certificatesigningrequests/%s; left for a human",
                name,
                spec.get("username"),
                subresource,
            )
            return None
        updated = copy.deepcopy(csr)
        conditions = updated.setdefault("status", {}).setdefault("conditions", [])
        now = rfc3339(self._clock.utcnow())
        conditions.append(
            {
                "type": "Approved",
                "status": "True",
                "reason": "AutoApproved",
                "message": message,
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            }
        )
        self._client.request("PUT", CSRS.path("", name) + "/approval", body=updated)
        self._log.info(
            "csr %s: approved the client certificate of %s for %s", name, cn, spec.get("username")
        )
        return None

    def _allowed(self, spec: dict[str, Any], subresource: str) -> bool:
        review: dict[str, Any] = {
            "apiVersion": SUBJECT_ACCESS_REVIEWS.api_version,
            "kind": SUBJECT_ACCESS_REVIEWS.kind,
            "spec": {
                "user": spec.get("username", ""),
                "groups": spec.get("groups") or [],
                "resourceAttributes": {
                    "group": CSRS.group,
                    "resource": CSRS.plural,
                    "verb": "create",
                    "subresource": subresource,
                },
            },
        }
        for field in ("uid", "extra"):
            if spec.get(field):
                review["spec"][field] = spec[field]
        answer = self._client.create(SUBJECT_ACCESS_REVIEWS, review)
        return bool((answer.get("status") or {}).get("allowed"))


@dataclass(frozen=True)
class SigningSettings:
    cert_file: Path | None
    key_file: Path | None
    duration: float

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SigningSettings:
        return cls(
            cert_file=getattr(args, "cluster_signing_cert_file", None),
            key_file=getattr(args, "cluster_signing_key_file", None),
            duration=float(getattr(args, "cluster_signing_duration", DEFAULT_DURATION)),
        )

    def load(self) -> pki.CertKey:
        if self.cert_file is None or self.key_file is None:
            raise ValueError(
                f"{SIGNING} needs both --cluster-signing-cert-file and "
                "--cluster-signing-key-file (the cluster CA, e.g. pki/ca.crt and pki/ca.key)"
            )
        try:
            cert = pki.load_cert(self.cert_file)
            key = pki.load_key(self.key_file)
        except pki.PKIError as exc:
            raise ValueError(f"{SIGNING}: {exc}") from None
        return pki.CertKey(cert, key)


def check_signing_settings(args: argparse.Namespace) -> bool:
    """Whether the signing controller runs: it has a CA to sign with (else it is off, as
    in Kubernetes); a ValueError if only one of the files is given or they do not load."""
    settings = SigningSettings.from_args(args)
    if settings.cert_file is None and settings.key_file is None:
        return False
    settings.load()
    if settings.duration <= 0:
        raise ValueError("--cluster-signing-duration must be positive")
    return True


_EXTENDED = {
    "client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
    "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
}


def sign(
    ca: pki.CertKey,
    request: x509.CertificateSigningRequest,
    usages: list[str],
    duration: datetime.timedelta,
    now: datetime.datetime,
) -> x509.Certificate:
    """A certificate for `request` (module docstring)."""
    try:
        names = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        sans: list[x509.GeneralName] = list(names)
    except x509.ExtensionNotFound:
        sans = []
    return pki.sign_leaf(
        ca,
        request.subject,
        request.public_key(),
        not_before=now - BACKDATE,
        not_after=now + duration,
        extended_usages=[_EXTENDED[u] for u in usages if u in _EXTENDED],
        sans=sans,
        key_encipherment="key encipherment" in usages,
    )


class CSRSigningController:
    """Signs approved CSRs with the cluster CA (module docstring); keyed by name."""

    name = SIGNING

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        settings = SigningSettings.from_args(ctx.args)
        self._ca = settings.load()
        self._duration = datetime.timedelta(seconds=settings.duration)
        self._clock = clock
        self._client = ctx.client_for(SIGNING)
        self._log = controller_logger(SIGNING)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._csrs = ctx.informers.informer(CSRS)
        self._csrs.add_event_handler(
            on_add=self._changed, on_update=lambda _old, new: self._changed(new)
        )

    def _changed(self, csr: Object) -> None:
        if approved(csr) and not (csr.get("status") or {}).get("certificate"):
            self.queue.add(object_key(csr))

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(
            SIGNING, self.queue, self.sync, self._log, tracer=self._tracer, objects=self._csrs
        ).run(workers, stop)

    def sync(self, name: str) -> SyncResult:
        csr = self._csrs.indexer.get(name)
        if csr is None or not approved(csr) or _condition(csr, "Failed"):
            return None
        if (csr.get("status") or {}).get("certificate"):
            return None
        spec = csr.get("spec") or {}
        signer = spec.get("signerName")
        if signer not in (KUBELET_CLIENT, KUBELET_SERVING, APISERVER_CLIENT):
            return None  # another signer's business
        try:
            request = parse_request(csr)
        except ValueError as exc:
            return self._fail(csr, f"the request cannot be read: {exc}")
        if signer == KUBELET_CLIENT:
            problem = kubelet_client_problem(csr, request)
        elif signer == KUBELET_SERVING:
            problem = kubelet_serving_problem(csr, request)
        else:
            problem = (
                "" if "client auth" in (spec.get("usages") or []) else "usages lack client auth"
            )
        if problem:
            return self._fail(csr, problem)
        duration = self._duration
        if spec.get("expirationSeconds"):
            duration = min(duration, datetime.timedelta(seconds=int(spec["expirationSeconds"])))
        cert = sign(
            self._ca, request, list(spec.get("usages") or []), duration, self._clock.utcnow()
        )
        pem = cert.public_bytes(serialization.Encoding.PEM)
        updated = copy.deepcopy(csr)
        updated.setdefault("status", {})["certificate"] = base64.b64encode(pem).decode()
        self._client.update_status(CSRS, updated)
        self._log.info(
            "csr %s: signed %s for %s, valid until %s",
            name,
            request.subject.rfc4514_string(),
            spec.get("username"),
            cert.not_valid_after_utc.isoformat(),
        )
        return None

    def _fail(self, csr: Object, problem: str) -> SyncResult:
        name = csr["metadata"]["name"]
        updated = copy.deepcopy(csr)
        now = rfc3339(self._clock.utcnow())
        updated.setdefault("status", {}).setdefault("conditions", []).append(
            {
                "type": "Failed",
                "status": "True",
                "reason": "SignerValidationFailure",
                "message": f"{csr['spec'].get('signerName')}: {problem}",
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            }
        )
        self._client.update_status(CSRS, updated)
        self._log.info("csr %s: not signing: %s", name, problem)
        return None


class TokenCleaner:
    """Deletes expired bootstrap tokens (module docstring); keyed by "kube-system/name"."""

    name = TOKEN_CLEANER

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._clock = clock
        self._client = ctx.client_for(TOKEN_CLEANER)
        self._log = controller_logger(TOKEN_CLEANER)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._secrets = ctx.informers.informer(SECRETS)
        self._secrets.add_event_handler(
            on_add=self._changed, on_update=lambda _old, new: self._changed(new)
        )

    def _changed(self, secret: Object | DeletedFinalStateUnknown) -> None:
        if isinstance(secret, dict) and is_bootstrap_token(secret):
            self.queue.add(object_key(secret))

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(
            TOKEN_CLEANER,
            self.queue,
            self.sync,
            self._log,
            tracer=self._tracer,
            objects=self._secrets,
        ).run(workers, stop)

    def sync(self, key: str) -> SyncResult:
        secret = self._secrets.indexer.get(key)
        if secret is None or not is_bootstrap_token(secret):
            return None
        encoded = (secret.get("data") or {}).get("expiration")
        if not encoded:
            return None
        try:
            expires = parse_time(base64.b64decode(encoded).decode())
        except ValueError as exc:
            raise SyncError(f"bootstrap token {key}: unreadable expiration: {exc}") from None
        left = (expires - self._clock.utcnow()).total_seconds()
        if left > 0:
            return left
        meta = secret["metadata"]
        try:
            self._client.delete(
                SECRETS,
                meta["name"],
                meta["namespace"],
                preconditions=Preconditions(uid=meta.get("uid")),
            )
        except StatusError as exc:
            if exc.code not in (404, 409):
                raise
            return None
        self._log.info("deleted the bootstrap token %s, expired at %s", key, expires.isoformat())
        return None


def is_bootstrap_token(secret: Object) -> bool:
    """A bootstrap token's Secret (its type, in kube-system)."""
    return (
        secret.get("type") == BOOTSTRAP_TOKEN_TYPE
        and (secret.get("metadata") or {}).get("namespace") == "kube-system"
    )
