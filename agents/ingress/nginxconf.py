"""nginx.conf from Ingresses, Services, EndpointSlices and TLS Secrets: a pure function
of the caches, as ingress-nginx renders its template from them, so the controller can
rebuild the whole file after any change and tests can read what it makes.

What the file says:

* One `server` per host named by a rule of an Ingress of ours; the rules of every
  Ingress naming that host are merged, the oldest Ingress winning a path two name (as
  ingress-nginx merges them). A host listed under an Ingress's `spec.tls` whose Secret
  exists also listens on 443 with that Secret's certificate; a Secret that is missing
  or not a key pair is reported, and the host is served on port 80 only.
* Paths: `Exact` is nginx's `location = /p`; `Prefix` (and `ImplementationSpecific`,
  which this controller treats as Prefix) matches `/p` and everything under `/p/`,
  element by element as the API defines it: `location = /p` plus `location /p/`.
  nginx picks the longest matching prefix and prefers an exact match, which is the
  API's precedence.
* A backend is an `upstream` of the Service's ready endpoints (the pod addresses of
  its EndpointSlices at the target port the Service port maps to, as ingress-nginx
  proxies to endpoints rather than to the ClusterIP). A Service that does not exist,
  a port it does not have, or no ready endpoint answer 503, and the first two are
  reported (the controller records an Event on the Ingress).
* A path with other characters than letters, digits and `-._~/` is left out and
  reported, as ingress-nginx's strict path validation refuses it: the path is written
  into nginx.conf, where `;` or `{` would end the directive.
* The default server (requests for no known host, or a path no rule matches) proxies
  to the oldest Ingress's `spec.defaultBackend`, or answers 404.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubelab.api import endpointslices
from kubelab.client import Object

SAFE_PATH = re.compile(r"/[A-Za-z0-9\-._~/]*")
"""The paths served, as ingress-nginx's strict path validation allows them: a path is
written into nginx.conf, where `;`, `{` or a quote would end the directive."""


@dataclass(frozen=True)
class Problem:
    """Something wrong with an Ingress that nginx answers for with an error status:
    `reason` and `message` are the Warning Event's."""

    ingress: Object
    reason: str
    message: str


@dataclass
class Rendered:
    """What one render made: the file's text, the certificate files it names (name ->
    PEM, written beside it) and the problems found."""

    conf: str
    files: dict[str, bytes] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class Backend:
    """Where a location sends its requests: an upstream's name, or a status to return."""

    upstream: str = ""
    status: int = 0


def _key(obj: Object) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _age_order(ingress: Object) -> tuple[str, str]:
    meta = ingress["metadata"]
    return (str(meta.get("creationTimestamp") or ""), _key(ingress))


class _Cluster:
    """The caches, indexed for the lookups a render makes."""

    def __init__(
        self, services: Iterable[Object], slices: Iterable[Object], secrets: Iterable[Object]
    ) -> None:
        self.services = {_key(s): s for s in services}
        self.slices = {
            f"{namespace}/{name}": of_service
            for (namespace, name), of_service in endpointslices.by_service(slices).items()
        }
        self.secrets = {_key(s): s for s in secrets}


class _Renderer:
    def __init__(self, cluster: _Cluster) -> None:
        self.cluster = cluster
        self.upstreams: dict[str, list[str]] = {}
        self.problems: list[Problem] = []

    def backend(self, ingress: Object, spec: dict[str, Any], where: str) -> Backend:
        """The upstream of an IngressBackend (`spec`), made on first use."""
        namespace = ingress["metadata"].get("namespace", "")
        service_ref = spec.get("service") or {}
        name = service_ref.get("name")
        if not name:
            resource = spec.get("resource") or {}
            self.report(
                ingress,
                "UnsupportedBackend",
                f"{where}: backend {resource.get('kind', '?')}/{resource.get('name', '?')} is "
                "not a Service; only Service backends are served (answering 503)",
            )
            return Backend(status=503)
        port_ref = service_ref.get("port") or {}
        key = f"{namespace}/{name}"
        service = self.cluster.services.get(key)
        if service is None:
            self.report(
                ingress,
                "ServiceNotFound",
                f"{where}: service {key} does not exist (answering 503 until it does)",
            )
            return Backend(status=503)
        port = _service_port(service, port_ref)
        if port is None:
            wanted = port_ref.get("name") or port_ref.get("number")
            self.report(
                ingress,
                "ServicePortNotFound",
                f"{where}: service {key} has no port {wanted} (answering 503)",
            )
            return Backend(status=503)
        servers = _ready_endpoints(self.cluster.slices.get(key, []), port)
        if not servers:
            return Backend(status=503)
        upstream = _upstream_name(namespace, name, port)
        self.upstreams[upstream] = servers
        return Backend(upstream=upstream)

    def report(self, ingress: Object, reason: str, message: str) -> None:
        self.problems.append(Problem(ingress, reason, message))


def _service_port(service: Object, ref: dict[str, Any]) -> dict[str, Any] | None:
    for port in (service.get("spec") or {}).get("ports") or []:
        if port.get("protocol", "TCP") != "TCP":
            continue
        if ("name" in ref and port.get("name") == ref["name"]) or (
            "number" in ref and port.get("port") == ref["number"]
        ):
            return dict(port)
    return None


def _ready_endpoints(slices: Iterable[Mapping[str, Any]], port: dict[str, Any]) -> list[str]:
    """The "address:port" of every ready endpoint of the Service port `port`."""
    ready = endpointslices.ready_endpoints(slices, port.get("name") or "", "TCP")
    return sorted(f"{address}:{number}" for address, number in ready)


def _upstream_name(namespace: str, service: str, port: dict[str, Any]) -> str:
    return f"{namespace}-{service}-{port.get('name') or port.get('port')}"


def _locations(path: str, path_type: str) -> list[str]:
    """nginx's locations for one HTTPIngressPath (module docstring)."""
    if path_type == "Exact":
        return [f"= {path}"]
    trimmed = path.rstrip("/")
    if not trimmed:
        return ["/"]
    return [f"= {trimmed}", f"{trimmed}/"]


def _server_name(host: str) -> str:
    """A wildcard host (`*.example.com`) matches one DNS label, as the API defines it;
    nginx's own `*.` matches any number, hence a regular expression."""
    if host.startswith("*."):
        return "~^[^.]+" + re.escape(host[1:]) + "$"
    return host


def _location_block(location: str, backend: Backend) -> list[str]:
    if backend.upstream:
        body = [
            f"      proxy_pass http://{backend.upstream};",
            "      proxy_set_header Host $host;",
            "      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
            "      proxy_set_header X-Forwarded-Proto $scheme;",
            '      proxy_set_header Connection "";',
        ]
    else:
        body = [f"      return {backend.status};"]
    return [f"    location {location} {{", *body, "    }"]


def _pem(secret: Object, name: str) -> bytes | None:
    value = (secret.get("data") or {}).get(name)
    try:
        return base64.b64decode(value) if value else None
    except ValueError:
        return None


def render(
    ingresses: Iterable[Object],
    services: Iterable[Object],
    slices: Iterable[Object],
    secrets: Iterable[Object],
    *,
    directory: str,
) -> Rendered:
    """The nginx.conf of the module docstring for `ingresses` (those of this controller's
    class); the certificate files it names are under `directory`."""
    renderer = _Renderer(_Cluster(services, slices, secrets))
    hosts: dict[str, dict[str, Backend]] = {}
    certificates: dict[str, str] = {}
    files: dict[str, bytes] = {}
    default: Backend | None = None
    for ingress in sorted(ingresses, key=_age_order):
        key = _key(ingress)
        spec = ingress.get("spec") or {}
        namespace = ingress["metadata"].get("namespace", "")
        if default is None and spec.get("defaultBackend"):
            default = renderer.backend(
                ingress, spec["defaultBackend"], f"ingress {key} defaultBackend"
            )
        for tls in spec.get("tls") or []:
            secret_name = tls.get("secretName")
            if not secret_name:
                continue
            secret = renderer.cluster.secrets.get(f"{namespace}/{secret_name}")
            cert = _pem(secret, "tls.crt") if secret is not None else None
            private = _pem(secret, "tls.key") if secret is not None else None
            if cert is None or private is None:
                renderer.report(
                    ingress,
                    "TLSSecretNotFound",
                    f"ingress {key}: secret {namespace}/{secret_name} "
                    + ("does not exist" if secret is None else "has no tls.crt and tls.key")
                    + f"; {', '.join(tls.get('hosts') or [])} served over HTTP only",
                )
                continue
            pem = f"{namespace}-{secret_name}.pem"
            files[pem] = cert.rstrip(b"\n") + b"\n" + private
            for host in tls.get("hosts") or []:
                certificates.setdefault(host, pem)
        for number, rule in enumerate(spec.get("rules") or []):
            host = rule.get("host") or ""
            paths = hosts.setdefault(host, {})
            for path in (rule.get("http") or {}).get("paths") or []:
                value = path.get("path") or "/"
                where = f"ingress {key} rule {number} ({host or '*'}) path {value}"
                if not SAFE_PATH.fullmatch(value):
                    renderer.report(
                        ingress,
                        "InvalidPath",
                        f"{where}: only letters, digits and -._~/ are served in paths "
                        "(ingress-nginx's strict path validation); the path is left out",
                    )
                    continue
                backend = renderer.backend(ingress, path.get("backend") or {}, where)
                for location in _locations(value, path.get("pathType", "")):
                    paths.setdefault(location, backend)
    fallback = default or Backend(status=404)
    lines = [
        "# Written by kubelab's ingress controller from the cluster's Ingresses: do not edit.",
        "worker_processes 1;",
        "error_log stderr notice;",
        "events {",
        "  worker_connections 1024;",
        "}",
        "http {",
        "  access_log /dev/stdout;",
        "  server_names_hash_bucket_size 128;",
        "  proxy_http_version 1.1;",
        "  proxy_connect_timeout 5s;",
    ]
    for name, servers in sorted(renderer.upstreams.items()):
        lines += [f"  upstream {name} {{", *(f"    server {s};" for s in servers), "  }"]
    catch_all = hosts.pop("", {})
    lines += ["  server {", "    listen 80 default_server;", "    server_name _;"]
    for location, backend in sorted(catch_all.items()):
        lines += _location_block(location, backend)
    if "/" not in catch_all:
        lines += _location_block("/", fallback)
    lines.append("  }")
    for host, paths in sorted(hosts.items()):
        lines += ["  server {", "    listen 80;"]
        certificate = certificates.get(host)
        if certificate is not None:
            lines += [
                "    listen 443 ssl;",
                f"    ssl_certificate {directory}/{certificate};",
                f"    ssl_certificate_key {directory}/{certificate};",
            ]
        lines.append(f"    server_name {_server_name(host)};")
        for location, backend in sorted(paths.items()):
            lines += _location_block(location, backend)
        if "/" not in paths:
            lines += _location_block("/", fallback)
        lines.append("  }")
    lines.append("}")
    return Rendered("\n".join(lines) + "\n", files, renderer.problems)
