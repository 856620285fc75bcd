"""The load balancer in front of an HA lab's apiservers (kind's `external-load-balancer`
node, kubeadm's `--control-plane-endpoint`).

With more than one control-plane node, the lab starts a container of Debian's haproxy
(`lab.images`, `kubelab/haproxy`) on the lab's network at a fixed address, before
`labadm init`, so that the endpoint (`<address>:6443`) is in the apiservers'
certificates and in every kubeconfig and in cluster-info from the start. HAProxy passes
TCP through (TLS ends at the apiservers, whose client certificates it must not see) and
checks each apiserver with `GET /readyz` over TLS every 3 seconds, and every half second
once a check has failed: two failures mark one down (its open connections are cut, so
clients reconnect to another at once), one success marks it up again. A down server is
checked every second. (kind checks every 10 s; a check is a TLS handshake on both sides:
checking every second, the idle balancer alone used 0.7 % of a core, now 0.3 %.) A
connection refused by a server not yet marked down is redispatched to another one, so
clients see no error for it. A server that has not joined yet is simply down.
Control-plane nodes are all listed from the start, because their addresses are fixed.
"""

from __future__ import annotations

import io
import logging
import tarfile
import time
from collections.abc import Sequence

import docker
import docker.errors
from docker.models.containers import Container

from lab.labadm.layout import API_PORT
from lab.nodes import LAB_LABEL, ROLE_LABEL, UNLESS_STOPPED, Addressing

log = logging.getLogger("lab.haproxy")

CONFIG_PATH = "/etc/haproxy/haproxy.cfg"
HEALTH_CHECK = "check check-ssl verify none inter 3s fastinter 500ms downinter 1s fall 2 rise 1"
"""Every server's health check (the module docstring says why these intervals)."""
ADDRESS_OFFSET = 3
"""The balancer's address: this far into the node range (nodes start at +10)."""


def address(addressing: Addressing) -> str:
    return str(addressing.node_range.network_address + ADDRESS_OFFSET)


def config(backends: Sequence[tuple[str, str]], port: int = API_PORT) -> str:
    """haproxy.cfg for `backends` (name, address): TCP through, /readyz checked over TLS."""
    servers = "\n".join(f"  server {name} {ip}:{port}" for name, ip in backends)
    return f"""global
  log stdout format raw local0 info
  maxconn 4000

defaults
  mode tcp
  log global
  option tcplog
  timeout connect 3s
  # A refused connection (an apiserver just stopped, not yet marked down) is tried
  # again on another server rather than handed to the client as a closed connection.
  retries 3
  option redispatch 1
  # Watches stay open for minutes; the apiserver ends them itself.
  timeout client 15m
  timeout server 15m

frontend apiserver
  bind *:{port}
  default_backend apiservers

backend apiservers
  option httpchk GET /readyz
  http-check expect status 200
  default-server {HEALTH_CHECK} on-marked-down shutdown-sessions
{servers}
"""


def _tar(path: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def start(
    client: docker.DockerClient,
    prefix: str,
    network: str,
    addressing: Addressing,
    image: str,
    backends: Sequence[tuple[str, str]],
) -> Container:
    """Create the balancer's container (`<prefix>-lb`) at its fixed address, write its
    config into it, start it, and wait until it listens."""
    ip = address(addressing)
    container = client.containers.create(
        image,
        name=f"{prefix}-lb",
        hostname="lb",
        labels={LAB_LABEL: prefix, ROLE_LABEL: "load-balancer"},
        network=network,
        networking_config={network: client.api.create_endpoint_config(ipv4_address=ip)},
        restart_policy=UNLESS_STOPPED,  # back with the nodes after an engine restart
    )
    container.put_archive("/", _tar(CONFIG_PATH, config(backends).encode()))
    container.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        container.reload()
        if container.status != "running":
            break
        if "Loading success" in container.logs().decode(errors="replace"):
            log.info("lab %s: load balancer at %s:%d", prefix, ip, API_PORT)
            return container
        time.sleep(0.2)
    raise docker.errors.DockerException(
        f"the load balancer {container.name} did not start; its log:\n"
        + container.logs(tail=30).decode(errors="replace")
    )
