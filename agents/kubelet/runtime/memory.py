"""`MemoryRuntime`: a container runtime where nothing runs, for hollow nodes (kubemark's
idea: the scheduler benchmark hosts hundreds of kubelets in one process) and for the pod
worker's tests against the real apiserver.

Per node it costs a few dicts and one condition variable: no thread, no timer. A
container's life is decided when it starts, by `behaviour(config)`: how long it runs and
with what exit code (None: until stopped). `script_behaviour`, the default, reads the
command the way a shell would for the few forms the seeds' workloads use (`echo ...`,
`sleep N`, `exit N`, `true`, `false`, statements joined by `;` or `&&`), so the seeds'
busybox pod completes and its log holds the echoed line; anything else runs until
stopped. Exited states are computed when listed, against the clock, and `events()` wakes
up when the next container is due to exit, so the PLEG sees it on time.

Tests steer it further: `crash(container_id, code, reason)` ends a running container
(OOMKilled too), `exec_handler` answers exec probes, `unpullable` lists images whose pull
fails as a registry without them answers, `unreachable` those whose pull finds no registry
(an offline lab's).
"""

from __future__ import annotations

import itertools
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from agents.kubelet.runtime import (
    NODE,
    POD_UID,
    ContainerConfig,
    ContainerStatus,
    Event,
    ExecResult,
    ExecSession,
    ImageInfo,
    ImageNotFound,
    NotFound,
    RegistryUnreachable,
    RuntimeFailure,
    SandboxConfig,
    SandboxStatus,
    State,
    Usage,
)


@dataclass(frozen=True)
class Life:
    """What a started container does: runs `seconds` (None: until stopped), then exits
    with `exit_code`, having written `output` to its log."""

    seconds: float | None
    exit_code: int = 0
    output: bytes = b""


Behaviour = Callable[[ContainerConfig], Life]
ExecHandler = Callable[[ContainerStatus, list[str]], ExecResult]


def script_behaviour(config: ContainerConfig) -> Life:
    """The life of a container running `config`'s command (module docstring)."""
    argv = list(config.command) + list(config.args)
    if len(argv) >= 3 and argv[0].endswith("sh") and argv[1] == "-c":
        script = argv[2]
    elif argv:
        script = shlex.join(argv)
    else:
        return Life(None)
    output = b""
    seconds = 0.0
    for statement in script.replace("&&", ";").replace("\n", ";").split(";"):
        try:
            words = shlex.split(statement)
        except ValueError:
            return Life(None)
        if not words:
            continue
        verb, rest = words[0].rsplit("/", 1)[-1], words[1:]
        if verb == "echo":
            output += (" ".join(rest) + "\n").encode()
        elif verb == "true":
            continue
        elif verb == "false":
            return Life(seconds, 1, output)
        elif verb == "exit":
            return Life(seconds, int(rest[0]) if rest and rest[0].isdigit() else 0, output)
        elif verb == "sleep" and rest and rest[0].replace(".", "", 1).isdigit():
            seconds += float(rest[0])
        else:
            return Life(None, 0, output)
    return Life(seconds, 0, output)


def _ok(_container: ContainerStatus, _command: list[str]) -> ExecResult:
    return ExecResult(0, b"")


@dataclass
class _Container:
    status: ContainerStatus
    config: ContainerConfig
    life: Life = field(default_factory=lambda: Life(None))


class MemoryRuntime:
    """An in-memory `Runtime` for node `node` (module docstring)."""

    name = "memory"

    def __init__(
        self,
        node: str,
        *,
        behaviour: Behaviour = script_behaviour,
        exec_handler: ExecHandler = _ok,
        unpullable: frozenset[str] = frozenset(),
        unreachable: frozenset[str] = frozenset(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.node = node
        self.behaviour = behaviour
        self.exec_handler = exec_handler
        self.unpullable = unpullable
        self.unreachable = unreachable
        self._now = clock
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._sandboxes: dict[str, SandboxStatus] = {}
        self._containers: dict[str, _Container] = {}
        self._images: dict[str, ImageInfo] = {}
        self._events: list[Event] = []
        self._readers = 0
        self._ip = itertools.count(2)

    def ping(self) -> None:
        pass

    def version(self) -> str:
        return "0.1.0"

    def _id(self, kind: str) -> str:
        return f"{kind}-{self.node}-{next(self._ids)}"

    def _emit(self, container_id: str, pod_uid: str, action: str) -> None:
        if self._readers:  # no reader, nothing kept: a node without a PLEG stays small
            self._events.append(Event(container_id, pod_uid, action))
            self._cond.notify_all()

    # -- sandboxes -----------------------------------------------------------------------

    def run_sandbox(self, config: SandboxConfig) -> SandboxStatus:
        with self._cond:
            sid = self._id("sandbox")
            n = next(self._ip)
            status = self._sandboxes[sid] = SandboxStatus(
                id=sid,
                pod=config.pod,
                attempt=config.attempt,
                ready=True,
                ip="" if config.host_network else f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}",
                created_at=self._now(),
                labels={**config.labels, NODE: self.node},
            )
            self._emit(sid, config.pod.uid, "sandbox-start")
            return status

    def stop_sandbox(self, sandbox_id: str) -> None:
        with self._cond:
            sandbox = self._sandboxes.get(sandbox_id)
            if sandbox is None:
                raise NotFound(f"no sandbox {sandbox_id}")
            for c in list(self._containers.values()):
                if c.status.sandbox_id == sandbox_id:
                    self._exit(c, 137, "Error")
            self._sandboxes[sandbox_id] = replace(sandbox, ready=False)
            self._emit(sandbox_id, sandbox.pod.uid, "sandbox-stop")

    def remove_sandbox(self, sandbox_id: str) -> None:
        with self._cond:
            sandbox = self._sandboxes.pop(sandbox_id, None)
            if sandbox is None:
                return
            for cid, c in list(self._containers.items()):
                if c.status.sandbox_id == sandbox_id:
                    del self._containers[cid]
            self._emit(sandbox_id, sandbox.pod.uid, "sandbox-remove")

    def list_sandboxes(self) -> list[SandboxStatus]:
        with self._cond:
            return list(self._sandboxes.values())

    # -- containers ----------------------------------------------------------------------

    def create_container(self, sandbox_id: str, config: ContainerConfig) -> str:
        with self._cond:
            if sandbox_id not in self._sandboxes:
                raise NotFound(f"no sandbox {sandbox_id}")
            image = self.image_status(config.image)
            if image is None:
                raise ImageNotFound(f"image {config.image} is not present on node {self.node}")
            for other in self._containers.values():
                if (other.status.pod_uid, other.status.name, other.status.attempt) == (
                    config.labels.get(POD_UID),
                    config.name,
                    config.attempt,
                ):
                    # As Docker, whose container names hold the pod, name and attempt.
                    raise RuntimeFailure(
                        f"creating container {config.name} (attempt {config.attempt}): "
                        f"Conflict. The name is already in use by container {other.status.id}"
                    )
            cid = self._id("container")
            status = ContainerStatus(
                id=cid,
                sandbox_id=sandbox_id,
                name=config.name,
                attempt=config.attempt,
                image=config.image,
                image_id=image.id,
                state=State.CREATED,
                labels={**config.labels, NODE: self.node},
                created_at=self._now(),
            )
            self._containers[cid] = _Container(status, config)
            return cid

    def _get(self, container_id: str) -> _Container:
        c = self._containers.get(container_id)
        if c is None:
            raise NotFound(f"no container {container_id}")
        return c

    def start_container(self, container_id: str) -> None:
        with self._cond:
            c = self._get(container_id)
            c.life = self.behaviour(c.config)
            c.status = replace(c.status, state=State.RUNNING, started_at=self._now())
            self._emit(container_id, c.status.pod_uid, "start")

    def _exit(self, c: _Container, code: int, reason: str, at: float | None = None) -> None:
        if c.status.state != State.RUNNING:
            return
        c.status = replace(
            c.status,
            state=State.EXITED,
            exit_code=code,
            reason=reason,
            finished_at=at if at is not None else self._now(),
        )
        self._emit(c.status.id, c.status.pod_uid, "die")

    def _settle(self) -> float | None:
        """End the containers whose life is over; return when the next one ends."""
        now, next_due = self._now(), None
        for c in self._containers.values():
            if c.status.state != State.RUNNING or c.life.seconds is None:
                continue
            due = (c.status.started_at or now) + c.life.seconds
            if due <= now:
                code = c.life.exit_code
                self._exit(c, code, "Completed" if code == 0 else "Error", at=due)
            else:
                next_due = due if next_due is None else min(next_due, due)
        return next_due

    def crash(self, container_id: str, exit_code: int = 1, reason: str = "Error") -> None:
        """End a running container now (a test's fault: a crash, an OOM kill)."""
        with self._cond:
            self._exit(self._get(container_id), exit_code, reason)

    def stop_container(self, container_id: str, timeout: float) -> None:
        with self._cond:
            # Stopped by a signal: 137 as Docker reports SIGKILL, 143 for SIGTERM.
            self._exit(self._get(container_id), 143 if timeout > 0 else 137, "Error")

    def remove_container(self, container_id: str) -> None:
        with self._cond:
            c = self._containers.pop(container_id, None)
            if c is not None:
                self._emit(container_id, c.status.pod_uid, "destroy")

    def list_containers(self) -> list[ContainerStatus]:
        with self._cond:
            self._settle()
            return [c.status for c in self._containers.values()]

    # -- images --------------------------------------------------------------------------

    def image_status(self, image: str) -> ImageInfo | None:
        return self._images.get(image)

    def pull_image(self, image: str) -> ImageInfo:
        if image in self.unreachable:
            raise RegistryUnreachable(
                f'pulling {image}: Get "https://registry-1.docker.io/v2/": dial tcp: lookup '
                "registry-1.docker.io on 127.0.0.11:53: server misbehaving"
            )
        if image in self.unpullable:
            raise ImageNotFound(
                f"pull access denied for {image}: repository does not exist or may require "
                "'docker login'"
            )
        with self._cond:
            info = self._images.setdefault(
                image, ImageInfo(image, f"sha256:{abs(hash(image)):064x}"[:71])
            )
            return info

    # -- logs, exec, stats, events -------------------------------------------------------

    def logs(
        self,
        container_id: str,
        *,
        follow: bool = False,
        tail: int | None = None,
        since: float | None = None,
        timestamps: bool = False,
    ) -> Iterator[bytes]:
        with self._cond:
            self._settle()
            c = self._get(container_id)
            if c.status.state == State.CREATED:
                return iter(())
            stamp = c.status.started_at or self._now()
        if since is not None and stamp < since:
            return iter(())
        lines = c.life.output.splitlines(keepends=True)
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        if timestamps:
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(stamp)).encode()
            lines = [prefix + b".000000000Z " + line for line in lines]
        return iter(lines)

    def exec_sync(self, container_id: str, command: list[str], timeout: float) -> ExecResult:
        with self._cond:
            status = self._get(container_id).status
        if status.state != State.RUNNING:
            raise NotFound(f"container {container_id} is not running")
        return self.exec_handler(status, command)

    def exec_stream(
        self, container_id: str, command: list[str], *, tty: bool, stdin: bool
    ) -> ExecSession:
        raise NotImplementedError("interactive exec needs real containers (DockerRuntime)")

    def attach(self, container_id: str, *, tty: bool, stdin: bool) -> ExecSession:
        raise NotImplementedError("attach needs real containers (DockerRuntime)")

    def port_forward(self, sandbox_id: str, port: int) -> socket.socket:
        raise NotImplementedError("port-forward needs a real network namespace (DockerRuntime)")

    def stats(self, container_id: str) -> Usage | None:
        with self._cond:
            c = self._containers.get(container_id)
            if c is None or c.status.state != State.RUNNING:
                return None
            return Usage(0, 0, 0, self._now())

    def events(self, stop_after: float) -> Iterator[Event]:
        """Events for one reader (the node's PLEG), which takes each batch away; they are
        kept from this call on."""
        deadline = time.monotonic() + stop_after
        with self._cond:
            self._readers += 1
        return self._read_events(deadline)

    def _read_events(self, deadline: float) -> Iterator[Event]:
        try:
            while True:
                with self._cond:
                    next_due = self._settle()
                    while not self._events:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return
                        wait = left if next_due is None else min(left, next_due - self._now())
                        self._cond.wait(max(wait, 0.001))
                        next_due = self._settle()
                    batch, self._events = self._events, []
                yield from batch
        finally:
            with self._cond:
                self._readers -= 1
