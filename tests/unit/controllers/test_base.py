"""The worker loop every controller runs: retries with back-off, keys that come back
after a wait, a clean stop that leaves the backlog alone; informers shared per resource."""

from __future__ import annotations

import itertools
import logging
import threading
import time

from controlplane.controllers.base import InformerFactory, SyncError, SyncResult, Workers
from kubelab.api.errors import StatusError
from kubelab.client import (
    ClientConfig,
    ItemExponentialFailureRateLimiter,
    RestClient,
    WorkQueue,
    resource_for,
)
from tests.unit.client.conftest import eventually

log = logging.getLogger("test-controller")


def run(workers: Workers[str], count: int = 2) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=workers.run, args=(count, stop), daemon=True)
    thread.start()
    return stop, thread


def test_a_failing_key_is_retried_with_back_off_until_it_succeeds() -> None:
    queue: WorkQueue[str] = WorkQueue(ItemExponentialFailureRateLimiter(0.01, 1.0))
    calls: list[float] = []
    failures = [SyncError("not yet"), StatusError(409, "Conflict", "modified"), KeyError("x")]

    def sync(key: str) -> SyncResult:
        calls.append(time.monotonic())
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return None

    stop, thread = run(Workers("test", queue, sync, log))
    queue.add("k")
    eventually(lambda: len(calls) == 4)
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert gaps[0] >= 0.01 and gaps[1] >= 0.02 and gaps[2] >= 0.04, gaps
    eventually(lambda: queue.num_requeues("k") == 0)  # forgotten once it succeeded
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


def test_a_key_whose_sync_waits_comes_back_after_the_wait() -> None:
    queue: WorkQueue[str] = WorkQueue()
    calls: list[float] = []

    def sync(key: str) -> SyncResult:
        calls.append(time.monotonic())
        return 0.1 if len(calls) == 1 else None

    stop, thread = run(Workers("test", queue, sync, log))
    queue.add("k")
    eventually(lambda: len(calls) == 2)
    assert calls[1] - calls[0] >= 0.1
    stop.set()
    thread.join(5)


def test_keys_still_queued_when_stopped_are_left_alone() -> None:
    queue: WorkQueue[str] = WorkQueue()
    synced: list[str] = []
    busy, release = threading.Event(), threading.Event()

    def sync(key: str) -> SyncResult:
        synced.append(key)
        busy.set()
        release.wait(5)
        return None

    stop, thread = run(Workers("test", queue, sync, log), count=1)
    queue.add("first")
    assert busy.wait(5)
    queue.add("second")
    stop.set()  # leadership lost while "first" is being synced
    release.set()
    thread.join(5)
    assert not thread.is_alive()
    assert synced == ["first"], "the next leader's business"


def test_informers_are_shared_per_resource() -> None:
    with RestClient(ClientConfig(server="http://127.0.0.1:1")) as client:
        factory = InformerFactory(client)
        pods = factory.informer(resource_for("v1", "Pod"))
        assert factory.informer(resource_for("v1", "Pod")) is pods
        assert factory.informer(resource_for("v1", "ConfigMap")) is not pods
        assert len(factory) == 2


def test_join_bounds_the_wait_in_all_and_names_the_informers_still_running() -> None:
    factory = InformerFactory(RestClient(ClientConfig(server="http://127.0.0.1:1")))
    release = threading.Event()
    threads = [
        threading.Thread(target=release.wait, name=f"informer {n}", daemon=True)
        for n in ("pods", "nodes", "leases")
    ]
    for thread in threads:
        thread.start()
    factory._threads = threads
    started = time.monotonic()
    assert factory.join(0.3) == ["informer pods", "informer nodes", "informer leases"]
    assert time.monotonic() - started < 1.0, "the bound is for all of them together"
    release.set()
    assert factory.join(5) == []
