"""The runtime interface, on both implementations: what the pod workers rely on (a
sandbox, containers joined to it, exits with reasons, logs, exec, adoption by labels)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agents.kubelet.runtime import (
    CONTAINER_NAME,
    ContainerConfig,
    PodRef,
    RegistryUnreachable,
    Resources,
    Runtime,
    SandboxConfig,
    State,
)
from agents.kubelet.runtime.docker import DockerRuntime
from agents.kubelet.runtime.memory import Life, MemoryRuntime, script_behaviour
from tests.kubelet.docker_fixture import DockerImages, docker_images

__all__ = ["docker_images"]

POD = PodRef("default", "hello", "uid-1")


def _sandbox(rt: Runtime) -> str:
    return rt.run_sandbox(SandboxConfig(POD, 0, "hello", POD.labels())).id


def _container(name: str, image: str, *args: str, **kw: object) -> ContainerConfig:
    return ContainerConfig(
        name=name,
        attempt=0,
        image=image,
        labels={**POD.labels(), CONTAINER_NAME: name},
        args=args,
        **kw,  # type: ignore[arg-type]
    )


def _wait_exited(rt: Runtime, cid: str, timeout: float = 20) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {c.id: c for c in rt.list_containers()}[cid]
        if found.state == State.EXITED:
            return found
        time.sleep(0.1)
    raise AssertionError(f"container {cid} did not exit in {timeout}s")


def test_script_behaviour_reads_the_seeds_commands() -> None:
    assert script_behaviour(_container("c", "b", "sh", "-c", 'echo "Hello Kubernetes!"')) == Life(
        0, 0, b"Hello Kubernetes!\n"
    )
    assert script_behaviour(_container("c", "b", "sh", "-c", "sleep 2; exit 3")) == Life(2, 3)
    assert script_behaviour(_container("c", "b", "nginx")).seconds is None


def test_memory_runtime_runs_exits_and_tells_its_events() -> None:
    rt = MemoryRuntime("n")
    events = rt.events(stop_after=2)
    sid = _sandbox(rt)
    rt.pull_image("busybox")
    cid = rt.create_container(sid, _container("c", "busybox", "sh", "-c", "sleep 0.2; echo hi"))
    rt.start_container(cid)
    assert {c.id: c.state for c in rt.list_containers()}[cid] == State.RUNNING
    actions = [next(events).action for _ in range(3)]
    assert actions == ["sandbox-start", "start", "die"]
    done = {c.id: c for c in rt.list_containers()}[cid]
    assert (done.exit_code, done.reason) == (0, "Completed")
    assert b"".join(rt.logs(cid)) == b"hi\n"
    forever = rt.create_container(sid, _container("d", "busybox", "nginx"))
    rt.start_container(forever)
    rt.crash(forever, 137, "OOMKilled")
    assert {c.id: c.reason for c in rt.list_containers()}[forever] == "OOMKilled"


def test_a_pull_that_reaches_no_registry_says_so(docker_runtime: DockerRuntime) -> None:
    """Port 1 of this machine refuses, as an offline lab's way to docker.io fails: the
    engine's dial error becomes `RegistryUnreachable`, not a registry's "no such image"."""
    with pytest.raises(RegistryUnreachable, match=r"dial tcp 127\.0\.0\.1:1"):
        docker_runtime.pull_image("127.0.0.1:1/kl-seedsmall-foo:1.0")


@pytest.fixture
def docker_runtime(docker_images: DockerImages) -> Iterator[DockerRuntime]:
    rt = DockerRuntime(
        f"{docker_images.prefix}-node",
        pause_image=docker_images.pause,
        network="none",
        name_prefix=docker_images.prefix,
    )
    try:
        yield rt
    finally:
        docker_images.cleanup_containers()


def test_docker_runtime_sandbox_containers_logs_exec(
    docker_runtime: DockerRuntime, docker_images: DockerImages
) -> None:
    rt = docker_runtime
    started = rt.run_sandbox(SandboxConfig(POD, 0, "hello", POD.labels()))
    sid = started.id
    # What starting it returned is what a relist sees (the relist needs no inspection).
    assert (started.pod, started.ready) == (POD, True)
    assert rt.list_sandboxes() == [started]
    app = rt.create_container(
        sid, _container("app", docker_images.busybox, "sh", "-c", "echo hello; sleep 30")
    )
    rt.start_container(app)
    deadline = time.monotonic() + 10
    while b"hello" not in b"".join(rt.logs(app)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert b"".join(rt.logs(app)) == b"hello\n"
    result = rt.exec_sync(app, ["sh", "-c", "echo $((6*7)); exit 3"], timeout=10)
    assert (result.exit_code, result.output) == (3, b"42\n")
    # The app shares the sandbox's UTS namespace: its hostname is the pod's.
    assert rt.exec_sync(app, ["hostname"], timeout=10).output == b"hello\n"
    rt.stop_container(app, timeout=1)
    status = _wait_exited(rt, app)
    assert status.state == State.EXITED  # type: ignore[attr-defined]
    assert status.image_id.startswith("docker://sha256:")  # type: ignore[attr-defined]


def test_docker_runtime_reports_oomkilled(
    docker_runtime: DockerRuntime, docker_images: DockerImages
) -> None:
    rt = docker_runtime
    sid = _sandbox(rt)
    hog = rt.create_container(
        sid,
        _container(
            "hog",
            docker_images.busybox,
            "tail",
            "/dev/zero",
            resources=Resources(memory_limit=16 * 1024 * 1024),
        ),
    )
    rt.start_container(hog)
    status = _wait_exited(rt, hog)
    assert (status.exit_code, status.reason) == (137, "OOMKilled")  # type: ignore[attr-defined]
