"""The kubelet's TLSConnection (agents/kubelet/streaming.py): one TLS connection that a
reader thread and writer threads use at once, as exec and port-forward do. Each SSL call
is under one lock and the reader waits for data outside it, so a writer is never held
up by a reader that waits for the client."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

from agents.kubelet.streaming import TLSConnection
from kubelab import pki


def _pair(tmp_path: Path) -> tuple[ssl.SSLSocket, ssl.SSLSocket]:
    ca = pki.new_ca("streaming-test")
    crt, key = pki.write_pair(pki.issue(ca, "kubelet", server=True, ip_addresses=["127.0.0.1"]),
                              tmp_path, "kubelet")  # fmt: skip
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem())
    server_ctx = pki.server_ssl_context(tmp_path / "ca.crt", crt, key, require_client_cert=False)
    client_ctx = pki.client_ssl_context(tmp_path / "ca.crt", None, None)
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[ssl.SSLSocket] = []
    accept = threading.Thread(
        target=lambda: accepted.append(
            server_ctx.wrap_socket(listener.accept()[0], server_side=True)
        )
    )
    accept.start()
    raw = socket.create_connection(listener.getsockname(), timeout=10)
    client = client_ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    accept.join(timeout=10)
    listener.close()
    return accepted[0], client


def test_a_waiting_reader_does_not_hold_up_the_writers(tmp_path: Path) -> None:
    server, client = _pair(tmp_path)
    conn = TLSConnection(server)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(conn.recv(100)), daemon=True)
    reader.start()  # waits: the client sends nothing until it has read everything
    payload = bytes(range(256)) * 4096  # 1 MiB, more than the socket buffers hold
    writers = [
        threading.Thread(target=conn.sendall, args=(payload,), daemon=True) for _ in range(2)
    ]
    for writer in writers:
        writer.start()
    got = bytearray()
    while len(got) < 2 * len(payload):
        got += client.recv(65536)
    for writer in writers:
        writer.join(timeout=10)
    assert bytes(got) == payload * 2, "each sendall is one unit, never interleaved"
    client.sendall(b"bye")
    reader.join(timeout=10)
    assert received == [b"bye"]
    client.close()
    assert conn.recv(100) == b""  # the client's close ends the reader
