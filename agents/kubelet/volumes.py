"""Pod volumes on the node's disk, under `<root-dir>/pods/<uid>/volumes/<plugin>/<name>`,
bind-mounted into containers: emptyDir (`medium: Memory` as a tmpfs), hostPath,
persistentVolumeClaim (the claim's bound PersistentVolume, a hostPath or local directory
of this node: the local-path provisioner's volumes are hostPath ones), configMap, secret,
downwardAPI and projected (with the service-account token from the
TokenRequest API, refreshed at 80 % of its life, as the kubelet's token manager does).

API-backed volumes are written the way Kubernetes' atomic writer does: the files go into
a fresh hidden directory, `..data` is switched to it with one rename, and each visible
name is a symlink through `..data`, so a container never sees half an update.

A volume that cannot be set up (a missing ConfigMap that is not optional, a hostPath of
the wrong type) raises `MountError`; the pod worker reports FailedMount and retries.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.kubelet import podspec
from agents.kubelet.config import byte_count
from agents.kubelet.runtime import Mount
from kubelab.api.errors import StatusError
from kubelab.api.validation.storage import PV_SOURCES
from kubelab.client import RestClient, resource_for

log = logging.getLogger("kubelab.kubelet.volumes")

Object = dict[str, Any]
SERVICE_ACCOUNTS = resource_for("v1", "ServiceAccount")
TOKEN_REFRESH_FRACTION = 0.8


class MountError(Exception):
    """A volume could not be set up; the message is FailedMount's."""


def write_atomic(directory: Path, files: dict[str, tuple[bytes, int]]) -> bool:
    """Make `directory` hold exactly `files` (relative path -> (content, mode)), switching
    all at once; returns whether anything changed."""
    directory.mkdir(parents=True, exist_ok=True)
    current = directory / "..data"
    if current.is_symlink():
        old = directory / os.readlink(current)
        same = sorted(str(p.relative_to(old)) for p in old.rglob("*") if p.is_file()) == sorted(
            files
        ) and all((old / k).read_bytes() == v for k, (v, _) in files.items())
        if same:
            return False
    else:
        old = None
    stamp = datetime.datetime.now(datetime.UTC).strftime("..%Y_%m_%d_%H_%M_%S.%f")
    fresh = directory / stamp
    fresh.mkdir()
    for rel, (content, mode) in files.items():
        target = fresh / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(mode)
    link = directory / "..data_tmp"
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(stamp)
    link.rename(current)
    for top in {rel.split("/", 1)[0] for rel in files}:
        visible = directory / top
        if not visible.is_symlink():
            visible.symlink_to(f"..data/{top}")
    for entry in directory.iterdir():
        if entry.is_symlink() and entry.name not in {"..data"} and not entry.exists():
            entry.unlink()  # a key that is gone
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return True


@dataclass
class _Token:
    token: str
    issued: float
    expires: float


@dataclass
class VolumeManager:
    """Sets up and tears down pod volumes for one node (module docstring)."""

    root_dir: Path
    client: RestClient
    node_name: str
    lookup: podspec.Lookup
    _tokens: dict[tuple[str, str], _Token] = field(default_factory=dict)
    _claimed_paths: dict[tuple[str, str], Path] = field(default_factory=dict)
    """(pod uid, volume name) -> the directory its claim resolved to: a claim's volume is
    resolved once, when the pod first mounts it, as Kubernetes mounts it once for the
    pod's life, not with two reads of the apiserver at each sync."""

    def pod_dir(self, uid: str) -> Path:
        return self.root_dir / "pods" / uid

    def setup(
        self, pod: Object, host_ip: str, pod_ip: str, allocatable: dict[str, str]
    ) -> dict[str, Path]:
        """Every volume of `pod`, up to date: name -> host directory (or file)."""
        out: dict[str, Path] = {}
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            out[volume["name"]] = self._setup_one(pod, volume, host_ip, pod_ip, allocatable)
        return out

    def _dir(self, pod: Object, plugin: str, name: str) -> Path:
        return self.pod_dir(pod["metadata"]["uid"]) / "volumes" / f"kubernetes.io~{plugin}" / name

    def _setup_one(
        self, pod: Object, volume: Object, host_ip: str, pod_ip: str, allocatable: dict[str, str]
    ) -> Path:
        name = volume["name"]
        ns = pod["metadata"].get("namespace", "default")
        if "emptyDir" in volume:
            path = self._dir(pod, "empty-dir", name)
            if not path.exists():
                path.mkdir(parents=True, mode=0o777)
                path.chmod(0o777)
                if (volume["emptyDir"] or {}).get("medium") == "Memory":
                    self._mount_tmpfs(path, (volume["emptyDir"] or {}).get("sizeLimit"))
            return path
        if "hostPath" in volume:
            return _host_path(volume["hostPath"], name)
        if "persistentVolumeClaim" in volume:
            key = (pod["metadata"]["uid"], name)
            claimed = self._claimed_paths.get(key)
            if claimed is None:
                claimed = self._claimed(ns, volume["persistentVolumeClaim"], name)
                self._claimed_paths[key] = claimed
            return claimed
        if "configMap" in volume:
            src = volume["configMap"]
            files = self._keys("configmaps", ns, src, name)
            path = self._dir(pod, "configmap", name)
            write_atomic(path, files)
            return path
        if "secret" in volume:
            src = {**volume["secret"], "name": volume["secret"].get("secretName", "")}
            files = self._keys("secrets", ns, src, name)
            path = self._dir(pod, "secret", name)
            write_atomic(path, files)
            return path
        if "downwardAPI" in volume:
            files = self._downward(pod, volume["downwardAPI"], host_ip, pod_ip, allocatable)
            path = self._dir(pod, "downward-api", name)
            write_atomic(path, files)
            return path
        if "projected" in volume:
            files = self._projected(pod, volume, host_ip, pod_ip, allocatable)
            path = self._dir(pod, "projected", name)
            write_atomic(path, files)
            return path
        raise MountError(
            f'volume "{name}": unsupported volume type {sorted(set(volume) - {"name"})}'
        )

    def _claimed(self, namespace: str, source: Object, volume: str) -> Path:
        """The node directory behind a claim: claim -> its bound PersistentVolume ->
        that volume's hostPath or local path (the sources a node's disk can serve)."""
        name = source.get("claimName", "")
        where = f'MountVolume.SetUp failed for volume "{volume}" : error processing PVC'
        claim = self.lookup("persistentvolumeclaims", namespace, name)
        if claim is None:
            raise MountError(
                f'{where} {namespace}/{name}: persistentvolumeclaim "{name}" not found'
            )
        volume_name = (claim.get("spec") or {}).get("volumeName")
        if not volume_name or (claim.get("status") or {}).get("phase") != "Bound":
            raise MountError(f"{where} {namespace}/{name}: PVC is not bound")
        pv = self.lookup("persistentvolumes", "", volume_name)
        if pv is None:
            raise MountError(
                f'{where} {namespace}/{name}: persistentvolume "{volume_name}" not found'
            )
        spec = pv.get("spec") or {}
        if "hostPath" in spec:
            path = _host_path(spec["hostPath"], volume)
        elif "local" in spec:
            path = Path(spec["local"].get("path", ""))
            if not path.exists():
                raise MountError(
                    f'{where} {namespace}/{name}: the local volume "{volume_name}" has no '
                    f"{path} on this node"
                )
        else:
            kinds = sorted(set(spec) & set(PV_SOURCES))
            raise MountError(
                f'{where} {namespace}/{name}: volume "{volume_name}" is of type {kinds}; '
                "this node mounts hostPath and local volumes"
            )
        log.info(
            "claim %s/%s (uid %s) -> volume %s (uid %s, resourceVersion %s) at %s",
            namespace,
            name,
            claim["metadata"].get("uid"),
            volume_name,
            pv["metadata"].get("uid"),
            pv["metadata"].get("resourceVersion"),
            path,
        )
        return path

    def _mount_tmpfs(self, path: Path, size: object) -> None:
        args = ["mount", "-t", "tmpfs", "-o", "mode=0777"]
        if size:
            args[-1] += f",size={byte_count(size)}"
        done = subprocess.run([*args, "tmpfs", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise MountError(f"mounting a tmpfs for emptyDir {path.name}: {done.stderr.strip()}")

    def _keys(
        self, kind: str, namespace: str, src: Object, volume: str
    ) -> dict[str, tuple[bytes, int]]:
        obj = self.lookup(kind, namespace, src.get("name", ""))
        singular = "configmap" if kind == "configmaps" else "secret"
        if obj is None:
            if src.get("optional"):
                return {}
            raise MountError(
                f'MountVolume.SetUp failed for volume "{volume}" : {singular} '
                f'"{src.get("name", "")}" not found'
            )
        data: dict[str, bytes] = {}
        for key, value in (obj.get("data") or {}).items():
            data[key] = base64.b64decode(value) if kind == "secrets" else str(value).encode()
        for key, value in (obj.get("binaryData") or {}).items():
            data[key] = base64.b64decode(value)
        mode = int(src.get("defaultMode", 0o644))
        items = src.get("items")
        if not items:
            return {k: (v, mode) for k, v in data.items()}
        out = {}
        for item in items:
            if item["key"] not in data:
                if src.get("optional"):
                    continue
                raise MountError(
                    f'MountVolume.SetUp failed for volume "{volume}" : configmap references '
                    f"non-existent config key: {item['key']}"
                )
            out[item.get("path") or item["key"]] = (data[item["key"]], int(item.get("mode", mode)))
        return out

    def _downward(
        self,
        pod: Object,
        src: Object,
        host_ip: str,
        pod_ip: str,
        allocatable: dict[str, str],
    ) -> dict[str, tuple[bytes, int]]:
        mode = int(src.get("defaultMode", 0o644))
        out = {}
        first = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", "")
        for item in src.get("items") or []:
            try:
                if "fieldRef" in item:
                    value = podspec.field_value(pod, item["fieldRef"]["fieldPath"], host_ip, pod_ip)
                else:
                    value = podspec.resource_field(
                        pod, item["resourceFieldRef"], first, allocatable
                    )
            except podspec.ConfigError as exc:
                raise MountError(str(exc)) from None
            out[item["path"]] = (value.encode(), int(item.get("mode", mode)))
        return out

    def _projected(
        self,
        pod: Object,
        volume: Object,
        host_ip: str,
        pod_ip: str,
        allocatable: dict[str, str],
    ) -> dict[str, tuple[bytes, int]]:
        src = volume["projected"]
        ns = pod["metadata"].get("namespace", "default")
        mode = int(src.get("defaultMode", 0o644))
        out: dict[str, tuple[bytes, int]] = {}
        for source in src.get("sources") or []:
            if "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                token = self._token(pod, volume["name"], sat)
                out[sat.get("path", "token")] = (token.encode(), mode)
            elif "configMap" in source:
                out.update(self._keys("configmaps", ns, source["configMap"], volume["name"]))
            elif "secret" in source:
                out.update(self._keys("secrets", ns, source["secret"], volume["name"]))
            elif "downwardAPI" in source:
                out.update(self._downward(pod, source["downwardAPI"], host_ip, pod_ip, allocatable))
        return {k: (v, mode) for k, (v, _) in out.items()}

    def _token(self, pod: Object, volume: str, sat: Object) -> str:
        """The service account's token for this pod (TokenRequest), reused until 80 % of
        its life has passed."""
        meta = pod["metadata"]
        key = (meta["uid"], volume)
        now = time.time()
        held = self._tokens.get(key)
        if held and now < held.issued + (held.expires - held.issued) * TOKEN_REFRESH_FRACTION:
            return held.token
        account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        request: Object = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": int(sat.get("expirationSeconds", 3607)),
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        if sat.get("audience"):
            request["spec"]["audiences"] = [sat["audience"]]
        path = (
            f"/api/v1/namespaces/{meta.get('namespace', 'default')}/serviceaccounts/{account}/token"
        )
        try:
            answer = self.client.request("POST", path, body=request)
        except StatusError as exc:
            raise MountError(
                f'MountVolume.SetUp failed for volume "{volume}" : failed to fetch token: {exc}'
            ) from None
        status = answer.get("status") or {}
        expires = _parse_time(status.get("expirationTimestamp")) or now + 3600
        self._tokens[key] = _Token(str(status.get("token", "")), now, expires)
        return self._tokens[key].token

    def next_refresh(self, uid: str) -> float | None:
        """When the first of the pod's tokens is due for refreshing."""
        due = [
            t.issued + (t.expires - t.issued) * TOKEN_REFRESH_FRACTION
            for (u, _), t in self._tokens.items()
            if u == uid
        ]
        return min(due) if due else None

    def teardown(self, uid: str) -> None:
        """Remove everything the pod's volumes left on disk (tmpfs unmounted first)."""
        for key in [k for k in self._tokens if k[0] == uid]:
            del self._tokens[key]
        for key in [k for k in list(self._claimed_paths) if k[0] == uid]:
            del self._claimed_paths[key]
        base = self.pod_dir(uid)
        empty = base / "volumes" / "kubernetes.io~empty-dir"
        if empty.is_dir():
            for d in empty.iterdir():
                if os.path.ismount(d):
                    subprocess.run(["umount", str(d)], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def _parse_time(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _host_path(src: Object, volume: str) -> Path:
    path = Path(src.get("path", ""))
    kind = src.get("type") or ""
    if kind == "DirectoryOrCreate":
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "FileOrCreate" and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    elif kind == "Directory" and not path.is_dir():
        raise MountError(
            f'MountVolume.SetUp failed for volume "{volume}" : hostPath type check failed: '
            f"{path} is not a directory"
        )
    elif kind == "File" and not path.is_file():
        raise MountError(
            f'MountVolume.SetUp failed for volume "{volume}" : hostPath type check failed: '
            f"{path} is not a file"
        )
    return path


def container_mounts(container: Object, volumes: dict[str, Path], pod: Object) -> list[Mount]:
    """The binds of a container's volumeMounts (subPath included); API-backed volumes are
    always read-only, as Kubernetes mounts them."""
    kinds = {v["name"]: v for v in (pod.get("spec") or {}).get("volumes") or []}
    out = []
    for vm in container.get("volumeMounts") or []:
        host = volumes.get(vm["name"])
        if host is None:
            raise MountError(f'unable to find volume "{vm["name"]}" for the container mount')
        if vm.get("subPath"):
            host = host / vm["subPath"]
            if not host.exists():
                host.mkdir(parents=True)
        source = kinds.get(vm["name"], {})
        api_backed = any(k in source for k in ("configMap", "secret", "downwardAPI", "projected"))
        claim_read_only = bool((source.get("persistentVolumeClaim") or {}).get("readOnly"))
        read_only = bool(vm.get("readOnly")) or api_backed or claim_read_only
        out.append(Mount(str(host), vm["mountPath"], read_only))
    return out
