"""A component's own HTTPS endpoint: `/healthz`, `/readyz` (with `/healthz/<check>` and
`/readyz/<check>` for one check, `?verbose` for the list) and `/metrics` in
Prometheus' text format, as kube-controller-manager serves them on 10257 and
kube-scheduler on 10259.

The serving certificate is the one given (`--tls-cert-file`, `--tls-private-key-file`)
or, as the Go components do without one, a self-signed pair made once in `--cert-dir`
(`<name>.crt`/`.key`, kept for the next start, with the CA that signed it beside them
for a client that wants to verify it).

A departure: the endpoints need no authentication (the Go components delegate
`/metrics` to the apiserver's authorization); they carry no secrets.
"""

from __future__ import annotations

import http.server
import logging
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kubelab import pki

log = logging.getLogger(__name__)

Check = Callable[[], str | None]
"""A health check: None when healthy, else what is wrong."""


def serving_context(
    cert_file: Path | None, key_file: Path | None, cert_dir: Path | None, name: str
) -> ssl.SSLContext:
    """The TLS context of the endpoint (module docstring)."""
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
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert_file), str(key_file))
    return context


class _Handler(http.server.BaseHTTPRequestHandler):
    server: HealthServer

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        top, _, check = url.path.strip("/").partition("/")
        if top == "metrics" and not check:
            self._send(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        elif top in ("healthz", "readyz", "livez"):
            checks = self.server.readyz if top == "readyz" else self.server.healthz
            self._health(top, checks, check, "verbose" in url.query)
        else:
            self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")

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

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None  # a probe every few seconds is not news


class HealthServer(http.server.ThreadingHTTPServer):
    """The endpoint of the module docstring, serving from a thread once `start`ed."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        context: ssl.SSLContext,
        registry: CollectorRegistry,
        healthz: Mapping[str, Check],
        readyz: Mapping[str, Check],
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
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

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
