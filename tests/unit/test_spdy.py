"""SPDY/3.1 framing (kubelab.spdy) against frames recorded from the real kubectl, and
the kubelet's port-forward over it (agents.kubelet.streaming) with a socket as the pod.

testdata/spdy/kubectl-1.37.1-port-forward.client.bin holds what `kubectl port-forward`
1.37.1 (KUBECTL_PORT_FORWARD_WEBSOCKETS=false) sent to the kubelet for two HTTP requests;
kubelet-port-forward.server.bin is what the kubelet answered, which kubectl accepted.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
import zlib
from pathlib import Path

import pytest

from agents.kubelet.streaming import PortForwarder, SpdySession
from kubelab import spdy

DATA = Path(__file__).parent / "testdata" / "spdy"
CLIENT = (DATA / "kubectl-1.37.1-port-forward.client.bin").read_bytes()
SERVER = (DATA / "kubelet-port-forward.server.bin").read_bytes()
REQUEST = b"GET /index.html HTTP/1.0\r\n\r\n"


def _pair(request: str, kind: str) -> spdy.Headers:
    return {"streamtype": [kind], "port": ["8080"], "requestid": [request]}


def test_kubectl_frames_decode_to_its_stream_pairs() -> None:
    frames = spdy.Codec().feed(CLIENT)
    assert frames == [
        spdy.SynStream(1, _pair("0", "error")),
        spdy.Data(1, b"", fin=True),
        spdy.SynStream(3, _pair("0", "data")),
        spdy.Data(3, REQUEST),
        spdy.RstStream(3, spdy.CANCEL),
        spdy.SynStream(5, _pair("1", "error")),
        spdy.Data(5, b"", fin=True),
        spdy.SynStream(7, _pair("1", "data")),
        spdy.Data(7, REQUEST),
        spdy.RstStream(7, spdy.CANCEL),
    ]


def test_frames_split_anywhere_decode_the_same() -> None:
    codec = spdy.Codec()
    frames = [f for i in range(len(CLIENT)) for f in codec.feed(CLIENT[i : i + 1])]
    assert frames == spdy.Codec().feed(CLIENT)


def test_header_blocks_use_spdy3s_dictionary() -> None:
    """Go's zlib names the preset dictionary by its Adler-32 in the first block."""
    first_block = CLIENT[8 + 10 :]
    assert first_block[1] & 0x20  # FDICT
    assert struct.unpack("!I", first_block[2:6])[0] == zlib.adler32(spdy.DICTIONARY)
    assert len(spdy.DICTIONARY) == 1423


def test_the_kubelets_recorded_answer_encodes_byte_for_byte() -> None:
    """The same frames in the same order give the bytes kubectl accepted (the header
    compressor's state runs across blocks)."""
    frames = spdy.Codec().feed(SERVER)
    kinds = [type(f).__name__ for f in frames]
    assert kinds[:2] == ["SynReply", "SynReply"] and frames[5] == spdy.Data(1, b"", fin=True)
    encoder = spdy.Codec()
    assert b"".join(encoder.encode(f) for f in frames) == SERVER


@pytest.mark.parametrize(
    "frame",
    [
        spdy.SynStream(9, {"a": ["1", "2"]}, associated_to=3, priority=5, fin=True),
        spdy.SynStream(11, {}, unidirectional=True),
        spdy.SynReply(9, {"x": ["y"]}, fin=True),
        spdy.HeadersFrame(9, {"k": ["v"]}),
        spdy.RstStream(9, spdy.REFUSED_STREAM),
        spdy.Settings(((1, 7, 65536), (0, 4, 100))),
        spdy.Ping(42),
        spdy.GoAway(9, 2),
        spdy.WindowUpdate(9, 1000),
        spdy.Data(9, b"x" * 70000, fin=True),
    ],
)
def test_every_frame_round_trips(frame: spdy.Frame) -> None:
    assert spdy.Codec().feed(spdy.Codec().encode(frame)) == [frame]


def test_bad_input_is_a_protocol_error() -> None:
    version2 = struct.pack("!HHI", 0x8002, spdy.PING, 4) + b"\0\0\0\1"
    with pytest.raises(spdy.ProtocolError, match="version 2"):
        spdy.Codec().feed(version2)
    garbage = struct.pack("!HHI", 0x8003, spdy.SYN_REPLY, 8) + b"\0\0\0\1junk"
    with pytest.raises(spdy.ProtocolError, match="decompress"):
        spdy.Codec().feed(garbage)


class _Transport:
    """The client's side in memory: frames go in through `inbox`, the kubelet's bytes
    are decoded into `sent`."""

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self.sent: queue.SimpleQueue[spdy.Frame] = queue.SimpleQueue()
        self._decoder = spdy.Codec()

    def recv(self) -> bytes:
        return self.inbox.get(timeout=10)

    def send(self, data: bytes) -> None:
        for frame in self._decoder.feed(data):
            self.sent.put(frame)


def test_port_forward_pairs_streams_and_ends_the_error_stream_last() -> None:
    pod, kubelet_end = socket.socketpair()

    def serve() -> None:
        request = b""
        while chunk := pod.recv(4096):  # until the client's FIN reaches the pod
            request += chunk
        pod.sendall(b"answer to " + request)
        pod.close()

    threading.Thread(target=serve, daemon=True).start()
    ports: list[int] = []

    def connect(port: int) -> socket.socket:
        ports.append(port)
        return kubelet_end

    transport = _Transport()
    session = SpdySession(transport, PortForwarder(connect, "ns/web").on_stream)
    runner = threading.Thread(target=session.run, daemon=True)
    runner.start()
    client = spdy.Codec()
    for frame in (
        spdy.SynStream(1, _pair("0", "error")),
        spdy.Data(1, b"", fin=True),
        spdy.SynStream(3, _pair("0", "data")),
        spdy.Data(3, b"ping", fin=True),
    ):
        transport.inbox.put(client.encode(frame))
    got = []
    while spdy.Data(1, b"", fin=True) not in got:
        got.append(transport.sent.get(timeout=10))
    transport.inbox.put(b"")
    runner.join(timeout=10)
    assert ports == [8080]
    assert got[:2] == [spdy.SynReply(1), spdy.SynReply(3)]
    assert b"".join(f.data for f in got if isinstance(f, spdy.Data)) == b"answer to ping"
    assert got[-2:] == [spdy.Data(3, b"", fin=True), spdy.Data(1, b"", fin=True)]


def test_a_port_nobody_listens_on_is_reported_on_the_error_stream() -> None:
    def refuse(port: int) -> socket.socket:
        raise ConnectionRefusedError(f"connect to 127.0.0.1:{port}: connection refused")

    transport = _Transport()
    session = SpdySession(transport, PortForwarder(refuse, "ns/web").on_stream)
    client = spdy.Codec()
    for frame in (spdy.SynStream(1, _pair("0", "error")), spdy.SynStream(3, _pair("0", "data"))):
        transport.inbox.put(client.encode(frame))
    runner = threading.Thread(target=session.run, daemon=True)
    runner.start()
    got = []
    while spdy.Data(1, b"", fin=True) not in got:
        got.append(transport.sent.get(timeout=10))
    transport.inbox.put(b"")
    runner.join(timeout=10)
    (message,) = [f.data for f in got if isinstance(f, spdy.Data) and f.stream_id == 1 and f.data]
    assert message.startswith(b"error forwarding port 8080 to pod ns/web:")
    assert b"connection refused" in message
