"""Content negotiation for resource requests: which form of the objects to answer with.

A client names in ``Accept`` the forms it can read, most preferred first, and the first
one this apiserver can produce wins:

* the object itself, as JSON (``application/json``, or a wildcard);
* a ``meta.k8s.io`` Table (``application/json;as=Table;g=meta.k8s.io;v=v1``): what
  ``kubectl get`` prints (see `tables`);
* metadata only (``as=PartialObjectMetadata`` for a get or a watch,
  ``as=PartialObjectMetadataList`` for a list, ``g=meta.k8s.io;v=v1``): what
  client-go's metadata informers ask for (the garbage collector, the namespace and quota
  controllers), so they need not hold every object's spec and status.

Nothing but JSON is encoded here. A client that accepts only forms this server cannot
produce (``application/vnd.kubernetes.protobuf`` alone, or metadata-only for the wrong
shape) gets kube-apiserver's 406 NotAcceptable rather than a body it cannot decode;
clients that send protobuf first list JSON as their fallback, which is then used.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from kubelab.api.errors import StatusError

from .discovery import MediaRange, not_acceptable, parse_accept

META_API_VERSION = "meta.k8s.io/v1"
_JSON = "application/json"


class Form(Enum):
    OBJECT = "object"
    TABLE = "Table"
    PARTIAL = "PartialObjectMetadata"


def _form(entry: MediaRange, verb: str) -> Form | None:
    """The form this entry asks for, if it is one served for `verb`; None otherwise."""
    if not entry.covers("application", "json"):
        return None
    wanted = entry.params.get("as")
    if wanted is None:
        return Form.OBJECT
    group, version = entry.params.get("g"), entry.params.get("v")
    if group != "meta.k8s.io":
        return None
    if wanted == "Table" and version in ("v1", "v1beta1") and verb in ("get", "list", "watch"):
        return Form.TABLE
    if version != "v1":
        return None
    if wanted == "PartialObjectMetadata" and verb in ("get", "watch"):
        return Form.PARTIAL
    if wanted == "PartialObjectMetadataList" and verb == "list":
        return Form.PARTIAL
    return None


def negotiate(accept: str | None, verb: str) -> Form:
    """The form to answer a read (`verb` get, list or watch) with, or the 406 when no
    entry of `accept` can be produced. Writes answer the object whatever was asked: the
    protobuf-speaking clients that write (kubectl's typed commands) read JSON answers
    by their Content-Type."""
    if verb not in ("get", "list", "watch"):
        return Form.OBJECT
    entries = parse_accept(accept)
    for entry in entries:
        form = _form(entry, verb)
        if form is not None:
            return form
    asked = sorted({entry.params["as"] for entry in entries if entry.params.get("as")})
    if not asked:
        raise not_acceptable([_JSON])
    shape = "PartialObjectMetadataList" if verb == "list" else "PartialObjectMetadata"
    raise StatusError(
        406,
        "NotAcceptable",
        f"cannot answer a {verb} as {', '.join(asked)}: accepted are {_JSON}, or "
        f"{_JSON};as=Table;g=meta.k8s.io;v=v1, or {_JSON};as={shape};g=meta.k8s.io;v=v1",
    )


def partial_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object's metadata as a PartialObjectMetadata."""
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": META_API_VERSION,
        "metadata": obj.get("metadata", {}),
    }


def partial_list(listed: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": META_API_VERSION,
        "metadata": listed.get("metadata", {}),
        "items": [partial_object(item) for item in listed.get("items", [])],
    }
