"""Benchmarks that print their figures (recorded in docs/benchmarks.md), and what they
share: the CPU time a process has used, read from /proc. The top layer: they may import
the lab, the components and the library; nothing imports them."""

from __future__ import annotations

import os


def process_stat(pid: int) -> tuple[float, int]:
    """User plus system CPU seconds process `pid` has used so far, and its start time
    (clock ticks since boot: with the pid, what tells a process from a later one that
    reused its pid). Raises OSError once the process is gone."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[19])


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds process `pid` has used so far."""
    return process_stat(pid)[0]
