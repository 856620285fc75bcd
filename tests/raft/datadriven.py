"""A minimal data-driven test file format, after cockroachdb/datadriven.

A file is a sequence of test cases:

    # comments and blank lines between cases are kept as they are
    command arg key=value key=(1,2,3)
    ----
    expected output line
    expected output line

The expected output ends at the first blank line (so output never contains one). Running
with `--rewrite` replaces every expected output with the actual one, so a behaviour
change is reviewed as a diff of the transcript.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SEPARATOR = "----"


@dataclass
class TestCase:
    pos: str
    command: str
    args: list[str] = field(default_factory=list)
    kwargs: dict[str, list[str]] = field(default_factory=dict)
    input_line: str = ""

    def arg_int(self, i: int) -> int:
        return int(self.args[i])

    def ids(self) -> list[int]:
        return [int(a) for a in self.args]

    def kw_ints(self, key: str, default: list[int] | None = None) -> list[int]:
        if key not in self.kwargs:
            return list(default or [])
        return [int(v) for v in self.kwargs[key]]

    def kw_int(self, key: str, default: int) -> int:
        vals = self.kwargs.get(key)
        return int(vals[0]) if vals else default


_KV = re.compile(r"^([a-zA-Z_-]+)=(?:\((.*)\)|(.*))$")


def parse_command(line: str, pos: str) -> TestCase:
    parts = shlex.split(line)
    tc = TestCase(pos=pos, command=parts[0], input_line=line)
    for p in parts[1:]:
        m = _KV.match(p)
        if m:
            raw = m.group(2) if m.group(2) is not None else m.group(3)
            tc.kwargs[m.group(1)] = [v.strip() for v in raw.split(",") if v.strip()]
        else:
            tc.args.append(p)
    return tc


def run_file(path: Path, run: Callable[[TestCase], str], rewrite: bool) -> list[str]:
    """Run every case in `path`; return a list of mismatch reports (empty = pass)."""
    lines = path.read_text().splitlines()
    out: list[str] = []
    failures: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            out.append(line)
            i += 1
            continue
        pos = f"{path.name}:{i + 1}"
        tc = parse_command(line, pos)
        out.append(line)
        i += 1
        if i >= len(lines) or lines[i] != SEPARATOR:
            raise ValueError(f"{pos}: expected '{SEPARATOR}' after the command")
        out.append(SEPARATOR)
        i += 1
        expected: list[str] = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        actual = run(tc).rstrip("\n")
        actual_lines = actual.splitlines() if actual else ["ok"]
        out.extend(actual_lines)
        if actual_lines != expected and not rewrite:
            failures.append(
                f"{pos}: {line}\n--- expected\n"
                + "\n".join(expected)
                + "\n--- actual\n"
                + "\n".join(actual_lines)
            )
    if rewrite:
        path.write_text("\n".join(out) + "\n")
    return failures
