"""Subresources and review resources: the parts of the API that are not plain CRUD.

* ``status``: GET reads the object; PUT/PATCH change only its status.
* ``scale``: an autoscaling/v1 Scale view of a workload's replicas (``kubectl scale``).
* ``binding``: the scheduler's decision, a Binding that sets a pod's ``spec.nodeName``
  once (a second binding is a 409).
* ``serviceaccounts/token``: a TokenRequest answered with a signed token
  (``kubectl create token``).
* ``namespaces/finalize``, ``certificatesigningrequests/approval``: writes of one field.
* ``pods/eviction``: an Eviction deletes the pod if its disruption budget allows (`eviction`).
* ``pods/log|exec|attach|portforward``, ``nodes/proxy``: the live-data path, proxied to
  the node's kubelet (`kubelet_proxy`).
* Reviews (never stored): SelfSubjectAccessReview and SelfSubjectRulesReview
  (``kubectl auth can-i``), SubjectAccessReview, TokenReview, SelfSubjectReview
  (``kubectl auth whoami``).
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import Response, request

from kubelab import fastjson
from kubelab.api import errors, patch
from kubelab.api.resources import Resource, lookup

from . import eviction
from .authn import API_AUDIENCE, UserInfo
from .authz import MASTERS, NODES
from .registry import DeleteOptions, decode_body, parse_dry_run, patch_error
from .requestinfo import RequestInfo
from .strategies import for_resource, now_rfc3339

if TYPE_CHECKING:
    from .apiserver import APIServer

Object = dict[str, Any]
MAX_TOKEN_SECONDS = 365 * 24 * 3600


def json_response(body: Any, status: int = 200) -> Response:
    """A compact JSON answer (the app's and the subresource handlers' one format), ending
    in a newline as Kubernetes' encoder ends every body."""
    return Response(fastjson.dumps(body) + b"\n", status=status, mimetype="application/json")


def _body() -> Object:
    return decode_body(request.get_data(), request.content_type or "")


def _dry_run() -> bool:
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


def subresource(server: APIServer, r: Resource, info: RequestInfo, user: UserInfo) -> Response:
    sub, verb = info.subresource, info.verb
    if sub not in r.subresources:
        raise errors.StatusError(404, "NotFound", f"{r.group_resource} has no subresource {sub!r}")
    reg = server.registry
    ns = info.namespace if r.namespaced else ""
    if sub == "status":
        served = server.registry_for(r)
        if verb == "get":
            return json_response(served.get(r, ns, info.name))
        if verb == "update":
            return json_response(
                served.update(r, ns, info.name, _body(), user, "status", _dry_run())
            )
        if verb == "patch":
            return json_response(
                served.patch(
                    r,
                    ns,
                    info.name,
                    request.get_data(),
                    request.content_type or "",
                    user,
                    "status",
                    _dry_run(),
                )
            )
    if sub == "scale":
        return _scale(server, r, ns, info, user)
    if sub == "binding" and verb == "create":
        return _bind(server, r, ns, info.name, _body(), user)
    if sub == "token" and verb == "create":
        return _token(server, ns, info.name, _body())
    if sub in ("finalize", "approval") and verb == "update":
        return _one_field(server, r, ns, info.name, sub, _body(), user)
    if sub == "eviction" and verb == "create":
        body = _body()
        options = DeleteOptions.parse(dict(request.args), body.get("deleteOptions"))
        eviction.admit_eviction(
            reg.get(r, ns, info.name),
            server.cached_list("poddisruptionbudgets.policy", ns),
            functools.partial(server.swap, "poddisruptionbudgets.policy"),
            dry_run=options.dry_run,
        )
        reg.delete(r, ns, info.name, options, user)
        return json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            },
            201,
        )
    if sub in ("log", "exec", "attach", "portforward", "proxy"):
        return server.kubelet_proxy(r, ns, info, user)
    raise errors.method_not_allowed(f"{verb} is not supported on {r.plural}/{sub}")


def _scale(server: APIServer, r: Resource, ns: str, info: RequestInfo, user: UserInfo) -> Response:
    reg, strategy = server.registry_for(r), for_resource(r)
    if info.verb == "get":
        return json_response(strategy.to_scale(reg.get(r, ns, info.name)))
    if info.verb not in ("update", "patch"):
        raise errors.method_not_allowed(f"{info.verb} is not supported on {r.plural}/scale")
    if info.verb == "update":
        wanted = _body()
    else:
        current = strategy.to_scale(reg.get(r, ns, info.name))
        # The read's resourceVersion is not the client's: a patch pins one only if it
        # sets it (a controller's status write meanwhile must not make it a 409).
        current["metadata"].pop("resourceVersion", None)
        media = (request.content_type or "").split(";")[0].strip()
        try:
            wanted = patch.apply_patch(
                "Scale",
                current,
                request.get_data(),
                patch.MERGE_PATCH if media == patch.STRATEGIC_MERGE_PATCH else media,
            )
        except patch.PatchError as exc:
            raise patch_error(exc) from None
    replicas = wanted.get("spec", {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid_object(
            "Scale",
            info.name,
            [errors.invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
            "autoscaling",
        )
    rv = str(wanted.get("metadata", {}).get("resourceVersion") or "")
    body = json.dumps(
        {"metadata": {"resourceVersion": rv} if rv else {}, **strategy.scale_patch(replicas)}
    ).encode()
    updated = reg.patch(
        r,
        ns,
        info.name,
        body,
        "application/merge-patch+json",
        user,
        dry_run=_dry_run(),
        manager=field_manager(),
    )
    return json_response(strategy.to_scale(updated))


def _bind(
    server: APIServer, r: Resource, ns: str, name: str, binding: Object, user: UserInfo
) -> Response:
    target = binding.get("target")
    node = target.get("name") if isinstance(target, dict) else None
    if not node or not isinstance(node, str):
        raise errors.invalid_object("Binding", name, [errors.required("target.name")])
    pod_name = binding.get("metadata", {}).get("name", name)
    if pod_name != name:
        raise errors.bad_request("the Binding's name must be the pod's name")

    def bind(old: Object) -> Object:
        if old.get("metadata", {}).get("deletionTimestamp"):
            raise errors.conflict(
                "pods", name, why="pod is being deleted, cannot be assigned a host"
            )
        if old.get("spec", {}).get("nodeName"):
            raise errors.conflict(
                "pods",
                name,
                why=(f'pod {name} is already assigned to node "{old["spec"]["nodeName"]}"'),
            )
        new = copy.deepcopy(old)
        new["spec"]["nodeName"] = node
        conditions = [
            c
            for c in new.setdefault("status", {}).get("conditions", [])
            if c.get("type") != "PodScheduled"
        ]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": now_rfc3339(),
                "lastProbeTime": None,
            }
        )
        new["status"]["conditions"] = conditions
        return new

    server.registry.update_with(r, ns, name, bind, user, "binding")
    return json_response(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
        201,
    )


def _token(server: APIServer, ns: str, name: str, request_body: Object) -> Response:
    sa_resource = lookup("", "v1", "serviceaccounts")
    assert sa_resource is not None
    account = server.registry.get(sa_resource, ns, name)
    spec = request_body.get("spec") or {}
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
        pod = server.registry.get(pods, ns, str(ref.get("name", "")))
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
    token, exp = server.issuer.issue(
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
            "metadata": {
                "name": name,
                "namespace": ns,
                "creationTimestamp": now_rfc3339(),
            },
            "spec": {**spec, "expirationSeconds": seconds},
            "status": {"token": token, "expirationTimestamp": expires},
        },
        201,
    )


def _one_field(
    server: APIServer, r: Resource, ns: str, name: str, sub: str, body: Object, user: UserInfo
) -> Response:
    """namespaces/finalize writes spec.finalizers; csr/approval writes status.conditions."""
    path = ("spec", "finalizers") if sub == "finalize" else ("status", "conditions")
    section = body.get(path[0])
    value = section.get(path[1], []) if isinstance(section, dict) else None
    if not isinstance(value, list):
        raise errors.bad_request(f"{'.'.join(path)} must be a list")
    patch_body = json.dumps({path[0]: {path[1]: value}}).encode()
    updated = server.registry.patch(
        r,
        ns,
        name,
        patch_body,
        "application/merge-patch+json",
        user,
        "status" if sub == "approval" else "",
        _dry_run(),
    )
    return json_response(updated)


# -- reviews -----------------------------------------------------------------------------


def virtual(server: APIServer, r: Resource, info: RequestInfo, user: UserInfo) -> Object:
    """Create-only resources that are answered, never stored."""
    if r.group == "metrics.k8s.io":
        if info.verb not in ("get", "list"):
            raise errors.method_not_allowed(f"{r.group_resource} is read-only")
        return server.resource_metrics(r, info.namespace, info.name)
    if info.verb != "create":
        raise errors.method_not_allowed(f"only create is supported on {r.group_resource}")
    body = _body()
    review = _REVIEWS.get(r.kind)
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
    "SelfSubjectAccessReview": _self_access_review,
    "SubjectAccessReview": _subject_access_review,
    "SelfSubjectRulesReview": _rules_review,
    "SelfSubjectReview": _self_subject_review,
    "TokenReview": _token_review,
}
