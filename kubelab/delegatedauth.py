"""Delegated authentication and authorization: a component's own HTTPS server asks the
apiserver who a caller is and what they may do, as kube-controller-manager,
kube-scheduler and the kubelet do (k8s.io/apiserver's delegating authenticator and
authorizer). The component keeps no users or rules of its own: RBAC in the cluster
decides, and changes to it apply to the component too.

Who is calling (`Delegation.authenticate`), first match wins:

1. a client certificate, if the TLS handshake verified one against the client CA:
   its common name is the user, its organizations the groups;
2. a bearer token (`Authorization: Bearer ...`), sent to the apiserver in a
   TokenReview (`authentication.k8s.io/v1`): the user and groups it answers, or
   nobody (401) if it does not vouch for the token or cannot be asked;
3. neither: `system:anonymous` in `system:unauthenticated`, whom authorization then
   judges like anyone else (Kubernetes answers an anonymous /metrics 403, not 401);
   or nobody (401) where anonymous requests are off (the kubelet's
   `--anonymous-auth=false`, as kubeadm runs it).

May they (`Delegation.authorize`): a SubjectAccessReview (`authorization.k8s.io/v1`)
for the user, their groups and the request's attributes (a non-resource path such as
`get /metrics`, or a resource such as `get nodes/metrics`). An apiserver that cannot
be asked means no (403).

Answers are cached for `ttl` seconds, as the Go components cache them (10 s by
default for the control plane's, so that a revoked binding stops working quickly), at
most `CACHE_SIZE` of each kind; tokens are kept only as their SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client import RestClient, ServerUnreachable

log = logging.getLogger(__name__)

TTL = 10.0
"""Seconds an answer is kept (kube-controller-manager's and kube-scheduler's default)."""

CACHE_SIZE = 4096
"""Answers kept at most per cache: callers choose their tokens, so the cache is bounded."""


@dataclass(frozen=True)
class User:
    """Who a request comes from, as the apiserver's authentication names them."""

    name: str
    groups: tuple[str, ...] = ()


ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


def user_of_certificate(peer: Mapping[str, Any]) -> User:
    """The user a verified client certificate names (`ssl.SSLSocket.getpeercert()`):
    CN the user, O the groups, as the apiserver reads them."""
    attributes = [pair for rdn in peer.get("subject", ()) for pair in rdn]
    name = next((value for key, value in attributes if key == "commonName"), "")
    return User(name, tuple(value for key, value in attributes if key == "organizationName"))


class _Cache:
    """Answers with an expiry, at most CACHE_SIZE (the oldest go first)."""

    def __init__(self, ttl: float, clock: Callable[[], float]) -> None:
        self._ttl = ttl
        self._clock = clock
        self._entries: dict[Any, tuple[Any, float]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The cached answer for `key`, or `compute()`'s (cached; an exception is not)."""
        now = self._clock()
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and hit[1] > now:
            return hit[0]
        answer = compute()
        with self._lock:
            self._entries.pop(key, None)
            while len(self._entries) >= CACHE_SIZE:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = (answer, now + self._ttl)
        return answer


class Delegation:
    """The caller's identity and rights, asked of the apiserver (module docstring).

    `authentication` is the client TokenReviews go through (None: bearer tokens are not
    looked at); `authorization` the one for SubjectAccessReviews (None: every review is
    refused). They may be one client. `anonymous`: whether a caller with neither a
    certificate nor a reviewed token is `system:anonymous` (else nobody).
    """

    def __init__(
        self,
        authentication: RestClient | None,
        authorization: RestClient | None,
        *,
        ttl: float = TTL,
        anonymous: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._authentication = authentication
        self._anonymous = ANONYMOUS if anonymous else None
        self._authorization = authorization
        self._tokens = _Cache(ttl, clock)
        self._decisions = _Cache(ttl, clock)

    def authenticate(self, peer: Mapping[str, Any] | None, authorization: str) -> User | None:
        """Who sends a request with the verified certificate `peer` (if any) and the
        Authorization header `authorization` ("" if none); None: nobody (401)."""
        if peer:
            return user_of_certificate(peer)
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip() or self._authentication is None:
            return self._anonymous
        digest = hashlib.sha256(token.strip().encode()).digest()
        try:
            user: User | None = self._tokens.get(digest, lambda: self._review_token(token))
        except (StatusError, ServerUnreachable) as exc:
            log.warning("cannot check a bearer token with the apiserver (TokenReview): %s", exc)
            return None
        return user

    def _review_token(self, token: str) -> User | None:
        assert self._authentication is not None
        review = self._authentication.request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token.strip()},
            },
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        return User(str(user.get("username", "")), tuple(user.get("groups") or ()))

    def authorize(self, user: User, attributes: Mapping[str, Any]) -> bool:
        """Whether `user` may do what `attributes` describe: a SubjectAccessReview's
        `{"nonResourceAttributes": {...}}` or `{"resourceAttributes": {...}}`."""
        if self._authorization is None:
            return False
        key = (user, json.dumps(attributes, sort_keys=True))
        try:
            allowed: bool = self._decisions.get(key, lambda: self._review_access(user, attributes))
        except (StatusError, ServerUnreachable) as exc:
            log.warning("SubjectAccessReview for %s failed: %s", user.name, exc)
            return False
        return allowed

    def _review_access(self, user: User, attributes: Mapping[str, Any]) -> bool:
        assert self._authorization is not None
        answer = self._authorization.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {"user": user.name, "groups": list(user.groups), **attributes},
            },
        )
        return bool((answer.get("status") or {}).get("allowed"))
