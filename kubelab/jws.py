"""Detached JSON Web Signatures with a bootstrap token, as the `cluster-info` ConfigMap
carries them (Kubernetes' bootstrap signer, kubeadm's discovery).

The controller-manager's bootstrap signer signs the ConfigMap's `kubeconfig` with each
signing bootstrap token and stores `jws-kubeconfig-<token-id>`: a compact JWS (HS256,
key = the token's secret, header `{"alg":"HS256","kid":"<token-id>"}`) with its payload
left out (`header..signature`). A node holding the whole token verifies the ConfigMap
before trusting the CA in it: only someone who knows the token's secret could have
signed it. The signature is plain HMAC-SHA256 over RFC 7515's signing input (PyJWT
refuses nothing here but warns of the 16-byte secret, which is the token's format).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

SIGNATURE_PREFIX = "jws-kubeconfig-"
"""cluster-info's key for a token's signature: this prefix and the token's id."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(signing_input: str, secret: str) -> str:
    digest = hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest()
    return _b64(digest)


def sign_detached(content: str, token_id: str, token_secret: str) -> str:
    """`content` signed with the token, payload detached: `header..signature`."""
    header = _b64(json.dumps({"alg": "HS256", "kid": token_id}, separators=(",", ":")).encode())
    return f"{header}..{_signature(f'{header}.{_b64(content.encode())}', token_secret)}"


def verify_detached(detached: str, content: str, token_id: str, token_secret: str) -> bool:
    """Whether `detached` is a signature of `content` by the token `token_id.secret`: the
    header names HS256 and this token's id, and the MAC matches (compared in constant
    time)."""
    header, _, signature = detached.partition("..")
    if not header or not signature or "." in signature:
        return False
    try:
        claims = json.loads(_unb64(header))
    except ValueError:
        return False
    if not isinstance(claims, dict) or claims.get("alg") != "HS256":
        return False
    if claims.get("kid") != token_id:
        return False
    wanted = _signature(f"{header}.{_b64(content.encode())}", token_secret)
    return hmac.compare_digest(wanted, signature)
