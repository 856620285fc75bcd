"""``kubelab-apiserver``: the apiserver process, with kube-apiserver's flag names.

The WSGI server is gevent's (`gevent.pywsgi`), chosen over the alternatives because:

* watches are long-lived streams: hundreds of them must be cheap, which greenlets are
  (a thread-per-request server such as cheroot or waitress needs a thread per watch);
* it streams a response as the app yields it (chunked), one event per chunk;
* its request handler is a small class we can extend to hand the client certificate to
  the app (``environ["kubelab.client_cert"]``: DER bytes if it verified, else why not),
  which gunicorn's sync and gthread workers do not do;
* it is pure WSGI, so Flask stays the framework, and it is well kept.

``gevent.monkey.patch_all()`` runs first, so the store client (requests, sockets) and the
watch cache's threads become cooperative greenlets without changing their code.

TLS: the server presents ``--tls-cert-file`` and asks clients for a certificate
(optional: tokens are fine too) to be verified against ``--client-ca-file``. As in Go's
apiserver, a certificate that does not verify (another CA, expired) does not fail the
handshake: the request gets a 401 from the authenticator, even on ``/healthz``. Python's
ssl module cannot defer the verdict like that (it aborts the handshake, "unknown ca"), so
the TLS is pyOpenSSL's, whose verify callback can; see `tls`. The handshake runs in the
connection's greenlet, so a slow client never holds up the accept loop.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import logging  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from gevent.pywsgi import WSGIHandler, WSGIServer  # noqa: E402
from OpenSSL import SSL  # noqa: E402

from kubelab import gcpause, tracing  # noqa: E402
from kubelab.flags import duration  # noqa: E402
from kubelab.process import configure_logging  # noqa: E402

from .admission import Chain  # noqa: E402
from .apiserver import APIServer, Config  # noqa: E402
from .app import create_app  # noqa: E402
from .authn import SERVICE_ACCOUNT_ISSUER, UnverifiedCertificate  # noqa: E402
from .kubelet import KubeletAuth  # noqa: E402
from .metricscache import PERIOD  # noqa: E402
from .tls import TLSSocket, server_context  # noqa: E402

log = logging.getLogger("kubelab.apiserver")


class CertHandler(WSGIHandler):  # type: ignore[misc]
    """Adds the client's certificate to the WSGI environ: DER bytes if it verified, an
    `UnverifiedCertificate` (a 401 for the authenticator) if it did not, else None."""

    socket: TLSSocket

    def get_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environ()
        tls = self.socket
        if tls.client_cert_error is not None:
            environ["kubelab.client_cert"] = UnverifiedCertificate(tls.client_cert_error)
        else:
            environ["kubelab.client_cert"] = tls.client_cert
        # The live-data path takes over the connection for protocol upgrades (exec,
        # port-forward): see `take_over`.
        environ["kubelab.take_over"] = self.take_over
        # Werkzeug routes a WebSocket request only to WebSocket rules; the apiserver's
        # rules are plain HTTP (the upgrade is tunnelled, not served), so the header is
        # kept aside for the tunnel.
        upgrade = environ.pop("HTTP_UPGRADE", None)
        if upgrade is not None:
            environ["kubelab.upgrade"] = upgrade
        return environ

    def take_over(self) -> TLSSocket:
        """Hand the client connection to the app (an upgraded stream now owns it):
        gevent must not write a response of its own, and closes it afterwards."""
        self.headers_sent = True
        self.close_connection = True
        return self.socket

    def log_request(self) -> None:
        """Access logging is the audit log's job; keep the process log for events."""

    def process_result(self) -> None:
        """As gevent's, except that an empty chunk from the app sends the headers at once:
        a watch with nothing to report yet must still answer 200 now, because clients
        (client-go's Watch) wait for the response headers before they go on."""
        for data in self.result:
            if data or not self.headers_sent:
                self.write(data)
        if self.status and not self.headers_sent:
            self.write(b"")
        if self.response_use_chunked:
            self._sendall(b"0\r\n\r\n")

    def _write_with_headers(self, data: bytes) -> None:
        """As gevent's, except that the headers and the first piece of the body go out in
        one write: one TLS record and one send instead of two. Most answers (an object,
        a Status) are that one piece, and the second send was a measurable part of the
        CPU of a small request."""
        self.headers_sent = True
        self.finalize_headers()
        out = bytearray(b"HTTP/1.1 ")
        out += self.status
        out += b"\r\n"
        for header, value in self.response_headers:
            out += header
            out += b": "
            out += value
            out += b"\r\n"
        out += b"\r\n"
        if data and self.response_use_chunked:
            out += b"%x\r\n" % len(data)
            out += data
            out += b"\r\n"
        elif data:
            out += data
        self._sendall(out)


class APIHTTPServer(WSGIServer):  # type: ignore[misc]
    """gevent's WSGI server over pyOpenSSL TLS (gevent's own TLS option is the ssl
    module's). A failed handshake (plain HTTP, a client that hangs up) is one log line."""

    def __init__(self, listener: Any, application: Any, tls: SSL.Context, **kwargs: Any) -> None:
        # gevent sets the scheme from its own TLS option, which is not used here.
        super().__init__(listener, application, environ={"wsgi.url_scheme": "https"}, **kwargs)
        self.tls = tls

    def handle(self, client_socket: Any, address: Any) -> None:
        """Runs in the connection's own greenlet; gevent closes `client_socket` after."""
        # Without NODELAY, a write that follows another (a watch's events, a large body)
        # waits for the client's delayed ACK (40 ms on Linux).
        client_socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = TLSSocket(client_socket, self.tls)
        try:
            conn.do_handshake()
        except OSError as exc:
            log.info("apiserver: TLS handshake with %s failed: %s", address[0], exc)
            return
        super().handle(conn, address)


def _public_keys(paths: list[Path]) -> list[Any]:
    keys: list[Any] = []
    for p in paths:
        data = p.read_bytes()
        if b"PRIVATE KEY" in data:
            keys.append(serialization.load_pem_private_key(data, None).public_key())
        else:
            keys.append(serialization.load_pem_public_key(data))
    return keys


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="kubelab-apiserver", description="The kubelab Kubernetes API server."
    )
    p.add_argument(
        "--etcd-servers", required=True, help="comma-separated store URLs (kubelab-store or etcd)"
    )
    p.add_argument("--etcd-cafile", type=Path)
    p.add_argument("--etcd-certfile", type=Path)
    p.add_argument("--etcd-keyfile", type=Path)
    p.add_argument("--bind-address", default="0.0.0.0")
    p.add_argument("--secure-port", type=int, default=6443)
    p.add_argument("--advertise-address", default="127.0.0.1")
    p.add_argument("--tls-cert-file", type=Path, required=True)
    p.add_argument("--tls-private-key-file", type=Path, required=True)
    p.add_argument("--client-ca-file", type=Path)
    p.add_argument("--service-account-key-file", type=Path, action="append", default=[])
    p.add_argument("--service-account-signing-key-file", type=Path)
    p.add_argument("--service-account-issuer", default=None)
    p.add_argument("--service-cluster-ip-range", default="10.96.0.0/12")
    p.add_argument("--service-node-port-range", default="30000-32767")
    p.add_argument("--authorization-mode", default="Node,RBAC")
    p.add_argument("--enable-admission-plugins", default=",".join(Chain.ALL))
    p.add_argument("--audit-log-path", type=Path)
    p.add_argument("--token-auth-file", type=Path)
    p.add_argument("--anonymous-auth", default="true", choices=["true", "false"])
    p.add_argument("--kubelet-client-certificate", type=Path)
    p.add_argument("--kubelet-client-key", type=Path)
    p.add_argument("--kubelet-certificate-authority", type=Path)
    p.add_argument(
        "--metric-resolution",
        type=_resolution,
        default=PERIOD,
        help="how often the kubelets' figures for metrics.k8s.io are scraped (e.g. 15s)",
    )
    p.add_argument("-v", "--v", type=int, default=1, help="log verbosity (0-5)")
    tracing.add_flags(p)
    return p.parse_args(argv)


def config_from(args: argparse.Namespace) -> Config:
    low, _, high = args.service_node_port_range.partition("-")
    signing = None
    if args.service_account_signing_key_file:
        signing = serialization.load_pem_private_key(
            args.service_account_signing_key_file.read_bytes(), None
        )
    public = _public_keys(args.service_account_key_file)
    if signing is not None and not public:
        public = [signing.public_key()]
    modes = [m.strip() for m in args.authorization_mode.split(",")]
    if modes != ["Node", "RBAC"] and modes != ["RBAC"]:
        raise SystemExit(
            f"--authorization-mode {args.authorization_mode}: kubelab supports "
            "Node,RBAC (and RBAC alone)"
        )
    return Config(
        etcd_servers=[s.strip() for s in args.etcd_servers.split(",") if s.strip()],
        etcd_cafile=args.etcd_cafile,
        etcd_certfile=args.etcd_certfile,
        etcd_keyfile=args.etcd_keyfile,
        advertise_address=args.advertise_address,
        secure_port=args.secure_port,
        service_cluster_ip_range=args.service_cluster_ip_range,
        service_node_port_range=(int(low), int(high)),
        admission_plugins=tuple(
            p.strip() for p in args.enable_admission_plugins.split(",") if p.strip()
        ),
        audit_log_path=args.audit_log_path,
        token_auth_file=args.token_auth_file,
        anonymous_auth=args.anonymous_auth == "true",
        service_account_signing_key=signing,
        service_account_public_keys=public,
        service_account_issuer=args.service_account_issuer or SERVICE_ACCOUNT_ISSUER,
        node_authorizer="Node" in modes,
        kubelet_auth=KubeletAuth(
            args.kubelet_client_certificate,
            args.kubelet_client_key,
            args.kubelet_certificate_authority,
        ),
        tracing_endpoint=args.tracing_endpoint,
        metric_resolution=args.metric_resolution,
    )


def _resolution(text: str) -> float:
    """--metric-resolution: a positive Go duration ("15s", "1m"), in seconds."""
    value = duration(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the duration must be positive")
    return value


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    configure_logging(args.v)
    config = config_from(args)
    server = APIServer(config)
    # The watch cache holds every object: keep full GC pauses short (kubelab.gcpause).
    gcpause.install(server.metrics.observe_gc)
    log.info("apiserver: starting; store %s", ",".join(config.etcd_servers))
    try:
        server.start()
    except RuntimeError as exc:
        log.error("%s", exc)
        raise SystemExit(1) from None
    http = APIHTTPServer(
        (args.bind_address, args.secure_port),
        create_app(server),
        server_context(args.tls_cert_file, args.tls_private_key_file, args.client_ca_file),
        handler_class=CertHandler,
        log=None,
        error_log=logging.getLogger("kubelab.apiserver.http"),
    )

    def shutdown() -> None:
        log.info("apiserver: shutting down")
        http.stop(timeout=5)
        server.stop()

    gevent.signal_handler(signal.SIGTERM, shutdown)
    gevent.signal_handler(signal.SIGINT, shutdown)
    log.info("apiserver: serving on https://%s:%d", args.bind_address, args.secure_port)
    http.serve_forever()
    log.info("apiserver: stopped")


if __name__ == "__main__":
    main()
