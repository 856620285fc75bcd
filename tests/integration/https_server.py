"""An HTTPS server for the webhooks tests serve (admission, CRD conversion): JSON in,
JSON out, on `tests.standin`'s server, with a certificate from a throwaway CA that the
apiserver is given as ``caBundle``."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from kubelab import pki
from tests import standin

Respond = Callable[[dict[str, Any], str], dict[str, Any]]
"""(the posted JSON, the URL path without its query) -> the JSON to answer."""


@contextlib.contextmanager
def json_over_https(tmp_path: Path, respond: Respond) -> Iterator[tuple[str, str]]:
    """Serve `respond` on a loopback port until the block ends; yields the server's base
    URL (https://127.0.0.1:<port>) and the base64 CA bundle that trusts it."""
    ca = pki.new_ca("webhook-test-ca", valid_days=1)

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

    tls = standin.tls_context(ca, tmp_path, "webhook")
    server: standin.StandInServer
    with standin.serve(Handler, tls=tls) as server:
        yield standin.url(server), base64.b64encode(ca.cert_pem()).decode()
