"""CRD conversion webhooks: a CustomResourceDefinition with several versions and
``spec.conversion.strategy: Webhook`` has its objects converted between the storage
version and the version a client asked for by the CRD's webhook, over HTTPS with the
``apiextensions.k8s.io/v1`` ConversionReview protocol (as Kubernetes' apiextensions
apiserver does; with strategy ``None`` only ``apiVersion`` changes, `crds`).

The call: POST of a ConversionReview whose ``request`` has a ``uid``, the
``desiredAPIVersion`` and the ``objects`` to convert, to
``spec.conversion.webhook.clientConfig`` (``url``, trusting ``caBundle``; the shared
`webhookclient`), within 30 s. The answer's ``response`` must carry the request's
``uid``, ``result.status: Success`` and one converted object per object sent, each in
the desired version and of the same kind. As Kubernetes does, only the labels and
annotations of a converted object's metadata are taken from the webhook; the rest of
the metadata (name, uid, resourceVersion, ...) is the original's. An object already in
the desired version is not sent.

A failure (the webhook unreachable, ``result.status: Failure``, an answer that breaks
the rules above) fails the request with a 500 in Kubernetes' words: ``conversion
webhook for <group>/<version>, Kind=<kind> failed: <why>``.

Departure: objects are sent one per review (a list converts each item in its own call;
Kubernetes sends a list in one review).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from kubelab.api import errors

from .webhookclient import CallError, post, review_response

log = logging.getLogger("kubelab.apiserver.conversion")

Object = dict[str, Any]
REVIEW_API_VERSION = "apiextensions.k8s.io/v1"
TIMEOUT_SECONDS = 30


def uses_webhook(crd: Object) -> bool:
    return ((crd.get("spec") or {}).get("conversion") or {}).get("strategy") == "Webhook"


def webhook_converter(crd: Object, desired: str) -> Callable[[Object], Object]:
    """The conversion of an object of `crd` to the apiVersion `desired`, by its webhook."""
    webhook = ((crd.get("spec") or {}).get("conversion") or {}).get("webhook") or {}
    client_config = webhook.get("clientConfig") or {}

    def convert(obj: Object) -> Object:
        if obj.get("apiVersion") == desired:
            return obj
        what = f"{obj.get('apiVersion')}, Kind={obj.get('kind')}"
        try:
            return _converted(obj, desired, client_config)
        except CallError as exc:
            log.warning("conversion: %s %s to %s failed: %s", what, _name(obj), desired, exc)
            raise errors.internal_error(f"conversion webhook for {what} failed: {exc}") from None

    return convert


def _name(obj: Object) -> str:
    meta = obj.get("metadata") or {}
    return "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)


def _converted(obj: Object, desired: str, client_config: Object) -> Object:
    uid = str(uuid.uuid4())
    review = {
        "apiVersion": REVIEW_API_VERSION,
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [obj]},
    }
    answer = post(client_config, review, TIMEOUT_SECONDS)
    response = review_response(answer, REVIEW_API_VERSION, "ConversionReview", uid)
    result = response.get("result") or {}
    if result.get("status") != "Success":
        raise CallError(str(result.get("message") or "the webhook did not report success"))
    converted = response.get("convertedObjects")
    if not isinstance(converted, list) or len(converted) != 1:
        raise CallError(
            "expected 1 converted object, got "
            f"{len(converted) if isinstance(converted, list) else 'none'}"
        )
    out = converted[0]
    if not isinstance(out, dict):
        raise CallError("the converted object is not an object")
    if out.get("apiVersion") != desired:
        raise CallError(
            f"invalid converted object: apiVersion {out.get('apiVersion')!r}, expected {desired!r}"
        )
    if out.get("kind") != obj.get("kind"):
        raise CallError(
            f"invalid converted object: kind {out.get('kind')!r}, expected {obj.get('kind')!r}"
        )
    meta = dict(obj.get("metadata") or {})
    new_meta = out.get("metadata") or {}
    for key in ("labels", "annotations"):
        if new_meta.get(key):
            meta[key] = new_meta[key]
        else:
            meta.pop(key, None)
    return {**out, "metadata": meta}
