"""The string ``format``s a CustomResourceDefinition's schema validates, as
kube-openapi's format registry (go-openapi's strfmt) checks them for apiextensions.

Kubernetes validates these formats and ignores any other (the JSONSchemaProps
reference lists them): ``bsonobjectid``, ``uri``, ``email``, ``hostname``, ``ipv4``,
``ipv6``, ``cidr``, ``mac``, ``uuid`` (and ``uuid3``, ``uuid4``, ``uuid5``), ``isbn``
(``isbn10``, ``isbn13``), ``creditcard``, ``ssn``, ``hexcolor``, ``rgbcolor``, ``byte``
(standard base64), ``password`` (anything), ``date`` (RFC 3339 full-date),
``duration`` and ``datetime``. A format is looked up with its dashes removed, as the
registry normalizes names, so ``date-time`` is ``datetime``. Numeric formats
(``int32``, ``int64``, ``float``, ``double``) are not checked: the registry applies to
strings only. Each check here follows the Go parser or regular expression the
registry uses, as far as Python's standard library allows (`ipaddress` for IPs and
CIDRs, `base64`, `datetime`).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import re
from collections.abc import Callable
from email.utils import parseaddr
from urllib.parse import urlsplit

_LABEL = r"[^\W_](?:[^\W_]|-){0,61}[^\W_]|[^\W_]"
_HOSTNAME = re.compile(rf"^(?:{_LABEL})(?:\.(?:{_LABEL}))*\.?$")
"""RFC 1034 host names, letters and digits of any script (as go-openapi allows)."""
_UUID = r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?%s[0-9a-f]{3}-?%s[0-9a-f]{3}-?[0-9a-f]{12}$"
_PATTERNS = {
    "bsonobjectid": r"^[0-9a-fA-F]{24}$",
    "uuid": r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
    "uuid3": _UUID % ("3", "[0-9a-f]"),
    "uuid4": _UUID % ("4", "[89ab]"),
    "uuid5": _UUID % ("5", "[89ab]"),
    "isbn10": r"^(?:[0-9]{9}X|[0-9]{10})$",
    "isbn13": r"^(?:(?:97(?:8|9))[0-9]{10})$",
    "creditcard": (
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|"
        r"3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$"
    ),
    "ssn": r"^\d{3}[- ]?\d{2}[- ]?\d{4}$",
    "hexcolor": r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$",
    "rgbcolor": (
        r"^rgb\(\s*\b([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\b\s*,\s*"
        r"\b([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\b\s*,\s*"
        r"\b([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\b\s*\)$"
    ),
    "mac": (
        r"^(?:[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){5}|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){7}|"
        r"[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){19}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){2}|"
        r"[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){3}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){9})$"
    ),
}
_DURATION = re.compile(
    r"^(\s*[-+]?\d+(\.\d+)?\s*(ns|us|µs|ms|s|m|h|d|w|"
    r"nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?))+\s*$"
)
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _ip(version: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return ipaddress.ip_address(value).version == version
        except ValueError:
            return False

    return check


def _cidr(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return "/" in value


def _uri(value: str) -> bool:
    """Go's url.ParseRequestURI: an absolute URI, or an absolute path."""
    if not value or any(c.isspace() for c in value):
        return False
    parts = urlsplit(value)
    return bool(parts.scheme) or value.startswith("/")


def _email(value: str) -> bool:
    _, address = parseaddr(value)
    local, at, domain = address.rpartition("@")
    return bool(at and local and domain)


def _byte(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _date(value: str) -> bool:
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return len(value) == 10


def _datetime(value: str) -> bool:
    if _DATETIME.match(value) is None:
        return False
    try:
        datetime.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _isbn(value: str) -> bool:
    compact = value.replace("-", "").replace(" ", "")
    return bool(re.match(_PATTERNS["isbn10"], compact) or re.match(_PATTERNS["isbn13"], compact))


def _pattern(name: str) -> Callable[[str], bool]:
    compiled = re.compile(_PATTERNS[name])
    return lambda value: compiled.match(value) is not None


CHECKS: dict[str, Callable[[str], bool]] = {
    **{name: _pattern(name) for name in _PATTERNS},
    "uri": _uri,
    "email": _email,
    "hostname": lambda value: len(value) <= 255 and _HOSTNAME.match(value) is not None,
    "ipv4": _ip(4),
    "ipv6": _ip(6),
    "cidr": _cidr,
    "isbn": _isbn,
    "byte": _byte,
    "password": lambda value: True,
    "date": _date,
    "duration": lambda value: _DURATION.match(value) is not None,
    "datetime": _datetime,
}


def valid(format_: str, value: str) -> bool:
    """Whether `value` is of `format_`; True for a format Kubernetes does not check."""
    check = CHECKS.get(format_.replace("-", "").lower())
    return check is None or check(value)
