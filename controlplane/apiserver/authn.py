"""Authentication: who is asking. The first step of every request.

Methods: a bearer token, when the request carries one (a client that sends a token
means to be that token's user), else the client certificate, else anonymous:

* X.509 client certificates from the cluster CA: the TLS layer has verified the chain,
  the subject's CN is the user name and each O is a group (``CN=system:node:w1,
  O=system:nodes`` is the kubelet of node w1; ``O=system:masters`` is a cluster admin).
  A certificate that did not verify (another CA, expired) reaches us as an
  `UnverifiedCertificate` and is a 401, as in kube-apiserver, whose TLS layer lets the
  handshake complete and leaves the verdict to its x509 authenticator.
* Bearer tokens:
  - service-account tokens: JWTs the apiserver signed with the cluster's service-account
    key (`TokenIssuer`). A token stays valid only while its ServiceAccount (and, for a
    bound token, its Pod) exists with the same uid, so deleting the account revokes it.
  - bootstrap tokens ``<id>.<secret>``, stored as Secrets ``kube-system/bootstrap-token-<id>``
    (the ones `labadm token create` makes; `labadm join` authenticates with one).
  - a static token file (``--token-auth-file``: ``token,user,uid,"group1,group2"``).
* Anonymous: only where the anonymous user is useful (health checks, version, the public
  ``cluster-info`` ConfigMap a joining node reads). Elsewhere a request without
  credentials gets 401, so a forgotten kubeconfig fails loudly instead of as 403.

Every authenticated user also gets the group ``system:authenticated``. A token or a
certificate that is presented but invalid is a 401 even where anonymous would be allowed:
a client that sent credentials meant to use them. The 401 message says why (expired,
unknown, revoked) because this is a lab, where telling the operator what to fix matters
more than hiding it.
"""

from __future__ import annotations

import csv
import datetime
import functools
import hmac
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes
from cryptography.x509.oid import NameOID

from kubelab.api import errors

log = logging.getLogger("kubelab.apiserver.authn")

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"

# What the anonymous user may reach at all (RBAC still decides; see the module doc).
_ANONYMOUS_PATHS = ("/healthz", "/livez", "/readyz", "/version")
BOOTSTRAP_TOKEN = re.compile(r"[a-z0-9]{6}\.[a-z0-9]{16}")
_CLUSTER_INFO = "/api/v1/namespaces/kube-public/configmaps/cluster-info"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = self.extra
        return out


@dataclass(frozen=True, slots=True)
class UnverifiedCertificate:
    """What the TLS layer passes instead of a client certificate (DER bytes) that failed
    verification against the client CA; `reason` is Go's wording of why, with details."""

    reason: str


def anonymous_allowed(path: str) -> bool:
    return (
        path.rstrip("/") in _ANONYMOUS_PATHS
        or path.startswith(tuple(p + "/" for p in _ANONYMOUS_PATHS))
        or path == _CLUSTER_INFO
    )


def _with_authenticated(groups: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*groups, AUTHENTICATED]))


@functools.lru_cache(maxsize=1024)
def user_from_certificate(der: bytes) -> UserInfo:
    """The user a verified client certificate names (cached: clients present the same
    certificate on every request, and parsing it is a measurable share of a GET)."""
    return _user_from_certificate(der)


def _user_from_certificate(der: bytes) -> UserInfo:
    cert = x509.load_der_x509_certificate(der)
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    if not cn:
        raise errors.unauthorized("Unauthorized: the client certificate has no common name")
    return UserInfo(str(cn[0].value), groups=_with_authenticated([str(o.value) for o in orgs]))


class TokenIssuer:
    """Signs and checks service-account tokens (JWT, ES256 or RS256 by key type)."""

    def __init__(
        self,
        signing_key: PrivateKeyTypes | None,
        public_keys: list[PublicKeyTypes],
        issuer: str = SERVICE_ACCOUNT_ISSUER,
    ) -> None:
        self.signing_key = signing_key
        self.public_keys = public_keys
        self.issuer = issuer

    @staticmethod
    def _algorithm(key: Any) -> str:
        from cryptography.hazmat.primitives.asymmetric import ec, rsa

        if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
            return "ES256"
        if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
            return "RS256"
        raise ValueError("service-account keys must be RSA or ECDSA P-256")

    def issue(
        self,
        namespace: str,
        account: str,
        account_uid: str,
        *,
        audiences: list[str] | None = None,
        expiration_seconds: int = 3600,
        bound_pod: tuple[str, str] | None = None,
    ) -> tuple[str, int]:
        """A token for `namespace/account` and its expiry (unix time)."""
        if self.signing_key is None:
            raise errors.service_unavailable(
                "this apiserver has no --service-account-signing-key-file; it cannot issue tokens"
            )
        now = int(time.time())
        exp = now + expiration_seconds
        k8s: dict[str, Any] = {
            "namespace": namespace,
            "serviceaccount": {"name": account, "uid": account_uid},
        }
        if bound_pod is not None:
            k8s["pod"] = {"name": bound_pod[0], "uid": bound_pod[1]}
        claims = {
            "iss": self.issuer,
            "sub": f"system:serviceaccount:{namespace}:{account}",
            "aud": audiences or [API_AUDIENCE],
            "iat": now,
            "nbf": now,
            "exp": exp,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": k8s,
        }
        token = jwt.encode(
            claims,
            self.signing_key,  # type: ignore[arg-type]
            algorithm=self._algorithm(self.signing_key),
        )
        return token, exp

    def verify(self, token: str) -> dict[str, Any]:
        last: Exception | None = None
        for key in self.public_keys:
            try:
                claims: dict[str, Any] = jwt.decode(
                    token,
                    key,  # type: ignore[arg-type]
                    algorithms=[self._algorithm(key)],
                    audience=API_AUDIENCE,
                    issuer=self.issuer,
                    options={"require": ["exp", "sub", "iss"]},
                )
                return claims
            except jwt.ExpiredSignatureError:
                raise errors.unauthorized(
                    "Unauthorized: the service-account token has expired; request a new one "
                    "(kubectl create token)"
                ) from None
            except jwt.InvalidTokenError as exc:
                last = exc
        raise errors.unauthorized(f"Unauthorized: invalid bearer token ({last})")


def load_token_file(path: Path) -> dict[str, UserInfo]:
    """``token,user,uid[,"group1,group2"]`` per line, as kube-apiserver's token file."""
    users: dict[str, UserInfo] = {}
    with path.open(newline="") as f:
        for lineno, row in enumerate(csv.reader(f), 1):
            if not row or row[0].startswith("#"):
                continue
            if len(row) < 3:
                raise ValueError(f"{path}:{lineno}: expected token,user,uid[,groups]")
            groups = [g for g in row[3].split(",") if g] if len(row) > 3 else []
            users[row[0]] = UserInfo(row[1], row[2], _with_authenticated(groups))
    return users


Lookup = Callable[[str, str, str], dict[str, Any] | None]
"""(resource plural, namespace, name) -> the stored object or None (from the cache)."""


class Authenticator:
    def __init__(
        self,
        *,
        issuer: TokenIssuer | None,
        lookup: Lookup,
        static_tokens: dict[str, UserInfo] | None = None,
        anonymous: bool = True,
    ) -> None:
        self.issuer = issuer
        self.lookup = lookup
        self.static_tokens = static_tokens or {}
        self.anonymous = anonymous

    def authenticate(
        self, path: str, client_cert: bytes | UnverifiedCertificate | None, authorization: str
    ) -> UserInfo:
        if authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise errors.unauthorized("Unauthorized: only Bearer tokens are accepted")
            return self._token(token.strip())
        if isinstance(client_cert, UnverifiedCertificate):
            log.info("Unable to authenticate the request: %s", client_cert.reason)
            raise errors.unauthorized(f"Unauthorized: {client_cert.reason}")
        if client_cert:
            return user_from_certificate(client_cert)
        if self.anonymous and anonymous_allowed(path):
            return UserInfo(ANONYMOUS, groups=(UNAUTHENTICATED,))
        raise errors.unauthorized(
            "Unauthorized: no client certificate or bearer token; use a kubeconfig with "
            "credentials (e.g. /etc/kubernetes/admin.conf)"
        )

    def _token(self, token: str) -> UserInfo:
        if token in self.static_tokens:
            return self.static_tokens[token]
        if BOOTSTRAP_TOKEN.fullmatch(token):
            return self._bootstrap(token)
        if self.issuer is None:
            raise errors.unauthorized("Unauthorized: service-account tokens are not enabled")
        claims = self.issuer.verify(token)
        k8s = claims.get("kubernetes.io", {})
        ns = str(k8s.get("namespace", ""))
        sa = k8s.get("serviceaccount", {})
        name, uid = str(sa.get("name", "")), str(sa.get("uid", ""))
        stored = self.lookup("serviceaccounts", ns, name)
        if stored is None or stored["metadata"].get("uid") != uid:
            raise errors.unauthorized(
                f"Unauthorized: service account {ns}/{name} no longer exists (token revoked)"
            )
        pod = k8s.get("pod")
        extra: dict[str, list[str]] = {}
        if pod:
            live = self.lookup("pods", ns, str(pod.get("name", "")))
            if live is None or live["metadata"].get("uid") != pod.get("uid"):
                raise errors.unauthorized(
                    f"Unauthorized: the token's pod {ns}/{pod.get('name')} no longer exists"
                )
            extra["authentication.kubernetes.io/pod-name"] = [str(pod.get("name"))]
        return UserInfo(
            f"system:serviceaccount:{ns}:{name}",
            uid,
            _with_authenticated(["system:serviceaccounts", f"system:serviceaccounts:{ns}"]),
            extra,
        )

    def _bootstrap(self, token: str) -> UserInfo:
        token_id, _, secret = token.partition(".")
        stored = self.lookup("secrets", "kube-system", f"bootstrap-token-{token_id}")
        data = _secret_data(stored) if stored is not None else {}
        if (
            stored is None
            or stored.get("type") != "bootstrap.kubernetes.io/token"
            or not hmac.compare_digest(data.get("token-secret", ""), secret)
        ):
            raise errors.unauthorized(
                f"Unauthorized: bootstrap token {token_id!r} is not known; create one with "
                "`labadm token create`"
            )
        if data.get("usage-bootstrap-authentication") != "true":
            raise errors.unauthorized(
                f"Unauthorized: bootstrap token {token_id!r} is not for authentication"
            )
        expiration = data.get("expiration", "")
        if expiration:
            try:
                when = datetime.datetime.fromisoformat(expiration.replace("Z", "+00:00"))
            except ValueError:
                raise errors.unauthorized(
                    f"Unauthorized: bootstrap token {token_id!r} has an unreadable expiration "
                    f"{expiration!r}"
                ) from None
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.UTC)
            if when <= datetime.datetime.now(datetime.UTC):
                raise errors.unauthorized(
                    f"Unauthorized: bootstrap token {token_id!r} expired at {expiration}; "
                    "create a new one with `labadm token create`"
                )
        extra = [g for g in data.get("auth-extra-groups", "").split(",") if g]
        return UserInfo(
            f"system:bootstrap:{token_id}",
            groups=_with_authenticated(["system:bootstrappers", *extra]),
        )


def _secret_data(secret: dict[str, Any]) -> dict[str, str]:
    import base64

    out = {
        k: base64.b64decode(v).decode(errors="replace")
        for k, v in (secret.get("data") or {}).items()
    }
    out.update(secret.get("stringData") or {})
    return out
