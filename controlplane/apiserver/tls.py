"""The apiserver's TLS: a client certificate is checked the way Go's kube-apiserver does.

kube-apiserver asks for a client certificate without requiring a valid one
(``tls.RequestClientCert``): the handshake completes whatever the client presents, and its
x509 authenticator then fails a request whose certificate does not verify against
``--client-ca-file`` with 401 Unauthorized (also where anonymous could read, such as
``/healthz``: a client that presented a credential meant to use it).

Python's ``ssl`` module cannot do that: once a client CA is loaded it verifies the
certificate inside the handshake and aborts it ("unknown ca"), and it has no verify
callback to defer the decision. pyOpenSSL exposes OpenSSL's: ours notes OpenSSL's own
verdict for each certificate of the chain (``preverify_ok``; the chain is never checked
by hand) and lets the handshake complete. `TLSSocket` then offers the certificate only if
it verified, and otherwise why it did not, for the authenticator to answer 401.

Sessions are never resumed: a resumed session skips verification, and the session would
record the callback's "accepted" rather than OpenSSL's verdict, so a client could carry
an unverified certificate into a connection that looks verified.

gevent cannot wrap a pyOpenSSL connection itself, so `TLSSocket` is a small cooperative
adapter: the accepted socket is non-blocking, so OpenSSL reports "would block" and the
greenlet waits on the descriptor, as gevent's own ``ssl`` sockets do.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from socket import socket
from typing import TYPE_CHECKING, Any, TypeVar

from cryptography.hazmat.primitives.serialization import Encoding
from gevent.socket import wait_read, wait_write
from OpenSSL import SSL, crypto

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

Bytes = bytes | bytearray | memoryview
_T = TypeVar("_T")

# What a failed verification is called in Go's x509 package (and so in kube-apiserver's
# log), by OpenSSL's X509_V_ERR_* code; other codes are named by number.
_GO_REASONS = {
    2: "x509: certificate signed by unknown authority",  # UNABLE_TO_GET_ISSUER_CERT
    7: "x509: certificate signed by unknown authority",  # CERT_SIGNATURE_FAILURE
    9: "x509: certificate has expired or is not yet valid",  # CERT_NOT_YET_VALID
    10: "x509: certificate has expired or is not yet valid",  # CERT_HAS_EXPIRED
    18: "x509: certificate signed by unknown authority",  # DEPTH_ZERO_SELF_SIGNED_CERT
    19: "x509: certificate signed by unknown authority",  # SELF_SIGNED_CERT_IN_CHAIN
    20: "x509: certificate signed by unknown authority",  # UNABLE_TO_GET_ISSUER_CERT_LOCALLY
    21: "x509: certificate signed by unknown authority",  # UNABLE_TO_VERIFY_LEAF_SIGNATURE
    24: "x509: certificate is not authorized to sign other certificates",  # INVALID_CA
    26: "x509: certificate specifies an incompatible key usage",  # INVALID_PURPOSE
}

# The ssl module's default server ciphers for TLS 1.2 (TLS 1.3's suites are all strong).
_CIPHERS = (
    b"@SECLEVEL=2:ECDH+AESGCM:ECDH+CHACHA20:ECDH+AES:DHE+AES:!aNULL:!eNULL:!aDSS:!SHA1:!AESCCM"
)


class TLSError(OSError):
    """A TLS protocol failure, as an OSError: gevent's handler and the exec tunnel treat
    OSError as "the connection broke", which this is."""


class _EndOfStream(TLSError):
    """The peer closed the connection: the end of the stream for a read, a failure for
    a handshake or a write."""


def server_context(cert: Path, key: Path, client_ca: Path | None) -> SSL.Context:
    """TLS 1.2+ with `cert` (a chain) and `key`; with `client_ca`, a client certificate
    is asked for (optional) and judged against it, without failing the handshake."""
    ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
    ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
    ctx.set_cipher_list(_CIPHERS)
    ctx.set_options(SSL.OP_NO_TICKET | SSL.OP_CIPHER_SERVER_PREFERENCE)
    ctx.set_session_cache_mode(SSL.SESS_CACHE_OFF)  # see the module doc
    ctx.use_certificate_chain_file(str(cert))
    ctx.use_privatekey_file(str(key))
    ctx.check_privatekey()
    if client_ca is not None:
        ctx.load_verify_locations(str(client_ca))
        # The CertificateRequest names the acceptable issuers, as Go's server does, so a
        # client with several certificates can pick the right one.
        ctx.load_client_ca(str(client_ca).encode())
        ctx.set_verify(SSL.VERIFY_PEER, _note_verdict)
    return ctx


def _note_verdict(conn: SSL.Connection, cert: crypto.X509, error: int, depth: int, ok: int) -> bool:
    """OpenSSL's verify callback: keep the first failure (code, depth) in the connection's
    app data, and accept, so that a bad certificate is answered with a 401, not an
    aborted handshake."""
    if not ok and conn.get_app_data() is None:
        conn.set_app_data((error, depth))
    return True


class TLSSocket:
    """A server-side TLS connection over an accepted gevent socket, with the socket
    methods gevent's WSGI handler and the exec/attach/port-forward tunnel use.

    After `do_handshake`, `client_cert` is the client's certificate (DER) if it verified
    against the client CA, and `client_cert_error` says why a presented one did not
    (both None when the client presented none).
    """

    __slots__ = ("_conn", "_fd", "_raw", "client_cert", "client_cert_error")

    def __init__(self, raw: socket, context: SSL.Context) -> None:
        self._raw = raw
        self._fd = raw.fileno()
        self._conn = SSL.Connection(context, raw)
        self._conn.set_accept_state()
        self.client_cert: bytes | None = None
        self.client_cert_error: str | None = None

    def do_handshake(self) -> None:
        """Complete the handshake (raises OSError if it fails) and judge the client's
        certificate from what the verify callback noted."""
        conn = self._conn
        self._io(conn.do_handshake)
        cert = conn.get_peer_certificate(as_cryptography=True)
        if cert is None:
            return
        failure: tuple[int, int] | None = conn.get_app_data()
        if failure is None:
            self.client_cert = cert.public_bytes(Encoding.DER)
            return
        code, depth = failure
        reason = _GO_REASONS.get(code, "x509: certificate verification failed")
        self.client_cert_error = (
            f"{reason} (OpenSSL verify error {code} at depth {depth}; subject "
            f'"{cert.subject.rfc4514_string()}", issuer "{cert.issuer.rfc4514_string()}")'
        )

    def recv_into(self, buffer: WriteableBuffer, nbytes: int = 0) -> int:
        """Read into `buffer` (0 at the end of the stream)."""
        try:
            return self._io(self._conn.recv_into, buffer, nbytes or None)
        except _EndOfStream:
            return 0

    def recv(self, bufsize: int) -> bytes:
        """Up to `bufsize` bytes (b"" at the end of the stream)."""
        try:
            return self._io(self._conn.recv, bufsize)
        except _EndOfStream:
            return b""

    def send(self, data: Bytes) -> int:
        """Send some of `data` (the context allows partial writes); how much was sent."""
        if not data:
            return 0  # OpenSSL takes writing nothing for an error
        return self._io(self._conn.send, data)

    def _io(self, operation: Callable[..., _T], *args: Any) -> _T:
        """`operation` of the connection, retried as the socket becomes ready whenever
        OpenSSL would block (the greenlet waits, others run). A TLS failure raises
        OSError; the end of the stream `_EndOfStream`, one."""
        while True:
            try:
                return operation(*args)
            except SSL.WantReadError:
                wait_read(self._fd)
            except SSL.WantWriteError:
                wait_write(self._fd)
            except SSL.Error as exc:
                if _is_eof(exc):
                    raise _EndOfStream("unexpected EOF") from None
                raise _os_error(exc) from None

    def sendall(self, data: Bytes) -> None:
        """Send all of `data` (pyOpenSSL's own sendall gives up at the first "would
        block" on a non-blocking socket)."""
        sent = self.send(data)
        size = len(data)
        if sent < size:
            with memoryview(data) as view:
                while sent < size:
                    sent += self.send(view[sent:])

    def makefile(self, mode: str = "rb", buffering: int = -1) -> io.BufferedReader:
        """The buffered reader gevent's handler reads requests from (it asks for 'rb')."""
        if mode != "rb":
            raise ValueError(f"TLSSocket.makefile: only 'rb' is supported, not {mode!r}")
        size = io.DEFAULT_BUFFER_SIZE if buffering < 0 else buffering
        return io.BufferedReader(_Reader(self), size)

    def shutdown(self, how: int) -> None:
        """Shut the TCP connection down (not a TLS close_notify), as ``socket.shutdown``:
        the tunnel uses it to wake the pump still reading the other way."""
        self._raw.shutdown(how)

    def close(self) -> None:
        self._raw.close()


class _Reader(io.RawIOBase):
    """The raw stream under `TLSSocket.makefile`'s buffer, which it fills in place."""

    def __init__(self, sock: TLSSocket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        return self._sock.recv_into(buffer)


def _is_eof(exc: SSL.Error) -> bool:
    """A close_notify, or the peer closing TCP without one (most HTTP clients do)."""
    return isinstance(exc, SSL.ZeroReturnError) or (
        isinstance(exc, SSL.SysCallError) and exc.args[0] == -1
    )


def _os_error(exc: SSL.Error) -> OSError:
    """pyOpenSSL's exception as the OSError a socket would raise."""
    if isinstance(exc, SSL.SysCallError):
        code = exc.args[0]
        if isinstance(code, int) and code > 0:
            return OSError(code, os.strerror(code))  # ConnectionResetError, BrokenPipeError
        return TLSError("unexpected EOF")
    # SSL.Error's argument is OpenSSL's error queue: [(library, function, reason), ...].
    reasons = [r[2] for r in exc.args[0] if len(r) == 3] if exc.args else []
    return TLSError("; ".join(reasons) or str(exc))
