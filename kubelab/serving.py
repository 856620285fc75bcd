"""A component's own HTTPS endpoint: `/healthz`, `/readyz`, `/livez` (with
`/healthz/<check>` and `/readyz/<check>` for one check, `?verbose` for the list) and
`/metrics` in Prometheus' text format, as kube-controller-manager serves them on 10257 and
kube-scheduler on 10259, with those components' flags (`add_flags`, `serve`):

    --secure-port N, --bind-address IP      where (0: not at all)
    --tls-cert-file, --tls-private-key-file the serving certificate
    --cert-dir DIR                          where a self-signed one is kept without them
    --client-ca-file FILE                   the CA client certificates must chain to
    --authentication-kubeconfig FILE        the apiserver that reviews bearer tokens
    --authorization-kubeconfig FILE         the apiserver that reviews access
    --authorization-always-allow-paths      open to anyone (/healthz,/readyz,/livez)

The serving certificate is the one given or, as the Go components do without one, a
self-signed pair made once in `--cert-dir` (`<name>.crt`/`.key`, kept for the next
start, with the CA that signed it beside them for a client that wants to verify it).

Every request is authenticated and authorized by delegation (`kubelab.delegatedauth`):
a client certificate from `--client-ca-file` or a bearer token the apiserver vouches for
(TokenReview), else the caller is `system:anonymous`; a token the apiserver does not
vouch for gets 401. Then the always-allowed paths (kubelets' probes, load balancers'
checks) and the group `system:masters` pass; anyone else needs a SubjectAccessReview that
allows `get` on the non-resource path (RBAC's `nonResourceURLs`; the bootstrap role
`system:monitoring` grants `/metrics` to the group of that name), else 403 with the
apiserver's wording. Without `--authorization-kubeconfig` only those two pass, without
`--authentication-kubeconfig` bearer tokens are not looked at: as in Kubernetes, a
component started without them serves its metrics to nobody but system:masters.

A departure: the client CA is only `--client-ca-file`; the Go components also read it
from the ConfigMap `kube-system/extension-apiserver-authentication`, which kubelab's
apiserver does not publish.
"""

from __future__ import annotations

import argparse
import http.server
import logging
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kubelab import fastjson, pki
from kubelab.api import errors
from kubelab.client import KubeconfigError, RestClient, load_kubeconfig
from kubelab.delegatedauth import Delegation, User

log = logging.getLogger(__name__)

Check = Callable[[], str | None]
"""A health check: None when healthy, else what is wrong."""

ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
"""`--authorization-always-allow-paths`' default, kube-controller-manager's and
kube-scheduler's."""

ALWAYS_ALLOW_GROUPS = ("system:masters",)
"""Groups allowed without asking: the apiserver would allow them anything anyway."""


REVIEW_TIMEOUT = 10.0
"""Seconds a TokenReview or SubjectAccessReview may take (the Go components' default)."""


class ServingError(Exception):
    """The endpoint cannot be served as configured; the message says what to fix."""


def add_flags(parser: argparse.ArgumentParser, secure_port: int) -> None:
    """The flags of the module docstring; `secure_port` is the component's port."""
    parser.add_argument("--secure-port", type=int, default=secure_port)
    parser.add_argument("--bind-address", default="0.0.0.0")
    parser.add_argument("--tls-cert-file", type=Path)
    parser.add_argument("--tls-private-key-file", type=Path)
    parser.add_argument("--cert-dir", type=Path)
    parser.add_argument("--client-ca-file", type=Path)
    parser.add_argument("--authentication-kubeconfig", type=Path)
    parser.add_argument("--authorization-kubeconfig", type=Path)
    parser.add_argument(
        "--authorization-always-allow-paths",
        type=lambda text: tuple(p for p in text.split(",") if p),
        default=ALWAYS_ALLOW_PATHS,
    )


def serve(
    args: argparse.Namespace,
    name: str,
    registry: CollectorRegistry,
    healthz: Mapping[str, Check],
    readyz: Mapping[str, Check],
) -> HealthServer | None:
    """The endpoint of component `name` as the flags of `add_flags` say, started (None
    with `--secure-port 0`); a ServingError if it cannot be."""
    if args.secure_port == 0:
        return None
    clients: list[RestClient] = []
    try:
        context = serving_context(
            args.tls_cert_file, args.tls_private_key_file, args.cert_dir, name, args.client_ca_file
        )
        reviewers: list[RestClient | None] = []
        for flag, path in (
            ("--authentication-kubeconfig", args.authentication_kubeconfig),
            ("--authorization-kubeconfig", args.authorization_kubeconfig),
        ):
            if path is None:
                log.warning("no %s: %s", flag, _WITHOUT[flag])
                reviewers.append(None)
                continue
            client = RestClient(
                load_kubeconfig(path),
                user_agent=f"{name}/delegated-auth",
                timeout=REVIEW_TIMEOUT,
                max_retries=1,
            )
            clients.append(client)
            reviewers.append(client)
        server = HealthServer(
            (args.bind_address, args.secure_port),
            context,
            registry,
            healthz,
            readyz,
            delegation=Delegation(*reviewers),
            always_allow_paths=args.authorization_always_allow_paths,
            clients=clients,
        )
    except (OSError, ssl.SSLError, pki.PKIError, KubeconfigError) as exc:
        for client in clients:
            client.close()
        where = f"{args.bind_address}:{args.secure_port}"
        raise ServingError(f"cannot serve /healthz, /readyz, /metrics on {where}: {exc}") from exc
    server.start()
    return server


_WITHOUT = {
    "--authentication-kubeconfig": "bearer tokens are not reviewed (TokenReview), and only "
    "client certificates from --client-ca-file authenticate",
    "--authorization-kubeconfig": "access is not reviewed (SubjectAccessReview), and only "
    "the always-allowed paths and system:masters are served",
}


def serving_context(
    cert_file: Path | None,
    key_file: Path | None,
    cert_dir: Path | None,
    name: str,
    client_ca: Path | None = None,
) -> ssl.SSLContext:
    """The TLS context of the endpoint (module docstring); with `client_ca`, a client
    may present a certificate, which must chain to it."""
    if cert_file is None or key_file is None:
        directory = cert_dir or Path(tempfile.mkdtemp(prefix=f"{name}-"))
        directory.mkdir(parents=True, exist_ok=True)
        cert_file, key_file = directory / f"{name}.crt", directory / f"{name}.key"
        if not cert_file.exists() or not key_file.exists():
            host = socket.gethostname()
            ca = pki.new_ca(f"{name}-ca@{host}")
            serving = pki.issue(
                ca, name, server=True, dns_names=["localhost", host], ip_addresses=["127.0.0.1"]
            )
            pki.write_pair(serving, directory, name)
            pki.write_pair(ca, directory, f"{name}-ca")
    if client_ca is not None:
        return pki.server_ssl_context(client_ca, cert_file, key_file, require_client_cert=False)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert_file), str(key_file))
    return context


def _allowed_path(path: str, patterns: Sequence[str]) -> bool:
    """Whether `path` is one of `patterns` (a trailing `*` matches any rest), as the
    always-allow-paths authorizer matches."""
    return any(path.startswith(p[:-1]) if p.endswith("*") else path == p for p in patterns)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: HealthServer

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        user = self._caller()
        if user is None:
            self._status(errors.unauthorized())
            return
        if not self.server.allows(user, url.path):
            self._status(errors.forbidden_path(user.name, "get", url.path))
            return
        top, _, check = url.path.strip("/").partition("/")
        if top == "metrics" and not check:
            self._send(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        elif top in ("healthz", "readyz", "livez"):
            checks = self.server.readyz if top == "readyz" else self.server.healthz
            self._health(top, checks, check, "verbose" in url.query)
        else:
            self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")

    def _caller(self) -> User | None:
        """Who sends the request (`Delegation.authenticate`)."""
        assert isinstance(self.connection, ssl.SSLSocket)
        peer = self.connection.getpeercert()
        return self.server.delegation.authenticate(peer, self.headers.get("Authorization", ""))

    def _health(self, top: str, checks: Mapping[str, Check], only: str, verbose: bool) -> None:
        if only:
            if only not in checks:
                self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")
                return
            checks = {only: checks[only]}
        failures: list[str] = []
        lines: list[str] = []
        for name, check in checks.items():
            problem = check()
            if problem is None:
                lines.append(f"[+]{name} ok")
            else:
                lines.append(f"[-]{name} failed: reason withheld")
                failures.append(f"{name}: {problem}")
        if failures:
            log.info("%s check failed: %s", top, "; ".join(failures))
            body = "\n".join(lines) + f"\n{top} check failed\n"
            self._send(500, body.encode(), "text/plain; charset=utf-8")
        elif verbose:
            body = "\n".join(lines) + f"\n{top} check passed\n"
            self._send(200, body.encode(), "text/plain; charset=utf-8")
        else:
            self._send(200, b"ok", "text/plain; charset=utf-8")

    def _status(self, error: errors.StatusError) -> None:
        """A refusal as the apiserver words it: a Status object."""
        self._send(error.code, fastjson.dumps(error.status()), "application/json")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None  # a probe every few seconds is not news


class HealthServer(http.server.ThreadingHTTPServer):
    """The endpoint of the module docstring, serving from a thread once `start`ed.
    `clients` (the delegation's) are closed when it stops."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        context: ssl.SSLContext,
        registry: CollectorRegistry,
        healthz: Mapping[str, Check],
        readyz: Mapping[str, Check],
        *,
        delegation: Delegation,
        always_allow_paths: Sequence[str] = ALWAYS_ALLOW_PATHS,
        clients: Sequence[RestClient] = (),
    ) -> None:
        super().__init__(address, _Handler)
        # The handshake happens in the request's thread, not in the accept loop: one
        # slow client must not hold up the probes of the others.
        self.socket = context.wrap_socket(
            self.socket, server_side=True, do_handshake_on_connect=False
        )
        self.registry = registry
        self.healthz = dict(healthz)
        self.readyz = {**healthz, **readyz}
        self.delegation = delegation
        self.always_allow_paths = tuple(always_allow_paths)
        self._clients = tuple(clients)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def allows(self, user: User, path: str) -> bool:
        """Whether `user` may get `path` (module docstring)."""
        if _allowed_path(path, self.always_allow_paths):
            return True
        if any(group in ALWAYS_ALLOW_GROUPS for group in user.groups):
            return True
        return self.delegation.authorize(
            user, {"nonResourceAttributes": {"path": path, "verb": "get"}}
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self.serve_forever, name="healthz", daemon=True)
        self._thread.start()
        log.info(
            "serving /healthz, /readyz and /metrics on https://%s:%d", *self.server_address[:2]
        )

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(5)
        for client in self._clients:
            client.close()
