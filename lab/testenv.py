"""The real apiserver in-process, for tests: Kubernetes' envtest, the kubelab way.

Client-side components (the client library, the controllers, the scheduler, the kubelet)
are tested against the API. A fake API in `tests/` would have to re-learn every rule
the apiserver has (patches, selectors, deletion, admission) and would drift from it;
this serves the real one instead:

    with Environment.start() as env:
        rest = RESTClient(env.client_config())            # system:masters
        node = env.client_config("system:node:n1", ["system:nodes"])
        subprocess.run([kubectl, "--kubeconfig", env.kubeconfig, "get", "ns"])

What runs is `controlplane.apiserver`'s `APIServer` (registry, strategies, admission,
authentication and RBAC/Node authorization, the watch cache) and its Flask app, over
`lab.memstore` (the store's own MVCC state machine, in memory), served on a loopback
port with real TLS from a throwaway cluster CA. Every identity is a client certificate
(CN user, O groups) signed by that CA, so authentication and authorization are the real
ones. `faults` (`lab.faults`) sits in front of the app to inject failures.

The HTTP server is cheroot's (CherryPy's threaded WSGI server), not the production gevent
server: a test process must not be monkey-patched, and without it gevent's server would
stall on the first watch (the watch cache's queues block the thread, not a greenlet).
Like the production server it keeps connections alive (a client pays one TLS handshake,
not one per request), streams watch responses chunk by chunk, sends the headers of a
watch that has nothing to report yet, does the TLS handshake in the connection's thread
rather than the accept loop, and hands the app the client certificate
(``environ["kubelab.client_cert"]``). A watch (or a held fault) holds a worker thread
while it runs; the pool grows a worker whenever none is free. What differs from the
production server, and is tested against real processes instead (`tests/integration/`):
TLS is Python's `ssl`, so a client certificate from another CA fails the handshake
instead of getting a 401; exec, attach and port-forward (connection take-over) are not
served.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import re
import shutil
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from cheroot import errors as cheroot_errors
from cheroot.makefile import MakeFile
from cheroot.ssl import Adapter
from cheroot.workers.threadpool import ThreadPool, WorkerThread
from cheroot.wsgi import Gateway_10, Server
from cryptography.hazmat.primitives.asymmetric import ec
from opentelemetry.sdk.trace.export import SpanExporter

from controlplane.apiserver.admission import Chain
from controlplane.apiserver.apiserver import APIServer, Config
from controlplane.apiserver.app import create_app
from kubelab import pki
from kubelab.api.resources import Resource
from kubelab.client import ClientConfig, write_kubeconfig
from lab.faults import Disconnect, Faults, Recorder, RequestLog
from lab.memstore import MemStore

log = logging.getLogger("kubelab.lab.testenv")

ADMIN = "kubernetes-admin"
MASTERS = ("system:masters",)


class _TLSSocket(ssl.SSLSocket):
    """A server-side TLS socket on which a TLS failure while reading (a failed
    handshake, a client that went away mid-record) is cheroot's "peer dropped the TLS
    connection": the connection closes quietly instead of a 500 and a traceback in the
    log."""

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        try:
            return super().recv_into(buffer, nbytes, flags)
        except ssl.SSLError as exc:
            raise cheroot_errors.FatalSSLAlert(f"TLS: {exc}") from exc


class _TLS(Adapter):
    """cheroot's TLS hook with the context `Environment.start` made, whose handshake
    runs in the connection's worker thread (OpenSSL does it on the first read) rather
    than in the accept loop as cheroot's own adapter does: one slow client must not hold
    up the others."""

    def __init__(self, context: ssl.SSLContext, cert_file: Path, key_file: Path) -> None:
        super().__init__(str(cert_file), str(key_file))
        context.sslsocket_class = _TLSSocket
        self.context = context

    def bind(self, sock: socket.socket) -> socket.socket:
        return sock

    def wrap(self, sock: socket.socket) -> tuple[ssl.SSLSocket, dict[str, str]]:
        tls = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return tls, {}

    def get_environ(self) -> dict[str, str]:
        return {}

    def makefile(self, sock: ssl.SSLSocket, mode: str = "r", bufsize: int = -1) -> Any:
        return MakeFile(sock, mode, bufsize if bufsize > 0 else io.DEFAULT_BUFFER_SIZE)


class _Gateway(Gateway_10):
    """cheroot's WSGI gateway, with the production server's additions: the client
    certificate in the environ, the headers sent at an empty chunk, a `Disconnect`
    hanging up."""

    # cheroot's stubs leave these untyped (and say the base's returns None).
    def get_environ(self) -> dict[str, Any]:  # type: ignore[override]
        environ: dict[str, Any] = super().get_environ()  # type: ignore[no-untyped-call]
        # DER if the client presented one: the context verified it against the CA.
        environ["kubelab.client_cert"] = self.req.conn.socket.getpeercert(binary_form=True)
        return environ

    def respond(self) -> None:
        """As cheroot's, except that an empty chunk from the app sends the headers at
        once (as `controlplane.apiserver.server.CertHandler` does: a watch with nothing
        to report yet must answer 200 now, clients wait for the headers), and that a
        `Disconnect` (a fault) closes the connection without (finishing) an answer."""
        req = self.req
        req.server.requests.keep_up()  # this worker may now be busy for long (a watch)
        try:
            result = req.server.wsgi_app(self.env, self.start_response)
            try:
                for chunk in result:
                    if chunk or not req.sent_headers:
                        self.write(chunk)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Disconnect:
            req.ready = False  # no headers now
            req.chunked_write = False  # no end of the body
            req.close_connection = True
            with contextlib.suppress(OSError):
                req.conn.socket.shutdown(socket.SHUT_RDWR)


class _Pool(ThreadPool):
    """cheroot's worker pool, growing whenever a queued connection would find no free
    worker: a watch holds its worker for as long as it runs (as does a held fault), and
    a pool of fixed size would leave later requests queued behind them."""

    def put(self, obj: Any) -> None:
        super().put(obj)
        self.keep_up()

    def keep_up(self) -> None:
        """Start a worker for each queued connection that no idle worker will take.
        Called as a connection is queued and as a worker starts on a request (until
        then a worker that has just taken a connection still counts as idle)."""
        short = self.qsize - self.idle
        if short > 0:
            self.grow(short)

    def grow(self, amount: int) -> None:
        """As cheroot's, except that the workers are daemon threads (a test that never
        stopped its environment must not hang the interpreter's exit) and that it does
        not wait for them to be running (cheroot sleeps 0.1 s whenever one is not yet,
        and here it is called from the accept loop)."""
        threads: list[WorkerThread] = self._threads  # type: ignore[attr-defined]
        for _ in range(min(amount, max(self.max - len(threads), 0))):
            worker = WorkerThread(self.server)  # type: ignore[no-untyped-call]
            worker.name = f"testenv-http-worker-{len(threads)}"
            worker.daemon = True
            worker.start()
            threads.append(worker)


class _Server(Server):
    """cheroot's WSGI server as the test apiserver's: TLS from `_TLS`, `_Gateway`, a
    growing `_Pool`, and connections kept alive (no limit on idle ones)."""

    def __init__(self, tls: _TLS) -> None:
        # An idle connection is closed after `timeout` seconds (so is one that stalls
        # mid-request): long, so that a client's pooled connection is not closed under
        # it while a test waits.
        super().__init__(("127.0.0.1", 0), _placeholder, numthreads=4, timeout=300)
        self.gateway = _Gateway
        self.requests = _Pool(self, min=4)
        self.ssl_adapter = tls
        self.keep_alive_conn_limit = None  # type: ignore[assignment]
        # The accept loop's poll interval: how long `stop` takes at most.
        self.expiration_interval = 0.02
        # Without NODELAY a write that follows another (headers, then a watch's
        # events) waits for the client's delayed ACK (40 ms on Linux). cheroot's
        # default, said here because it matters.
        self.nodelay = True

    @property
    def port(self) -> int:
        port: int = self.bind_addr[1]
        return port

    def error_log(self, msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
        """cheroot's messages go to this module's log (cheroot writes to stderr)."""
        log.log(level, "testenv server: %s", msg, exc_info=traceback)


class Environment:
    """A running test apiserver; `start` it, use it, `stop` it (or use `with`).

    `server` is the `APIServer` itself, for a test that must reach in (say, to shorten
    `server.registry.bookmark_every`).
    """

    def __init__(
        self,
        directory: Path,
        server: APIServer,
        http: _Server,
        ca: pki.CertKey,
        owns_directory: bool,
    ) -> None:
        self.directory = directory
        self.server = server
        self.faults = Faults(create_app(server), server.cacher)
        """Faults to inject (`lab.faults`); the `apiserver` fixture clears them after each
        test."""
        self._recorder = Recorder(self.faults)
        http.wsgi_app = self._recorder
        self.url = f"https://127.0.0.1:{http.port}"
        self._http = http
        self._ca = ca
        self._owns_directory = owns_directory
        self._creds: dict[tuple[str, tuple[str, ...]], pki.CertKey] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=http.serve, name="testenv-http", daemon=True)
        self.kubeconfig = self.kubeconfig_for(ADMIN, MASTERS)
        """The admin kubeconfig (system:masters), for the real kubectl."""

    @classmethod
    def start(
        cls,
        *,
        directory: Path | None = None,
        admission_plugins: Sequence[str] = Chain.ALL,
        node_authorizer: bool = True,
        service_cluster_ip_range: str = "10.96.0.0/12",
        service_node_port_range: tuple[int, int] = (30000, 32767),
        bookmark_interval: float = 5.0,
        span_exporter: SpanExporter | None = None,
        audit_log_path: Path | None = None,
    ) -> Environment:
        """Start an apiserver on a free loopback port, over an empty in-memory store.

        Its files (the CA, kubeconfigs) go to `directory`, by default a temporary one
        removed by `stop`. The apiserver bootstraps as in production: system
        namespaces, the RBAC bootstrap policy, the `kubernetes` Service. A watch that
        asked for bookmarks gets one after `bookmark_interval` quiet seconds (checked
        once a second). With a `span_exporter` (the SDK's `InMemorySpanExporter`) the
        apiserver traces into it; `env.server.tracing.force_flush()` hands it what ended.
        With `audit_log_path` it keeps its audit log there (`--audit-log-path`).
        """
        began = time.monotonic()
        owns = directory is None
        where = directory or Path(tempfile.mkdtemp(prefix="kubelab-testenv-"))
        where.mkdir(parents=True, exist_ok=True)
        ca = pki.new_ca("kubernetes")
        serving = pki.issue(
            ca,
            "kube-apiserver",
            dns_names=["localhost", "kubernetes", "kubernetes.default"],
            ip_addresses=["127.0.0.1"],
            server=True,
        )
        ca_file, _ = pki.write_pair(ca, where, "ca")
        cert_file, key_file = pki.write_pair(serving, where, "apiserver")
        tls = pki.server_ssl_context(ca_file, cert_file, key_file, require_client_cert=False)

        signing = ec.generate_private_key(ec.SECP256R1())
        # Bound first: the apiserver advertises its port in the `kubernetes` Endpoints.
        http = _Server(_TLS(tls, cert_file, key_file))
        http.prepare()
        config = Config(
            etcd_servers=["memstore://"],
            secure_port=http.port,
            service_cluster_ip_range=service_cluster_ip_range,
            service_node_port_range=service_node_port_range,
            admission_plugins=tuple(admission_plugins),
            service_account_signing_key=signing,
            service_account_public_keys=[signing.public_key()],
            node_authorizer=node_authorizer,
            audit_log_path=audit_log_path,
        )
        server = APIServer(config, client=MemStore(), span_exporter=span_exporter)
        try:
            server.start(timeout=10)
        except BaseException:
            server.stop()
            http.stop()
            if owns:
                shutil.rmtree(where, ignore_errors=True)
            raise
        server.registry.bookmark_every = bookmark_interval
        env = cls(where, server, http, ca, owns)
        env._thread.start()
        log.info("testenv: apiserver at %s, up in %.3fs", env.url, time.monotonic() - began)
        return env

    # -- identities ----------------------------------------------------------------------

    def _credentials(self, user: str, groups: Sequence[str]) -> pki.CertKey:
        key = (user, tuple(groups))
        with self._lock:
            cert = self._creds.get(key)
            if cert is None:
                cert = pki.issue(self._ca, user, organizations=list(groups), client=True)
                self._creds[key] = cert
            return cert

    def client_config(
        self, user: str = ADMIN, groups: Sequence[str] = MASTERS, namespace: str = "default"
    ) -> ClientConfig:
        """A client configuration authenticating as `user` in `groups` (a client
        certificate from the cluster CA); by default the admin (system:masters)."""
        cert = self._credentials(user, groups)
        return ClientConfig(
            server=self.url,
            ca_data=self._ca.cert_pem(),
            client_cert_data=cert.cert_pem(),
            client_key_data=cert.key_pem(),
            namespace=namespace,
            source=f"lab.testenv ({user})",
        )

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig file authenticating as `user` in `groups`, for kubectl or the
        official client."""
        cert = self._credentials(user, groups)
        tag = hashlib.sha256("\0".join([user, *groups]).encode()).hexdigest()[:8]
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", user)
        return write_kubeconfig(
            self.directory / f"{name}-{tag}.conf",
            cluster_name="kubelab-testenv",
            server=self.url,
            ca_data=self._ca.cert_pem(),
            user_name=user,
            client_cert_data=cert.cert_pem(),
            client_key_data=cert.key_pem(),
        )

    # -- observing -----------------------------------------------------------------------

    @contextlib.contextmanager
    def record(self) -> Iterator[RequestLog]:
        """Record the requests clients send while the block runs."""
        log = RequestLog()
        self._recorder.logs.append(log)
        try:
            yield log
        finally:
            self._recorder.logs.remove(log)

    def open_watches(self, resource: Resource, namespace: str | None = None) -> int:
        """How many watches on `resource` (in `namespace`, or in all) are being served."""
        watchers = list(self.server.cacher.cache_for(resource).watchers)
        if namespace is None:
            return len(watchers)
        return sum(w.prefix == resource.collection_prefix(namespace) for w in watchers)

    def wait_for_watches(
        self, n: int, resource: Resource, namespace: str | None = None, timeout: float = 5.0
    ) -> None:
        """Wait until at least `n` such watches are open (the watcher is registered
        before its stream starts, so nothing written afterwards is missed)."""
        deadline = time.monotonic() + timeout
        while self.open_watches(resource, namespace) < n:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.open_watches(resource, namespace)} watches on "
                    f"{resource.plural} open after {timeout}s, expected {n}"
                )
            time.sleep(0.005)

    # -- lifecycle -----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop serving (open watches end, held requests go on), and remove the files if
        they were ours."""
        self.faults.clear()
        self.server.stop()  # first: it ends the watches, whose workers `_http` waits for
        self._http.stop()
        self._thread.join(timeout=5)
        if self._owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _placeholder(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """The server's app until the apiserver exists (the server is bound first, for its
    port); it is replaced before the server takes its first request."""
    start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
    return [b"starting\n"]
