"""The gateway's streamed calls (watch, lease keep-alive, snapshot): newline-separated
``{"result": ...}`` frames on an HTTP connection of their own, and `Watch`, the open watch
callers iterate.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Iterator
from typing import Any

from opentelemetry import propagate

from kubelab import fastjson
from kubelab.grpccodes import GrpcCode
from kubelab.storeclient.errors import (
    DeadlineExceeded,
    Unavailable,
    error_from_body,
)
from kubelab.storeclient.http import describe_failure
from kubelab.storeclient.kvstore import WatchStream
from kubelab.storeclient.wire import WatchResponse

_JSON_HEADERS = {"Content-Type": "application/json"}


def _keep_alive(sock: socket.socket) -> None:
    """Probe an idle stream's peer so a member that vanished (a partition, a powered-off
    machine: no FIN, no RST) ends a watch within ~15 s instead of never."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 3)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)


class Stream:
    """One streamed gateway call on its own HTTP connection.

    Streams use `http.client` rather than the unary calls' pool (`kubelab.storeclient.http`) because
    `close` must be able to interrupt a read blocked in another thread (a watch with no
    events): shutting the socket down does that, and only a connection we own exposes its
    socket.
    """

    def __init__(self, endpoint: str, conn: http.client.HTTPConnection) -> None:
        self.endpoint = endpoint
        self._conn = conn
        self._response: http.client.HTTPResponse | None = None
        self._closed = threading.Event()
        # http.client is not thread-safe: while a read is in progress, `close` only shuts
        # the socket down (which wakes the reader) and the reading thread releases the
        # connection. The lock orders the two.
        self._lock = threading.Lock()
        self._reading = False

    @property
    def closed(self) -> bool:
        """Whether `close` was called (so a broken read is expected, not an error)."""
        return self._closed.is_set()

    def open(self, path: str, body: dict[str, Any], timeout: float | None) -> None:
        """Send the request and read the response headers; raise the error if not 200.
        The request carries the current span's trace context, as unary calls do."""
        headers = dict(_JSON_HEADERS)
        propagate.inject(headers)
        self._conn.request("POST", path, body=fastjson.dumps(body), headers=headers)
        response = self._conn.getresponse()
        if response.status != 200:
            raw = response.read()
            self.close()
            try:
                parsed = fastjson.loads(raw)
            except ValueError:
                parsed = None
            raise error_from_body(parsed, response.status, f"{self.endpoint}{path}")
        if self._conn.sock is not None:
            self._conn.sock.settimeout(timeout)
            _keep_alive(self._conn.sock)
        self._response = response

    def _readline(self) -> bytes:
        """The next line, or b"" at the end of the stream or once closed."""
        assert self._response is not None
        with self._lock:
            if self.closed:
                return b""
            self._reading = True
        try:
            return self._response.readline()
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if self.closed:
                return b""
            if isinstance(exc, TimeoutError):
                raise DeadlineExceeded(
                    GrpcCode.DEADLINE_EXCEEDED, f"{self.endpoint}: stream read timed out"
                ) from None
            raise Unavailable(
                GrpcCode.UNAVAILABLE, f"{self.endpoint}: stream broken: {describe_failure(exc)}"
            ) from None
        finally:
            with self._lock:
                self._reading = False
                if self.closed:
                    self._conn.close()

    def frames(self) -> Iterator[dict[str, Any]]:
        """The ``result`` of each frame until the server ends the stream or `close`."""
        while line := self._readline():
            if not line.strip():
                continue
            frame = fastjson.loads(line)
            if "result" not in frame:
                err = error_from_body(frame, 200, self.endpoint)
                if err.code == GrpcCode.CANCELLED:
                    # Streams are cancelled by closing them, never through the stream, so
                    # this is the member's gateway shutting down: the member went away.
                    err = Unavailable(GrpcCode.UNAVAILABLE, f"{self.endpoint}: {err.message}")
                raise err
            result: dict[str, Any] = frame["result"]
            yield result

    def close(self) -> None:
        """End the stream; safe from any thread, and more than once."""
        self._closed.set()
        with self._lock:
            sock = self._conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):  # already disconnected
                    sock.shutdown(socket.SHUT_RDWR)
            if not self._reading:
                self._conn.close()


class Watch(WatchStream):
    """An open watch on one member's gateway (`WatchStream`'s contract): its frames are
    the stream's; the member ending the stream is `Unavailable`."""

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._frames = stream.frames()
        self._done = False

    @property
    def endpoint(self) -> str:
        return self._stream.endpoint

    def __next__(self) -> WatchResponse:
        if self._done:
            raise StopIteration
        frame = next(self._frames, None)
        if frame is None:
            self._done = True
            if self._stream.closed:
                raise StopIteration
            raise Unavailable(GrpcCode.UNAVAILABLE, f"{self.endpoint}: watch stream ended")
        response = WatchResponse.parse(frame)
        if response.canceled:
            self.close()
        return response

    def close(self) -> None:
        self._done = True
        self._stream.close()
