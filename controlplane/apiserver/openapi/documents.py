"""A document as served: its encoded bytes and digest (URLs, ETags), built once under a
lock, and the HTTP answer with the caching headers kubectl's HTTP cache relies on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..discovery import Served

JSONDict = dict[str, Any]
JSON_CONTENT_TYPE = "application/json"

_lock = threading.RLock()
_T = TypeVar("_T")


def locked(build: Callable[[], _T]) -> Callable[[], _T]:
    """Build once, under a lock: parallel first requests wait instead of each spending a
    second building the same document."""
    cached = functools.cache(build)

    @functools.wraps(build)
    def once() -> _T:
        with _lock:
            return cached()

    return once


@dataclass(frozen=True)
class Encoded:
    """A document as sent, with the digest that names it in URLs and ETags."""

    body: bytes
    digest: str

    @classmethod
    def of(cls, body: bytes) -> Encoded:
        return cls(body, hashlib.sha512(body).hexdigest().upper())

    @classmethod
    def json(cls, doc: JSONDict) -> Encoded:
        return cls.of(json.dumps(doc, separators=(",", ":")).encode())


def cached_answer(
    doc: Encoded,
    content_type: str,
    if_none_match: str | None,
    cache: dict[str, str] | None = None,
) -> Served:
    """200, or 304 when the client's cached copy is current; kubectl keeps an HTTP cache
    of these documents and revalidates with If-None-Match. `cache` replaces the default
    "revalidate every time" caching headers."""
    etag = f'"{doc.digest}"'
    headers = {"Content-Type": content_type, "ETag": etag, "Vary": "Accept"}
    headers |= cache or {"Cache-Control": "no-cache, private"}
    if if_none_match and etag in (tag.strip() for tag in if_none_match.split(",")):
        return Served(304, b"", headers)
    return Served(200, doc.body, headers)
