"""Benchmark: what a running lab costs at rest, per container and per process.

Issue 13's target is the idle 3+2 lab under 10 % of one core. This reads the CPU time
the kernel charged to each of the lab's containers (cgroup v1 `cpuacct.usage`, or v2
`cpu.stat`) over `--seconds`, and to each process in them (`/proc/<pid>/stat`; a node
container's processes include the pods' and the inner engine's, which live in nested
cgroups). CPU of processes that started and ended inside the window (a probe's
`iptables -C`, a `runc --version`) shows only in the container's figure; the difference
is printed beside it, since that is where a cost nobody sees hides. The processes are
then summed by program across the lab (the store members together, the shims together),
busiest first.

The trace collector's own figure is printed last: with tracing on (the lab's default),
the components' spans of the lab at rest (leases, health checks, status writes) reach
it; a lab with `tracing: false` in its cluster config has none, for comparison.

Run it against a lab `make up` brought up, with nothing else busy on the machine, a few
minutes after `make up` (the first minutes include image pulls and leader elections):

    python -m bench.idle [--prefix kubelab-kubelab] [--seconds 300] [--top 25]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import docker

from bench import process_stat
from lab.nodes import LAB_LABEL

CGROUP = Path("/sys/fs/cgroup")
COLLECTOR = "controlplane.collector"
"""The trace collector's program (its static pod runs `python -m controlplane.collector`)."""


@dataclass(frozen=True)
class Container:
    name: str
    cgroup: Path
    v2: bool

    def usage(self) -> float:
        """CPU seconds charged to the container so far (its nested cgroups included)."""
        if self.v2:
            for line in (self.cgroup / "cpu.stat").read_text().splitlines():
                key, value = line.split()
                if key == "usage_usec":
                    return int(value) / 1e6
            raise RuntimeError(f"no usage_usec in {self.cgroup}/cpu.stat")
        return int((self.cgroup / "cpuacct.usage").read_text()) / 1e9

    def pids(self) -> set[int]:
        """Every process in the container's cgroup and the cgroups nested in it."""
        found: set[int] = set()
        for procs in self.cgroup.rglob("cgroup.procs"):
            try:
                found.update(int(p) for p in procs.read_text().split())
            except OSError:  # a nested cgroup removed while we walked
                continue
        return found


def lab_containers(client: docker.DockerClient, prefix: str) -> list[Container]:
    """The lab's running containers with the cgroup the kernel accounts them in."""
    v2 = (CGROUP / "cgroup.controllers").exists()
    found = []
    for c in client.containers.list(filters={"label": f"{LAB_LABEL}={prefix}"}):
        name, cid = str(c.name), str(c.id)
        candidates = (
            [CGROUP / "system.slice" / f"docker-{cid}.scope", CGROUP / "docker" / cid]
            if v2
            else [CGROUP / "cpuacct" / "docker" / cid]
        )
        cgroup = next((p for p in candidates if p.exists()), None)
        if cgroup is None:
            tried = ", ".join(map(str, candidates))
            raise SystemExit(f"no cgroup found for {name} (tried {tried})")
        found.append(Container(name, cgroup, v2))
    return sorted(found, key=lambda c: c.name)


Process = tuple[int, int]
"""A process as (pid, start time in clock ticks): a pid reused within the window is
another process."""


def process_times(pids: set[int]) -> dict[Process, tuple[str, float]]:
    """Each live process's command line (shortened) and CPU seconds so far."""
    times = {}
    for pid in pids:
        try:
            seconds, started = process_stat(pid)
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # ended since the cgroup listed it
            continue
        times[(pid, started)] = (describe([a.decode(errors="replace") for a in argv if a]), seconds)
    return times


def describe(argv: list[str]) -> str:
    """`python -m agents.kubelet ...` as `agents.kubelet`; other programs by their name."""
    if not argv:
        return "?"
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1]
    return " ".join([Path(argv[0]).name, *argv[1:2]])[:60]


@dataclass(frozen=True)
class Sample:
    """One container's CPU over the window, % of one core."""

    container: str
    total: float
    processes: list[tuple[str, float]]
    """The processes alive at both ends of the window, busiest first."""
    started: int
    """Processes alive at the end that were not at the start."""

    @property
    def other(self) -> float:
        """CPU of processes not alive at both ends (started or ended in the window)."""
        return self.total - sum(percent for _, percent in self.processes)


def measure(containers: list[Container], seconds: float) -> list[Sample]:
    before = {c.name: (c.usage(), process_times(c.pids())) for c in containers}
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    samples = []
    for c in containers:
        usage, then = before[c.name]
        now = process_times(c.pids())
        seen = [
            (name, 100.0 * (spent - then[process][1]) / elapsed)
            for process, (name, spent) in now.items()
            if process in then
        ]
        samples.append(
            Sample(
                c.name,
                100.0 * (c.usage() - usage) / elapsed,
                sorted(seen, key=lambda s: -s[1]),
                len(set(now) - set(then)),
            )
        )
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", default="kubelab-kubelab", help="the lab's label value")
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--top", type=int, default=25, help="processes listed, busiest first")
    args = parser.parse_args()
    containers = lab_containers(docker.from_env(), args.prefix)
    if not containers:
        raise SystemExit(
            f"no running container labelled {LAB_LABEL}={args.prefix}: `make up` first"
        )
    print(
        f"{len(containers)} containers of {args.prefix}, {args.seconds:.0f} s at rest", flush=True
    )
    samples = measure(containers, args.seconds)
    for s in samples:
        print(
            f"  {s.container:<32} {s.total:6.2f} %  "
            f"(processes that started or ended meanwhile: {s.other:.2f} %; {s.started} still up)"
        )
    print(f"  {'in all':<32} {sum(s.total for s in samples):6.2f} % of one core")
    print(f"\nbusiest processes (% of one core over {args.seconds:.0f} s):")
    busiest = sorted(
        ((percent, s.container, name) for s in samples for name, percent in s.processes),
        reverse=True,
    )
    for percent, container, name in busiest[: args.top]:
        print(f"  {percent:5.2f} %  {container}: {name}")
    programs: dict[str, list[float]] = {}
    for s in samples:
        for name, percent in s.processes:
            programs.setdefault(name.split()[0], []).append(percent)
    print("\nby program, the lab's processes together:")
    for name, figures in sorted(programs.items(), key=lambda p: -sum(p[1]))[: args.top]:
        print(f"  {sum(figures):5.2f} %  {name} ({len(figures)} processes)")
    collector = programs.get(COLLECTOR)
    print(
        f"\nthe trace collector: {sum(collector):.2f} % of one core"
        if collector
        else "\nno trace collector (a lab with `tracing: false`)"
    )


if __name__ == "__main__":
    main()
