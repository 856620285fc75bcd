"""Where the apiserver is and who we are to it: kubeconfig files and in-cluster config,
both resolved to one `ClientConfig` that `RestClient` takes.

Kubeconfig. The file format kubectl reads: named `clusters` (server URL, CA), `users`
(client certificate, bearer token) and `contexts` (a cluster, a user, a namespace), plus
a `current-context`. Loading follows kubectl's rules, so that a file that works with
kubectl works here:

* The files are the explicit path if one is given, else the list in `KUBECONFIG`
  (separated by `os.pathsep`; names of missing files are skipped), else
  `~/.kube/config`.
* Several files are merged entry by entry: the first file that defines a cluster, user
  or context of a given name wins, and so does the first `current-context`.
* File paths inside a file (`certificate-authority`, `client-certificate`, `client-key`,
  `tokenFile`) are relative to that file's directory.
* Inline data wins over a path to the same thing (`certificate-authority-data` over
  `certificate-authority`, `token` over `tokenFile`).

Certificates, keys and the CA are read when the configuration is loaded, so that a
missing file is reported at start-up, naming the kubeconfig and the entry that refers to
it, rather than as a TLS failure on the first request. A token file is only checked: its
path is kept because the REST client re-reads it (projected service-account tokens are
rotated on disk).

In-cluster. A pod reaches the apiserver through the `kubernetes` Service, whose address
the kubelet puts in `KUBERNETES_SERVICE_HOST`/`_PORT`, with the credentials of its
service account mounted at `/var/run/secrets/kubernetes.io/serviceaccount` (`token`,
`ca.crt`, `namespace`).

`write_kubeconfig` produces a file in the same format for labadm to hand out.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]

from kubelab import pki

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's service-account credentials."""

_PATH_FIELDS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}
"""Fields holding file paths, per entry type: resolved against the kubeconfig's directory."""

_UNSUPPORTED_AUTH = ("exec", "auth-provider", "username", "password")


class KubeconfigError(Exception):
    """The configuration cannot be loaded; the message names the file and what is wrong."""


@dataclass(frozen=True)
class ClientConfig:
    """How to reach and authenticate to one apiserver.

    `ca_data` (PEM) verifies the server; without it the system's CAs do, unless
    `insecure_skip_tls_verify`. A client certificate is `client_cert_data` with
    `client_key_data` (PEM, both or neither). A bearer token is `token`, or the content of
    `token_file`, re-read as it changes. `namespace` is the default namespace of the
    context (or of the pod). `context` is the kubeconfig context's name ("" in a pod).
    `source` says where this came from, for error messages.
    """

    server: str
    ca_data: bytes | None = field(default=None, repr=False)
    insecure_skip_tls_verify: bool = False
    client_cert_data: bytes | None = field(default=None, repr=False)
    client_key_data: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    token_file: Path | None = None
    namespace: str = "default"
    context: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        where = f" ({self.source})" if self.source else ""
        if not self.server.startswith(("https://", "http://")):
            raise KubeconfigError(
                f"server {self.server!r}{where} must be a URL starting with https:// (or http://)"
            )
        if (self.client_cert_data is None) != (self.client_key_data is None):
            raise KubeconfigError(
                f"a client certificate needs both the certificate and its key{where}"
            )
        if self.insecure_skip_tls_verify and self.ca_data is not None:
            raise KubeconfigError(
                f"a certificate authority and insecure-skip-tls-verify were both given{where}: "
                "remove one of them"
            )


# -- reading files -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """One named cluster, user or context, and the file it came from."""

    name: str
    fields: dict[str, Any]
    file: Path


@dataclass
class _Merged:
    files: list[Path]
    clusters: dict[str, _Entry] = field(default_factory=dict)
    users: dict[str, _Entry] = field(default_factory=dict)
    contexts: dict[str, _Entry] = field(default_factory=dict)
    current_context: str = ""

    def describe_files(self) -> str:
        return ", ".join(str(f) for f in self.files)


def _parse_section(doc: Mapping[str, Any], section: str, kind: str, path: Path) -> list[_Entry]:
    """The entries of `clusters`, `users` or `contexts` (`kind` is the inner key)."""
    items = doc.get(section) or []
    if not isinstance(items, list):
        raise KubeconfigError(f"{path}: `{section}` must be a list")
    entries = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise KubeconfigError(f"{path}: {section}[{i}] has no name")
        fields = item.get(kind) or {}
        if not isinstance(fields, Mapping):
            raise KubeconfigError(f"{path}: {section}[{i}].{kind} must be a mapping")
        resolved = dict(fields)
        for key in _PATH_FIELDS.get(kind, ()):
            if resolved.get(key):
                resolved[key] = path.parent / str(resolved[key])
        entries.append(_Entry(item["name"], resolved, path))
    return entries


def _merge_file(merged: _Merged, path: Path) -> None:
    """Add the entries of `path` that earlier files did not define."""
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML: {exc}") from exc
    if doc is None:  # an empty file is an empty configuration, as for kubectl
        return
    if not isinstance(doc, Mapping):
        raise KubeconfigError(f"kubeconfig {path} must be a YAML mapping (kind: Config)")
    for section, kind, table in (
        ("clusters", "cluster", merged.clusters),
        ("users", "user", merged.users),
        ("contexts", "context", merged.contexts),
    ):
        for entry in _parse_section(doc, section, kind, path):
            table.setdefault(entry.name, entry)
    if not merged.current_context:
        merged.current_context = str(doc.get("current-context") or "")


def _kubeconfig_files(path: str | os.PathLike[str] | None) -> list[Path]:
    if path is not None:
        return [Path(path)]
    env = os.environ.get("KUBECONFIG", "")
    if env:
        listed = [Path(p) for p in env.split(os.pathsep) if p]
        existing = [p for p in listed if p.exists()]
        if not existing:
            raise KubeconfigError(
                f"none of the files in KUBECONFIG exists: {', '.join(map(str, listed))}"
            )
        return existing
    return [Path.home() / ".kube" / "config"]


# -- resolving a context -----------------------------------------------------------------


def _b64(entry: _Entry, key: str) -> bytes:
    value = entry.fields[key]
    try:
        return base64.b64decode("".join(str(value).split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KubeconfigError(f"{entry.file}: {entry.name}: {key} is not valid base64") from exc


def _read(entry: _Entry, key: str) -> bytes:
    path = Path(entry.fields[key])
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KubeconfigError(
            f"{entry.file}: {entry.name}: cannot read {key} {path}: {exc.strerror}"
        ) from exc


def _data_or_file(entry: _Entry, key: str) -> bytes | None:
    """`<key>-data` decoded, else the content of the file `<key>`, else None."""
    if entry.fields.get(f"{key}-data"):
        return _b64(entry, f"{key}-data")
    if entry.fields.get(key):
        return _read(entry, key)
    return None


def _lookup(table: dict[str, _Entry], what: str, name: str, ctx: _Entry, m: _Merged) -> _Entry:
    try:
        return table[name]
    except KeyError:
        raise KubeconfigError(
            f'context "{ctx.name}" ({ctx.file}) refers to {what} "{name}", which is not '
            f"defined in {m.describe_files()}"
        ) from None


def _resolve(m: _Merged, context: str | None) -> ClientConfig:
    name = context or m.current_context
    if not name:
        raise KubeconfigError(
            f"no current-context is set in {m.describe_files()}: pass a context name or set "
            "one with `kubectl config use-context NAME`"
        )
    if name not in m.contexts:
        known = ", ".join(sorted(m.contexts)) or "none"
        raise KubeconfigError(
            f'context "{name}" is not defined in {m.describe_files()} (defined: {known})'
        )
    ctx = m.contexts[name]
    cluster = _lookup(m.clusters, "cluster", str(ctx.fields.get("cluster") or ""), ctx, m)
    server = cluster.fields.get("server")
    if not server:
        raise KubeconfigError(f'{cluster.file}: cluster "{cluster.name}" has no server')

    user_fields: dict[str, Any] = {}
    user_name = str(ctx.fields.get("user") or "")
    cert = key = None
    token_file = None
    if user_name:  # a context without a user talks to the apiserver anonymously
        user = _lookup(m.users, "user", user_name, ctx, m)
        user_fields = user.fields
        unsupported = [k for k in _UNSUPPORTED_AUTH if user_fields.get(k)]
        if unsupported:
            raise KubeconfigError(
                f'{user.file}: user "{user.name}" authenticates with {", ".join(unsupported)}, '
                "which kubelab's client does not support: use a client certificate or a token"
            )
        cert = _data_or_file(user, "client-certificate")
        key = _data_or_file(user, "client-key")
        if (cert is None) != (key is None):
            missing = "client-key" if key is None else "client-certificate"
            raise KubeconfigError(
                f'{user.file}: user "{user.name}" has a client certificate without its other '
                f"half: {missing} (or {missing}-data) is missing"
            )
        if user_fields.get("tokenFile") and not user_fields.get("token"):
            token_file = Path(user_fields["tokenFile"])
            _read(user, "tokenFile")  # only to report a missing file now, not at first use

    return ClientConfig(
        server=str(server).rstrip("/"),
        ca_data=_data_or_file(cluster, "certificate-authority"),
        insecure_skip_tls_verify=bool(cluster.fields.get("insecure-skip-tls-verify")),
        client_cert_data=cert,
        client_key_data=key,
        token=str(user_fields["token"]) if user_fields.get("token") else None,
        token_file=token_file,
        namespace=str(ctx.fields.get("namespace") or "default"),
        context=name,
        source=f'context "{name}" in {ctx.file}',
    )


# -- public entry points -----------------------------------------------------------------


def load_kubeconfig(
    path: str | os.PathLike[str] | None = None, *, context: str | None = None
) -> ClientConfig:
    """Load `context` (default: the current context) from `path`, or from the files that
    `KUBECONFIG` lists, or from ~/.kube/config, merged as kubectl merges them."""
    merged = _Merged(files=_kubeconfig_files(path))
    for file in merged.files:
        _merge_file(merged, file)
    return _resolve(merged, context)


def load_incluster_config(directory: Path | None = None) -> ClientConfig:
    """The configuration of a pod: the `kubernetes` Service, and the service account
    mounted in `directory` (default: `SERVICE_ACCOUNT_DIR`)."""
    directory = directory or SERVICE_ACCOUNT_DIR
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeconfigError(
            "not running in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"
        )
    token_file = directory / "token"
    try:
        token_file.read_bytes()
        ca = (directory / "ca.crt").read_bytes()
    except OSError as exc:
        raise KubeconfigError(
            f"the pod's service account credentials are missing: cannot read {exc.filename} "
            f"({exc.strerror}); is automountServiceAccountToken disabled?"
        ) from exc
    try:
        namespace = (directory / "namespace").read_text().strip()
    except FileNotFoundError:
        namespace = "default"
    bracketed = f"[{host}]" if ":" in host else host  # an IPv6 address
    return ClientConfig(
        server=f"https://{bracketed}:{port}",
        ca_data=ca,
        token_file=token_file,
        namespace=namespace or "default",
        source=f"in-cluster service account {directory}",
    )


def load_config(
    path: str | os.PathLike[str] | None = None, *, context: str | None = None
) -> ClientConfig:
    """Whatever applies, in client-go's order: an explicit kubeconfig, `KUBECONFIG`,
    ~/.kube/config, then the pod's in-cluster configuration."""
    default_file = Path.home() / ".kube" / "config"
    if path is not None or os.environ.get("KUBECONFIG") or default_file.exists():
        return load_kubeconfig(path, context=context)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return load_incluster_config()
    raise KubeconfigError(
        f"no configuration found: KUBECONFIG is not set, {default_file} does not exist and "
        "this is not a pod (KUBERNETES_SERVICE_HOST is not set)"
    )


def _b64_text(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def write_kubeconfig(
    path: str | os.PathLike[str],
    *,
    cluster_name: str,
    server: str,
    ca_data: bytes,
    user_name: str,
    client_cert_data: bytes | None = None,
    client_key_data: bytes | None = None,
    token: str | None = None,
    context_name: str | None = None,
    namespace: str | None = None,
) -> Path:
    """Write a self-contained kubeconfig (everything inline) with one cluster, one user and
    one context, made current, and return its path.

    The context is named `<user>@<cluster>` unless `context_name` says otherwise. The
    file holds credentials, so it is written with mode 0600, atomically.
    """
    if (client_cert_data is None) != (client_key_data is None):
        raise ValueError("client_cert_data and client_key_data must be given together")
    if client_cert_data is None and token is None:
        raise ValueError("a kubeconfig user needs a client certificate or a token")
    user: dict[str, str] = {}
    if client_cert_data is not None and client_key_data is not None:
        user["client-certificate-data"] = _b64_text(client_cert_data)
        user["client-key-data"] = _b64_text(client_key_data)
    if token is not None:
        user["token"] = token
    context: dict[str, str] = {"cluster": cluster_name, "user": user_name}
    if namespace:
        context["namespace"] = namespace
    context_name = context_name or f"{user_name}@{cluster_name}"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {"server": server, "certificate-authority-data": _b64_text(ca_data)},
            }
        ],
        "users": [{"name": user_name, "user": user}],
        "contexts": [{"name": context_name, "context": context}],
        "current-context": context_name,
        "preferences": {},
    }
    target = Path(path)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    pki.write_atomic(target, yaml.safe_dump(doc, sort_keys=False).encode(), 0o600)
    return target
