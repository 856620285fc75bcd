"""Leader election on a Lease: acquisition, renewal, takeover after expiry judged on the
candidate's own clock, 409 when another candidate wrote first, release, lost leadership."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from kubelab.client.clock import REAL_CLOCK, Clock, FakeClock
from kubelab.client.kubeconfig import ClientConfig
from kubelab.client.leaderelection import LEASES, LeaderElector
from kubelab.client.rest import Object, RestClient
from tests.unit.client.conftest import FAST_BACKOFF, eventually
from tests.unit.client.fakeapi import FakeApiServer


class InterleavingClient(RestClient):
    """A client that runs `before_update` (once) just before its next update: how a test
    puts another candidate's write between this one's read and write."""

    before_update: Callable[[], object] | None = None

    def update(self, resource: Any, body: Any) -> Object:
        action, self.before_update = self.before_update, None
        if action is not None:
            action()
        return super().update(resource, body)


def candidate(
    api: FakeApiServer,
    identity: str,
    clock: Clock,
    *,
    client: RestClient | None = None,
    **kwargs: Any,
) -> tuple[LeaderElector, list[str]]:
    """An elector, and the log of its callbacks."""
    log: list[str] = []
    client = client or RestClient(ClientConfig(server=api.url), qps=None, backoff=FAST_BACKOFF)
    kwargs.setdefault("on_started_leading", lambda leading: log.append("started"))
    elector = LeaderElector(
        client,
        name="kube-scheduler",
        namespace="kube-system",
        identity=identity,
        on_stopped_leading=lambda: log.append("stopped"),
        on_new_leader=lambda who: log.append(f"leader={who}"),
        clock=clock,
        **kwargs,
    )
    return elector, log


def lease_spec(api: FakeApiServer) -> dict[str, Any]:
    spec: dict[str, Any] = api.get(LEASES, "kube-system", "kube-scheduler")["spec"]
    return spec


def test_the_first_candidate_creates_the_lease(api: FakeApiServer) -> None:
    clock = FakeClock()
    a, log = candidate(api, "a", clock)
    assert a.try_acquire_or_renew() and a.is_leader()
    assert lease_spec(api) == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "acquireTime": "2024-01-01T00:00:00.000000Z",
        "renewTime": "2024-01-01T00:00:00.000000Z",
        "leaseTransitions": 0,
    }
    assert log == ["leader=a"]

    clock.step(2)
    assert a.try_acquire_or_renew()
    spec = lease_spec(api)
    assert spec["renewTime"] == "2024-01-01T00:00:02.000000Z"
    assert (spec["acquireTime"], spec["leaseTransitions"]) == ("2024-01-01T00:00:00.000000Z", 0)
    assert log == ["leader=a"], "a renewal is not a new leader"


def test_a_lease_is_taken_over_only_after_it_expired_on_the_takers_clock(
    api: FakeApiServer,
) -> None:
    clock = FakeClock()
    a, _ = candidate(api, "a", clock)
    b, b_log = candidate(api, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew() and b.leader() == "a"

    clock.step(5)
    assert a.try_acquire_or_renew()  # a renews at t=5, then dies
    assert not b.try_acquire_or_renew()  # b sees the renewal at t=5
    clock.step(14.9)
    assert not b.try_acquire_or_renew(), "15 s after b saw the last change, not after t=0"
    clock.step(0.2)
    assert b.try_acquire_or_renew() and b.is_leader()
    spec = lease_spec(api)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    assert spec["acquireTime"] == "2024-01-01T00:00:20.100000Z"
    assert b_log == ["leader=a", "leader=b"]

    assert not a.try_acquire_or_renew(), "a, back, finds b's fresh lease"
    assert not a.is_leader() and a.leader() == "b"


def test_when_two_candidates_write_at_once_the_second_gets_409(api: FakeApiServer) -> None:
    clock = FakeClock()
    a, _ = candidate(api, "a", clock)
    assert a.try_acquire_or_renew()
    clock.step(16)  # a has stopped renewing; its lease expired for everyone
    slow = InterleavingClient(ClientConfig(server=api.url), qps=None)
    b, _ = candidate(api, "b", clock, client=slow)
    c, _ = candidate(api, "c", clock)
    assert not b.try_acquire_or_renew() and not c.try_acquire_or_renew()  # both observe a
    clock.step(16)

    slow.before_update = c.try_acquire_or_renew  # c writes between b's read and b's write
    assert not b.try_acquire_or_renew(), "b's write carried a stale resourceVersion"
    assert c.is_leader() and lease_spec(api)["holderIdentity"] == "c"
    assert any(r.method == "PUT" for r in api.calls(path="/leases"))

    api.inject(409, method="PUT", path="/leases")
    clock.step(2)
    assert not c.try_acquire_or_renew(), "a conflict is a lost round, not an error"
    assert lease_spec(api)["holderIdentity"] == "c"


def test_a_stopped_leader_releases_the_lease_for_a_quick_successor(api: FakeApiServer) -> None:
    timing: dict[str, Any] = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.05}
    a, a_log = candidate(api, "a", REAL_CLOCK, **timing)
    leading_event: list[threading.Event] = []
    b, b_log = candidate(api, "b", REAL_CLOCK, on_started_leading=leading_event.append, **timing)
    stop_a, stop_b = threading.Event(), threading.Event()
    a_thread = threading.Thread(target=a.run, args=(stop_a,))
    a_thread.start()
    eventually(lambda: "started" in a_log)
    b_thread = threading.Thread(target=b.run, args=(stop_b,))
    b_thread.start()
    eventually(lambda: "leader=a" in b_log)

    stop_a.set()
    a_thread.join(5)
    assert a_log == ["leader=a", "started", "stopped"]
    assert lease_spec(api)["holderIdentity"] in ("", "b")
    eventually(lambda: b.is_leader(), timeout=0.9)  # sooner than the 1 s lease would expire
    assert lease_spec(api)["leaseTransitions"] == 1
    assert not leading_event[0].is_set()

    stop_b.set()
    b_thread.join(5)
    assert leading_event[0].is_set(), "the leading event ends with leadership"


def test_a_leader_that_cannot_renew_stops_leading(api: FakeApiServer) -> None:
    timing: dict[str, Any] = {"lease_duration": 1.0, "renew_deadline": 0.3, "retry_period": 0.05}
    leading: list[threading.Event] = []
    a, log = candidate(api, "a", REAL_CLOCK, on_started_leading=leading.append, **timing)
    stop = threading.Event()
    thread = threading.Thread(target=a.run, args=(stop,))
    thread.start()
    eventually(lambda: bool(leading))

    api.inject(500, path="/leases", times=10_000)
    thread.join(5)
    assert not thread.is_alive() and not stop.is_set()
    assert leading[0].is_set() and log[-1] == "stopped"
    api.faults.clear()
    assert lease_spec(api)["holderIdentity"] == "a", "not released: it was lost, not given"


@pytest.mark.parametrize(
    ("timing", "message"),
    [
        ({"lease_duration": 10, "renew_deadline": 10}, "greater than renew_deadline"),
        ({"renew_deadline": 2, "retry_period": 2}, "greater than 1.2 \\* retry_period"),
        ({"retry_period": 0}, "must be positive"),
    ],
)
def test_inconsistent_timings_are_refused(
    api: FakeApiServer, timing: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        candidate(api, "a", REAL_CLOCK, **timing)
