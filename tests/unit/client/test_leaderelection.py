"""Leader election on a Lease: acquisition, renewal, takeover after expiry judged on the
candidate's own clock, 409 when another candidate wrote first, release, lost leadership.
The Lease lives in the real apiserver in-process (`lab.testenv`), in the test's own
namespace."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kubelab.api import errors
from kubelab.client.clock import REAL_CLOCK, Clock, FakeClock
from kubelab.client.leaderelection import LEASES, LeaderElector
from kubelab.client.rest import Object, RestClient, ServerUnreachable
from lab.testenv import Environment
from tests.unit.client.conftest import FAST_BACKOFF, AutoClock, eventually


@dataclass
class Cluster:
    """Where the candidates meet: the test apiserver, the test's namespace, and a client
    to look at the Lease with."""

    env: Environment
    namespace: str
    admin: RestClient


@pytest.fixture
def api(apiserver: Environment, namespace: str, admin: RestClient) -> Cluster:
    return Cluster(apiserver, namespace, admin)


class InterleavingClient(RestClient):
    """A client that runs `before_update` (once) just before its next update: how a test
    puts another candidate's write between this one's read and write."""

    before_update: Callable[[], object] | None = None

    def update(self, resource: Any, body: Any) -> Object:
        action, self.before_update = self.before_update, None
        if action is not None:
            action()
        return super().update(resource, body)


class ScriptedClient(RestClient):
    """A client whose reads follow a script of (seconds the read takes on `clock`, what
    it does: "ok", "fail" or an exception to raise); once the script is used up, reads
    fail at once."""

    def __init__(self, api: Cluster, clock: FakeClock, script: list[Any]) -> None:
        super().__init__(api.env.client_config(), qps=None, max_retries=0)
        self.clock = clock
        self.script = list(script)

    def get(self, resource: Any, name: str, namespace: str = "") -> Object:
        seconds, action = self.script.pop(0) if self.script else (0.0, "fail")
        self.clock.step(seconds)
        if isinstance(action, Exception):
            raise action
        if action == "fail":
            raise ServerUnreachable("scripted failure")
        return super().get(resource, name, namespace)


# Timings a loaded machine cannot break, for tests of hand-offs and releases rather than
# of expiry: a lease far longer than any test (a successor takes it over only because the
# leader released it, never because it expired), a renew deadline no slow request
# reaches, and quick retries (a candidate notices a release at once).
STEADY: dict[str, Any] = {"lease_duration": 600.0, "renew_deadline": 20.0, "retry_period": 0.05}


def working(log: list[str]) -> Callable[[threading.Event], None]:
    """An on_started_leading that works until leadership ends."""

    def lead(leading: threading.Event) -> None:
        log.append("started")
        leading.wait()

    return lead


def candidate(
    api: Cluster,
    identity: str,
    clock: Clock,
    *,
    client: RestClient | None = None,
    **kwargs: Any,
) -> tuple[LeaderElector, list[str]]:
    """An elector, and the log of its callbacks."""
    log: list[str] = []
    client = client or RestClient(api.env.client_config(), qps=None, backoff=FAST_BACKOFF)
    kwargs.setdefault("on_started_leading", working(log))
    elector = LeaderElector(
        client,
        name="kube-scheduler",
        namespace=api.namespace,
        identity=identity,
        on_stopped_leading=lambda: log.append("stopped"),
        on_new_leader=lambda who: log.append(f"leader={who}"),
        clock=clock,
        **kwargs,
    )
    return elector, log


def lease_spec(api: Cluster) -> dict[str, Any]:
    spec: dict[str, Any] = api.admin.get(LEASES, "kube-scheduler", api.namespace)["spec"]
    return spec


def test_the_first_candidate_creates_the_lease(api: Cluster) -> None:
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
    api: Cluster,
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


def test_when_two_candidates_write_at_once_the_second_gets_409(api: Cluster) -> None:
    clock = FakeClock()
    a, _ = candidate(api, "a", clock)
    assert a.try_acquire_or_renew()
    clock.step(16)  # a has stopped renewing; its lease expired for everyone
    slow = InterleavingClient(api.env.client_config(), qps=None)
    b, _ = candidate(api, "b", clock, client=slow)
    c, _ = candidate(api, "c", clock)
    assert not b.try_acquire_or_renew() and not c.try_acquire_or_renew()  # both observe a
    clock.step(16)

    slow.before_update = c.try_acquire_or_renew  # c writes between b's read and b's write
    with api.env.record() as log:
        assert not b.try_acquire_or_renew(), "b's write carried a stale resourceVersion"
    assert c.is_leader() and lease_spec(api)["holderIdentity"] == "c"
    assert any(r.method == "PUT" for r in log.calls(path="/leases"))

    api.env.faults.conflict(method="PUT", path="/leases")
    clock.step(2)
    assert not c.try_acquire_or_renew(), "a conflict is a lost round, not an error"
    assert lease_spec(api)["holderIdentity"] == "c"


def test_a_stopped_leader_releases_the_lease_for_a_quick_successor(api: Cluster) -> None:
    a, a_log = candidate(api, "a", REAL_CLOCK, **STEADY)
    leading_event: list[threading.Event] = []
    b, b_log = candidate(
        api,
        "b",
        REAL_CLOCK,
        on_started_leading=lambda e: (leading_event.append(e), e.wait()),
        **STEADY,
    )
    stop_a, stop_b = threading.Event(), threading.Event()
    a_thread = threading.Thread(target=a.run, args=(stop_a,))
    a_thread.start()
    eventually(lambda: "started" in a_log)
    b_thread = threading.Thread(target=b.run, args=(stop_b,))
    b_thread.start()
    eventually(lambda: "leader=a" in b_log)

    stop_a.set()
    a_thread.join(30)
    assert a_log == ["leader=a", "started", "stopped"]
    assert lease_spec(api)["holderIdentity"] in ("", "b")
    eventually(lambda: b.is_leader())  # released: the lease cannot have expired
    assert lease_spec(api)["leaseTransitions"] == 1
    # is_leader() turns true before the elector calls on_started_leading in its thread.
    eventually(lambda: leading_event)
    assert not leading_event[0].is_set()

    stop_b.set()
    b_thread.join(30)
    assert leading_event[0].is_set(), "the leading event ends with leadership"


def test_a_leader_that_cannot_renew_stops_leading(api: Cluster) -> None:
    timing: dict[str, Any] = {"lease_duration": 1.0, "renew_deadline": 0.3, "retry_period": 0.05}
    leading: list[threading.Event] = []
    a, log = candidate(
        api, "a", REAL_CLOCK, on_started_leading=lambda e: (leading.append(e), e.wait()), **timing
    )
    stop = threading.Event()
    thread = threading.Thread(target=a.run, args=(stop,))
    thread.start()
    eventually(lambda: bool(leading))

    api.env.faults.status(errors.internal_error("injected"), count=None, path="/leases")
    thread.join(30)
    assert not thread.is_alive() and not stop.is_set()
    assert leading[0].is_set() and log[-1] == "stopped"
    api.env.faults.clear()
    assert lease_spec(api)["holderIdentity"] == "a", "not released: it was lost, not given"


def _run_scripted(api: Cluster, script: list[Any]) -> tuple[float, list[float]]:
    """Run a leader (lease 15 s, renew deadline 10 s, retry 2 s) whose reads follow
    `script`; when (clock time) it stopped leading, and its sleeps."""
    clock = AutoClock()
    client = ScriptedClient(api, clock, script)
    stopped_at: list[float] = []
    a, log = candidate(api, "a", clock, client=client)
    a._on_stopped_leading = lambda: stopped_at.append(clock.now())
    thread = threading.Thread(target=a.run, args=(threading.Event(),), daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and log == ["leader=a", "started"]
    return stopped_at[0], clock.slept


def test_the_renew_deadline_counts_the_time_failed_attempts_take(api: Cluster) -> None:
    # Acquired at t=0; each failed renewal takes 3 s (a timeout): 2 -> 5, 7 -> 10.
    stopped_at, slept = _run_scripted(api, [(0, "ok"), (3, "fail"), (3, "fail"), (3, "fail")])
    assert stopped_at == 10.0, "gives up renew_deadline after the last renewal, no later"
    assert slept == [2.0, 2.0]


def test_a_renewal_that_succeeds_after_the_deadline_counts_as_lost(api: Cluster) -> None:
    # Acquired at t=0; failures 2 -> 3 and 5 -> 6; the next attempt starts at 8 and sleeps
    # min(2, 10 - 8): its success at 11 comes too late, others may already lead.
    script = [(0, "ok"), (1, "fail"), (1, "fail"), (3, "ok"), (0, "ok")]
    stopped_at, slept = _run_scripted(api, script)
    assert stopped_at == 11.0 and slept == [2.0, 2.0, 2.0]
    # Renewed by the attempt that started at 2 (deadline 12); one failure 6 -> 10.5: the
    # next sleep ends at the deadline, and no attempt starts.
    stopped_at, slept = _run_scripted(api, [(0, "ok"), (2, "ok"), (4.5, "fail")])
    assert (stopped_at, slept) == (12.0, [2.0, 2.0, 1.5])


def test_any_error_in_an_attempt_is_a_failed_attempt(api: Cluster) -> None:
    clock = FakeClock()
    client = ScriptedClient(api, clock, [(0, ValueError("bad JSON")), (0, KeyError("spec"))])
    a, _ = candidate(api, "a", clock, client=client)
    assert not a.try_acquire_or_renew() and not a.try_acquire_or_renew()
    lease = {
        "apiVersion": LEASES.api_version,
        "kind": LEASES.kind,
        "metadata": {"name": "kube-scheduler", "namespace": api.namespace},
        "spec": {"holderIdentity": "b", "leaseDurationSeconds": "fifteen"},
    }
    # The apiserver would refuse to store it (validation): a fault answers it instead.
    api.env.faults.answer(200, json.dumps(lease), "application/json", path="/kube-scheduler$")
    b, _ = candidate(api, "a", clock)
    assert not b.try_acquire_or_renew(), "a malformed Lease is not ours, and no crash"


def test_the_lease_is_released_only_once_the_work_has_stopped(api: Cluster) -> None:
    may_finish, finished = threading.Event(), threading.Event()
    holder_when_finishing: list[str] = []

    def lead(leading: threading.Event) -> None:
        leading.wait()
        may_finish.wait(5)  # the workers finish the keys they hold
        holder_when_finishing.append(lease_spec(api)["holderIdentity"])
        finished.set()

    a, log = candidate(api, "a", REAL_CLOCK, on_started_leading=lead, **STEADY)
    stop = threading.Event()
    thread = threading.Thread(target=a.run, args=(stop,))
    thread.start()
    eventually(a.is_leader)
    stop.set()
    renewed = lease_spec(api)["renewTime"]
    eventually(lambda: lease_spec(api)["renewTime"] != renewed)
    assert thread.is_alive() and lease_spec(api)["holderIdentity"] == "a", "still held"
    may_finish.set()
    thread.join(30)
    assert finished.is_set() and holder_when_finishing == ["a"]
    assert lease_spec(api)["holderIdentity"] == "" and log[-1] == "stopped"


def test_work_that_does_not_stop_in_time_is_left_with_the_lease_unreleased(
    api: Cluster,
) -> None:
    never = threading.Event()
    a, log = candidate(
        api, "a", REAL_CLOCK, on_started_leading=lambda e: never.wait(5), stop_timeout=0.2, **STEADY
    )
    stop = threading.Event()
    thread = threading.Thread(target=a.run, args=(stop,))
    thread.start()
    eventually(a.is_leader)
    stop.set()
    thread.join(30)
    never.set()
    assert log[-1] == "stopped" and lease_spec(api)["holderIdentity"] == "a"


@pytest.mark.parametrize("outcome", ["returns", "raises"])
def test_the_term_ends_when_the_leading_callback_ends(api: Cluster, outcome: str) -> None:

    def lead(leading: threading.Event) -> None:
        if outcome == "raises":
            raise RuntimeError("the controllers could not start")

    a, log = candidate(api, "a", REAL_CLOCK, on_started_leading=lead, **STEADY)
    stop = threading.Event()
    thread = threading.Thread(target=a.run, args=(stop,), daemon=True)
    thread.start()
    thread.join(30)
    stop.set()
    assert not thread.is_alive(), "no renewing for a term whose work is over"
    assert log == ["leader=a", "stopped"]
    assert lease_spec(api)["holderIdentity"] == "", "released"


@pytest.mark.parametrize(
    ("timing", "message"),
    [
        ({"lease_duration": 10, "renew_deadline": 10}, "greater than renewDeadline \\(10s\\)"),
        ({"renew_deadline": 2, "retry_period": 2}, "greater than 1.2 \\* retryPeriod \\(2s\\)"),
        ({"retry_period": 0}, "must be positive"),
    ],
)
def test_inconsistent_timings_are_refused(
    api: Cluster, timing: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        candidate(api, "a", REAL_CLOCK, **timing)
