"""certificates.k8s.io: a CertificateSigningRequest records who asked for it."""

from __future__ import annotations

from typing import Any

from .generic import Object, StatusResetStrategy


class CertificateSigningRequestStrategy(StatusResetStrategy):
    """The requester's identity goes into ``spec.username/uid/groups/extra`` on create,
    from the request's authenticated user, never from the body: the CSR approver decides
    by it (a kubelet may only ask for its own node's certificate)."""

    def prepare_for_create(self, obj: Object, user: Any = None) -> None:
        super().prepare_for_create(obj, user)
        if user is None:
            return
        spec = obj.setdefault("spec", {})
        for field in ("username", "uid", "groups", "extra"):
            spec.pop(field, None)
        spec["username"] = user.name
        if user.uid:
            spec["uid"] = user.uid
        if user.groups:
            spec["groups"] = list(user.groups)
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
