"""Benchmark: a PersistentVolumeClaim bound and its pod Running, against pod start.

Issue 28's target: a pod with a new claim of the default class (`standard`, local-path,
WaitForFirstConsumer) Running with its claim Bound within the start of a plain pod plus
5 s. Each sample creates a claim and a busybox pod that mounts it, at once, as `kubectl
apply -f` of both does, and times from the creates to the first look (every 50 ms) that
sees the claim Bound and the pod Running; then it times a pod without a claim the same
way, on the same lab, as the baseline. The way a claim goes: the persistent-volume
controller hands it to the provisioner only once the scheduler, which waits for the
claim in its VolumeBinding, has picked a node; the provisioner makes the volume; the
controller binds; the scheduler binds the pod; the kubelet makes the directory and
starts the containers.

Run it against a running lab (`make up`, or `labctl up` of a small one) whose context
the kubeconfig names, with busybox present on its nodes (any pod of it run once):

    python -m bench.storage [--kubeconfig FILE] [--context NAME] [--samples 20]
    make bench-storage      (the lab of `make up`)

Samples run one after another; the namespace made for them is deleted at the end,
which releases the volumes (the provisioner's helper pods then remove the directories).
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable

from bench.pods import quantiles
from kubelab.api.resources import Resource
from kubelab.client import RestClient, load_config, resource_for

PODS = resource_for("v1", "Pod")
CLAIMS = resource_for("v1", "PersistentVolumeClaim")
NAMESPACES = resource_for("v1", "Namespace")
POLL = 0.05
TIMEOUT = 180.0


def pod_body(name: str, claim: str | None) -> dict[str, object]:
    container: dict[str, object] = {
        "name": "main",
        "image": "busybox",
        "imagePullPolicy": "IfNotPresent",
        "command": ["sleep", "3600"],
    }
    spec: dict[str, object] = {"containers": [container], "terminationGracePeriodSeconds": 0}
    if claim is not None:
        container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def claim_body(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}},
    }


def wait(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {TIMEOUT:.0f} s waiting for {what}")
        time.sleep(POLL)


def phase(client: RestClient, resource: Resource, name: str, namespace: str) -> str:
    obj = client.get(resource, name, namespace)
    return str((obj.get("status") or {}).get("phase") or "")


def sample(client: RestClient, namespace: str, index: int, with_claim: bool) -> float:
    name = f"{'claimed' if with_claim else 'plain'}-{index}"
    started = time.monotonic()
    if with_claim:
        client.create(CLAIMS, claim_body(name), namespace)
    client.create(PODS, pod_body(name, name if with_claim else None), namespace)

    def ready() -> bool:
        if phase(client, PODS, name, namespace) != "Running":
            return False
        return not with_claim or phase(client, CLAIMS, name, namespace) == "Bound"

    wait(ready, f"{namespace}/{name}")
    elapsed = time.monotonic() - started
    client.delete(PODS, name, namespace, grace_period_seconds=0)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    client = RestClient(load_config(args.kubeconfig, context=args.context), qps=None)
    namespace = f"bench-storage-{uuid.uuid4().hex[:6]}"
    client.create(NAMESPACES, {"metadata": {"name": namespace}})
    try:
        wait(
            lambda: bool(client.list(resource_for("v1", "ServiceAccount"), namespace)["items"]),
            "the namespace's default ServiceAccount",
        )
        sample(client, namespace, -1, with_claim=False)  # busybox present, caches warm
        plain, claimed = [], []
        for index in range(args.samples):
            plain.append(sample(client, namespace, index, with_claim=False))
            claimed.append(sample(client, namespace, index, with_claim=True))
    finally:
        client.delete(NAMESPACES, namespace)
    print(f"{args.samples} samples each, one at a time")
    print(f"{'':34} {'p50 s':>7} {'p99 s':>7}")
    for what, samples in (
        ("pod Running (no claim)", plain),
        ("claim Bound + pod Running", claimed),
    ):
        p50, p99 = quantiles(samples)
        print(f"{what:34} {p50:7.2f} {p99:7.2f}")
    extra = [c - p for c, p in zip(claimed, plain, strict=True)]
    p50, p99 = quantiles(extra)
    print(f"{'what the claim adds':34} {p50:7.2f} {p99:7.2f}   (target: under 5 s)")


if __name__ == "__main__":
    main()
