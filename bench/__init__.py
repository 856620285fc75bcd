"""Benchmarks that print their figures (recorded in docs/benchmarks.md), and what they
share: the CPU time a process has used, read from /proc."""

from __future__ import annotations

import os


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds process `pid` has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
