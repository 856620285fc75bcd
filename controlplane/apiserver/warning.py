"""Warnings for the client: the ``Warning`` headers of one request's answer, which
kubectl prints ("Warning: ...") and the official clients log.

Kubernetes' apiserver lets any part of a request's handling add a warning to its
context (``k8s.io/apiserver/pkg/warning``): field validation under ``fieldValidation=
Warn``, deprecated APIs, and the ``warnings`` of admission webhooks' AdmissionReview
responses, which is what this module carries (field validation keeps its own record,
`fieldvalidation.Check`, since it also decides between a 400 and warnings). The
recorder travels in a context variable (per greenlet under gevent, per thread
elsewhere), like field validation's, so that admission, which knows nothing of HTTP,
can add to it. A warning given twice is sent once, as Kubernetes' recorder dedupes;
each is written as RFC 7234 warn-code 299 ("miscellaneous persistent warning") with
agent "-", and control characters are replaced by spaces, as Kubernetes sanitizes
what webhooks send.
"""

from __future__ import annotations

import contextvars
import json

_current: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "kubelab_warnings", default=None
)


def begin() -> None:
    """Start recording the warnings of a request."""
    _current.set([])


def add(text: str) -> None:
    """Warn the client of the current request (outside a request: nothing to do)."""
    recorded = _current.get()
    text = "".join(c if c.isprintable() else " " for c in str(text)).strip()
    if recorded is not None and text and text not in recorded:
        recorded.append(text)


def take() -> list[str]:
    """The warnings recorded for the request; it records no more."""
    recorded = _current.get() or []
    _current.set(None)
    return recorded


def header(text: str) -> str:
    """A ``Warning`` header's value, as Kubernetes writes it; kubectl prints `text`."""
    return f"299 - {json.dumps(text)}"
