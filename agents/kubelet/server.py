"""The kubelet's HTTPS server on 10250: the far end of the seeds' live-data flow (the
apiserver relays `kubectl logs`, `exec` and `top` here; see
`controlplane/apiserver/kubelet.py` for the paths it calls).

* `/containerLogs/<ns>/<pod>/<container>`: follow, tailLines, previous, timestamps,
  sinceSeconds;
* `/exec/<ns>/<pod>/<container>?command=...` and `/attach/<ns>/<pod>/<container>`:
  WebSocket with the `v5.channel.k8s.io` subprotocol (v4 too): each message starts with
  a channel byte (0 stdin, 1 stdout, 2 stderr, 3 the final Status, 4 terminal resize;
  v5's 255 closes a channel); a client's messages may be binary or text (the official
  Python client sends str stdin as text), both read as bytes, as Kubernetes reads them;
* `/portForward/<ns>/<pod>`: SPDY/3.1 (`portforward.k8s.io`), either on the upgraded
  connection (kubectl before 1.31) or tunnelled in WebSocket binary messages
  (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+), see agents/kubelet/streaming.py; or
  WebSocket `v4.channel.k8s.io` with `?ports=...` (the official Python client), two
  channels per port (data, error), each opened by the port number. Connections are
  made inside the pod's network namespace.

An upgraded connection is read and written by several threads: it goes through
`streaming.TLSConnection`, which serializes the SSL calls (OpenSSL forbids two threads
in one SSL object; the race is what once failed a TLS exchange with UNEXPECTED_MESSAGE).
* `/stats/summary` (CPU and memory of the node, pods and containers, for metrics.k8s.io),
  `/healthz`, `/metrics` (Prometheus), `/pods`.

Every request is authenticated, none is anonymous: a client certificate signed by the
cluster CA (the apiserver's kubelet-client certificate), or a bearer token the apiserver
vouches for (TokenReview); then authorized by a SubjectAccessReview for `nodes/<sub>` of
this node (proxy, log, stats, metrics), as the kubelet's webhook authorizer does
(`kubelab.delegatedauth`, which the control plane's components use too). Answers are
cached for a minute.

A request that carries a W3C `traceparent` (the apiserver relaying `kubectl logs`) is a
span continuing its trace: `Kubelet.containerLogs`, `Kubelet.exec`, `Kubelet.attach`,
`Kubelet.portForward`, `Kubelet.stats`, with the pod (and container) as attributes; one
without makes none (metrics scrapes, probes of the server).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

import prometheus_client
import wsproto
import wsproto.events
from opentelemetry import propagate, trace
from wsproto import ConnectionType, WSConnection

from agents.kubelet import podtrace
from agents.kubelet.pods import PodWorkers
from agents.kubelet.runtime import CONTAINER_NAME, ExecSession, Runtime, State
from agents.kubelet.streaming import (
    EXEC_PROTOCOLS,
    STREAM_TIMEOUT,
    ChannelMessages,
    ExecStreams,
    PortForwarder,
    RawTransport,
    SpdySession,
    TLSConnection,
    Transport,
    WebSocketTunnel,
    exit_status,
)
from kubelab import tracing
from kubelab.client import RestClient
from kubelab.delegatedauth import Delegation, User

log = logging.getLogger("kubelab.kubelet.server")

Object = dict[str, Any]
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
SPDY = "spdy/3.1"
SPDY_TUNNEL = "SPDY/3.1+portforward.k8s.io"
PORT_FORWARD_PROTOCOLS = (SPDY_TUNNEL, "v4.channel.k8s.io", "portforward.k8s.io")
DECISION_TTL = 60.0
_SPANS = {
    "containerLogs": "Kubelet.containerLogs",
    "exec": "Kubelet.exec",
    "attach": "Kubelet.attach",
    "portForward": "Kubelet.portForward",
}
"""The traced live-data requests' spans, by the path's first segment."""


def _subresource(path: str) -> str:
    """The nodes/<sub> a path needs (kubelet's authorizer mapping)."""
    if path.startswith("/stats"):
        return "stats"
    if path.startswith("/metrics"):
        return "metrics"
    if path.startswith("/logs"):
        return "log"
    return "proxy"


class Authorizer:
    """Who is calling, and may they (module docstring): `kubelab.delegatedauth`'s
    reviews, with no anonymous callers (kubeadm runs kubelets with
    --anonymous-auth=false) and a request's path mapped to `nodes/<sub>` of this node."""

    def __init__(self, client: RestClient, node: str) -> None:
        self.node = node
        self.delegation = Delegation(client, client, ttl=DECISION_TTL, anonymous=False)

    def allowed(self, user: User, method: str, path: str) -> bool:
        verb = "get" if method in ("GET", "HEAD") else "create"
        attributes = {
            "verb": verb,
            "resource": "nodes",
            "subresource": _subresource(path),
            "name": self.node,
        }
        return self.delegation.authorize(user, {"resourceAttributes": attributes})


class StatsCollector:
    """CPU rates need two samples: keep each container's previous one."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._last: dict[str, tuple[int, float]] = {}

    def rate(self, key: str, cpu_ns: int, at: float) -> int:
        prev = self._last.get(key)
        self._last[key] = (cpu_ns, at)
        if prev is None or at <= prev[1]:
            return 0
        return max(0, int((cpu_ns - prev[0]) / (at - prev[1])))


HANDSHAKE_TIMEOUT = 10.0
"""Seconds a client has to complete the TLS handshake."""


class KubeletServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        ssl_context: ssl.SSLContext,
        workers: PodWorkers,
        authorizer: Authorizer,
        node_usage: Callable[[], tuple[int, int]],
        *,
        tracer: trace.Tracer | None = None,
        registry: prometheus_client.CollectorRegistry | None = None,
    ) -> None:
        """`tracer` traces the live-data requests (module docstring); `registry` holds
        what `/metrics` serves (a new one by default)."""
        super().__init__(address, _Handler)
        self.tracer = tracer
        # The handshake runs in the connection's own thread (`_Handler.setup`), not in
        # accept(): a slow or broken client must not hold up the accept loop.
        self.socket = ssl_context.wrap_socket(
            self.socket, server_side=True, do_handshake_on_connect=False
        )
        self.workers = workers
        self.runtime = workers.runtime
        self.authorizer = authorizer
        self.node_usage = node_usage
        self.stats = StatsCollector(workers.runtime)
        self.registry = registry or prometheus_client.CollectorRegistry()
        self.running_pods = prometheus_client.Gauge(
            "kubelet_running_pods", "Pods with a running sandbox", registry=self.registry
        )
        self.running_containers = prometheus_client.Gauge(
            "kubelet_running_containers", "Running containers", registry=self.registry
        )

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="kubelet https", daemon=True)
        thread.start()
        return thread

    def _pod_uid(self, ns: str, pod: str) -> str:
        with self.workers._lock:
            states = list(self.workers.pods.items())
        uid = next(
            (
                u
                for u, st in states
                if st.pod is not None
                and st.pod["metadata"]["name"] == pod
                and st.pod["metadata"].get("namespace", "default") == ns
            ),
            None,
        )
        if uid is None:
            raise LookupError(f'pod "{pod}" in namespace "{ns}" is not running on this node')
        return uid

    def find_sandbox(self, ns: str, pod: str) -> str:
        """The runtime id of a pod's ready sandbox (its network namespace)."""
        ready = [s for s in self.workers.pleg.snapshot(self._pod_uid(ns, pod)).sandboxes if s.ready]
        if not ready:
            raise LookupError(f'pod "{pod}" in namespace "{ns}" has no running sandbox')
        return max(ready, key=lambda s: s.created_at).id

    def find_container(self, ns: str, pod: str, container: str, previous: bool) -> str:
        """The runtime id of a pod's container (its last dead one with `previous`)."""
        uid = self._pod_uid(ns, pod)
        found = sorted(
            (
                c
                for c in self.workers.pleg.snapshot(uid).containers
                if c.labels.get(CONTAINER_NAME) == container
            ),
            key=lambda c: (c.attempt, c.created_at),
        )
        if previous:
            found = found[:-1]
        if not found:
            what = "previous terminated container" if previous else "container"
            raise LookupError(f'{what} "{container}" in pod "{pod}" not found')
        return found[-1].id


class _Handler(BaseHTTPRequestHandler):
    server: KubeletServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        assert isinstance(self.request, ssl.SSLSocket)
        self.request.settimeout(HANDSHAKE_TIMEOUT)
        self.request.do_handshake()
        self.request.settimeout(None)
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("kubelet https: " + format, *args)

    def _error(self, code: int, message: str) -> None:
        body = (message + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _caller(self) -> User | None:
        """Who sends the request (`Delegation.authenticate`); None: nobody (401)."""
        return self.server.authorizer.delegation.authenticate(
            self.connection.getpeercert(), self.headers.get("Authorization", "")
        )

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        caller = self._caller()
        if caller is None:
            self._error(401, "Unauthorized")
            return
        if not self.server.authorizer.allowed(caller, method, url.path):
            sub = _subresource(url.path)
            self._error(
                403,
                f"Forbidden (user={caller.name}, verb={method.lower()}, resource=nodes, "
                f"subresource={sub})",
            )
            return
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        with self._traced(url.path, parts):
            self._route(url, query, parts)

    def _traced(self, path: str, parts: list[str]) -> contextlib.AbstractContextManager[Any]:
        """A live-data request's span, continuing the trace of its `traceparent`
        (module docstring); nothing for the other paths or an untraced request."""
        name = _SPANS.get(parts[0]) if path != "/stats/summary" else "Kubelet.stats"
        tracer = self.server.tracer
        if tracer is None or name is None:
            return contextlib.nullcontext()
        context = propagate.extract(self.headers)
        if not trace.get_current_span(context).get_span_context().is_valid:
            return contextlib.nullcontext()
        attributes: dict[str, str] = {}
        if len(parts) >= 3 and name != "Kubelet.stats":
            pod = {"kind": "Pod", "metadata": {"namespace": parts[1], "name": parts[2]}}
            attributes = tracing.object_attributes(pod)
            if len(parts) >= 4:
                attributes[podtrace.CONTAINER] = parts[3]
        return tracer.start_as_current_span(
            name, context=context, kind=trace.SpanKind.SERVER, attributes=attributes
        )

    def _route(self, url: SplitResult, query: dict[str, str], parts: list[str]) -> None:
        try:
            if url.path == "/healthz":
                self._text(b"ok")
            elif url.path == "/pods":
                self._pods()
            elif url.path == "/metrics":
                self._metrics()
            elif url.path == "/stats/summary":
                self._json(self._summary())
            elif parts[0] == "containerLogs" and len(parts) == 4:
                self._logs(parts[1], parts[2], parts[3], query)
            elif parts[0] in ("exec", "attach") and len(parts) == 4:
                self._exec(parts[0], parts[1], parts[2], parts[3], parse_qs(url.query))
            elif parts[0] == "portForward" and len(parts) == 3:
                self._port_forward(parts[1], parts[2], parse_qs(url.query))
            else:
                self._error(404, f"404 page not found: {url.path}")
        except LookupError as exc:
            self._error(404, str(exc).strip("'\""))

    def _text(self, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _pods(self) -> None:
        with self.server.workers._lock:
            pods = [st.pod for st in self.server.workers.pods.values() if st.pod is not None]
        self._json({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods})

    def _metrics(self) -> None:
        containers = self.server.runtime.list_containers()
        self.server.running_containers.set(sum(c.state == State.RUNNING for c in containers))
        self.server.running_pods.set(sum(s.ready for s in self.server.runtime.list_sandboxes()))
        self._text(
            prometheus_client.generate_latest(self.server.registry), "text/plain; version=0.0.4"
        )

    def _summary(self) -> Object:
        srv = self.server
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        cpu_ns, working_set = srv.node_usage()
        node = {
            "nodeName": srv.workers.config.node_name,
            "cpu": {
                "time": stamp,
                "usageNanoCores": srv.stats.rate("", cpu_ns, now),
                "usageCoreNanoSeconds": cpu_ns,
            },
            "memory": {"time": stamp, "workingSetBytes": working_set},
        }
        pods = []
        with srv.workers._lock:
            states = [(uid, st.pod) for uid, st in srv.workers.pods.items() if st.pod is not None]
        for uid, pod in states:
            containers = []
            for c in srv.workers.pleg.snapshot(uid).containers:
                if c.state != State.RUNNING:
                    continue
                usage = srv.runtime.stats(c.id)
                if usage is None:
                    continue
                containers.append(
                    {
                        "name": c.labels.get(CONTAINER_NAME, ""),
                        "startTime": time.strftime(
                            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(c.started_at or now)
                        ),
                        "cpu": {
                            "time": stamp,
                            "usageNanoCores": srv.stats.rate(c.id, usage.cpu_usage_ns, usage.time),
                            "usageCoreNanoSeconds": usage.cpu_usage_ns,
                        },
                        "memory": {
                            "time": stamp,
                            "workingSetBytes": usage.memory_working_set,
                            "usageBytes": usage.memory_usage,
                        },
                    }
                )
            meta = pod["metadata"]
            pods.append(
                {
                    "podRef": {
                        "name": meta["name"],
                        "namespace": meta.get("namespace"),
                        "uid": uid,
                    },
                    "containers": containers,
                }
            )
        return {"node": node, "pods": pods}

    def _logs(self, ns: str, pod: str, container: str, query: dict[str, str]) -> None:
        cid = self.server.find_container(ns, pod, container, query.get("previous") == "true")
        follow = query.get("follow") == "true"
        since = None
        if query.get("sinceSeconds"):
            since = time.time() - int(query["sinceSeconds"])
        tail = int(query["tailLines"]) if query.get("tailLines") else None
        chunks = self.server.runtime.logs(
            cid,
            follow=follow,
            tail=tail,
            since=since,
            timestamps=query.get("timestamps") == "true",
        )
        limit = int(query["limitBytes"]) if query.get("limitBytes") else None
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            for chunk in chunks:
                if limit is not None:
                    chunk = chunk[: max(0, limit - sent)]
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    sent += len(chunk)
                if limit is not None and sent >= limit:
                    break
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client went away (kubectl logs -f interrupted)
        self.close_connection = True

    # -- exec, attach and port-forward over WebSocket ---------------------------------------

    def _websocket(self, protocols: tuple[str, ...]) -> tuple[WSConnection, str] | None:
        """Check the upgrade request and pick a subprotocol; answer 400 if either fails.
        Nothing is sent on success: the caller accepts once its stream is ready."""
        if self.headers.get("Upgrade", "").lower() != "websocket":
            self._error(400, f"this needs a WebSocket upgrade ({', '.join(protocols)})")
            return None
        ws = WSConnection(ConnectionType.SERVER)
        # The handshake was parsed already; wsproto checks it again from the raw request.
        lines = [self.requestline, *(f"{k}: {v}" for k, v in self.headers.items())]
        ws.receive_data(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        request = next((e for e in ws.events() if isinstance(e, wsproto.events.Request)), None)
        if request is None:
            self._error(400, "not a WebSocket handshake")
            return None
        protocol = next((p for p in protocols if p in request.subprotocols), None)
        if protocol is None:
            self._error(400, f"no supported subprotocol among {request.subprotocols}")
            return None
        return ws, protocol

    def _exec(
        self, verb: str, ns: str, pod: str, container: str, query: dict[str, list[str]]
    ) -> None:
        """exec runs `command` in the container; attach joins the container's own stdio.
        Over WebSocket (v5/v4.channel.k8s.io) or SPDY/3.1 (kubectl before 1.30, and with
        KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false)."""
        if self.headers.get("Upgrade", "").lower() == SPDY:
            self._exec_spdy(verb, ns, pod, container, query)
            return
        upgrade = self._websocket(PROTOCOLS)
        if upgrade is None:
            return
        ws, protocol = upgrade
        session = self._start(verb, ns, pod, container, query)
        if session is None:
            return
        sock = TLSConnection(self.connection)
        sock.sendall(ws.send(wsproto.events.AcceptConnection(subprotocol=protocol)))
        self.close_connection = True
        lock = threading.Lock()

        def send(channel: int, data: bytes) -> None:
            with lock:
                sock.sendall(ws.send(wsproto.events.BytesMessage(data=bytes([channel]) + data)))

        reader = threading.Thread(
            target=self._pump_input, args=(ws, sock, session, lock), daemon=True
        )
        reader.start()
        try:
            while True:
                stream, data = session.read()
                if stream == 0:
                    break
                send(stream, data)
            send(3, json.dumps(exit_status(session.exit_code())).encode())
            with lock:
                sock.sendall(ws.send(wsproto.events.CloseConnection(code=1000)))
        except OSError:
            pass
        finally:
            session.close()

    def _start(
        self, verb: str, ns: str, pod: str, container: str, query: dict[str, list[str]]
    ) -> ExecSession | None:
        """The exec'd command or the attached container (None once a 4xx/5xx is sent)."""
        cid = self.server.find_container(ns, pod, container, False)
        command = query.get("command") or []
        if verb == "exec" and not command:
            self._error(400, "you must specify at least one command for the container")
            return None
        tty, stdin = _flag(query, "tty"), _flag(query, "stdin")
        runtime = self.server.runtime
        try:
            if verb == "exec":
                session = runtime.exec_stream(cid, command, tty=tty, stdin=stdin)
            else:
                session = runtime.attach(cid, tty=tty, stdin=stdin)
        except Exception as exc:
            self._error(500, f"{verb} failed: {exc}")
            return None
        log.info("kubelet https: %s in %s/%s container %s (tty=%s)", verb, ns, pod, container, tty)
        return session

    def _stream_protocol(self, supported: tuple[str, ...]) -> str | None:
        """The SPDY upgrade's X-Stream-Protocol-Version we speak (400 sent if none)."""
        offered = [
            p.strip()
            for v in self.headers.get_all("X-Stream-Protocol-Version") or []
            for p in v.split(",")
        ]
        protocol = next((p for p in supported if p in offered), None)
        if protocol is None:
            self._error(
                400,
                f"SPDY needs X-Stream-Protocol-Version with one of {', '.join(supported)} "
                f"(offered: {', '.join(offered) or 'none'})",
            )
        return protocol

    def _switch_to_spdy(self, protocol: str) -> TLSConnection:
        conn = TLSConnection(self.connection)
        conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
            b"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: %s\r\n\r\n" % protocol.encode()
        )
        self.close_connection = True
        return conn

    def _exec_spdy(
        self, verb: str, ns: str, pod: str, container: str, query: dict[str, list[str]]
    ) -> None:
        protocol = self._stream_protocol(EXEC_PROTOCOLS)
        if protocol is None:
            return
        session = self._start(verb, ns, pod, container, query)
        if session is None:
            return
        streams = ExecStreams(
            protocol,
            stdin=_flag(query, "stdin"),
            stdout=_flag(query, "stdout"),
            stderr=_flag(query, "stderr"),
            tty=_flag(query, "tty"),
        )
        spdy_session = SpdySession(RawTransport(self._switch_to_spdy(protocol)), streams.on_stream)
        reader = threading.Thread(target=spdy_session.run, daemon=True)
        reader.start()
        try:
            streams.serve(session)
        except OSError:
            pass
        finally:
            session.close()
        reader.join(timeout=STREAM_TIMEOUT)  # the client hangs up once it has the status

    def _port_forward(self, ns: str, pod: str, query: dict[str, list[str]]) -> None:
        """Port-forward in each protocol kubectl and the official clients speak: SPDY/3.1
        on the upgraded connection (kubectl before 1.31), the same SPDY inside WebSocket
        (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+; see agents/kubelet/streaming.py
        for both), or WebSocket `v4.channel.k8s.io` (the official Python client)."""
        if self.headers.get("Upgrade", "").lower() == SPDY:
            self._port_forward_spdy(ns, pod)
            return
        upgrade = self._websocket(PORT_FORWARD_PROTOCOLS)
        if upgrade is None:
            return
        ws, protocol = upgrade
        if protocol == SPDY_TUNNEL:
            sandbox = self.server.find_sandbox(ns, pod)
            conn = TLSConnection(self.connection)
            conn.sendall(ws.send(wsproto.events.AcceptConnection(subprotocol=protocol)))
            self.close_connection = True
            self._serve_spdy(WebSocketTunnel(conn, ws), ns, pod, sandbox)
            return
        self._port_forward_channels(ws, protocol, ns, pod, query)

    def _port_forward_spdy(self, ns: str, pod: str) -> None:
        """The SPDY/3.1 upgrade: answer 101 with the stream protocol, then serve SPDY."""
        if self._stream_protocol(("portforward.k8s.io",)) is None:
            return
        sandbox = self.server.find_sandbox(ns, pod)
        conn = self._switch_to_spdy("portforward.k8s.io")
        self._serve_spdy(RawTransport(conn), ns, pod, sandbox)

    def _serve_spdy(self, transport: Transport, ns: str, pod: str, sandbox: str) -> None:
        def connect(port: int) -> socket.socket:
            return self.server.runtime.port_forward(sandbox, port)

        forwarder = PortForwarder(connect, f"{ns}/{pod}")
        SpdySession(transport, forwarder.on_stream).run()

    def _port_forward_channels(
        self, ws: WSConnection, protocol: str, ns: str, pod: str, query: dict[str, list[str]]
    ) -> None:
        """Port-forward over WebSocket (`v4.channel.k8s.io`, as the official clients speak
        it): for the i-th port of `?ports=`, channel 2i carries its data and 2i+1 its
        errors, and each channel's first message from here is the port (2 bytes, little
        endian). Each port gets one TCP connection in the pod's network namespace."""
        try:
            ports = [
                int(p) for v in query.get("ports", []) + query.get("port", []) for p in v.split(",")
            ]
        except ValueError:
            ports = []
        if not ports or not all(0 < p < 65536 for p in ports):
            self._error(400, "port-forward needs ?ports=<port>[,<port>...] between 1 and 65535")
            return
        sandbox = self.server.find_sandbox(ns, pod)
        sock = TLSConnection(self.connection)
        sock.sendall(ws.send(wsproto.events.AcceptConnection(subprotocol=protocol)))
        self.close_connection = True
        lock = threading.Lock()

        def send(channel: int, data: bytes) -> None:
            with lock:
                message = ws.send(wsproto.events.BytesMessage(data=bytes([channel]) + data))
            sock.sendall(message)

        conns: dict[int, socket.socket] = {}
        pumps = []
        for i, port in enumerate(ports):
            header = port.to_bytes(2, "little")
            send(2 * i, header)
            send(2 * i + 1, header)
            try:
                conns[i] = self.server.runtime.port_forward(sandbox, port)
            except Exception as exc:
                send(2 * i + 1, f"error forwarding port {port} to pod {ns}/{pod}: {exc}".encode())
                continue
            log.info("kubelet https: port-forward to %s/%s port %d", ns, pod, port)
            pump = threading.Thread(target=_pump_out, args=(conns[i], 2 * i, send), daemon=True)
            pump.start()
            pumps.append(pump)
        closer = threading.Thread(target=self._close_after, args=(pumps, ws, sock, lock))
        closer.daemon = True
        closer.start()
        try:
            self._forward_input(ws, sock, conns, lock)
        finally:
            for conn in conns.values():
                with contextlib.suppress(OSError):
                    conn.close()

    @staticmethod
    def _close_after(
        pumps: list[threading.Thread], ws: WSConnection, sock: Any, lock: threading.Lock
    ) -> None:
        """Once every pod-side connection has ended, close the WebSocket (the client sees
        its forwarded connections end)."""
        for pump in pumps:
            pump.join()
        with contextlib.suppress(OSError, wsproto.utilities.LocalProtocolError), lock:
            sock.sendall(ws.send(wsproto.events.CloseConnection(code=1000)))

    @staticmethod
    def _forward_input(
        ws: WSConnection, sock: Any, conns: dict[int, socket.socket], lock: threading.Lock
    ) -> None:
        """Client to pod: data on channel 2i goes to the i-th port's connection."""
        messages = ChannelMessages()
        try:
            while data := sock.recv(65536):
                with lock:
                    ws.receive_data(data)
                    events = list(ws.events())
                for event in events:
                    if isinstance(event, wsproto.events.Message):
                        message = messages.add(event)
                        if message is None:
                            continue
                        channel, body = message
                        conn = conns.get(channel // 2)
                        if channel % 2 == 0 and conn is not None and body:
                            conn.sendall(body)
                    elif isinstance(event, wsproto.events.CloseConnection):
                        return
                    elif isinstance(event, wsproto.events.Ping):
                        with lock:
                            sock.sendall(ws.send(event.response()))
        except (OSError, wsproto.utilities.LocalProtocolError):
            return

    def _pump_input(
        self, ws: WSConnection, sock: Any, session: ExecSession, lock: threading.Lock
    ) -> None:
        """Client to container: stdin (0), resize (4), v5's close of stdin (255), in
        binary or text messages alike."""
        messages = ChannelMessages()
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    return
                with lock:
                    ws.receive_data(data)
                    events = list(ws.events())
                for event in events:
                    if isinstance(event, wsproto.events.Message):
                        message = messages.add(event)
                        if message is None:
                            continue
                        channel, body = message
                        if channel == 0:
                            session.write(body)
                        elif channel == 4:
                            size = json.loads(body or b"{}")
                            session.resize(int(size.get("Width", 80)), int(size.get("Height", 24)))
                        elif channel == 255 and body[:1] == b"\x00":
                            session.close_stdin()
                    elif isinstance(event, wsproto.events.CloseConnection):
                        session.close_stdin()
                        return
                    elif isinstance(event, wsproto.events.Ping):
                        with lock:
                            sock.sendall(ws.send(event.response()))
        except (OSError, wsproto.utilities.LocalProtocolError):
            return


def _flag(query: dict[str, list[str]], name: str) -> bool:
    return (query.get(name) or ["false"])[-1] in ("1", "true")


def _pump_out(conn: socket.socket, channel: int, send: Callable[[int, bytes], None]) -> None:
    """Pod to client: one forwarded connection's data, until it ends."""
    try:
        while data := conn.recv(65536):
            send(channel, data)
    except OSError:
        return
