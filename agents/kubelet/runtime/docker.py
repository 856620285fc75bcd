"""`DockerRuntime`: the kubelet's runtime on a Docker Engine (the node's own dockerd), through
the `docker` SDK. The seeds' write flows end here: a pod bound to the node becomes a
pause container holding the network namespace and app containers joined to it.

Mapping (dockershim's, so that `docker ps` inside a node reads as it did on Kubernetes
before 1.24):

* names `<prefix>_POD_<pod>_<ns>_<uid>_<attempt>` for sandboxes and
  `<prefix>_<container>_<pod>_<ns>_<uid>_<attempt>` for containers (prefix `k8s`; tests
  on a shared engine use a run-specific one);
* the sandbox is the pause image on the pod network: a Docker bridge network in the
  node's podCIDR (`ensure_network`), so Docker's IPAM hands out the pod IP; `none` and
  `host` are the other choices (`--pod-network`);
* containers join the sandbox's network and IPC namespaces (`container:<sandbox>`), and
  so share its hostname and hosts file; the pod's resolv.conf is the kubelet's own file,
  bind-mounted read-only into each (Docker's own would name its embedded DNS); CPU
  shares/quota and memory limit under the pod's cgroup parent (`kubepods/...`, cgroupfs);
* `securityContext.privileged` cannot be honoured: `--privileged` fails on this machine
  (CAP_SYS_RESOURCE is outside the bounding set), so the kubelet asks for every
  capability instead (`cap_add=ALL`) and logs that it did.

Inspections of sandboxes and containers are cached by id and the state the list reports
(a running or exited container's inspection changes only with its state), so a relist
costs two list calls plus one inspect per sandbox or container that changed, not one per
sandbox each relist (which made a relist's cost grow with the pods on the node).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import datetime
import ipaddress
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import docker
import docker.errors

from agents.kubelet.runtime import (
    NODE,
    POD_NAME,
    POD_NAMESPACE,
    POD_UID,
    ContainerConfig,
    ContainerStatus,
    Event,
    ExecResult,
    ImageInfo,
    ImageNotFound,
    NotFound,
    PodRef,
    RegistryUnreachable,
    RuntimeFailure,
    SandboxConfig,
    SandboxStatus,
    State,
    Usage,
)

log = logging.getLogger("kubelab.kubelet.docker")

T = TypeVar("T", SandboxStatus, ContainerStatus)

TYPE_LABEL = "io.kubernetes.docker.type"
ATTEMPT_LABEL = "io.kubernetes.attempt"
DEFAULT_PAUSE_IMAGE = "registry.k8s.io/pause:3.9"
VERSION_TTL = 300.0
"""Seconds the engine's version is trusted: an upgraded engine shows in the Node's
nodeInfo within the 5 min the kubelet may wait to post an unchanged status anyway."""
STABLE_STATES = ("created", "running", "exited", "dead")
"""Listed states whose inspection stays as it is until the state changes (not
"restarting", "removing", "paused": the kubelet makes none of them, but another may)."""
STATE_EVENTS = ("create", "start", "die", "oom", "destroy")
"""The engine's container events that change what a relist sees."""
_LIBC = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000


def _time(value: str | None) -> float | None:
    """Docker's RFC 3339 time (nanoseconds, or year 1 for "never") as epoch seconds."""
    if not value or value.startswith("0001-"):
        return None
    head, _, frac = value.rstrip("Z").partition(".")
    stamp = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.UTC).timestamp()
    return stamp + (float("0." + frac[:9]) if frac else 0.0)


_UNREACHABLE = (
    "dial tcp",
    "no such host",
    "network is unreachable",
    "i/o timeout",
    "TLS handshake timeout",
    "request canceled while waiting for connection",
    "Client.Timeout exceeded",
)
"""What the engine's pull error says when it reached no registry (`Get
"https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on
127.0.0.11:53: server misbehaving`, a connect that was refused or timed out), as opposed
to a registry that answered that it has no such image."""


def _failure(exc: docker.errors.APIError, what: str) -> RuntimeFailure:
    if isinstance(exc, docker.errors.NotFound):
        return NotFound(f"{what}: {exc.explanation or exc}")
    return RuntimeFailure(f"{what}: {exc.explanation or exc}")


class _DockerExec:
    """An interactive exec over the engine's hijacked connection (an `ExecSession`)."""

    def __init__(self, api: docker.APIClient, exec_id: str, sock: socket.socket, tty: bool):
        self._api, self._id, self._sock, self._tty = api, exec_id, sock, tty

    def _recv_exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self._sock.recv(n - len(data))
            if not chunk:
                return b""
            data += chunk
        return data

    def read(self) -> tuple[int, bytes]:
        if self._tty:
            data = self._sock.recv(32 * 1024)
            return (1, data) if data else (0, b"")
        header = self._recv_exact(8)  # stream, 3 zero bytes, big-endian length
        if not header:
            return 0, b""
        stream, length = struct.unpack(">BxxxL", header)
        return (2 if stream == 2 else 1), self._recv_exact(length)

    def write(self, data: bytes) -> None:
        self._sock.sendall(data)

    def close_stdin(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)

    def resize(self, width: int, height: int) -> None:
        with contextlib.suppress(docker.errors.APIError):
            self._api.exec_resize(self._id, height=height, width=width)

    def exit_code(self) -> int:
        for _ in range(50):  # the exit code lands a moment after the stream ends
            info = self._api.exec_inspect(self._id)
            if not info.get("Running"):
                return int(info.get("ExitCode") or 0)
            time.sleep(0.02)
        return -1

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


class _DockerAttach(_DockerExec):
    """The container's own stdio over the engine's hijacked attach connection."""

    def resize(self, width: int, height: int) -> None:
        with contextlib.suppress(docker.errors.APIError):
            self._api.resize(self._id, height=height, width=width)

    def exit_code(self) -> int:
        for _ in range(50):  # the stream ends a moment before the engine records the exit
            state = self._api.inspect_container(self._id).get("State") or {}
            if not state.get("Running"):
                return int(state.get("ExitCode") or 0)
            time.sleep(0.02)
        return 0  # still running: the caller detached


def _connect_in_netns(pid: int, port: int, timeout: float = 10.0) -> socket.socket:
    """A TCP connection to 127.0.0.1:`port` in the network namespace of process `pid`.

    setns(2) switches only the calling thread's namespace, and a socket stays in the
    namespace it was made in: so a short-lived thread enters the pod's namespace, connects
    and ends, and no other thread of the kubelet ever leaves the node's own namespace
    (the role of dockershim's `nsenter ... socat`).
    """
    made: list[socket.socket | OSError] = []

    def enter_and_connect() -> None:
        try:
            with open(f"/proc/{pid}/ns/net", "rb") as ns:
                if _LIBC.setns(ns.fileno(), _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(
                        err, f"setns into the network namespace of pid {pid}: {os.strerror(err)}"
                    )
            made.append(socket.create_connection(("127.0.0.1", port), timeout=timeout))
        except OSError as exc:
            made.append(exc)

    thread = threading.Thread(target=enter_and_connect, name=f"netns {pid}", daemon=True)
    thread.start()
    thread.join()
    if not made:
        raise OSError(f"connecting to port {port} in the network namespace of pid {pid} failed")
    result = made[0]
    if isinstance(result, OSError):
        raise result
    result.settimeout(None)
    return result


class DockerRuntime:
    """A `Runtime` on the Docker Engine at `base_url` (module docstring)."""

    name = "docker"

    def __init__(
        self,
        node: str,
        *,
        base_url: str | None = None,
        pause_image: str = DEFAULT_PAUSE_IMAGE,
        network: str = "none",
        name_prefix: str = "k8s",
    ) -> None:
        self.node = node
        self.pause_image = pause_image
        self.network = network
        self.prefix = name_prefix
        self.client = (
            docker.DockerClient(base_url=base_url, timeout=120)
            if base_url
            else docker.from_env(timeout=120)
        )
        self.api: docker.APIClient = self.client.api
        self._seen: dict[str, tuple[str, ContainerStatus]] = {}
        """Container id -> (the state the list said, the inspected status)."""
        self._seen_sandboxes: dict[str, tuple[str, SandboxStatus]] = {}
        self._lock = threading.Lock()
        self._version: tuple[float, str] | None = None
        """When the engine's version was asked, and its answer."""
        self._execs = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="exec")

    def ping(self) -> None:
        self.api.ping()

    def version(self) -> str:
        """The engine's version, asked at most every VERSION_TTL seconds: dockerd answers
        `/version` by running `runc --version` and `docker-init --version`, and the node
        status asked it twice every 10 s, a third of an idle node's new processes."""
        now = time.monotonic()
        if self._version is None or now - self._version[0] > VERSION_TTL:
            self._version = (now, str(self.api.version()["Version"]))
        return self._version[1]

    def ensure_network(self, name: str, subnet: str) -> None:
        """A bridge network `name` in `subnet` (the node's podCIDR), the pods' network: the
        gateway is the subnet's first address, and no masquerading (pods reach each other
        across nodes by plain routes; the node's network agent masquerades the rest)."""
        try:
            found = self.api.inspect_network(name)
        except docker.errors.NotFound:
            found = None
        if found is not None:
            configs = (found.get("IPAM") or {}).get("Config") or []
            if not any(c.get("Subnet") == subnet for c in configs):
                raise RuntimeFailure(
                    f"docker network {name} exists with {configs}, not the podCIDR {subnet}: "
                    f"remove it (docker network rm {name}) and restart the kubelet"
                )
            return
        net = ipaddress.ip_network(subnet)
        pool = docker.types.IPAMPool(subnet=subnet, gateway=str(net.network_address + 1))
        self.api.create_network(
            name,
            driver="bridge",
            ipam=docker.types.IPAMConfig(pool_configs=[pool]),
            options={
                "com.docker.network.bridge.enable_ip_masquerade": "false",
                "com.docker.network.bridge.name": "cbr0",
            },
            labels={NODE: self.node},
        )
        log.info("kubelet %s: created pod network %s in %s", self.node, name, subnet)

    # -- sandboxes -----------------------------------------------------------------------

    def _name(self, what: str, pod: PodRef, attempt: int) -> str:
        return f"{self.prefix}_{what}_{pod.name}_{pod.namespace}_{pod.uid}_{attempt}"

    def run_sandbox(self, config: SandboxConfig) -> SandboxStatus:
        labels = {
            **config.labels,
            NODE: self.node,
            TYPE_LABEL: "podsandbox",
            ATTEMPT_LABEL: str(config.attempt),
        }
        network_mode = "host" if config.host_network else self.network
        host_config = self.api.create_host_config(
            network_mode=network_mode,
            ipc_mode="shareable",
            cgroup_parent=config.cgroup_parent or None,
            init=False,
        )
        name = self._name("POD", config.pod, config.attempt)

        def create() -> Any:
            return self.api.create_container(
                self.pause_image,
                name=name,
                hostname=None if config.host_network else config.hostname[:63],
                labels=labels,
                host_config=host_config,
            )

        try:
            try:
                created = create()
            except docker.errors.ImageNotFound:  # pulled once, not looked up for every pod
                self.pull_image(self.pause_image)
                created = create()
            self.api.start(created["Id"])
            info = self._inspect(created["Id"])  # its IP, as CRI's PodSandboxStatus
        except docker.errors.APIError as exc:
            raise _failure(exc, f"starting sandbox {name}") from None
        if info is None:
            raise NotFound(f"sandbox {name} vanished as it started")
        status = self._sandbox_status(info)
        with self._lock:  # the next relist need not inspect it again
            self._seen_sandboxes[status.id] = (str(info["State"].get("Status", "")), status)
        return status

    def stop_sandbox(self, sandbox_id: str) -> None:
        try:
            self.api.stop(sandbox_id, timeout=2)
        except docker.errors.APIError as exc:
            raise _failure(exc, f"stopping sandbox {sandbox_id[:12]}") from None

    def remove_sandbox(self, sandbox_id: str) -> None:
        self.remove_container(sandbox_id)

    def _listed(self, kind: str) -> list[dict[str, Any]]:
        try:
            found: list[dict[str, Any]] = self.api.containers(
                all=True, filters={"label": [f"{NODE}={self.node}", f"{TYPE_LABEL}={kind}"]}
            )
        except docker.errors.APIError as exc:
            raise _failure(exc, "listing containers") from None
        return found

    def _inspect(self, container_id: str) -> dict[str, Any] | None:
        try:
            info: dict[str, Any] = self.api.inspect_container(container_id)
        except docker.errors.NotFound:
            return None
        return info

    def _sandbox_status(self, info: dict[str, Any]) -> SandboxStatus:
        labels = info["Config"]["Labels"] or {}
        networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
        ip = next((n.get("IPAddress") for n in networks.values() if n.get("IPAddress")), "")
        return SandboxStatus(
            id=info["Id"],
            pod=PodRef(labels[POD_NAMESPACE], labels[POD_NAME], labels[POD_UID]),
            attempt=int(labels.get(ATTEMPT_LABEL, 0)),
            ready=bool(info["State"].get("Running")),
            ip=ip or "",
            created_at=_time(info.get("Created")) or 0.0,
            labels=labels,
        )

    def list_sandboxes(self) -> list[SandboxStatus]:
        return self._list_cached("podsandbox", self._sandbox_status, self._seen_sandboxes)

    def _list_cached(
        self,
        kind: str,
        status: Callable[[dict[str, Any]], T],
        cache: dict[str, tuple[str, T]],
    ) -> list[T]:
        """One list call, and an inspection only of those whose listed state is new: what
        an inspection says of a created, running or exited container (a sandbox's IP
        included) changes only with its state, as the kubelet never restarts one in place."""
        with self._lock:
            before = dict(cache)
        out = []
        seen: dict[str, tuple[str, T]] = {}
        for entry in self._listed(kind):
            cid, listed = entry["Id"], str(entry.get("State", ""))
            with self._lock:
                cached = cache.get(cid)
            if cached is not None and cached[0] == listed and listed in STABLE_STATES:
                seen[cid] = cached
                out.append(cached[1])
                continue
            info = self._inspect(cid)
            if info is None:
                continue
            found = status(info)
            # Keyed by the state inspected, which may be newer than the state listed.
            seen[cid] = (str(info["State"].get("Status", "")), found)
            out.append(found)
        with self._lock:
            # Entries that changed meanwhile (`run_sandbox` put one in) are newer: kept.
            for cid, old in before.items():
                if cid not in seen and cache.get(cid) is old:
                    del cache[cid]
            for cid, new in seen.items():
                if cache.get(cid) is before.get(cid):
                    cache[cid] = new
        return out

    # -- containers ----------------------------------------------------------------------

    def create_container(self, sandbox_id: str, config: ContainerConfig) -> str:
        # The pod's name from the container's own labels: no inspection of the sandbox (the
        # engine refuses a sandbox that is gone when the container starts).
        labels = config.labels
        pod = PodRef(labels[POD_NAMESPACE], labels[POD_NAME], labels[POD_UID])
        r = config.resources
        host_config = self.api.create_host_config(
            network_mode=f"container:{sandbox_id}",
            ipc_mode=f"container:{sandbox_id}",
            binds=[
                f"{m.host_path}:{m.container_path}:{'ro' if m.read_only else 'rw'}"
                for m in config.mounts
            ],
            tmpfs=dict.fromkeys(config.tmpfs, "") or None,
            cap_add=list(config.cap_add) or None,
            cap_drop=list(config.cap_drop) or None,
            read_only=config.read_only_rootfs,
            cpu_shares=r.cpu_shares,
            cpu_quota=r.cpu_quota or None,
            cpu_period=r.cpu_period if r.cpu_quota else None,
            mem_limit=r.memory_limit or None,
            memswap_limit=r.memory_limit or None,
            cgroup_parent=config.cgroup_parent or None,
        )
        labels = {
            **config.labels,
            NODE: self.node,
            TYPE_LABEL: "container",
            ATTEMPT_LABEL: str(config.attempt),
            "io.kubernetes.sandbox.id": sandbox_id,
        }
        name = self._name(config.name, pod, config.attempt)
        # The SDK's create_container always sends StdinOnce false: the same request, built
        # and sent in two steps (untyped in the SDK's stubs).
        api: Any = self.api
        body = api.create_container_config(
            config.image,
            list(config.args) or None,
            entrypoint=list(config.command) or None,
            environment=[f"{k}={v}" for k, v in config.env],
            working_dir=config.working_dir or None,
            user=config.user or None,
            tty=config.tty,
            stdin_open=config.stdin,
            labels=labels,
            host_config=host_config,
        )
        body["StdinOnce"] = config.stdin_once
        try:
            created = api.create_container_from_config(body, name)
        except docker.errors.ImageNotFound as exc:
            raise ImageNotFound(f"creating {name}: {exc.explanation or exc}") from None
        except docker.errors.APIError as exc:
            raise _failure(exc, f"creating container {name}") from None
        return str(created["Id"])

    def start_container(self, container_id: str) -> None:
        try:
            self.api.start(container_id)
        except docker.errors.APIError as exc:
            raise _failure(exc, f"starting container {container_id[:12]}") from None

    def stop_container(self, container_id: str, timeout: float) -> None:
        try:
            self.api.stop(container_id, timeout=max(0, round(timeout)))
        except docker.errors.APIError as exc:
            raise _failure(exc, f"stopping container {container_id[:12]}") from None

    def remove_container(self, container_id: str) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self.api.remove_container(container_id, force=True, v=True)
        with self._lock:
            self._seen.pop(container_id, None)
            self._seen_sandboxes.pop(container_id, None)

    def _status(self, info: dict[str, Any]) -> ContainerStatus:
        state = info["State"]
        labels = info["Config"]["Labels"] or {}
        status = str(state.get("Status", ""))
        exit_code = state.get("ExitCode")
        if status == "running":
            st, reason = State.RUNNING, ""
        elif status == "created":
            st, reason = State.CREATED, ""
        elif status in ("exited", "dead"):
            st = State.EXITED
            if state.get("OOMKilled"):
                reason = "OOMKilled"
            else:
                reason = "Completed" if exit_code == 0 else "Error"
        else:
            st, reason = State.UNKNOWN, ""
        return ContainerStatus(
            id=info["Id"],
            sandbox_id=labels.get("io.kubernetes.sandbox.id", ""),
            name=labels.get("io.kubernetes.container.name", ""),
            attempt=int(labels.get(ATTEMPT_LABEL, 0)),
            image=info["Config"]["Image"],
            image_id=f"docker://{info['Image']}",
            state=st,
            labels=labels,
            created_at=_time(info.get("Created")) or 0.0,
            started_at=_time(state.get("StartedAt")),
            finished_at=_time(state.get("FinishedAt")) if st == State.EXITED else None,
            exit_code=exit_code if st == State.EXITED else None,
            reason=reason,
            message=str(state.get("Error") or ""),
        )

    def list_containers(self) -> list[ContainerStatus]:
        return self._list_cached("container", self._status, self._seen)

    # -- images --------------------------------------------------------------------------

    def image_status(self, image: str) -> ImageInfo | None:
        try:
            info = self.client.images.get(image).attrs
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as exc:
            raise _failure(exc, f"inspecting image {image}") from None
        return ImageInfo(image, str(info["Id"]), int(info.get("Size") or 0))

    def pull_image(self, image: str) -> ImageInfo:
        repo, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
        try:
            self.api.pull(repo, tag=tag or "latest")
        except docker.errors.APIError as exc:
            explanation = str(exc.explanation or exc)
            if any(sign in explanation for sign in _UNREACHABLE):
                raise RegistryUnreachable(f"pulling {image}: {explanation}") from None
            raise ImageNotFound(f"pulling {image}: {explanation}") from None
        found = self.image_status(image)
        if found is None:
            raise ImageNotFound(f"pulled {image}, but the engine does not show it")
        return found

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
        kwargs: dict[str, Any] = {
            "stdout": True,
            "stderr": True,
            "timestamps": timestamps,
            "tail": "all" if tail is None else tail,
        }
        if since is not None:
            kwargs["since"] = since
        try:
            if follow:
                chunks: Iterator[bytes] = self.api.logs(
                    container_id, stream=True, follow=True, **kwargs
                )
                return chunks
            whole: bytes = self.api.logs(container_id, stream=False, **kwargs)
        except docker.errors.APIError as exc:
            raise _failure(exc, f"logs of {container_id[:12]}") from None
        return iter([whole] if whole else [])

    def exec_sync(self, container_id: str, command: list[str], timeout: float) -> ExecResult:
        def run() -> ExecResult:
            made = self.api.exec_create(container_id, command, stdout=True, stderr=True)
            output: bytes = self.api.exec_start(made["Id"])
            code = self.api.exec_inspect(made["Id"]).get("ExitCode")
            return ExecResult(int(code if code is not None else -1), output)

        future = self._execs.submit(run)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"command timed out after {timeout:g}s") from None
        except docker.errors.APIError as exc:
            raise _failure(exc, f"exec in {container_id[:12]}") from None

    def exec_stream(
        self, container_id: str, command: list[str], *, tty: bool, stdin: bool
    ) -> _DockerExec:
        try:
            made = self.api.exec_create(
                container_id, command, stdout=True, stderr=True, stdin=stdin, tty=tty
            )
            sock = self.api.exec_start(made["Id"], tty=tty, socket=True)
        except docker.errors.APIError as exc:
            raise _failure(exc, f"exec in {container_id[:12]}") from None
        # The SDK wraps the hijacked socket in a SocketIO; the session reads frames itself.
        raw = getattr(sock, "_sock", None)
        if not isinstance(raw, socket.socket):
            raise RuntimeFailure(f"exec in {container_id[:12]}: the engine gave no socket")
        raw.settimeout(None)
        return _DockerExec(self.api, made["Id"], raw, tty)

    def attach(self, container_id: str, *, tty: bool, stdin: bool) -> _DockerAttach:
        params = {"stdout": 1, "stderr": 1, "stream": 1, "stdin": int(stdin)}
        try:
            sock = self.api.attach_socket(container_id, params=params)
        except docker.errors.APIError as exc:
            raise _failure(exc, f"attach to {container_id[:12]}") from None
        raw = getattr(sock, "_sock", None)
        if not isinstance(raw, socket.socket):
            raise RuntimeFailure(f"attach to {container_id[:12]}: the engine gave no socket")
        raw.settimeout(None)
        return _DockerAttach(self.api, container_id, raw, tty)

    def port_forward(self, sandbox_id: str, port: int) -> socket.socket:
        info = self._inspect(sandbox_id)
        pid = int(((info or {}).get("State") or {}).get("Pid") or 0)
        if not pid:
            raise NotFound(f"sandbox {sandbox_id[:12]} is not running")
        try:
            return _connect_in_netns(pid, port)
        except OSError as exc:
            raise RuntimeFailure(
                f"port-forward to port {port} of sandbox {sandbox_id[:12]}: {exc}"
            ) from None

    def stats(self, container_id: str) -> Usage | None:
        try:
            s = self.api.stats(container_id, stream=False, one_shot=True)
        except docker.errors.APIError:
            return None
        cpu = ((s.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage")
        mem = s.get("memory_stats") or {}
        if cpu is None or "usage" not in mem:
            return None
        usage = int(mem["usage"])
        inactive = int((mem.get("stats") or {}).get("total_inactive_file", 0))
        return Usage(int(cpu), max(0, usage - inactive), usage, time.time())

    def events(self, stop_after: float) -> Iterator[Event]:
        now = time.time()
        stream = self.client.events(
            since=int(now),
            until=int(now + stop_after),
            decode=True,
            # Only changes of state: not exec_* (every exec probe), attach, resize, kill.
            filters={
                "type": "container",
                "label": f"{NODE}={self.node}",
                "event": list(STATE_EVENTS),
            },
        )
        try:
            for raw in stream:
                attrs = (raw.get("Actor") or {}).get("Attributes") or {}
                if raw.get("status") == "oom":
                    # The engine may mark OOMKilled after the container shows exited: an
                    # inspection cached at "exited" would miss it for good.
                    with self._lock:
                        self._seen.pop(str(raw.get("id", "")), None)
                yield Event(
                    str(raw.get("id", "")),
                    attrs.get(POD_UID, ""),
                    str(raw.get("status")),
                    int(raw.get("timeNano") or 0) / 1e9,
                )
        except docker.errors.APIError as exc:
            raise _failure(exc, "reading the engine's events") from None
        finally:
            stream.close()
