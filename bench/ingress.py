"""Benchmark: how long an Ingress change takes to be served (issue 28's target: p99
under 2 s), on a running Docker lab with the ingress add-on (`labctl up`).

In the namespace `bench-ingress` it runs an nginx Deployment (`nginx:1.21`, one
replica) behind the Service `web`, then, one at a time, creates `--changes` Ingresses,
each naming a host of its own for `web`. A change counts as served when a request from
this machine to the ingress's LoadBalancer address with that Host header is answered
200 by nginx's pod (until then the default server answers 404): create-to-served is
from the moment the create was answered, polled every 10 ms. Then every Ingress is
deleted and, one at a time, deletes are timed the same way (served: 404 again).

What this includes: the watch to the controller, its render and file write, the FIFO
to nginx's container, nginx's reload (new workers), and the request from the host
through kube-proxy's rules to the pod.

    python -m bench.ingress [--kubeconfig FILE] [--changes 40] [--markdown]
"""

from __future__ import annotations

import argparse
import contextlib
import time
import urllib.error
import urllib.request
from typing import Any

from bench.pods import quantiles
from kubelab.api.errors import StatusError
from kubelab.client import RestClient, load_config, resource_for

NAMESPACE = "bench-ingress"
TARGET_P99 = 2.0
POLL = 0.01
TIMEOUT = 30.0

NAMESPACES = resource_for("v1", "Namespace")
DEPLOYMENTS = resource_for("apps/v1", "Deployment")
SERVICES = resource_for("v1", "Service")
SLICES = resource_for("discovery.k8s.io/v1", "EndpointSlice")
INGRESSES = resource_for("networking.k8s.io/v1", "Ingress")
LABELS = {"app": "bench-web"}


def status(address: str, host: str) -> int:
    request = urllib.request.Request(f"http://{address}/", headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def wait_for(check: Any, what: str, timeout: float = TIMEOUT, every: float = POLL) -> float:
    """Seconds until `check()` holds; SystemExit naming `what` after `timeout`."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
    return time.monotonic() - start


def served(address: str, host: str, code: int) -> float:
    """Seconds until requests for `host` are answered `code`."""
    return wait_for(lambda: status(address, host) == code, f"{host} answered {code}")


def ingress(name: str) -> dict[str, Any]:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    return {
        "metadata": {"name": name},
        "spec": {
            "rules": [
                {
                    "host": f"{name}.bench.example",
                    "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
                }
            ]
        },
    }


def ready_endpoints(client: RestClient) -> bool:
    slices = client.list(SLICES, NAMESPACE, label_selector="kubernetes.io/service-name=web")
    return any(
        (e.get("conditions") or {}).get("ready")
        for s in slices["items"]
        for e in s.get("endpoints") or []
    )


def lb_address(client: RestClient) -> str:
    service = client.get(SERVICES, "ingress-nginx-controller", "ingress-nginx")
    ingress = (service.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    if not ingress:
        raise SystemExit(
            "ingress-nginx/ingress-nginx-controller has no address: is the lab up with the "
            "ingress add-on (labctl up), and its pool configured?"
        )
    return str(ingress[0]["ip"])


def set_up(client: RestClient) -> None:
    try:
        client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    except StatusError as exc:
        if exc.code != 409:
            raise
    pod = {
        "containers": [{"name": "nginx", "image": "nginx:1.21", "ports": [{"containerPort": 80}]}]
    }
    client.create(
        DEPLOYMENTS,
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": LABELS},
                "template": {"metadata": {"labels": LABELS}, "spec": pod},
            },
        },
        NAMESPACE,
    )
    client.create(
        SERVICES,
        {"metadata": {"name": "web"}, "spec": {"selector": LABELS, "ports": [{"port": 80}]}},
        NAMESPACE,
    )
    wait_for(lambda: ready_endpoints(client), "web's pod to be ready", timeout=180, every=0.5)


def tear_down(client: RestClient) -> None:
    for resource, name in ((SERVICES, "web"), (DEPLOYMENTS, "web")):
        try:
            client.delete(resource, name, NAMESPACE)
        except StatusError as exc:
            if exc.code != 404:
                raise


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.ingress", description=__doc__)
    p.add_argument("--kubeconfig")
    p.add_argument("--changes", type=int, default=40)
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    with RestClient(load_config(args.kubeconfig), qps=None) as client:
        address = lb_address(client)
        print(f"==> ingress at {address}; an nginx Deployment behind {NAMESPACE}/web")
        set_up(client)
        created: list[float] = []
        deleted: list[float] = []
        names = [f"b{i}" for i in range(args.changes)]
        try:
            for name in names:
                client.create(INGRESSES, ingress(name), NAMESPACE)
                created.append(served(address, f"{name}.bench.example", 200))
            for name in names:
                client.delete(INGRESSES, name, NAMESPACE)
                deleted.append(served(address, f"{name}.bench.example", 404))
        finally:
            for name in names[len(deleted) :]:
                with contextlib.suppress(StatusError):
                    client.delete(INGRESSES, name, NAMESPACE)
            tear_down(client)
    rows = (("create-to-served", created), ("delete-to-gone", deleted))
    if args.markdown:
        print("| change | Ingresses | p50 | p99 |")
        print("| --- | --- | --- | --- |")
        for what, latencies in rows:
            p50, p99 = quantiles(latencies)
            print(f"| {what} | {len(latencies)} | {p50 * 1000:.0f} ms | {p99 * 1000:.0f} ms |")
    else:
        for what, latencies in rows:
            p50, p99 = quantiles(latencies)
            print(f"{what}: {len(latencies)} Ingresses, p50 {p50:.3f} s, p99 {p99:.3f} s")
    worst = max(quantiles(created)[1], quantiles(deleted)[1])
    verdict = "meets" if worst < TARGET_P99 else "MISSES"
    print(f"\np99 {worst:.3f} s {verdict} the target of {TARGET_P99:.0f} s")


if __name__ == "__main__":
    main()
