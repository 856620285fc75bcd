"""A TCP relay from the lab network's gateway address to an apiserver on the host's
loopback, for tests.

The test apiservers (`lab.testenv`, `controlplane.localplane`) listen on 127.0.0.1 only,
and node containers reach the host only at their network's gateway address. The relay
accepts there and copies bytes both ways, TLS untouched: a node names the apiserver
`kubernetes` (a name its serving certificate holds) mapped to the gateway in its
/etc/hosts, so certificate checks pass end to end. The listener is on the lab's
internal network only; nothing beyond this machine can reach it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import threading
from dataclasses import dataclass, field

log = logging.getLogger("lab.relay")

BUFFER = 65536


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy until `source` ends, then end `sink`'s writing side (a half close)."""
    with contextlib.suppress(OSError):
        while data := source.recv(BUFFER):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    target: tuple[str, int] = ("127.0.0.1", 0)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client: socket.socket = self.request
        try:
            upstream = socket.create_connection(self.server.target, timeout=10)
        except OSError as err:
            log.warning("relay: cannot reach %s:%d: %s", *self.server.target, err)
            return
        upstream.settimeout(None)
        with upstream:
            back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join()


@dataclass
class Relay:
    """Listens on `host` (port `port`, 0 for any free one), forwards to `target`."""

    host: str
    target: tuple[str, int]
    port: int = 0
    _server: _Server | None = field(default=None, init=False)

    def start(self) -> Relay:
        server = _Server((self.host, self.port), _Handler)
        server.target = self.target
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, name="relay", daemon=True).start()
        log.info("relay %s:%d -> %s:%d", self.host, self.port, *self.target)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
