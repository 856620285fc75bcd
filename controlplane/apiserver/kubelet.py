"""The live-data path: what the apiserver fetches from a node's kubelet instead of the store.

The seeds' one exception to "only the apiserver talks to the store, everyone talks to the
apiserver": logs, node proxy and resource usage come from the kubelet's HTTPS server
(port 10250 unless the Node's ``status.daemonEndpoints`` says otherwise), reached at the
Node's InternalIP and authenticated with the apiserver's kubelet-client certificate
(``--kubelet-client-certificate/--kubelet-client-key``; the kubelet's serving certificate is
checked against ``--kubelet-certificate-authority``).

* ``pods/<name>/log``    -> ``/containerLogs/<ns>/<pod>/<container>`` (streamed, so
  ``kubectl logs -f`` follows);
* ``nodes/<name>/proxy/<path>`` -> ``/<path>`` (``kubectl get --raw .../proxy/stats/summary``);
* ``metrics.k8s.io``     -> each node's ``/stats/summary``, summed into NodeMetrics and
  PodMetrics (``kubectl top``), as metrics-server does.

Each request to a kubelet is an `APIServer.proxy` span (the node, the kubelet's path) in
the client's request's trace, and carries its `traceparent`, so the kubelet's own span
continues the trace; the span lasts until the kubelet's answer begins (a followed log or
an exec session streams on after it).

* ``pods/<name>/exec|attach|portforward`` -> ``/exec|attach/<ns>/<pod>/<container>``,
  ``/portForward/<ns>/<pod>``: protocol upgrades (WebSocket ``v5.channel.k8s.io`` from
  kubectl 1.31+, or SPDY), tunnelled: the apiserver forwards the upgrade request, relays
  the kubelet's 101 answer, then copies bytes both ways until either side closes. It
  never parses the stream, so every protocol version the two ends agree on works.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from opentelemetry import propagate, trace

from kubelab import tracing
from kubelab.api import errors

log = logging.getLogger("kubelab.apiserver.kubelet")

Object = dict[str, Any]
DEFAULT_PORT = 10250
LOG_PARAMS = (
    "follow",
    "previous",
    "sinceSeconds",
    "sinceTime",
    "timestamps",
    "tailLines",
    "limitBytes",
)


_REPLACED = ("host", "traceparent", "tracestate")
"""Headers of a tunnelled request the apiserver sets itself: the kubelet's address, and
the trace context of the apiserver's span instead of the client's."""


@dataclass(frozen=True)
class KubeletAuth:
    cert_file: Path | None = None
    key_file: Path | None = None
    ca_file: Path | None = None


def node_address(node: Object) -> tuple[str, int]:
    """Where a node's kubelet listens: its InternalIP (else any address) and port."""
    status = node.get("status", {})
    addresses = status.get("addresses") or []
    by_type = {a.get("type"): a.get("address") for a in addresses if isinstance(a, dict)}
    host = (
        by_type.get("InternalIP")
        or by_type.get("Hostname")
        or next((a for a in by_type.values() if a), None)
    )
    if not host:
        name = node.get("metadata", {}).get("name", "")
        raise errors.service_unavailable(
            f'node "{name}" reports no address: its kubelet has not registered it yet'
        )
    port = (status.get("daemonEndpoints") or {}).get("kubeletEndpoint", {}).get("Port")
    return str(host), int(port or DEFAULT_PORT)


class KubeletClient:
    def __init__(
        self, auth: KubeletAuth, traced: tracing.Tracing = tracing.DISABLED, timeout: float = 10.0
    ) -> None:
        ctx = ssl.create_default_context(cafile=str(auth.ca_file) if auth.ca_file else None)
        if auth.ca_file is None:
            # Without --kubelet-certificate-authority the kubelet's certificate cannot be
            # checked (kube-apiserver behaves the same way); the apiserver still proves
            # itself with its client certificate.
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if auth.cert_file is not None and auth.key_file is not None:
            ctx.load_cert_chain(auth.cert_file, auth.key_file)
        self.timeout = timeout
        self.ssl = ctx
        self.pool = urllib3.PoolManager(maxsize=16, ssl_context=ctx)
        self.tracing = traced

    def _span(self, node: str, host: str, port: int, path: str) -> AbstractContextManager[Any]:
        """The span of one request to a kubelet (module docstring)."""
        return self.tracing.span(
            "APIServer.proxy",
            {
                tracing.NODE_NAME: node,
                "server.address": host,
                "server.port": port,
                "url.path": path.split("?", 1)[0],
            },
            kind=trace.SpanKind.CLIENT,
        )

    def _get(
        self, node: Object, path: str, stream: bool, read_timeout: float | None
    ) -> urllib3.BaseHTTPResponse:
        host, port = node_address(node)
        url = f"https://{host}:{port}{path}"
        name = node.get("metadata", {}).get("name", "")
        with self._span(name, host, port, path) as span:
            headers: dict[str, str] = {}
            propagate.inject(headers)
            try:
                r = self.pool.request(
                    "GET",
                    url,
                    headers=headers,
                    preload_content=not stream,
                    retries=False,
                    timeout=urllib3.Timeout(connect=self.timeout, read=read_timeout),
                )
            except urllib3.exceptions.HTTPError as exc:
                raise errors.service_unavailable(
                    f'the kubelet of node "{name}" at {host}:{port} is not reachable: {exc}'
                ) from None
            span.set_attribute("http.response.status_code", r.status)
        if r.status >= 400:
            body = r.read(4096).decode(errors="replace").strip()
            r.release_conn()
            raise errors.StatusError(
                502 if r.status >= 500 else r.status,
                "BadGateway" if r.status >= 500 else "BadRequest",
                f'the kubelet of node "{name}" answered {r.status}: {body}',
            )
        return r

    def stream(self, node: Object, path: str, follow: bool) -> Iterator[bytes]:
        """The kubelet's answer, chunk by chunk (a followed log never times out). The
        request is made now, within the client's request (its span, its Status on a
        failure); only the body is read as the answer streams."""
        r = self._get(node, path, stream=True, read_timeout=None if follow else self.timeout)
        return _chunks(r)

    def tunnel(
        self,
        node: Object,
        request_line: str,
        headers: list[tuple[str, str]],
        take_over: Callable[[], socket.socket],
    ) -> None:
        """Forward an upgrade request to the kubelet and, once it answers 101, take over
        the client's connection and relay bytes both ways until either closes. Raises
        StatusError (while the client can still get a normal answer) when the kubelet
        refuses or is unreachable."""
        host, port = node_address(node)
        name = node.get("metadata", {}).get("name", "")
        with self._span(name, host, port, request_line.split(" ")[1]):
            try:
                raw = socket.create_connection((host, port), timeout=self.timeout)
                upstream = self.ssl.wrap_socket(raw, server_hostname=host)
            except OSError as exc:
                raise errors.service_unavailable(
                    f'the kubelet of node "{name}" at {host}:{port} is not reachable: {exc}'
                ) from None
            carried: dict[str, str] = {}
            propagate.inject(carried)
            head = [request_line, f"Host: {host}:{port}"]
            head += [f"{k}: {v}" for k, v in headers if k.lower() not in _REPLACED]
            head += [f"{k}: {v}" for k, v in carried.items()]
            upstream.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = upstream.recv(4096)
                if not chunk:
                    upstream.close()
                    raise errors.StatusError(
                        502, "BadGateway", f'the kubelet of node "{name}" closed the connection'
                    )
                answer += chunk
            status_line = answer.split(b"\r\n", 1)[0].decode("latin-1")
            if " 101 " not in status_line + " ":
                upstream.close()
                raise errors.StatusError(
                    502,
                    "BadGateway",
                    f'the kubelet of node "{name}" refused the upgrade: {status_line}',
                )
        upstream.settimeout(None)
        client = take_over()  # from here on the connection belongs to the stream
        client.sendall(answer)
        _relay(client, upstream)

    def get_json(self, node: Object, path: str) -> Object:
        r = self._get(node, path, stream=False, read_timeout=self.timeout)
        data: Object = r.json()
        return data


def _chunks(r: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    try:
        yield from r.stream(16 * 1024)
    finally:
        r.release_conn()


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until one side closes (green threads under gevent)."""

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(64 * 1024):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    upstream.close()


def container_of(pod: Object, args: dict[str, str]) -> str:
    """The container a request names, or the pod's only one (Kubernetes' default)."""
    meta, spec = pod["metadata"], pod.get("spec", {})
    containers = [c.get("name", "") for c in spec.get("containers") or []]
    others = [
        c.get("name", "")
        for c in (spec.get("initContainers") or []) + (spec.get("ephemeralContainers") or [])
    ]
    container = args.get("container", "")
    if not container:
        if len(containers) != 1:
            raise errors.bad_request(
                f"a container name must be specified for pod {meta['name']}, choose one of: "
                f"[{' '.join(containers)}]"
                + (f" or one of the init containers: [{' '.join(others)}]" if others else "")
            )
        return str(containers[0])
    if container not in containers + others:
        raise errors.bad_request(f"container {container} is not valid for pod {meta['name']}")
    return container


def stream_path(pod: Object, subresource: str, query: str, args: dict[str, str]) -> str:
    """The kubelet path for exec, attach or port-forward of `pod`."""
    meta = pod["metadata"]
    ns, name = quote(meta.get("namespace", "")), quote(meta["name"])
    if subresource == "portforward":
        return f"/portForward/{ns}/{name}" + (f"?{query}" if query else "")
    container = quote(container_of(pod, args))
    return f"/{subresource}/{ns}/{name}/{container}" + (f"?{query}" if query else "")


def log_path(pod: Object, args: dict[str, str]) -> tuple[str, bool]:
    """The kubelet path for a pod's log request, and whether it follows."""
    meta = pod["metadata"]
    container = container_of(pod, args)
    query = {k: v for k, v in args.items() if k in LOG_PARAMS}
    path = (
        f"/containerLogs/{quote(meta.get('namespace', ''))}/{quote(meta['name'])}/"
        f"{quote(container)}"
    )
    if query:
        path += "?" + urlencode(query)
    return path, args.get("follow") in ("true", "1")


# -- metrics.k8s.io ----------------------------------------------------------------------


def _cpu(stats: Object) -> str:
    nanos = (stats.get("cpu") or {}).get("usageNanoCores")
    return f"{int(nanos)}n" if nanos is not None else "0"


def _memory(stats: Object) -> str:
    working = (stats.get("memory") or {}).get("workingSetBytes")
    return f"{int(working) // 1024}Ki" if working is not None else "0"


def _stamp(summary_time: str | None) -> str:
    return summary_time or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_metrics(node: Object, summary: Object) -> Object:
    """A NodeMetrics from a kubelet's /stats/summary (as metrics-server reports it)."""
    stats = summary.get("node") or {}
    return {
        "kind": "NodeMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {
            "name": node["metadata"]["name"],
            "labels": node["metadata"].get("labels") or {},
            "creationTimestamp": _stamp(None),
        },
        "timestamp": _stamp((stats.get("cpu") or {}).get("time")),
        "window": "10s",
        "usage": {"cpu": _cpu(stats), "memory": _memory(stats)},
    }


def pod_metrics(summary: Object, namespace: str) -> list[Object]:
    """PodMetrics for the pods of `namespace` ("" for all) in a node's /stats/summary."""
    out = []
    for pod in summary.get("pods") or []:
        ref = pod.get("podRef") or {}
        if namespace and ref.get("namespace") != namespace:
            continue
        out.append(
            {
                "kind": "PodMetrics",
                "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {
                    "name": ref.get("name", ""),
                    "namespace": ref.get("namespace", ""),
                    "creationTimestamp": _stamp(None),
                },
                "timestamp": _stamp(None),
                "window": "10s",
                "containers": [
                    {"name": c.get("name", ""), "usage": {"cpu": _cpu(c), "memory": _memory(c)}}
                    for c in pod.get("containers") or []
                ],
            }
        )
    return out
