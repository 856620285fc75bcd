"""Flag values spelled as Kubernetes' Go components take them (durations such as "15s"
or "1m30s", booleans such as "true" or "f"), for the argparse parsers of kubelab's
components that mirror their flags."""

from __future__ import annotations

import argparse
import re

_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_SECONDS_PER = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """A duration as Go writes it ("15s", "1m30s", "500ms"), in seconds."""
    if not _DURATION.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 15s or 1m30s")
    return sum(float(n) * _SECONDS_PER[unit] for n, unit in _DURATION_PART.findall(text))


def flag_bool(text: str) -> bool:
    """A boolean flag's value, spelled as Go's flag package accepts it."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")
