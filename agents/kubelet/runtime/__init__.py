"""The kubelet's container runtime interface: what the pod workers, the PLEG and the HTTPS
server ask of a container engine, and nothing more (the role of Kubernetes' CRI).

Two implementations: `DockerRuntime` (`runtime.docker`, the Docker Engine API inside a
node: the seeds' "kubelet starts real containers") and `MemoryRuntime` (`runtime.memory`,
nothing runs: the hollow nodes of the scheduler benchmark, and the pod worker's unit
tests).

The model is CRI's: a pod is one *sandbox* (the pause container that owns the network
namespace, with the pod's IP) plus *containers* that join it. Every sandbox and container
carries labels naming its pod (namespace, name, uid) and, for a container, its name and
restart count, so that a kubelet that restarts adopts what it finds (the PLEG relists by
labels) instead of starting a second copy. A runtime only lists what belongs to its node
(`node` label), so that two kubelets sharing one engine never touch each other's pods.

Times are seconds since the epoch (floats); `None` means "not yet".
"""

from __future__ import annotations

import enum
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

# Labels on every sandbox and container (the names dockershim used).
POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_UID = "io.kubernetes.pod.uid"
CONTAINER_NAME = "io.kubernetes.container.name"
NODE = "kubelab.io/node"
"""The kubelet (node name) that owns the object."""


class RuntimeFailure(Exception):
    """The engine refused or failed an operation; the message says which and why."""


class ImageNotFound(RuntimeFailure):
    """The image is neither present nor pullable."""


class RegistryUnreachable(ImageNotFound):
    """No registry that could hold the image answered (a lab's network has no way out):
    the image is not in the lab, which is for the user to fix, not a pull to retry."""


class NotFound(RuntimeFailure):
    """No sandbox or container with that id (any more)."""


class State(enum.StrEnum):
    CREATED = "created"
    RUNNING = "running"
    EXITED = "exited"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    def labels(self) -> dict[str, str]:
        """The labels naming this pod (the runtime adds the `NODE` label itself)."""
        return {POD_NAMESPACE: self.namespace, POD_NAME: self.name, POD_UID: self.uid}


@dataclass(frozen=True)
class Mount:
    host_path: str
    container_path: str
    read_only: bool = False


@dataclass(frozen=True)
class SandboxConfig:
    pod: PodRef
    attempt: int
    hostname: str
    labels: dict[str, str]
    host_network: bool = False
    cgroup_parent: str = ""


@dataclass(frozen=True)
class Resources:
    """A container's cgroup limits, computed from requests and limits (see `resources`)."""

    cpu_shares: int = 2
    cpu_quota: int = 0
    """Microseconds per `cpu_period`; 0: unlimited."""
    cpu_period: int = 100_000
    memory_limit: int = 0
    """Bytes; 0: unlimited."""


@dataclass(frozen=True)
class ContainerConfig:
    name: str
    attempt: int
    image: str
    labels: dict[str, str]
    command: tuple[str, ...] = ()
    """Replaces the image's entrypoint when not empty."""
    args: tuple[str, ...] = ()
    """Replaces the image's command when not empty (or when `command` is given)."""
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str = ""
    mounts: tuple[Mount, ...] = ()
    tmpfs: tuple[str, ...] = ()
    user: str = ""
    cap_add: tuple[str, ...] = ()
    cap_drop: tuple[str, ...] = ()
    read_only_rootfs: bool = False
    tty: bool = False
    stdin: bool = False
    stdin_once: bool = False
    """The container's stdin closes when the first attached client detaches."""
    resources: Resources = field(default_factory=Resources)
    cgroup_parent: str = ""


@dataclass(frozen=True)
class SandboxStatus:
    id: str
    pod: PodRef
    attempt: int
    ready: bool
    ip: str
    created_at: float
    labels: dict[str, str]


@dataclass(frozen=True)
class ContainerStatus:
    id: str
    sandbox_id: str
    name: str
    attempt: int
    image: str
    image_id: str
    state: State
    labels: dict[str, str]
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    reason: str = ""
    """For an exited container: Completed, Error or OOMKilled (Kubernetes' reasons)."""
    message: str = ""

    @property
    def pod_uid(self) -> str:
        return self.labels.get(POD_UID, "")


@dataclass(frozen=True)
class ImageInfo:
    ref: str
    id: str
    size: int = 0


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: bytes


@dataclass(frozen=True)
class Usage:
    """Cumulative CPU and current memory of one container (or the node)."""

    cpu_usage_ns: int
    memory_working_set: int
    memory_usage: int
    time: float


@dataclass(frozen=True)
class Event:
    """Something happened to a container or sandbox (a hint: the PLEG relists)."""

    container_id: str
    pod_uid: str
    action: str
    at: float = 0.0
    """When it happened (epoch seconds); 0: unknown."""


class ExecSession(Protocol):
    """A running interactive command: bytes in (stdin), bytes out, its exit code."""

    def write(self, data: bytes) -> None: ...

    def close_stdin(self) -> None: ...

    def read(self) -> tuple[int, bytes]:
        """The next chunk and its stream (1 stdout, 2 stderr); (0, b"") at the end."""
        ...

    def resize(self, width: int, height: int) -> None: ...

    def exit_code(self) -> int: ...

    def close(self) -> None: ...


class Runtime(Protocol):
    """A container engine, as the kubelet uses it (module docstring)."""

    node: str
    name: str
    """"docker", "memory": nodeInfo's containerRuntimeVersion is `<name>://<version>`."""

    def ping(self) -> None:
        """Raise when the engine cannot be reached; cheap enough for every status check."""
        ...

    def version(self) -> str: ...

    # -- sandboxes -----------------------------------------------------------------------
    def run_sandbox(self, config: SandboxConfig) -> SandboxStatus:
        """Start the sandbox; its status (IP included), as CRI's RunPodSandbox followed
        by PodSandboxStatus, so that the caller needs no relist to go on."""
        ...

    def stop_sandbox(self, sandbox_id: str) -> None: ...

    def remove_sandbox(self, sandbox_id: str) -> None: ...

    def list_sandboxes(self) -> list[SandboxStatus]: ...

    # -- containers ----------------------------------------------------------------------
    def create_container(self, sandbox_id: str, config: ContainerConfig) -> str: ...

    def start_container(self, container_id: str) -> None: ...

    def stop_container(self, container_id: str, timeout: float) -> None:
        """SIGTERM, then SIGKILL after `timeout` seconds."""
        ...

    def remove_container(self, container_id: str) -> None: ...

    def list_containers(self) -> list[ContainerStatus]: ...

    # -- images --------------------------------------------------------------------------
    def image_status(self, image: str) -> ImageInfo | None: ...

    def pull_image(self, image: str) -> ImageInfo: ...

    # -- logs, exec, stats, events -------------------------------------------------------
    def logs(
        self,
        container_id: str,
        *,
        follow: bool = False,
        tail: int | None = None,
        since: float | None = None,
        timestamps: bool = False,
    ) -> Iterator[bytes]: ...

    def exec_sync(self, container_id: str, command: list[str], timeout: float) -> ExecResult:
        """Run a command to completion (exec probes); raises TimeoutError after `timeout`."""
        ...

    def exec_stream(
        self, container_id: str, command: list[str], *, tty: bool, stdin: bool
    ) -> ExecSession: ...

    def attach(self, container_id: str, *, tty: bool, stdin: bool) -> ExecSession:
        """The running container's own stdio (`kubectl attach`); the exit code is the
        container's once it has stopped."""
        ...

    def port_forward(self, sandbox_id: str, port: int) -> socket.socket:
        """A TCP connection to `port` on the pod's own localhost, made inside its network
        namespace (`kubectl port-forward`), so that it reaches a port nothing publishes."""
        ...

    def stats(self, container_id: str) -> Usage | None: ...

    def events(self, stop_after: float) -> Iterator[Event]:
        """Events as they happen, for at most `stop_after` seconds."""
        ...
