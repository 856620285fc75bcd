"""The apiserver's calls to webhooks over HTTPS, shared by admission webhooks
(`admission.webhooks`, AdmissionReview) and CRD conversion webhooks (`conversion`,
ConversionReview): a WebhookClientConfig's ``url`` is called with ``?timeout=<n>s``,
trusting its ``caBundle`` (or the system's roots); ``service`` is refused, since the
apiserver has no route to cluster IPs until the pod network exists. Failures are
`CallError`s worded as Kubernetes words them ("failed to call webhook: ...",
"received invalid webhook response: ..."). Each call carries the current trace context
(`traceparent`), so a webhook that traces continues the request's trace.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import json
import ssl
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import propagate

Object = dict[str, Any]
_MAX_RESPONSE = 3 * 1024 * 1024


class CallError(Exception):
    """The webhook could not be called, or answered something that is not a review."""


def _tls_context(config: Object) -> ssl.SSLContext:
    bundle = config.get("caBundle")
    if not bundle:
        return ssl.create_default_context()
    try:
        pem = base64.b64decode(bundle, validate=True).decode()
        return ssl.create_default_context(cadata=pem)
    except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError) as exc:
        raise CallError(
            f"failed to call webhook: caBundle is not a base64 PEM bundle: {exc}"
        ) from None


def post(config: Object, review: Object, timeout: int) -> Object:
    """POST `review` to the webhook `config` (a WebhookClientConfig: url and caBundle)
    within `timeout` seconds; its JSON answer, or CallError in Kubernetes' words."""
    service = config.get("service")
    if service is not None:
        where = f"{service.get('namespace')}/{service.get('name')}"
        raise CallError(
            f"failed to call webhook: service {where}: webhooks behind a Service are not "
            "reachable yet (the apiserver has no route to cluster IPs until the pod "
            "network exists); give clientConfig.url instead"
        )
    url = str(config.get("url") or "")
    parts = urlsplit(url)
    target = f"{url}?timeout={timeout}s"
    connection = http.client.HTTPSConnection(
        parts.hostname or "", parts.port or 443, timeout=timeout, context=_tls_context(config)
    )
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    propagate.inject(headers)
    try:
        connection.request(
            "POST",
            f"{parts.path or '/'}?timeout={timeout}s",
            body=json.dumps(review).encode(),
            headers=headers,
        )
        reply = connection.getresponse()
        body = reply.read(_MAX_RESPONSE + 1)
    except TimeoutError:
        raise CallError(
            f'failed to call webhook: Post "{target}": context deadline exceeded'
        ) from None
    except (OSError, http.client.HTTPException) as exc:
        raise CallError(f'failed to call webhook: Post "{target}": {exc}') from None
    finally:
        connection.close()
    if reply.status != 200:
        raise CallError(
            f"received invalid webhook response: the server answered {reply.status} "
            f"{reply.reason}: {body[:200]!r}"
        )
    if len(body) > _MAX_RESPONSE:
        raise CallError("received invalid webhook response: larger than 3 MiB")
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise CallError(f"received invalid webhook response: not JSON: {exc}") from None
    if not isinstance(answer, dict):
        raise CallError("received invalid webhook response: not a JSON object")
    return answer


def review_response(answer: Object, api_version: str, kind: str, uid: str) -> Object:
    """The ``response`` of a webhook's review (an AdmissionReview, a ConversionReview),
    checked: the review's apiVersion and kind, and the request's `uid`."""
    if answer.get("apiVersion") != api_version or answer.get("kind") != kind:
        raise CallError(
            f"received invalid webhook response: expected apiVersion {api_version} "
            f"and kind {kind}, got {answer.get('apiVersion')}/{answer.get('kind')}"
        )
    response = answer.get("response")
    if not isinstance(response, dict):
        raise CallError("received invalid webhook response: no response")
    if response.get("uid") != uid:
        raise CallError(
            f"received invalid webhook response: expected response.uid={uid!r}, "
            f"got {response.get('uid')!r}"
        )
    return response
