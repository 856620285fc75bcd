"""Stand-in HTTP(S) servers for tests (an admission webhook, a kubelet's endpoints, a
recorder of what a client sent): the standard library's threaded server on a free
loopback port, served from a thread for as long as a `with` block runs.

    with standin.serve(Handler, tls=standin.tls_context(ca, tmp_path)) as server:
        url = standin.url(server, "/admit")
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

from kubelab import pki

log = logging.getLogger("tests.standin")


class StandInServer(ThreadingHTTPServer):
    """The threaded server, with daemon request threads and a client that hangs up
    (an apiserver giving up on a slow webhook, say) logged rather than printed with a
    traceback: for a stand-in that is an ordinary event."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.info("stand-in server: request from %s failed", client_address, exc_info=True)


Server = TypeVar("Server", bound=StandInServer)


def tls_context(
    ca: pki.CertKey, directory: Path, name: str = "standin", client_ca: Path | None = None
) -> ssl.SSLContext:
    """A server context presenting a certificate for 127.0.0.1 issued by `ca` (written
    to `directory` as `name`.crt/.key); with `client_ca`, a client certificate is asked
    for (optional) and verified against it."""
    serving = pki.issue(ca, name, ip_addresses=["127.0.0.1"], server=True, valid_days=1)
    cert, key = pki.write_pair(serving, directory, name)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


@contextmanager
def serve(
    handler: type[BaseHTTPRequestHandler],
    tls: ssl.SSLContext | None = None,
    server_class: type[Server] = StandInServer,  # type: ignore[assignment]
) -> Iterator[Server]:
    """Serve `handler` (over TLS with `tls`) on a free loopback port until the block
    ends."""
    server = server_class(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="stand-in", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def url(server: StandInServer, path: str = "") -> str:
    """The server's URL (https if it serves TLS), with `path`."""
    scheme = "https" if isinstance(server.socket, ssl.SSLSocket) else "http"
    return f"{scheme}://127.0.0.1:{server.server_address[1]}{path}"
