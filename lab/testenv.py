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

The HTTP server is werkzeug's threaded one (Flask's own), not the production gevent
server: a test process must not be monkey-patched, and a thread per request is plenty
for tests. It streams watch responses chunk by chunk like gevent's and hands the app the
client certificate where the production server does (``environ["kubelab.client_cert"]``).
What differs from the production server, and is tested against real processes instead
(`tests/integration/`): TLS is Python's `ssl`, so a client certificate from another CA
fails the handshake instead of getting a 401; connections are not kept alive; exec,
attach and port-forward (connection take-over) are not served.
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

from cryptography.hazmat.primitives.asymmetric import ec
from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

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


class _TLSReader(socket.SocketIO):
    """A TLS socket's reading end on which a TLS failure (a client that went away
    mid-record sends an alert) is a dropped connection, as werkzeug treats a reset,
    rather than a request error with a traceback in the log."""

    def readinto(self, b: Any) -> int | None:
        try:
            return super().readinto(b)
        except ssl.SSLError as exc:
            raise ConnectionResetError(f"TLS: {exc}") from exc


class _Handler(WSGIRequestHandler):
    """werkzeug's handler, with the production server's WSGI environ additions."""

    # Without NODELAY a write that follows another (headers, then a watch's events)
    # waits for the client's delayed ACK (40 ms on Linux).
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the plain reader: reads go through _TLSReader instead
        self.rfile = io.BufferedReader(_TLSReader(self.connection, "rb"))

    def make_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().make_environ()
        environ.pop("SSL_CLIENT_CERT", None)
        # DER if the client presented one: the context verified it against the CA.
        environ["kubelab.client_cert"] = self.connection.getpeercert(binary_form=True)
        return environ

    def run_wsgi(self) -> None:
        try:
            super().run_wsgi()
        except Disconnect:  # a fault: hang up without (finishing) an answer
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Access logging is the audit log's job, as in the production server."""


class Environment:
    """A running test apiserver; `start` it, use it, `stop` it (or use `with`).

    `server` is the `APIServer` itself, for a test that must reach in (say, to shorten
    `server.registry.bookmark_every`).
    """

    def __init__(
        self,
        directory: Path,
        server: APIServer,
        http: ThreadedWSGIServer,
        ca: pki.CertKey,
        owns_directory: bool,
    ) -> None:
        self.directory = directory
        self.server = server
        self.faults = Faults(create_app(server), server.cacher)
        """Faults to inject (`lab.faults`); the `apiserver` fixture clears them after each
        test."""
        self._recorder = Recorder(self.faults)
        http.app = self._recorder
        self.url = f"https://127.0.0.1:{http.server_port}"
        self._http = http
        self._ca = ca
        self._owns_directory = owns_directory
        self._creds: dict[tuple[str, tuple[str, ...]], pki.CertKey] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=http.serve_forever, kwargs={"poll_interval": 0.02}, name="testenv-http"
        )
        self._thread.daemon = True
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
    ) -> Environment:
        """Start an apiserver on a free loopback port, over an empty in-memory store.

        Its files (the CA, kubeconfigs) go to `directory`, by default a temporary one
        removed by `stop`. The apiserver bootstraps as in production: system
        namespaces, the RBAC bootstrap policy, the `kubernetes` Service. A watch that
        asked for bookmarks gets one after `bookmark_interval` quiet seconds (checked
        once a second).
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
        http = ThreadedWSGIServer("127.0.0.1", 0, _placeholder, _Handler)
        http.daemon_threads = True
        # TLS set up here rather than by werkzeug, so that handshakes happen in each
        # request's thread, not in the accept loop (one slow client must not hold up
        # the others).
        http.socket = tls.wrap_socket(http.socket, server_side=True, do_handshake_on_connect=False)
        http.ssl_context = tls
        config = Config(
            etcd_servers=["memstore://"],
            secure_port=http.server_port,
            service_cluster_ip_range=service_cluster_ip_range,
            service_node_port_range=service_node_port_range,
            admission_plugins=tuple(admission_plugins),
            service_account_signing_key=signing,
            service_account_public_keys=[signing.public_key()],
            node_authorizer=node_authorizer,
        )
        server = APIServer(config, client=MemStore())
        try:
            server.start(timeout=10)
        except BaseException:
            server.stop()
            http.server_close()
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
        self._http.shutdown()
        self.server.stop()
        self._http.server_close()
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
