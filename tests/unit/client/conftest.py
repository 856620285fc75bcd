"""Fixtures of the client library's tests: clients of the real apiserver, in-process
(`apiserver` and `namespace` come from tests/conftest.py), and helpers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from kubelab import pki
from kubelab.client.clock import FakeClock
from kubelab.client.flowcontrol import Backoff
from kubelab.client.rest import RestClient
from lab.testenv import Environment

FAST_BACKOFF = Backoff(base=0.01, cap=0.05)


class AutoClock(FakeClock):
    """A fake clock whose sleeps advance it at once, recording each: for single-threaded
    code whose pauses are what the test checks."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        self.slept.append(round(seconds, 6))
        self.step(max(seconds, 0.0))
        return stop is not None and stop.is_set()


@pytest.fixture
def client(apiserver: Environment, namespace: str) -> Iterator[RestClient]:
    """An admin client (system:masters) of the test apiserver."""
    config = apiserver.client_config(namespace=namespace)
    with RestClient(config, qps=None, backoff=FAST_BACKOFF) as c:
        yield c


@pytest.fixture
def admin(apiserver: Environment) -> Iterator[RestClient]:
    """Another client, for what the test does around the client under test."""
    with RestClient(apiserver.client_config(), qps=None) as c:
        yield c


@pytest.fixture(scope="session")
def tls_ca() -> pki.CertKey:
    return pki.new_ca("kubelab-test-ca")


def eventually(predicate: Callable[[], object], timeout: float = 30.0) -> None:
    """Wait (real time) until `predicate()` is true: for effects of other threads. The
    timeout is only how long a failing test takes to say so: generous, because on the
    shared, loaded machine another thread may not run for seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s: {predicate.__doc__ or predicate}")
        time.sleep(0.005)
