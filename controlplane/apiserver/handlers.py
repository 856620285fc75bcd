"""Review resources, and what every handler reads of a request and writes back.

* Reviews (never stored): SelfSubjectAccessReview and SelfSubjectRulesReview
  (``kubectl auth can-i``), SubjectAccessReview, TokenReview, SelfSubjectReview
  (``kubectl auth whoami``): a table by kind.
* ``metrics.k8s.io``: read-only, from the kubelets' kept figures (`APIServer.resource_metrics`).
* The request helpers the main resource's handlers (`app`) and the subresources' REST
  objects (`subresources`) share: the body, ``dryRun``, the field manager, the JSON answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import Response, request

from kubelab import fastjson
from kubelab.api import errors
from kubelab.api.resources import Resource

from . import componentstatus, warning
from .authn import API_AUDIENCE, UserInfo
from .authz import MASTERS, NODES
from .registry import decode_body, parse_dry_run
from .requestinfo import RequestInfo
from .strategies import now_rfc3339
from .traces import describe

if TYPE_CHECKING:
    from .apiserver import APIServer

Object = dict[str, Any]


def json_response(body: Any, status: int = 200) -> Response:
    """A compact JSON answer (the app's and the subresource handlers' one format), escaped
    and ending in a newline as Kubernetes' encoder writes every body. The object answered
    is named on the request's span."""
    describe(body)
    data = fastjson.dumps_as_go(body) + b"\n"
    return Response(data, status=status, mimetype="application/json")


def request_body() -> Object:
    """The request's body as an object (JSON, YAML or protobuf, by its Content-Type)."""
    return decode_body(request.get_data(), request.content_type or "")


def dry_run() -> bool:
    """Whether the request asks for ``dryRun=All`` (400 for any other value)."""
    return parse_dry_run(request.args.get("dryRun"))


def field_manager() -> str:
    """Who is writing, for ``metadata.managedFields``: the request's ``fieldManager``, or
    else its User-Agent up to the first "/" ("kubectl"), as kube-apiserver does."""
    given = request.args.get("fieldManager")
    agent = request.headers.get("User-Agent", "")
    manager = given if given is not None else agent.split("/")[0]
    if len(manager) > 128:
        raise errors.bad_request(
            f"fieldManager: must be at most 128 characters, not {len(manager)}"
        )
    return manager or "unknown"


# -- reviews -----------------------------------------------------------------------------


def virtual(server: APIServer, r: Resource, info: RequestInfo, user: UserInfo) -> Object:
    """Create-only resources that are answered, never stored."""
    if r.group_resource == "componentstatuses":
        warning.add(componentstatus.DEPRECATION)
        return server.component_statuses(info.name)
    if r.group == "metrics.k8s.io":
        if info.verb not in ("get", "list"):
            raise errors.method_not_allowed(f"{r.group_resource} is read-only")
        return server.resource_metrics(
            r,
            info.namespace,
            info.name,
            request.args.get("labelSelector", ""),
            request.args.get("fieldSelector", ""),
        )
    if info.verb != "create":
        raise errors.method_not_allowed(f"only create is supported on {r.group_resource}")
    body = request_body()
    review = _REVIEWS.get(r.group_resource)
    if review is None:
        raise errors.method_not_allowed(f"{r.group_resource} is not served yet")
    return review(server, r, body, body.get("spec") or {}, user)


def _self_access_review(
    server: APIServer, r: Resource, body: Object, spec: Object, user: UserInfo
) -> Object:
    """May I? (``kubectl auth can-i``)"""
    return _access_review(server, r, body, spec, user)


def _subject_access_review(
    server: APIServer, r: Resource, body: Object, spec: Object, user: UserInfo
) -> Object:
    """May the user the review names?"""
    subject = UserInfo(
        str(spec.get("user", "")), str(spec.get("uid", "")), tuple(spec.get("groups") or [])
    )
    return _access_review(server, r, body, spec, subject)


def _access_review(
    server: APIServer, r: Resource, body: Object, spec: Object, subject: UserInfo
) -> Object:
    attrs = spec.get("resourceAttributes")
    if attrs:
        group = attrs.get("group", "")
        asked = RequestInfo(
            verb=attrs.get("verb", ""),
            path="",
            is_resource=True,
            group=group,
            version=attrs.get("version", ""),
            namespace=attrs.get("namespace", ""),
            resource=attrs.get("resource", ""),
            subresource=attrs.get("subresource", ""),
            name=attrs.get("name", ""),
        )
    else:
        nra = spec.get("nonResourceAttributes") or {}
        asked = RequestInfo(verb=nra.get("verb", ""), path=nra.get("path", ""))
    decision = server.authz.authorize(subject, asked)
    status: Object = {"allowed": decision.allowed}
    if decision.allowed and decision.reason:
        status["reason"] = f"allowed by {decision.reason}"
    return {
        **body,
        "apiVersion": r.api_version,
        "kind": r.kind,
        "metadata": body.get("metadata") or {},
        "status": status,
    }


def _rules_review(
    server: APIServer, r: Resource, body: Object, spec: Object, user: UserInfo
) -> Object:
    """What may I do in a namespace? (``kubectl auth can-i --list``)"""
    ns = spec.get("namespace", "")
    rules = [rule for rule, _ in server.authz.rules_for(user, ns)]
    resource_rules = [x for x in rules if "nonResourceURLs" not in x]
    non_resource = [x for x in rules if "nonResourceURLs" in x]
    return {
        "apiVersion": r.api_version,
        "kind": r.kind,
        "metadata": {},
        "spec": spec,
        "status": {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource,
            # The Node authorizer and system:masters grant more than these rules.
            "incomplete": MASTERS in user.groups or NODES in user.groups,
        },
    }


def _self_subject_review(
    server: APIServer, r: Resource, body: Object, spec: Object, user: UserInfo
) -> Object:
    """Who am I? (``kubectl auth whoami``)"""
    return {
        "apiVersion": r.api_version,
        "kind": r.kind,
        "metadata": {"creationTimestamp": now_rfc3339()},
        "status": {"userInfo": user.as_dict()},
    }


def _token_review(
    server: APIServer, r: Resource, body: Object, spec: Object, user: UserInfo
) -> Object:
    """Whose is this token?"""
    token = str(spec.get("token", ""))
    try:
        who = server.authn.authenticate("", None, f"Bearer {token}")
        # Tokens are only accepted for the API's own audience.
        wanted = spec.get("audiences") or [API_AUDIENCE]
        if API_AUDIENCE not in wanted:
            raise errors.unauthorized(
                f"token audiences do not include any of the requested {wanted}"
            )
        status = {"authenticated": True, "user": who.as_dict(), "audiences": [API_AUDIENCE]}
    except errors.StatusError as exc:
        status = {"authenticated": False, "error": exc.message}
    return {
        "apiVersion": r.api_version,
        "kind": r.kind,
        "metadata": {},
        "spec": spec,
        "status": status,
    }


Review = Callable[["APIServer", Resource, Object, Object, UserInfo], Object]
"""(server, resource, request body, its spec, requesting user) -> the answered review."""

_REVIEWS: dict[str, Review] = {
    "selfsubjectaccessreviews.authorization.k8s.io": _self_access_review,
    "subjectaccessreviews.authorization.k8s.io": _subject_access_review,
    "selfsubjectrulesreviews.authorization.k8s.io": _rules_review,
    "selfsubjectreviews.authentication.k8s.io": _self_subject_review,
    "tokenreviews.authentication.k8s.io": _token_review,
}
"""The reviews answered, by group resource (Kubernetes' REST objects of each)."""
