"""What kubelab's command-line tools share when they print: etcdctl's ASCII tables and
sizes, bytes written as stored, and the exit codes.

`labctl` (talks to a running store) and `labutl` (works on a member's files offline,
`controlplane.store.labutl`) both print like etcdctl/etcdutl, so their output is laid
out by the same helpers.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # the shell's convention for a SIGINT (Ctrl-C)


class CommandError(Exception):
    """Input that parses but cannot be used (an ID that is not hex, a bad txn line)."""


def emit(*lines: bytes | str) -> None:
    """Write lines to stdout as bytes: keys and values are printed as stored, like etcdctl."""
    out = sys.stdout
    out.flush()
    for line in lines:
        out.buffer.write((line.encode() if isinstance(line, str) else line) + b"\n")
    out.buffer.flush()


def ascii_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An ASCII table laid out like etcdctl's: centred headings, right-aligned cells."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def centred(text: str, width: int) -> str:
        left = (width - len(text)) // 2
        return " " * left + text + " " * (width - len(text) - left)

    head = "|" + "|".join(f" {centred(h, w)} " for h, w in zip(header, widths, strict=True))
    body = [
        "|" + "|".join(f" {c:>{w}} " for c, w in zip(row, widths, strict=True)) + "|"
        for row in rows
    ]
    return "\n".join([rule, head + "|", rule, *body, rule])


def human_bytes(n: int) -> str:
    """Sizes as etcdctl prints them (go-humanize: SI units, "438 kB", "1.2 MB")."""
    if n < 10:
        return f"{n} B"
    units = ["B", "kB", "MB", "GB", "TB", "PB", "EB"]
    exp = min(int(math.log(n, 1000)), len(units) - 1)
    val = math.floor(n / 1000**exp * 10 + 0.5) / 10
    return f"{val:.0f} {units[exp]}" if val >= 10 else f"{val:.1f} {units[exp]}"
