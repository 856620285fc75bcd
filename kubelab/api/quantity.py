"""Kubernetes resource quantities ("100m", "1.5Gi", "2e3"), exact and printed the way
the real API prints them.

Requests, limits, quotas and capacities are quantities. A controller that compares a
request with a limit, or the scheduler that sums requests on a node, must never go
through a float: `Quantity` keeps the value as an exact `Fraction`. Parsing follows
apimachinery's scanner character for character (so the same strings are accepted and
rejected, with the same messages), values are rounded up to whole nanos as Kubernetes
does, and `str()` gives the canonical form an apiserver stores and `kubectl` shows:
"1000m" -> "1", "0.5" -> "500m", "1.5Gi" -> "1536Mi", "12e4" -> "120e3".
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

FORMAT_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
SUFFIX_ERROR = "unable to parse quantity's suffix"

_DIGITS = "0123456789"
_SUFFIX_LETTERS = "eEinumkKMGTP"
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_SUFFIXES |= {"P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_EXPONENT = re.compile(r"[+-]?[0-9]+")
# Exponents past this are refused rather than computed: 10**999999999 would stall the
# apiserver, and no resource is counted in numbers with a thousand digits.
_MAX_EXPONENT = 1000
_NANO = 10**9
# BinarySI values are capped at the largest int64, as apimachinery caps them.
_MAX_BINARY = Fraction(2**63 - 1)


class QuantityFormat(StrEnum):
    """Which family of suffix a quantity was written with; it is kept for printing."""

    DECIMAL_SI = "DecimalSI"  # 12M, 100m, 5
    BINARY_SI = "BinarySI"  # 12Mi
    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6


@functools.total_ordering
@dataclass(frozen=True, eq=False)
class Quantity:
    """An exact quantity; equal values compare equal whatever their suffix ("1Ki" == "1024")."""

    value: Fraction
    format: QuantityFormat = QuantityFormat.DECIMAL_SI

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value == other.value

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return _canonical(self.value, self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def is_integer(self) -> bool:
        return self.value.denominator == 1

    def rounded_up(self, scale: int) -> Quantity:
        """The value rounded away from zero to a multiple of 10**scale (scale -3: whole
        millis), as the API rounds resource lists when it defaults them."""
        unit = Fraction(10) ** scale
        units = self.value / unit
        if units.denominator == 1:
            return self
        whole = units.numerator // units.denominator
        whole = whole + 1 if units > 0 else whole
        return Quantity(whole * unit, self.format)


def parse_quantity(text: str | int | float) -> Quantity:
    """Parse a quantity as apimachinery does; numbers are accepted as JSON allows them.

    Raises ValueError with Kubernetes' own message ("quantities must match the regular
    expression ..." or "unable to parse quantity's suffix")."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(FORMAT_ERROR)
    return _parse(str(text).strip())


@functools.lru_cache(maxsize=4096)
def _parse(source: str) -> Quantity:
    """`parse_quantity` of a string. Cached: the same few requests and limits are parsed
    on every pod create (validation, LimitRanger, ResourceQuota), and exact fractions
    are slow to build."""
    if not source:
        raise ValueError(FORMAT_ERROR)
    negative, whole, fraction, suffix = _scan(source)
    base, exponent, fmt = _interpret(suffix)
    try:
        digits = int(whole + fraction)
    except ValueError:  # more digits than Python converts at once: no real quantity
        raise ValueError(FORMAT_ERROR) from None
    magnitude = Fraction(digits, 10 ** len(fraction)) * Fraction(base) ** exponent
    nanos = magnitude * _NANO
    if nanos.denominator != 1:
        # Round up to the next nano: asking for a sliver of a resource still gets some.
        nanos = Fraction(nanos.numerator // nanos.denominator + 1)
    magnitude = nanos / _NANO
    if fmt is QuantityFormat.BINARY_SI:
        magnitude = min(magnitude, _MAX_BINARY)
        if 0 < magnitude < 1:
            fmt = QuantityFormat.DECIMAL_SI
    return Quantity(-magnitude if negative else magnitude, fmt)


def canonical(text: str | int | float) -> str:
    """The canonical spelling of a quantity: canonical("1000m") == "1"."""
    return str(parse_quantity(text))


def _scan(text: str) -> tuple[bool, str, str, str]:
    """Split "-1.5Gi" into (negative, "1", "5", "Gi"), mirroring apimachinery's scanner,
    which is stricter than the regular expression it quotes in its error."""
    pos, end = 0, len(text)
    negative = False
    if text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos == end:
        return negative, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos] or "0"
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise ValueError(FORMAT_ERROR)
    return negative, whole, fraction, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, QuantityFormat]:
    """(base, exponent, format) of a suffix: "Mi" -> (2, 20, BinarySI)."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], QuantityFormat.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], QuantityFormat.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT.fullmatch(suffix[1:]):
        exponent = int(suffix[1:])
        if exponent > _MAX_EXPONENT:
            raise ValueError(SUFFIX_ERROR)
        # Anything smaller than a nano rounds up to 1n (or stays 0) either way.
        return 10, max(exponent, -_MAX_EXPONENT), QuantityFormat.DECIMAL_EXPONENT
    raise ValueError(SUFFIX_ERROR)


def _canonical(value: Fraction, fmt: QuantityFormat) -> str:
    """Largest suffix that loses no precision and leaves no fractional digits."""
    if value == 0:
        return "0"
    if fmt is QuantityFormat.BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
        # Small or fractional binary values would need rounding: print them as decimal.
        fmt = QuantityFormat.DECIMAL_SI
    if fmt is QuantityFormat.BINARY_SI:
        number, exponent = int(value), 0
        while number % 1024 == 0:
            number //= 1024
            exponent += 10
        return f"{number}{_suffix_for(2, exponent)}"
    mantissa, exponent = int(value * _NANO), -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt is QuantityFormat.DECIMAL_SI and exponent <= _DECIMAL_SUFFIXES["E"]:
        return f"{mantissa}{_suffix_for(10, exponent)}"
    return f"{mantissa}e{exponent}" if exponent else str(mantissa)


def _suffix_for(base: int, exponent: int) -> str:
    table = {"": 0} | _BINARY_SUFFIXES if base == 2 else _DECIMAL_SUFFIXES
    return next(suffix for suffix, power in table.items() if power == exponent)
