"""The apiserver's TLS layer (controlplane.apiserver.tls) over real loopback sockets.

The server side is `TLSSocket` in a gevent StreamServer, as the apiserver runs it; the
clients are the stdlib's ssl, in a real thread (gevent's threadpool) so that the test's
greenlet keeps the server's hub running while a client blocks.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import ssl
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import gevent
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from gevent.server import StreamServer

from controlplane.apiserver.tls import TLSSocket, server_context
from kubelab import pki

T = TypeVar("T")


@dataclass
class Seen:
    """What the server saw of each connection, in order."""

    certs: list[bytes | None] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    handshake_failures: list[str] = field(default_factory=list)


@dataclass
class Setup:
    directory: Path
    ca: pki.CertKey
    address: tuple[str, int]
    seen: Seen

    def client(self, cn: str, ca: pki.CertKey | None = None) -> ssl.SSLContext:
        """A client context trusting the server, with a certificate for `cn` from `ca`
        (the cluster CA by default)."""
        ctx = ssl.create_default_context(cafile=self.directory / "ca.crt")
        issued = pki.issue(ca or self.ca, cn, client=True)
        crt, key = pki.write_pair(issued, self.directory, cn)
        ctx.load_cert_chain(crt, key)
        return ctx

    def anonymous(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.directory / "ca.crt")


def _serve(conn: TLSSocket) -> None:
    """Echo: each request is a 4-byte length and a body, read through the buffered
    reader gevent's WSGI handler uses; the answer is the body, written with sendall."""
    rfile = conn.makefile("rb", -1)
    while header := rfile.read(4):
        (size,) = struct.unpack("!I", header)
        conn.sendall(rfile.read(size))


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    ca = pki.new_ca("kubelab-ca")
    pki.write_pair(ca, tmp_path, "ca")
    crt, key = pki.write_pair(
        pki.issue(ca, "apiserver", ip_addresses=["127.0.0.1"], server=True), tmp_path, "srv"
    )
    context = server_context(crt, key, tmp_path / "ca.crt")
    seen = Seen()

    def handle(sock: socket.socket, _address: Any) -> None:
        conn = TLSSocket(sock, context)
        try:
            conn.do_handshake()
        except OSError as exc:
            seen.handshake_failures.append(str(exc))
            return
        seen.certs.append(conn.client_cert)
        seen.errors.append(conn.client_cert_error)
        _serve(conn)
        conn.close()

    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    try:
        yield Setup(tmp_path, ca, server.address, seen)
    finally:
        server.stop(timeout=1)


def _in_thread(fn: Callable[[], T]) -> T:
    result: T = gevent.get_hub().threadpool.spawn(fn).get(timeout=30)
    return result


def _echo(setup: Setup, ctx: ssl.SSLContext, bodies: list[bytes]) -> list[bytes]:
    """Send each body over one TLS connection and collect the echoes."""

    def run() -> list[bytes]:
        out = []
        with (
            socket.create_connection(setup.address, timeout=20) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            for body in bodies:
                tls.sendall(struct.pack("!I", len(body)) + body)
                got = bytearray()
                while len(got) < len(body):
                    chunk = tls.recv(65536)
                    assert chunk, "the server closed the connection"
                    got += chunk
                out.append(bytes(got))
        return out

    return _in_thread(run)


def test_a_certificate_from_the_client_ca_is_passed_on(setup: Setup) -> None:
    assert _echo(setup, setup.client("alice"), [b"hello"]) == [b"hello"]
    [der] = setup.seen.certs
    assert der is not None
    cn = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    assert cn == "CN=alice"
    assert setup.seen.errors == [None]


def test_a_certificate_from_another_ca_completes_the_handshake_but_is_flagged(
    setup: Setup,
) -> None:
    mallory = setup.client("mallory", ca=pki.new_ca("evil"))
    assert _echo(setup, mallory, [b"let me in"]) == [b"let me in"]
    assert setup.seen.certs == [None]
    [error] = setup.seen.errors
    assert error is not None
    assert error.startswith("x509: certificate signed by unknown authority")
    assert '"CN=mallory"' in error and '"CN=evil"' in error


def _expired(ca: pki.CertKey, cn: str) -> pki.CertKey:
    """A client certificate from `ca` whose validity ended yesterday."""
    key = ec.generate_private_key(ec.SECP256R1())
    yesterday = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(yesterday - datetime.timedelta(days=30))
        .not_valid_after(yesterday)
        .sign(ca.key, hashes.SHA256())
    )
    return pki.CertKey(cert, key)


def test_an_expired_certificate_is_flagged(setup: Setup) -> None:
    ctx = setup.anonymous()
    ctx.load_cert_chain(*pki.write_pair(_expired(setup.ca, "old"), setup.directory, "old"))
    assert _echo(setup, ctx, [b"x"]) == [b"x"]
    assert setup.seen.certs == [None]
    [error] = setup.seen.errors
    assert error is not None
    assert error.startswith("x509: certificate has expired or is not yet valid")


def test_a_server_only_certificate_is_flagged(setup: Setup) -> None:
    """The client-auth extended key usage is required, as Go's x509 authenticator does."""
    ctx = setup.anonymous()
    server_only = pki.issue(setup.ca, "web", ip_addresses=["127.0.0.1"], server=True)
    ctx.load_cert_chain(*pki.write_pair(server_only, setup.directory, "web"))
    _echo(setup, ctx, [b"x"])
    assert setup.seen.certs == [None]
    [error] = setup.seen.errors
    assert error is not None
    assert error.startswith("x509: certificate specifies an incompatible key usage")


def test_no_certificate_is_neither_passed_on_nor_flagged(setup: Setup) -> None:
    assert _echo(setup, setup.anonymous(), [b"hi"]) == [b"hi"]
    assert setup.seen.certs == [None]
    assert setup.seen.errors == [None]


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_a_flagged_certificate_cannot_be_laundered_by_resuming_a_session(
    setup: Setup, version: ssl.TLSVersion
) -> None:
    """A resumed session skips verification: the server must not resume any."""
    mallory = setup.client("mallory", ca=pki.new_ca("evil"))
    mallory.minimum_version = mallory.maximum_version = version

    def connect_twice() -> tuple[bool, bool]:
        reused = []
        session = None
        for _ in range(2):
            with (
                socket.create_connection(setup.address, timeout=20) as raw,
                mallory.wrap_socket(raw, server_hostname="127.0.0.1", session=session) as tls,
            ):
                tls.sendall(struct.pack("!I", 1) + b"x")
                assert tls.recv(1) == b"x"
                reused.append(bool(tls.session_reused))
                session = tls.session
        return reused[0], reused[1]

    assert _in_thread(connect_twice) == (False, False)
    assert setup.seen.certs == [None, None]
    assert all(e and "unknown authority" in e for e in setup.seen.errors)


def test_large_bodies_round_trip(setup: Setup) -> None:
    """1 MiB each way, several times on one connection: partial writes, reads larger and
    smaller than a TLS record, the reader's buffer."""
    bodies = [bytes(range(256)) * 4096, b"", b"tail" * 100_000]
    assert _echo(setup, setup.client("bob"), bodies) == bodies


def test_a_failed_handshake_is_an_oserror_with_openssl_reason(setup: Setup) -> None:
    def plain_http() -> None:
        with socket.create_connection(setup.address, timeout=20) as raw:
            raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            with contextlib.suppress(ConnectionResetError):  # closed with our bytes unread
                raw.recv(100)

    _in_thread(plain_http)
    gevent.sleep(0.1)  # the server's greenlet logs after the client has gone
    [failure] = setup.seen.handshake_failures
    assert "http request" in failure


def test_a_client_that_hangs_up_during_the_handshake_is_an_oserror(setup: Setup) -> None:
    def hang_up() -> None:
        socket.create_connection(setup.address, timeout=20).close()

    _in_thread(hang_up)
    gevent.sleep(0.1)
    assert setup.seen.handshake_failures == ["unexpected EOF"]
