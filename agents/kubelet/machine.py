"""What the node is made of and how loaded it is: CPU, memory, pods, disk and PIDs, for the
Node's capacity and its pressure conditions.

`HostMachine` reads the machine the kubelet runs on (inside a node container: the
node's cgroup limit, when lower than the machine's memory). `FixedMachine` is a node
of stated size that is never under pressure: hollow nodes.
"""

from __future__ import annotations

import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

CGROUP_MEMORY = Path("/sys/fs/cgroup/memory")
CGROUP_CPU = Path("/sys/fs/cgroup/cpuacct")


@dataclass(frozen=True)
class Pressure:
    memory_available: int
    disk_available_fraction: float
    pids_used_fraction: float


@dataclass(frozen=True)
class NodeUsage:
    """Cumulative CPU (ns) and memory working set of the whole node, for /stats/summary."""

    cpu_usage_ns: int
    memory_working_set: int


class Machine(Protocol):
    def cpus(self) -> int: ...

    def memory(self) -> int: ...

    def ephemeral_storage(self) -> int: ...

    def pressure(self) -> Pressure: ...

    def usage(self) -> NodeUsage: ...

    def info(self) -> dict[str, str]:
        """nodeInfo's machine fields: machineID, systemUUID, bootID, kernelVersion,
        osImage, operatingSystem, architecture."""
        ...


def _read(path: Path, default: str = "") -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return default


def _meminfo() -> dict[str, int]:
    out = {}
    for line in _read(Path("/proc/meminfo")).splitlines():
        key, _, value = line.partition(":")
        out[key] = int(value.split()[0]) * 1024 if value.split() else 0
    return out


def _os_image() -> str:
    for line in _read(Path("/etc/os-release")).splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return "Linux"


def _arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


class HostMachine:
    """The machine (or node container) the kubelet runs on; `root_dir` is the kubelet's
    state directory, whose filesystem is the node's ephemeral storage."""

    def __init__(self, root_dir: Path) -> None:
        self.root_dir = root_dir

    def cpus(self) -> int:
        return len(os.sched_getaffinity(0))

    def memory(self) -> int:
        total = _meminfo().get("MemTotal", 0)
        limit = int(_read(CGROUP_MEMORY / "memory.limit_in_bytes", "0") or 0)
        return min(total, limit) if 0 < limit < total else total

    def _disk(self) -> shutil._ntuple_diskusage:
        path = self.root_dir if self.root_dir.exists() else Path("/")
        return shutil.disk_usage(path)

    def ephemeral_storage(self) -> int:
        return self._disk().total

    def usage(self) -> NodeUsage:
        cpu = int(_read(CGROUP_CPU / "cpuacct.usage", "0") or 0)
        usage = int(_read(CGROUP_MEMORY / "memory.usage_in_bytes", "0") or 0)
        inactive = 0
        for line in _read(CGROUP_MEMORY / "memory.stat").splitlines():
            if line.startswith("total_inactive_file "):
                inactive = int(line.split()[1])
        if not usage:
            info = _meminfo()
            usage = info.get("MemTotal", 0) - info.get("MemAvailable", 0)
        return NodeUsage(cpu, max(0, usage - inactive))

    def pressure(self) -> Pressure:
        disk = self._disk()
        pid_max = int(_read(Path("/proc/sys/kernel/pid_max"), "32768") or 32768)
        pids = sum(1 for p in os.listdir("/proc") if p.isdigit())
        available = _meminfo().get("MemAvailable", 0)
        return Pressure(
            memory_available=min(
                available, max(0, self.memory() - self.usage().memory_working_set)
            ),
            disk_available_fraction=disk.free / disk.total if disk.total else 1.0,
            pids_used_fraction=pids / pid_max,
        )

    def info(self) -> dict[str, str]:
        uname = os.uname()
        return {
            "machineID": _read(Path("/etc/machine-id")),
            "systemUUID": _read(Path("/sys/class/dmi/id/product_uuid")),
            "bootID": _read(Path("/proc/sys/kernel/random/boot_id")),
            "kernelVersion": uname.release,
            "osImage": _os_image(),
            "operatingSystem": "linux",
            "architecture": _arch(),
        }


@dataclass(frozen=True)
class FixedMachine:
    """A node of the stated size, never under pressure (hollow nodes)."""

    cpu_count: int = 4
    memory_bytes: int = 16 * 1024**3
    storage_bytes: int = 100 * 1024**3

    def cpus(self) -> int:
        return self.cpu_count

    def memory(self) -> int:
        return self.memory_bytes

    def ephemeral_storage(self) -> int:
        return self.storage_bytes

    def pressure(self) -> Pressure:
        return Pressure(self.memory_bytes, 1.0, 0.0)

    def usage(self) -> NodeUsage:
        return NodeUsage(0, 0)

    def info(self) -> dict[str, str]:
        return {
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kernelVersion": "hollow",
            "osImage": "kubelab hollow node",
            "operatingSystem": "linux",
            "architecture": "amd64",
        }
