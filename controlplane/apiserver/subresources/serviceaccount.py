"""``serviceaccounts/token``: a TokenRequest answered with a signed token for the account
(``kubectl create token``), optionally bound to a pod (the kubelet's projected tokens):
the token dies with the pod."""

from __future__ import annotations

import datetime

from flask import Response

from kubelab.api import errors
from kubelab.api.resources import lookup

from ..authn import TokenIssuer
from ..handlers import json_response, request_body
from ..registry import Registry
from ..strategies import now_rfc3339
from .rest import SubresourceRequest, SubresourceREST

MAX_TOKEN_SECONDS = 365 * 24 * 3600


class TokenREST(SubresourceREST):
    def __init__(self, registry: Registry, issuer: TokenIssuer) -> None:
        self.registry, self.issuer = registry, issuer

    def create(self, req: SubresourceRequest) -> Response:
        ns, name, body = req.namespace, req.name, request_body()
        account = self.registry.get(req.resource, ns, name)
        spec = body.get("spec") or {}
        seconds = spec.get("expirationSeconds") or 3600
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise errors.bad_request("spec.expirationSeconds must be an integer number of seconds")
        too_long = f"may not exceed {MAX_TOKEN_SECONDS} seconds (one year)"
        too_short = "may not specify a duration less than 10 minutes"
        wrong = too_long if seconds > MAX_TOKEN_SECONDS else too_short if seconds < 600 else ""
        if wrong:
            raise errors.invalid_object(
                "TokenRequest",
                name,
                [errors.invalid("spec.expirationSeconds", seconds, wrong)],
                "authentication.k8s.io",
            )
        bound = None
        ref = spec.get("boundObjectRef") or {}
        if not isinstance(ref, dict):
            raise errors.bad_request("spec.boundObjectRef must be an object")
        if ref:
            if ref.get("kind") != "Pod":
                raise errors.invalid_object(
                    "TokenRequest",
                    name,
                    [errors.not_supported("spec.boundObjectRef.kind", ref.get("kind"), ["Pod"])],
                    "authentication.k8s.io",
                )
            pods = lookup("", "v1", "pods")
            assert pods is not None
            pod = self.registry.get(pods, ns, str(ref.get("name", "")))
            if ref.get("uid") and ref["uid"] != pod["metadata"]["uid"]:
                raise errors.conflict(
                    "pods",
                    pod["metadata"]["name"],
                    why=(
                        f"the uid in boundObjectRef ({ref['uid']}) is not the pod's "
                        f"({pod['metadata']['uid']})"
                    ),
                )
            bound = (pod["metadata"]["name"], pod["metadata"]["uid"])
        token, exp = self.issuer.issue(
            ns,
            name,
            account["metadata"]["uid"],
            audiences=spec.get("audiences"),
            expiration_seconds=seconds,
            bound_pod=bound,
        )
        expires = datetime.datetime.fromtimestamp(exp, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return json_response(
            {
                "kind": "TokenRequest",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": ns, "creationTimestamp": now_rfc3339()},
                "spec": {**spec, "expirationSeconds": seconds},
                "status": {"token": token, "expirationTimestamp": expires},
            },
            201,
        )
