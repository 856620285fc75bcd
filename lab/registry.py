"""The lab's registry mirror: where nodes pull `nginx:1.21` from, as on a real cluster.

No registry beyond this machine is reachable, so a lab runs its own: a container of
Debian's docker-registry (`lab.images`, recipe `registry`) at a fixed address on the
lab's network (`<node range>.2:5000`, plain HTTP, no auth), its blobs on a named volume
so that they outlive `labctl stop`/`start`. Every node's dockerd has it as its
`registry-mirrors` entry (`http://<ip>:5000`; dockerd needs the scheme), and the
docker.io names resolve to 127.0.0.1 in the nodes (`lab.nodes.DOCKER_IO_NAMES`): a pull
of a docker.io name asks the mirror first and fails at once, not after 10 s of lookups,
when the mirror lacks it.

A mirror serves docker.io names only (`nginx:1.21` is `docker.io/library/nginx:1.21`):
an image of another registry (`registry.k8s.io/pause:3.9`) still reaches the nodes by
`docker load` (`NodeCluster.load_image`). `push` copies an image from this machine's
engine with skopeo (Debian's; `docker push` would need the engine's own
`insecure-registries`, which is not the lab's to change), and skips it when the
registry's manifest already names the same image config (the image ID).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass

import docker
import docker.errors
import requests

from lab.images import REGISTRY_IMAGE
from lab.nodes import LAB_LABEL, ROLE_LABEL, UNLESS_STOPPED, Addressing

log = logging.getLogger("lab.registry")

PORT = 5000
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
    )
)


class RegistryError(RuntimeError):
    """The registry could not be started or an image could not be pushed to it."""


def mirror_path(image: str) -> str | None:
    """`repository:tag` as a docker.io mirror serves it (`nginx:1.21` is
    `library/nginx:1.21`), or None for an image of another registry."""
    name, _, tag = image.rpartition(":") if ":" in image.rpartition("/")[2] else (image, "", "")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        if first not in ("docker.io", "index.docker.io"):
            return None
        name = rest
    if "/" not in name:
        name = f"library/{name}"
    return f"{name}:{tag or 'latest'}"


@dataclass
class Registry:
    """The registry container of one lab."""

    prefix: str
    addressing: Addressing
    client: docker.DockerClient

    @property
    def container_name(self) -> str:
        return f"{self.prefix}-registry"

    @property
    def ip(self) -> str:
        return str(self.addressing.node_range.network_address + 2)

    @property
    def url(self) -> str:
        """The mirror as dockerd's `registry-mirrors` wants it."""
        return f"http://{self.ip}:{PORT}"

    def start(self, network: str) -> None:
        """The registry container at its fixed address, its blobs on a named volume."""
        volume = self.client.volumes.create(
            f"{self.container_name}-data", labels={LAB_LABEL: self.prefix, ROLE_LABEL: "registry"}
        )
        endpoint = self.client.api.create_endpoint_config(ipv4_address=self.ip)
        self.client.containers.run(
            REGISTRY_IMAGE,
            name=self.container_name,
            detach=True,
            labels={LAB_LABEL: self.prefix, ROLE_LABEL: "registry"},
            volumes={volume.name: {"bind": "/var/lib/registry", "mode": "rw"}},
            network=network,
            networking_config={network: endpoint},
            restart_policy=UNLESS_STOPPED,
        )
        log.info("lab %s: registry %s at %s", self.prefix, self.container_name, self.url)

    def _session(self) -> requests.Session:
        session = requests.Session()
        session.trust_env = False  # this machine's proxy settings are not for the lab
        return session

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        with self._session() as session:
            while time.monotonic() < deadline:
                try:
                    if session.get(f"{self.url}/v2/", timeout=2).status_code == 200:
                        return
                except requests.RequestException:
                    pass
                time.sleep(0.2)
        try:
            logs = self.client.containers.get(self.container_name).logs(tail=20).decode()
        except docker.errors.NotFound:
            logs = "(no container)"
        raise RegistryError(
            f"the lab's registry at {self.url} did not answer within {timeout:.0f}s; its "
            f"log:\n{logs}"
        )

    def holds(self, image: str) -> bool:
        """Whether the registry's manifest for `image` names this engine's image config."""
        path = mirror_path(image)
        if path is None:
            return False
        repository, _, tag = path.rpartition(":")
        with self._session() as session:
            response = session.get(
                f"{self.url}/v2/{repository}/manifests/{tag}",
                headers={"Accept": MANIFEST_TYPES},
                timeout=10,
            )
        if response.status_code != 200:
            return False
        config = response.json().get("config", {}).get("digest")
        return bool(config) and config == self.client.images.get(image).id

    def push(self, image: str) -> bool:
        """Copy `image` from this machine's engine into the registry; False if it was
        there already. Layers go uncompressed: the lab's network is a local bridge."""
        path = mirror_path(image)
        if path is None:
            raise RegistryError(
                f"{image} is not a docker.io name, and the registry mirrors docker.io only: "
                "load it into the nodes instead (NodeCluster.load_image)"
            )
        if self.holds(image):
            log.info("lab %s: registry holds %s already", self.prefix, image)
            return False
        if shutil.which("skopeo") is None:
            raise RegistryError(
                "skopeo is missing: `make venv` as root installs it (apt-get install skopeo)"
            )
        started = time.monotonic()
        # No proxy for the lab's own address (this machine's proxy cannot reach it).
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        done = subprocess.run(
            [
                "skopeo", "copy", "--quiet", "--dest-tls-verify=false",
                "--dest-compress=false", f"docker-daemon:{image}",
                f"docker://{self.ip}:{PORT}/{path}",
            ],
            capture_output=True, text=True, timeout=900, check=False, env=env,
        )  # fmt: skip
        if done.returncode != 0:
            raise RegistryError(f"pushing {image} to the lab's registry failed: {done.stderr}")
        log.info(
            "lab %s: pushed %s to the registry in %.1fs", self.prefix, image,
            time.monotonic() - started,
        )  # fmt: skip
        return True
