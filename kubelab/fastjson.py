"""JSON for the hot paths (stored objects, responses, watch events, the store client),
by orjson.

The standard library's json was a tenth of the apiserver's CPU per pod create: every
object is encoded for the store, decoded from the store's watch, and encoded again for
the client. orjson does the same work several times faster. It differs from json in two
ways that matter here, both handled:

* it refuses to encode integers beyond 64 bits, which only user input can carry
  (``json.loads`` keeps them exact): the standard library's encoder takes those objects;
* it decodes such integers as floats, so request bodies are still parsed by the
  standard library (`kubelab.api` and the apiserver's body decoding), and `loads` here
  is for data this project encoded.

Both raise ``ValueError`` subclasses on malformed input, so callers' error handling
does not change.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import orjson

_T = TypeVar("_T")


def dumps(obj: Any) -> bytes:
    """Compact JSON (UTF-8) of `obj`, keys in insertion order."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


_GO_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def dumps_as_go(obj: Any) -> bytes:
    """`dumps(obj)` with the escapes Go's encoding/json adds, so that a body is byte for
    byte what kube-apiserver writes: "<", ">" and "&" (escaped so that JSON is safe
    inside HTML) and the line separators U+2028 and U+2029 become \\u escapes. Those
    characters can only stand inside strings in compact JSON, so replacing them in the
    encoded bytes is exact, and the scans cost next to nothing beside the encoding."""
    data = dumps(obj)
    for raw, escaped in _GO_ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The value `data` encodes; ``ValueError`` (``orjson.JSONDecodeError``) if it is not
    JSON."""
    return orjson.loads(data)


def copy(obj: _T) -> _T:
    """A deep copy of a JSON value (dicts, lists, strings, numbers, booleans, None): the
    fastest deep copy for such values, and one that shares nothing with `obj`."""
    try:
        return orjson.loads(orjson.dumps(obj))  # type: ignore[no-any-return]
    except TypeError:
        return json.loads(json.dumps(obj))  # type: ignore[no-any-return]
