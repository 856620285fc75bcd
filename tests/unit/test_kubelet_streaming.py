"""The kubelet's TLSConnection (agents/kubelet/streaming.py): one TLS connection that a
reader thread and writer threads use at once, as exec and port-forward do. Each SSL call
is under one lock and the reader waits for data outside it, so a writer is never held
up by a reader that waits for the client. And ChannelMessages, which reads channel
messages however wsproto hands them over."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import wsproto.events
from wsproto import ConnectionType, WSConnection

from agents.kubelet.streaming import ChannelMessages, TLSConnection
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


def test_channel_messages_in_text_or_binary_frames_and_in_pieces() -> None:
    client, server = WSConnection(ConnectionType.CLIENT), WSConnection(ConnectionType.SERVER)
    server.receive_data(client.send(wsproto.events.Request(host="k", target="/exec")))
    client.receive_data(server.send(wsproto.events.AcceptConnection()))
    wire = client.send(wsproto.events.TextMessage(data="\x00h\u00e9llo"))
    wire += client.send(wsproto.events.BytesMessage(data=b"\xff\x00"))
    messages, seen = ChannelMessages(), []
    for i in range(len(wire)):  # a byte at a time: each message arrives in pieces
        server.receive_data(wire[i : i + 1])
        for event in server.events():
            if isinstance(event, wsproto.events.Message):
                seen.append(messages.add(event))
    assert [m for m in seen if m is not None] == [(0, "h\u00e9llo".encode()), (255, b"\x00")]
