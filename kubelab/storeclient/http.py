"""Kept-alive HTTP/1.1 connections for the store client's unary calls (`StoreClient`),
and for the REST client's (`kubelab.client.RestClient`, all but watches), which were on
requests: a small API call cost a client about 650 us of CPU through requests and
130 us through this.

A unary call to the store (etcd's JSON gateway) is a small POST and a small JSON answer.
The apiserver makes one for every write and every consistent read, under gevent, where a
`StoreClient.get` through urllib3 cost 442 us of CPU and costs 125 us through this
(measured on this project's machine; urllib3's share was a quarter of the apiserver's
CPU per pod create). This module is a pool of connections per endpoint, a request
written in one send, and the response parsed by httptools (the parser uvicorn uses),
chunked bodies included.

What urllib3 did that matters here is kept: an idle connection the server has closed is
noticed before it is reused (a zero-timeout readability check, as urllib3's), and failures
say whether the request can have reached the server (`never_sent`), which decides whether
a write may be retried on another endpoint.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections import deque
from collections.abc import Iterator
from urllib.parse import urlsplit

import httptools

MAX_IDLE = 128
"""Idle connections kept per endpoint; more are closed when their call ends. An apiserver
under load has more than 32 store calls in flight: with 32 kept, each call beyond them
connected anew (8% of its CPU in connecting and resolving in the scheduler benchmark)."""


class ConnectFailed(OSError):
    """The connection could not be made: the request never left this process."""


class ResponseTimeout(TimeoutError):
    """The server took longer than the timeout to answer."""


class _Response:
    """httptools' callbacks for one response."""

    __slots__ = ("body", "complete", "keep_alive", "parser")

    def __init__(self) -> None:
        self.body: list[bytes] = []
        self.complete = False
        self.keep_alive = False
        self.parser = httptools.HttpResponseParser(self)

    def on_headers_complete(self) -> None:
        # Only meaningful now: once the message is complete the parser has reset.
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class _ResponseWithHeaders(_Response):
    """A response whose headers are kept too (lower-cased names), for the REST client,
    which reads Retry-After and Content-Type; the store client needs none."""

    __slots__ = ("headers",)

    def __init__(self) -> None:
        super().__init__()
        self.headers: dict[str, str] = {}

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")


class Pool:
    """Connections to one store endpoint (``http://host:port`` or ``https://...``).

    Safe to share between threads and greenlets: each call takes a connection of its own
    (an idle one, or a new one) and gives it back afterwards.
    """

    def __init__(self, endpoint: str, timeout: float, context: ssl.SSLContext | None) -> None:
        url = urlsplit(endpoint)
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self.timeout = timeout
        self.context = context if url.scheme == "https" else None
        self._host_header = f"Host: {self.host}:{self.port}\r\n".encode()
        self._idle: deque[socket.socket] = deque()

    def request(
        self, method: str, path: str, body: bytes = b"", headers: bytes = b""
    ) -> tuple[int, bytes]:
        """Send one request (with more header lines `headers`, each ending in CRLF) and
        return the response's status and body.

        Raises `ConnectFailed` if no connection could be made, `ResponseTimeout` if the
        answer did not come within the timeout, and another ``OSError`` (or
        ``httptools.HttpParserError``) if the connection broke or the answer was not HTTP;
        in those last cases the request may have been applied.
        """
        headers = b"Content-Type: application/json\r\n" + headers
        response = self._exchange(method, path, body, headers)
        return response.parser.get_status_code(), b"".join(response.body)

    def exchange(
        self, method: str, path: str, body: bytes, headers: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """As `request`, with more header lines (`headers`, each ending in CRLF) and the
        response's headers returned too: status, headers (lower-cased names), body."""
        response = self._exchange(method, path, body, headers, _ResponseWithHeaders())
        assert isinstance(response, _ResponseWithHeaders)
        return response.parser.get_status_code(), response.headers, b"".join(response.body)

    def _exchange(
        self,
        method: str,
        path: str,
        body: bytes,
        headers: bytes,
        response: _Response | None = None,
    ) -> _Response:
        head = b"".join(
            (
                f"{method} {self.prefix}{path} HTTP/1.1\r\n".encode(),
                self._host_header,
                headers,
                b"Content-Length: ",
                str(len(body)).encode(),
                b"\r\n\r\n",
            )
        )
        response = response or _Response()
        sock = self._take()
        try:
            sock.sendall(head + body)
            self._read(sock, response)
        except TimeoutError:
            raise ResponseTimeout(f"no answer within {self.timeout:g}s") from None
        finally:
            if response.complete and response.keep_alive and len(self._idle) < MAX_IDLE:
                self._idle.append(sock)
            else:
                sock.close()
        return response

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()

    def _take(self) -> socket.socket:
        """An idle connection still open, or a new one."""
        while self._idle:
            try:
                sock = self._idle.pop()
            except IndexError:  # another caller took the last one
                break
            if not _readable(sock):
                return sock
            sock.close()
        return self._connect()

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as exc:
            raise ConnectFailed(exc.errno, _connect_reason(exc)) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.context is None:
            return sock
        try:
            return self.context.wrap_socket(sock, server_hostname=self.host)
        except OSError as exc:  # ssl.SSLError included
            sock.close()
            raise ConnectFailed(exc.errno, _connect_reason(exc)) from exc

    def _read(self, sock: socket.socket, response: _Response) -> None:
        """Read the response on `sock` into `response`, to its end."""
        while not response.complete:
            data = sock.recv(65536)
            if not data:
                raise ConnectionResetError("the server closed the connection before answering")
            response.parser.feed_data(data)


def _connect_reason(exc: OSError) -> str:
    return "connect timed out" if isinstance(exc, TimeoutError) else describe_failure(exc)


def _readable(sock: socket.socket) -> bool:
    """Whether an idle connection has something to read: it should not, unless the server
    closed it (EOF) or broke the protocol, and then it must not carry a request.

    select() while the descriptor fits its set (below 1024): under gevent it is a third
    cheaper than poll(), which is built of watchers there; poll() above."""
    if sock.fileno() < 1024:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it wraps (the OS's and the TLS layer's errors, as causes)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        nested = [e.__cause__, e.__context__, getattr(e, "reason", None)]
        nested.extend(e.args[:1])
        todo.extend(n for n in nested if isinstance(n, BaseException))


def describe_failure(exc: BaseException) -> str:
    """A short reason for a connection failure ("Connection refused", a TLS error)."""
    for e in _causes(exc):
        if isinstance(e, ssl.SSLCertVerificationError):
            return f"TLS: server certificate not trusted ({e.verify_message})"
        if isinstance(e, ssl.SSLError):
            return f"TLS: {e.reason or e}"
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
    return str(exc) or type(exc).__name__
