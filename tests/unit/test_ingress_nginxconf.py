"""nginx.conf rendered from Ingresses: host and path rules, endpoints as upstreams,
TLS from Secrets, the default backend, and what a missing Service answers; the reload
through the FIFO nginx's container reads."""

from __future__ import annotations

import base64
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agents.ingress.controller import fifo_reload
from agents.ingress.nginxconf import render


def service(name: str, port: int = 80, port_name: str = "http") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"name": port_name, "port": port, "protocol": "TCP"}]},
    }


def slice_(service: str, *ips: str, target: int = 8080, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{service}-abc",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": target, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}} for ip in ips],
    }


def path(p: str, svc: str, path_type: str = "Prefix", port: int = 80) -> dict[str, Any]:
    return {
        "path": p,
        "pathType": path_type,
        "backend": {"service": {"name": svc, "port": {"number": port}}},
    }


def ingress(name: str, *rules: dict[str, Any], created: str = "2026-01-01T00:00:00Z", **spec: Any):
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": created,
        },
        "spec": {"rules": list(rules), **spec},
    }


def rule(host: str, *paths: dict[str, Any]) -> dict[str, Any]:
    return (
        {"host": host, "http": {"paths": list(paths)}} if host else {"http": {"paths": list(paths)}}
    )


def server_of(conf: str, host: str) -> str:
    start = conf.index(f"server_name {host};")
    return conf[start : conf.index("\n  }", start)]


def test_a_host_rule_proxies_to_the_ready_endpoints_at_the_target_port() -> None:
    out = render(
        [ingress("web", rule("web.example", path("/", "web")))],
        [service("web")],
        [slice_("web", "10.244.1.5", "10.244.2.7"), slice_("web", "10.244.3.1", ready=False)],
        [],
        directory="/conf",
    )
    assert (
        "upstream default-web-http {\n    server 10.244.1.5:8080;\n    server 10.244.2.7:8080;\n  }"
        in out.conf
    )
    assert "10.244.3.1" not in out.conf
    assert "proxy_pass http://default-web-http;" in server_of(out.conf, "web.example")
    assert out.problems == []


def test_prefix_matches_by_path_element_and_exact_only_the_path() -> None:
    out = render(
        [
            ingress(
                "web",
                rule(
                    "a.example",
                    path("/api/", "web"),
                    path("/login", "web", "Exact"),
                    path("/img", "web", "ImplementationSpecific"),
                ),
            )
        ],
        [service("web")],
        [slice_("web", "10.244.1.5")],
        [],
        directory="/conf",
    )
    server = server_of(out.conf, "a.example")
    for location in ("= /api {", "/api/ {", "= /login {", "= /img {", "/img/ {"):
        assert f"location {location}" in server
    assert "location /login/" not in server
    # No rule for "/": the rest of the host answers 404.
    assert "location / {\n      return 404;" in server


def test_a_missing_service_answers_503_and_is_reported() -> None:
    ing = ingress("web", rule("a.example", path("/gone", "nothere")))
    out = render([ing], [], [], [], directory="/conf")
    assert "location /gone/ {\n      return 503;" in server_of(out.conf, "a.example")
    [problem] = out.problems
    assert problem.reason == "ServiceNotFound"
    assert "service default/nothere does not exist" in problem.message
    assert problem.ingress is ing


def test_a_service_without_ready_endpoints_answers_503_unreported() -> None:
    out = render(
        [ingress("web", rule("a.example", path("/", "web")))],
        [service("web")],
        [slice_("web", "10.244.1.5", ready=False)],
        [],
        directory="/conf",
    )
    assert "location / {\n      return 503;" in server_of(out.conf, "a.example")
    assert out.problems == []


def test_the_oldest_ingress_wins_a_path_and_gives_the_default_backend() -> None:
    old = ingress(
        "old",
        rule("a.example", path("/", "web")),
        created="2026-01-01T00:00:00Z",
        defaultBackend={"service": {"name": "web", "port": {"name": "http"}}},
    )
    new = ingress(
        "new",
        rule("a.example", path("/", "other"), path("/x", "web")),
        created="2026-02-01T00:00:00Z",
    )
    out = render(
        [new, old],
        [service("web"), service("other")],
        [slice_("web", "10.244.1.5"), slice_("other", "10.244.9.9")],
        [],
        directory="/conf",
    )
    server = server_of(out.conf, "a.example")
    assert "location / {\n      proxy_pass http://default-web-http;" in server
    assert "location /x/" in server
    default = out.conf[out.conf.index("listen 80 default_server") :]
    assert "location / {\n      proxy_pass http://default-web-http;" in default


def test_without_a_default_backend_unknown_hosts_get_404() -> None:
    out = render([], [], [], [], directory="/conf")
    assert "listen 80 default_server;" in out.conf
    assert "return 404;" in out.conf


def test_tls_hosts_listen_on_443_with_the_secrets_key_pair() -> None:
    secret = {
        "metadata": {"name": "cert", "namespace": "default"},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(b"CERT\n").decode(),
            "tls.key": base64.b64encode(b"KEY\n").decode(),
        },
    }
    ing = ingress(
        "web",
        rule("a.example", path("/", "web")),
        rule("b.example", path("/", "web")),
        tls=[
            {"hosts": ["a.example"], "secretName": "cert"},
            {"hosts": ["b.example"], "secretName": "gone"},
        ],
    )
    out = render(
        [ing], [service("web")], [slice_("web", "10.244.1.5")], [secret], directory="/conf"
    )
    assert "listen 443 ssl;\n    ssl_certificate /conf/default-cert.pem;" in out.conf
    assert out.files == {"default-cert.pem": b"CERT\nKEY\n"}
    assert "443" not in server_of(out.conf, "b.example")
    [problem] = out.problems
    assert problem.reason == "TLSSecretNotFound"
    assert "default/gone does not exist" in problem.message


def test_a_wildcard_host_matches_one_label() -> None:
    out = render(
        [ingress("web", rule("*.example.com", path("/", "web")))],
        [service("web")],
        [slice_("web", "10.244.1.5")],
        [],
        directory="/conf",
    )
    assert r"server_name ~^[^.]+\.example\.com$;" in out.conf


def test_a_named_port_that_the_service_lacks_is_reported() -> None:
    ing = ingress(
        "web",
        rule(
            "a.example",
            {
                "path": "/",
                "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"name": "grpc"}}},
            },
        ),
    )
    out = render([ing], [service("web")], [slice_("web", "10.244.1.5")], [], directory="/conf")
    [problem] = out.problems
    assert problem.reason == "ServicePortNotFound"


def test_a_reload_waits_for_nginx_to_read_the_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "reload"
    read: list[str] = []

    def nginx() -> None:  # the nginx container's script: make the FIFO, then read it
        time.sleep(0.3)
        os.mkfifo(fifo)
        with fifo.open() as lines:
            read.append(lines.readline())

    reader = threading.Thread(target=nginx)
    reader.start()
    fifo_reload(fifo)()
    reader.join(5)
    assert read == ["reload\n"]


def test_a_reload_nobody_reads_says_so(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "reload")
    with pytest.raises(RuntimeError, match="is nginx's container running"):
        fifo_reload(tmp_path / "reload", wait=0.2)()


def test_a_path_that_would_break_the_file_is_left_out_and_reported() -> None:
    ing = ingress("web", rule("a.example", path("/ok", "web"), path("/x;}return 200;#", "web")))
    out = render([ing], [service("web")], [slice_("web", "10.244.1.5")], [], directory="/conf")
    assert "return 200" not in out.conf and "location /ok/" in out.conf
    [problem] = out.problems
    assert problem.reason == "InvalidPath"
