"""`kubelab.storeclient.http`: the store client's kept-alive connections for unary calls."""

from __future__ import annotations

import os
import resource
import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from kubelab.storeclient import http as storehttp
from tests import standin


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.seen.append((self.path, body, self.client_address[1]))
        if self.path == "/slow":
            time.sleep(0.5)
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b'{"a":', b"1}"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            return
        answer = b'{"echo":' + body + b"}"
        self.send_response(200 if self.path != "/missing" else 404)
        self.send_header("Content-Length", str(len(answer)))
        if self.path == "/close":
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(answer)
        if self.path == "/hang-up":
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


class _Server(standin.StandInServer):
    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.seen: list[tuple[str, bytes, int]] = []


@pytest.fixture
def server() -> Iterator[_Server]:
    with standin.serve(_Handler, server_class=_Server) as srv:
        yield srv


def _pool(srv: _Server, timeout: float = 5.0) -> storehttp.Pool:
    port = srv.server_address[1]
    return storehttp.Pool(f"http://127.0.0.1:{port}", timeout, None)


def test_calls_share_one_kept_alive_connection(server: _Server) -> None:
    pool = _pool(server)
    for i in range(5):
        assert pool.request("POST", "/v3/kv/range", b"%d" % i) == (200, b'{"echo":%d}' % i)
    assert len({port for _, _, port in server.seen}) == 1
    assert [body for _, body, _ in server.seen] == [b"0", b"1", b"2", b"3", b"4"]


def test_an_error_status_is_returned_with_its_body(server: _Server) -> None:
    assert _pool(server).request("POST", "/missing", b"1") == (404, b'{"echo":1}')


def test_a_chunked_answer_is_reassembled(server: _Server) -> None:
    assert _pool(server).request("POST", "/chunked", b"") == (200, b'{"a":1}')


def test_connection_close_is_honoured(server: _Server) -> None:
    pool = _pool(server)
    pool.request("POST", "/close", b"1")
    pool.request("POST", "/v3/kv/range", b"2")
    assert len({port for _, _, port in server.seen}) == 2


def test_an_idle_connection_the_server_closed_is_not_reused(server: _Server) -> None:
    pool = _pool(server)
    # The server hangs up after answering without saying so, as after a keep-alive
    # timeout: the connection sits idle in the pool, closed at the other end.
    pool.request("POST", "/hang-up", b"1")
    time.sleep(0.2)
    assert pool.request("POST", "/v3/kv/range", b"2") == (200, b'{"echo":2}')
    assert len({port for _, _, port in server.seen}) == 2


def test_refused_connection_is_a_connect_failure() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pool = storehttp.Pool(f"http://127.0.0.1:{port}", 2.0, None)
    with pytest.raises(storehttp.ConnectFailed, match="refused"):
        pool.request("POST", "/v3/kv/range", b"{}")


def test_a_slow_answer_times_out(server: _Server) -> None:
    with pytest.raises(storehttp.ResponseTimeout, match=r"no answer within 0\.2s"):
        _pool(server, timeout=0.2).request("POST", "/slow", b"{}")


def test_a_closed_idle_connection_is_noticed_at_any_descriptor_number() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= 1100:
        pytest.skip("the descriptor limit is too low for a descriptor above 1023")
    ours, theirs = socket.socketpair()
    high = socket.socket(fileno=os.dup2(ours.fileno(), 1100))
    ours.close()
    try:
        for sock in (high, theirs):
            assert not storehttp._readable(sock)
        theirs.close()
        assert storehttp._readable(high)  # the peer's EOF
    finally:
        high.close()
