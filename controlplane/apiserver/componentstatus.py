"""`kubectl get componentstatuses` (core/v1 ComponentStatus, deprecated since 1.19 and
still answered by kube-apiserver 1.31): the health of the scheduler, the
controller-manager and the store, probed when asked, never stored.

As kube-apiserver does it: the scheduler and the controller-manager are probed at
`https://127.0.0.1:<their default secure port>/healthz` (10259, 10257) without verifying
their certificates, so the answer is right where they run beside the apiserver on a
control-plane node, as kubeadm lays them out, and says Unhealthy elsewhere (kube's
fragility, kept). A 2xx or 3xx answer is Healthy with its body as the message; another
status or a failed connection is Unhealthy with the reason as the message (`Get
"https://127.0.0.1:10259/healthz": dial tcp 127.0.0.1:10259: connect: connection
refused`). The store, `etcd-0` (one entry per storage configuration, and kubelab has
one), is Healthy with "ok" when its health check passes, else Unhealthy with the failure
as the error. Every answer carries the deprecation warning kube-apiserver sends.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import ssl
from collections.abc import Callable
from typing import Any

Object = dict[str, Any]

DEPRECATION = "v1 ComponentStatus is deprecated in v1.19+"
PROBE_TIMEOUT = 20.0
"""Seconds a component's /healthz gets (kube-apiserver's probe timeout)."""

HTTP_COMPONENTS: dict[str, int] = {"scheduler": 10259, "controller-manager": 10257}
"""The components probed over HTTPS, by name, at their default secure ports."""
STORE = "etcd-0"


def _unverified() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def probe_https(
    port: int, host: str = "127.0.0.1", timeout: float = PROBE_TIMEOUT
) -> tuple[bool, str]:
    """Whether https://host:port/healthz answers 2xx or 3xx; its body, or why not."""
    url = f"https://{host}:{port}/healthz"
    connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=_unverified())
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        body = response.read(64 * 1024).decode("utf-8", "replace")
    except ConnectionRefusedError:
        return False, f'Get "{url}": dial tcp {host}:{port}: connect: connection refused'
    except (OSError, http.client.HTTPException) as exc:
        return False, f'Get "{url}": {exc}'
    finally:
        connection.close()
    if 200 <= response.status < 400:
        return True, body
    return False, f"HTTP probe failed with statuscode: {response.status}"


def _status(name: str, healthy: bool, message: str = "", error: str = "") -> Object:
    condition: Object = {"type": "Healthy", "status": "True" if healthy else "False"}
    if message:
        condition["message"] = message
    if error:
        condition["error"] = error
    return {
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "conditions": [condition],
    }


def names() -> list[str]:
    """The components, in the order they are listed."""
    return [*HTTP_COMPONENTS, STORE]


def statuses(
    store_failure: Callable[[], str | None],
    wanted: list[str] | None = None,
    probe: Callable[[int], tuple[bool, str]] = probe_https,
) -> list[Object]:
    """The ComponentStatus of each component in `wanted` (all by default), probed side by
    side; `store_failure` says why the store is unhealthy, or None."""
    chosen = wanted if wanted is not None else names()

    def check(name: str) -> Object:
        if name == STORE:
            failure = store_failure()
            return (
                _status(name, True, "ok") if failure is None else _status(name, False, "", failure)
            )
        healthy, text = probe(HTTP_COMPONENTS[name])
        return _status(name, healthy, text)

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(chosen) or 1) as pool:
        return list(pool.map(check, chosen))
