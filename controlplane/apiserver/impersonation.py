"""Impersonation: ``Impersonate-User``, ``-Group``, ``-Uid`` and ``-Extra-<key>`` headers
(``kubectl --as``, ``--as-group``, ``--as-uid``), as kube-apiserver's impersonation
filter does it.

It runs after authentication and before authorization: every identity the caller asks
to take is a separate ``impersonate`` check for the caller, on the resource that names
it (``users``, ``groups``, ``serviceaccounts`` in the core group; ``uids`` and
``userextras/<key>`` in ``authentication.k8s.io``). When all pass, the rest of the chain
(authorization, admission, reviews such as ``kubectl auth can-i --as``) sees only the
impersonated user; the audit record keeps both.

The impersonated user is built as Kubernetes builds it: the groups asked for, or a
service account's own groups when none are; ``system:authenticated`` added for everyone
but ``system:anonymous`` (who gets ``system:unauthenticated``).
"""

from __future__ import annotations

from urllib.parse import unquote

from kubelab.api import errors

from .authn import UserInfo
from .authz import Authorizer
from .requestinfo import RequestInfo

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"
UID_HEADER = "Impersonate-Uid"
EXTRA_PREFIX = "Impersonate-Extra-"
# Every impersonation header starts so (compared lower-cased).
PREFIX = "impersonate-"

_SA_PREFIX = "system:serviceaccount:"
_AUTHENTICATED = "system:authenticated"
_UNAUTHENTICATED = "system:unauthenticated"
_ANONYMOUS = "system:anonymous"
_AUTHN_GROUP = "authentication.k8s.io"


def impersonate(
    caller: UserInfo, headers: list[tuple[str, str]], authorizer: Authorizer
) -> UserInfo:
    """The user the request acts as, after checking that `caller` may take each identity
    the ``Impersonate-*`` `headers` name; raises a 400 or 403 Status otherwise."""
    user = ""
    uid = ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for key, value in headers:
        lowered = key.lower()
        if lowered == USER_HEADER.lower():
            user = value
        elif lowered == GROUP_HEADER.lower():
            groups.append(value)
        elif lowered == UID_HEADER.lower():
            uid = value
        elif lowered.startswith(EXTRA_PREFIX.lower()):
            # Header names cannot carry every character of an extra's key, so clients
            # percent-encode it (kubectl does); the key is compared lower-cased.
            extra.setdefault(unquote(key[len(EXTRA_PREFIX) :]).lower(), []).append(value)
    if not user:
        asked = [f"{GROUP_HEADER}={g}" for g in groups]
        asked += [f"{UID_HEADER}={uid}"] if uid else []
        asked += [f"{EXTRA_PREFIX}{k}" for k in extra]
        raise errors.bad_request(
            f"requested [{', '.join(asked)}] without impersonating a user: add the "
            f"{USER_HEADER} header (kubectl --as=<user>)"
        )

    checks: list[RequestInfo] = []
    if user.startswith(_SA_PREFIX):
        namespace, _, name = user[len(_SA_PREFIX) :].partition(":")
        checks.append(_check("serviceaccounts", "", name, namespace=namespace))
        if not groups:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    else:
        checks.append(_check("users", "", user))
    checks += [_check("groups", "", group) for group in groups]
    if uid:
        checks.append(_check("uids", _AUTHN_GROUP, uid))
    for key, values in extra.items():
        checks += [_check("userextras", _AUTHN_GROUP, v, subresource=key) for v in values]

    for check in checks:
        if not authorizer.authorize(caller, check).allowed:
            raise errors.forbidden_request(
                caller.name,
                "impersonate",
                check.resource,
                check.group,
                check.namespace,
                check.name,
                check.subresource,
            )

    if user == _ANONYMOUS:
        if _UNAUTHENTICATED not in groups:
            groups.append(_UNAUTHENTICATED)
    elif _AUTHENTICATED not in groups:
        groups.append(_AUTHENTICATED)
    return UserInfo(user, uid=uid, groups=tuple(groups), extra=extra)


def _check(
    resource: str, group: str, name: str, namespace: str = "", subresource: str = ""
) -> RequestInfo:
    return RequestInfo(
        verb="impersonate",
        path="",
        is_resource=True,
        group=group,
        version="v1",
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )
