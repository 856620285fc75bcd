"""The byte streams under the kubelet's exec, attach and port-forward, and port-forward
over SPDY/3.1 (framing in `kubelab.spdy`).

**One TLS connection, several threads.** An upgraded connection is read by one thread
(client to container or pod) while others write (container or pod to client). OpenSSL
forbids using one SSL object from two threads at once (SSL_read and SSL_write race on
shared state; with TLS 1.3 a read may also write). `TLSConnection` therefore puts every
SSL call under one lock and waits for the socket outside it, on a non-blocking socket:
the reader never holds the lock while it waits for the client.

**Port-forward over SPDY** (``portforward.k8s.io``, as the kubelet serves it): the
client opens two streams per forwarded connection, both with headers ``streamtype``
(``error`` or ``data``), ``port`` and ``requestid``; the kubelet answers each with
SYN_REPLY, and once both of a request have arrived it connects to the port inside the
pod's network namespace and copies bytes both ways on the data stream. A failure goes to
the error stream as text. When the pod's side ends, the kubelet half-closes (FIN) the
data stream and then the error stream: kubectl waits for the error stream's end before
it lets the local connection go. The same SPDY bytes arrive either straight after an
``Upgrade: SPDY/3.1`` (kubectl before 1.31) or inside WebSocket binary messages
(``SPDY/3.1+portforward.k8s.io``, kubectl 1.31+): `WebSocketTunnel` unwraps them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import select
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any, Protocol

import wsproto
import wsproto.events
import wsproto.utilities
from wsproto import WSConnection

from agents.kubelet.runtime import ExecSession
from kubelab import spdy

log = logging.getLogger("kubelab.kubelet.streaming")

CHUNK = 64 * 1024


class TLSConnection:
    """An accepted TLS socket that several threads may read and write (module docstring)."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self._sock = sock
        self._lock = threading.Lock()
        sock.setblocking(False)

    def _wait(self, readable: bool) -> None:
        if self._sock.fileno() < 0:
            raise OSError("the connection is closed")
        if readable:
            select.select([self._sock], [], [])
        else:
            select.select([], [self._sock], [])

    def recv(self, size: int) -> bytes:
        """Up to `size` bytes; b"" when the client has closed."""
        while True:
            with self._lock:
                try:
                    return self._sock.recv(size)
                except ssl.SSLWantReadError:
                    readable = True
                except ssl.SSLWantWriteError:
                    readable = False
            self._wait(readable)

    def sendall(self, data: bytes) -> None:
        """All of `data`, as one unit: concurrent senders never interleave."""
        view = memoryview(data)
        with self._lock:
            while view:
                try:
                    view = view[self._sock.send(view) :]
                except ssl.SSLWantWriteError:
                    self._wait(False)
                except ssl.SSLWantReadError:
                    self._wait(True)


class Transport(Protocol):
    """A byte stream in both directions (SPDY's carrier)."""

    def recv(self) -> bytes: ...  # b"" at the end

    def send(self, data: bytes) -> None: ...


class RawTransport:
    """SPDY straight on the upgraded connection."""

    def __init__(self, conn: TLSConnection) -> None:
        self.conn = conn

    def recv(self) -> bytes:
        return self.conn.recv(CHUNK)

    def send(self, data: bytes) -> None:
        self.conn.sendall(data)


def message_bytes(event: wsproto.events.Message[Any]) -> bytes:
    """A data event's payload as bytes, whichever frame type carried it: Kubernetes reads
    text frames as their UTF-8 bytes, as it reads binary ones, and the official Python
    client sends str data (stdin typed as text, say) in text frames."""
    data = event.data
    return data.encode() if isinstance(data, str) else bytes(data)


class ChannelMessages:
    """Whole `*.channel.k8s.io` messages out of a WebSocket's data events: the first byte
    of a message names its channel (0 stdin, 4 resize, 255 v5's close of a channel ...),
    the rest is the channel's data.

    wsproto hands a message over in pieces as its bytes arrive (`message_finished` marks
    the last one), and only the first piece starts with the channel byte, so the pieces
    are joined here before the channel is read."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def add(self, event: wsproto.events.Message[Any]) -> tuple[int, bytes] | None:
        """(channel, data) once `event` completes a non-empty message, else None."""
        self._pending += message_bytes(event)
        if not event.message_finished or not self._pending:
            return None
        channel, data = self._pending[0], bytes(self._pending[1:])
        self._pending.clear()
        return channel, data


class WebSocketTunnel:
    """A byte stream carried in WebSocket binary messages (client-go's tunnelling
    connection): message boundaries mean nothing; pings are answered here."""

    def __init__(self, conn: TLSConnection, ws: WSConnection) -> None:
        self.conn = conn
        self.ws = ws
        self._lock = threading.Lock()  # wsproto's state is not thread-safe either

    def recv(self) -> bytes:
        while True:
            data = self.conn.recv(CHUNK)
            if not data:
                return b""
            out = bytearray()
            with self._lock:
                self.ws.receive_data(data)
                events = list(self.ws.events())
            for event in events:
                if isinstance(event, wsproto.events.Message):
                    out += message_bytes(event)
                elif isinstance(event, wsproto.events.Ping):
                    with self._lock:
                        reply = self.ws.send(event.response())
                    self.conn.sendall(reply)
                elif isinstance(event, wsproto.events.CloseConnection):
                    with contextlib.suppress(wsproto.utilities.LocalProtocolError, OSError):
                        with self._lock:
                            reply = self.ws.send(event.response())
                        self.conn.sendall(reply)
                    return bytes(out)
            if out:
                return bytes(out)

    def send(self, data: bytes) -> None:
        with self._lock:
            message = self.ws.send(wsproto.events.BytesMessage(data=data))
        self.conn.sendall(message)


class Stream:
    """One SPDY stream the client opened: its headers, what it sends (`read`) and what
    goes back to it (`write`, `close` for FIN)."""

    def __init__(self, session: SpdySession, stream_id: int, headers: spdy.Headers) -> None:
        self.session = session
        self.id = stream_id
        self.headers = headers
        self._incoming: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._closed = False

    def header(self, name: str) -> str:
        return (self.headers.get(name) or [""])[0]

    def read(self) -> bytes:
        """The client's next bytes on this stream; b"" once it half-closed or reset it."""
        return self._incoming.get()

    def _deliver(self, data: bytes) -> None:
        self._incoming.put(data)

    def write(self, data: bytes) -> None:
        for at in range(0, len(data), CHUNK):
            self.session.send(spdy.Data(self.id, data[at : at + CHUNK]))

    def close(self) -> None:
        """Half-close: nothing more from this side (FIN)."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(OSError):
                self.session.send(spdy.Data(self.id, b"", fin=True))


class SpdySession:
    """The kubelet's end of a SPDY/3.1 connection: accepts every stream the client opens
    (SYN_REPLY) and hands it to `on_stream`; answers PING; ends at GOAWAY or when the
    carrier closes, ending every stream's input."""

    def __init__(self, transport: Transport, on_stream: Callable[[Stream], None]) -> None:
        self.transport = transport
        self.on_stream = on_stream
        self.codec = spdy.Codec()
        self.streams: dict[int, Stream] = {}
        self._send_lock = threading.Lock()  # the codec's compressor is shared

    def send(self, frame: spdy.Frame) -> None:
        with self._send_lock:
            self.transport.send(self.codec.encode(frame))

    def run(self) -> None:
        """Read frames until the client goes away."""
        try:
            while data := self.transport.recv():
                for frame in self.codec.feed(data):
                    if not self._dispatch(frame):
                        return
        except spdy.ProtocolError as exc:
            log.warning("kubelet streaming: SPDY connection dropped: %s", exc)
            with contextlib.suppress(OSError):
                self.send(spdy.GoAway(max(self.streams, default=0), 1))
        except OSError:
            pass
        finally:
            for stream in self.streams.values():
                stream._deliver(b"")

    def _dispatch(self, frame: spdy.Frame) -> bool:
        if isinstance(frame, spdy.SynStream):
            stream = Stream(self, frame.stream_id, frame.headers)
            self.streams[frame.stream_id] = stream
            self.send(spdy.SynReply(frame.stream_id))
            if frame.fin:
                stream._deliver(b"")
            self.on_stream(stream)
        elif isinstance(frame, spdy.Data):
            target = self.streams.get(frame.stream_id)
            if target is None:
                self.send(spdy.RstStream(frame.stream_id, spdy.INVALID_STREAM))
                return True
            if frame.data:
                target._deliver(frame.data)
            if frame.fin:
                target._deliver(b"")
        elif isinstance(frame, spdy.RstStream):
            gone = self.streams.pop(frame.stream_id, None)
            if gone is not None:
                gone._closed = True
                gone._deliver(b"")
        elif isinstance(frame, spdy.Ping):
            self.send(frame)
        elif isinstance(frame, spdy.GoAway):
            return False
        return True


class PortForwarder:
    """Port-forward's stream pairs (module docstring): `connect(port)` opens a connection
    to the pod's port, `what` names the pod in messages."""

    def __init__(self, connect: Callable[[int], socket.socket], what: str) -> None:
        self.connect = connect
        self.what = what
        self._pairs: dict[str, dict[str, Stream]] = {}
        self._lock = threading.Lock()

    def on_stream(self, stream: Stream) -> None:
        kind = stream.header("streamtype")
        request = stream.header("requestid")
        if not request:  # clients before requestid: the error stream comes first
            request = str(stream.id if kind == "error" else stream.id - 2)
        if kind not in ("error", "data"):
            stream.write(f"unknown stream type {kind!r}".encode())
            stream.close()
            return
        with self._lock:
            pair = self._pairs.setdefault(request, {})
            pair[kind] = stream
            if len(pair) < 2:
                return
            del self._pairs[request]
        threading.Thread(
            target=self._forward, args=(pair["data"], pair["error"]), daemon=True
        ).start()

    def _forward(self, data: Stream, error: Stream) -> None:
        try:
            port = int(data.header("port"))
            conn = self.connect(port)
        except Exception as exc:
            message = f"error forwarding port {data.header('port')} to pod {self.what}: {exc}"
            with contextlib.suppress(OSError):
                error.write(message.encode())
            error.close()
            data.close()
            return
        log.info("kubelet streaming: port-forward (SPDY) to %s port %d", self.what, port)
        # The pod's side ending ends the forwarded connection (kubectl then waits for
        # the error stream's end); the client's FIN only half-closes towards the pod.
        threading.Thread(target=self._client_to_pod, args=(data, conn), daemon=True).start()
        try:
            while chunk := conn.recv(CHUNK):
                data.write(chunk)
        except OSError:
            pass
        data.close()
        error.close()
        conn.close()

    @staticmethod
    def _client_to_pod(data: Stream, conn: socket.socket) -> None:
        try:
            while chunk := data.read():
                conn.sendall(chunk)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def exit_status(code: int) -> dict[str, Any]:
    """The Status an exec or attach ends with (remotecommand v4 and WebSocket v4/v5)."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


EXEC_PROTOCOLS = ("v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io")
"""remotecommand's SPDY versions served, best first: v4 ends with a JSON Status on the
error stream, v3 adds the resize stream, v2 is v1 with stdin's end honoured."""

STREAM_TIMEOUT = 30.0
"""Seconds a client has to open every stream its request asked for (the kubelet's
streamCreationTimeout)."""


class ExecStreams:
    """exec and attach over SPDY: the client opens one stream per channel it asked for
    (``streamtype`` error, stdin, stdout, stderr, resize); `serve` runs once all are
    there, as the kubelet's remotecommand server does."""

    def __init__(self, protocol: str, stdin: bool, stdout: bool, stderr: bool, tty: bool) -> None:
        self.protocol = protocol
        self.tty = tty
        self.expected = {"error"}
        self.expected |= {"stdin"} if stdin else set()
        self.expected |= {"stdout"} if stdout else set()
        self.expected |= {"stderr"} if stderr and not tty else set()
        self.expected |= {"resize"} if tty and protocol != "v2.channel.k8s.io" else set()
        self.streams: dict[str, Stream] = {}
        self._ready = threading.Event()
        self._lock = threading.Lock()

    def on_stream(self, stream: Stream) -> None:
        with self._lock:
            self.streams[stream.header("streamtype")] = stream
            if self.expected <= self.streams.keys():
                self._ready.set()

    def serve(self, session: ExecSession) -> None:
        """Copy stdio both ways until the command ends, then report how it ended."""
        if not self._ready.wait(STREAM_TIMEOUT):
            missing = sorted(self.expected - self.streams.keys())
            log.warning("kubelet streaming: exec streams %s never opened", missing)
            return
        pumps = [threading.Thread(target=self._stdin, args=(session,), daemon=True)]
        if "resize" in self.streams:
            pumps.append(threading.Thread(target=self._resize, args=(session,), daemon=True))
        for pump in pumps:
            pump.start()
        outputs = {1: self.streams.get("stdout"), 2: self.streams.get("stderr")}
        if self.tty:
            outputs[2] = outputs[1]
        while True:
            channel, data = session.read()
            if channel == 0:
                break
            target = outputs.get(channel)
            if target is not None:
                target.write(data)
        error = self.streams["error"]
        status = exit_status(session.exit_code())
        if self.protocol == "v4.channel.k8s.io":
            error.write(json.dumps(status).encode())
        elif status["status"] != "Success":
            error.write(status["message"].encode())
        for stream in self.streams.values():
            stream.close()

    def _stdin(self, session: ExecSession) -> None:
        stream = self.streams.get("stdin")
        if stream is None:
            return
        while data := stream.read():
            session.write(data)
        session.close_stdin()

    def _resize(self, session: ExecSession) -> None:
        """Terminal sizes as JSON objects one after another ({"Width": .., "Height": ..})."""
        decoder, buffer = json.JSONDecoder(), ""
        while data := self.streams["resize"].read():
            buffer += data.decode(errors="replace")
            while buffer.strip():
                try:
                    size, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break  # an object split across frames: wait for the rest
                buffer = buffer.lstrip()[end:]
                session.resize(int(size.get("Width", 80)), int(size.get("Height", 24)))
