"""Docker for the kubelet's tests on this machine's own engine, until node containers
(branch node-images) exist to run them in: every container is made with
`network_mode="none"` (the host's network is never touched) and named with a
run-specific prefix, and the images are throwaway ones, `docker import`ed from Debian's
busybox-static, tagged with that prefix and removed after the session.

Under CI=true a missing engine is a failure, never a skip.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest

PAUSE_ENTRYPOINT = (
    '["/bin/sh", "-c", "trap \\"exit 0\\" TERM INT; while :; do sleep 3600 & wait; done"]'
)


@dataclass(frozen=True)
class DockerImages:
    client: docker.DockerClient
    prefix: str
    busybox: str
    pause: str

    def cleanup_containers(self) -> None:
        for c in self.client.containers.list(all=True, filters={"name": self.prefix}):
            if c.name and c.name.startswith(self.prefix):
                c.remove(force=True, v=True)


def _busybox_rootfs(tmp: Path) -> bytes:
    """A tar of / holding Debian's static busybox and a link per applet."""
    subprocess.run(
        ["apt-get", "download", "busybox-static"], cwd=tmp, check=True, capture_output=True
    )
    deb = next(tmp.glob("busybox-static_*.deb"))
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp / "root")], check=True)
    binary = tmp / "root" / "bin" / "busybox"
    applets = subprocess.run(
        [str(binary), "--list"], check=True, capture_output=True, text=True
    ).stdout.split()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for d in ("bin", "tmp", "etc", "proc", "sys", "dev", "var"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        tar.add(binary, "bin/busybox")
        for applet in applets:
            if applet != "busybox":
                link = tarfile.TarInfo(f"bin/{applet}")
                link.type, link.linkname = tarfile.SYMTYPE, "busybox"
                tar.addfile(link)
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
    return out.getvalue()


@pytest.fixture(scope="session")
def docker_images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerImages]:
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Docker engine is not reachable: {exc}")
        pytest.skip(f"no Docker engine: {exc}")
    prefix = f"kl-kubelet-{uuid.uuid4().hex[:6]}"
    rootfs = _busybox_rootfs(tmp_path_factory.mktemp("busybox"))
    busybox, pause = f"{prefix}-busybox:1.36", f"{prefix}-pause:3.9"
    client.api.import_image_from_data(
        rootfs, repository=busybox.split(":")[0], tag="1.36", changes=['CMD ["sh"]']
    )
    client.api.import_image_from_data(
        rootfs,
        repository=pause.split(":")[0],
        tag="3.9",
        changes=[f"ENTRYPOINT {PAUSE_ENTRYPOINT}"],
    )
    images = DockerImages(client, prefix, busybox, pause)
    try:
        yield images
    finally:
        images.cleanup_containers()
        for image in (busybox, pause):
            with contextlib.suppress(docker.errors.NotFound):
                client.images.remove(image, force=True)
        client.close()
