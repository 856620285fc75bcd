"""An HTTPS server for the webhooks tests serve (admission, CRD conversion): JSON in,
JSON out, with a certificate from a throwaway CA that the apiserver is given as
``caBundle``."""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubelab import pki

Respond = Callable[[dict[str, Any], str], dict[str, Any]]
"""(the posted JSON, the URL path without its query) -> the JSON to answer."""


@contextlib.contextmanager
def json_over_https(tmp_path: Path, respond: Respond) -> Iterator[tuple[str, str]]:
    """Serve `respond` on a loopback port until the block ends; yields the server's base
    URL (https://127.0.0.1:<port>) and the base64 CA bundle that trusts it."""
    ca = pki.new_ca("webhook-test-ca", valid_days=1)
    cert = pki.issue(ca, "webhook", ip_addresses=["127.0.0.1"], server=True, valid_days=1)
    cert_path, key_path = pki.write_pair(cert, tmp_path, "webhook")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            posted = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body = json.dumps(respond(posted, self.path.split("?")[0])).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            """The apiserver hanging up on a slow answer (its timeout) is expected."""

    server = Server(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield (
            f"https://127.0.0.1:{server.server_address[1]}",
            base64.b64encode(ca.cert_pem()).decode(),
        )
    finally:
        server.shutdown()
        server.server_close()
