"""A TCP relay from the lab network's gateway address to an apiserver on the host's
loopback, for tests and benchmarks (`NodeAPI`).

The test apiservers (`lab.testenv`, `controlplane.localplane`) listen on 127.0.0.1 only,
and node containers reach the host only at their network's gateway address. The relay
accepts there and copies bytes both ways, TLS untouched: a node names the apiserver
`kubernetes` (a name its serving certificate holds) mapped to the gateway in its
/etc/hosts, so certificate checks pass end to end. The listener is on the lab's
internal network only; nothing beyond this machine can reach it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from kubelab import pki
from kubelab.client import ClientConfig, RestClient, write_kubeconfig
from lab.nodes import Node
from lab.testenv import Environment

log = logging.getLogger("lab.relay")

BUFFER = 65536
# Node agents that only read the API authenticate as kube-proxy, whose bootstrap role
# (system:node-proxier) reads nodes, services and endpointslices: all that the network
# agent, kube-proxy and DNS need, and nothing more.
AGENT_USER = "system:kube-proxy"


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy until `source` ends, then end `sink`'s writing side (a half close)."""
    with contextlib.suppress(OSError):
        while data := source.recv(BUFFER):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    target: tuple[str, int] = ("127.0.0.1", 0)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client: socket.socket = self.request
        try:
            upstream = socket.create_connection(self.server.target, timeout=10)
        except OSError as err:
            log.warning("relay: cannot reach %s:%d: %s", *self.server.target, err)
            return
        upstream.settimeout(None)
        with upstream:
            back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join()


@dataclass
class Relay:
    """Listens on `host` (port `port`, 0 for any free one), forwards to `target`."""

    host: str
    target: tuple[str, int]
    port: int = 0
    _server: _Server | None = field(default=None, init=False)

    def start(self) -> Relay:
        server = _Server((self.host, self.port), _Handler)
        server.target = self.target
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, name="relay", daemon=True).start()
        log.info("relay %s:%d -> %s:%d", self.host, self.port, *self.target)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@dataclass
class NodeAPI:
    """An apiserver on the host as the nodes reach it: `kubernetes:<port>` in a node is
    the relay on the lab network's gateway (lab.relay), forwarding to the apiserver on
    the host's loopback; `kubernetes` is a name its certificate holds. Either the
    session's in-process apiserver (`open`, lab.testenv) or a control plane's real
    processes (`serve`, lab.localplane: the live-data path needs them)."""

    url: str
    ca_dir: Path
    """Where the cluster CA's ca.crt and ca.key are: node credentials are issued from it."""
    relay: Relay
    client: RestClient
    """The admin's client, for the caller's own API calls."""

    @classmethod
    def open(cls, env: Environment, gateway: str) -> NodeAPI:
        """Relay from `gateway` (the lab network's, see lab.nodes) to `env`'s apiserver."""
        return cls.serve(env.url, env.directory, gateway)

    @classmethod
    def serve(cls, url: str, ca_dir: Path, gateway: str) -> NodeAPI:
        """Relay from `gateway` to the apiserver at `url` whose CA is in `ca_dir`."""
        port = urllib.parse.urlsplit(url).port
        assert port is not None
        relay = Relay(gateway, ("127.0.0.1", port)).start()
        admin = _client_config(url, ca_dir, "kubernetes-admin", ("system:masters",))
        return cls(url, ca_dir, relay, RestClient(admin, qps=None))

    def close(self) -> None:
        self.client.close()
        self.relay.stop()

    @property
    def node_server(self) -> str:
        return f"https://kubernetes:{self.relay.port}"

    def kubeconfig_for_nodes(self, user: str, groups: tuple[str, ...] = ()) -> bytes:
        """A kubeconfig for `user` in `groups` with the server as nodes reach it."""
        config = _client_config(self.url, self.ca_dir, user, groups)
        assert config.ca_data and config.client_cert_data and config.client_key_data
        with tempfile.TemporaryDirectory() as tmp:
            path = write_kubeconfig(
                Path(tmp) / "node.conf",
                cluster_name="kubelab",
                server=self.node_server,
                ca_data=config.ca_data,
                user_name=user,
                client_cert_data=config.client_cert_data,
                client_key_data=config.client_key_data,
            )
            return path.read_bytes()

    def install(
        self, node: Node, path: str, user: str = AGENT_USER, groups: tuple[str, ...] = ()
    ) -> None:
        """Point `node` at the apiserver: /etc/hosts and a kubeconfig at `path` for `user`
        in `groups` (a kubelet: `system:node:<name>` in `system:nodes`)."""
        entry = f"{self.relay.host} kubernetes"
        node.sh(f"grep -qx '{entry}' /etc/hosts || echo '{entry}' >> /etc/hosts")
        node.write_file(path, self.kubeconfig_for_nodes(user, groups))


def _client_config(url: str, ca_dir: Path, user: str, groups: tuple[str, ...]) -> ClientConfig:
    """Credentials for `user` in `groups`: a client certificate of the CA in `ca_dir`."""
    ca = pki.load_pair(ca_dir, "ca")
    cert = pki.issue(ca, user, organizations=list(groups), client=True)
    return ClientConfig(
        server=url,
        ca_data=ca.cert_pem(),
        client_cert_data=cert.cert_pem(),
        client_key_data=cert.key_pem(),
    )
