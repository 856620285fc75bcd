"""The controller-manager process: kube-controller-manager's flags, and leadership: only
the holder of the Lease runs controllers, and a successor takes over when it stops."""

from __future__ import annotations

import argparse
import logging
import threading
import time
from collections.abc import Callable

import pytest

from controlplane.controllers.manager import (
    COMPONENT,
    CONTROLLERS,
    ControllerManager,
    Options,
    enabled_controllers,
    parse_args,
    run_with_leader_election,
)
from controlplane.controllers.serviceaccounts import SERVICE_ACCOUNT_CONTROLLER
from kubelab import leaderelectionconfig
from kubelab.client import ClientConfig, resource_for
from kubelab.flags import duration, flag_bool
from kubelab.leaderelectionconfig import LeaderElectionConfiguration
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import Cluster, new_object

NAMESPACES = resource_for("v1", "Namespace")
SERVICE_ACCOUNTS = resource_for("v1", "ServiceAccount")
LEASES = resource_for("coordination.k8s.io/v1", "Lease")
# Timings a loaded machine cannot break, for tests of hand-offs rather than of expiry:
# a lease far longer than any test (a successor takes it over only because the leader
# released it, never because it expired), a renew deadline that gives each request 5 s
# (a quarter of it), and quick retries (a candidate notices a release at once).
ELECTION = [
    "--leader-elect-lease-duration=10m",
    "--leader-elect-renew-deadline=20s",
    "--leader-elect-retry-period=50ms",
]


def test_controllers_are_chosen_as_kube_controller_manager_chooses_them() -> None:
    everything = list(CONTROLLERS)
    assert enabled_controllers("*") == everything
    assert enabled_controllers("") == []
    assert enabled_controllers("*,-namespace-controller") == [
        n for n in everything if n != "namespace-controller"
    ]
    assert enabled_controllers("garbagecollector, serviceaccount") == [
        "garbage-collector-controller",
        "serviceaccount-controller",
    ], "the older names still work"
    assert enabled_controllers("namespace,-namespace") == ["namespace-controller"], "first wins"
    assert "namespace-controller" not in enabled_controllers("-namespace,*")
    with pytest.raises(ValueError, match="'no-such-controller' is not a known controller"):
        enabled_controllers("*,no-such-controller")


def test_flags_are_spelled_as_go_spells_them() -> None:
    assert duration("15s") == 15.0 and duration("1m30s") == 90.0 and duration("500ms") == 0.5
    for bad in ("15", "s", "1x", "-1s"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration(bad)
    assert flag_bool("true") and flag_bool("1") and not flag_bool("False")
    with pytest.raises(argparse.ArgumentTypeError):
        flag_bool("yes")
    assert election([]).leader_elect is True
    assert election(["--leader-elect"]).leader_elect is True
    assert election(["--leader-elect=false"]).leader_elect is False
    args = parse_args(["--leader-elect-retry-period=100ms", "--concurrent-gc-syncs", "3"])
    assert (args.leader_elect_retry_period, args.concurrent_gc_syncs) == (0.1, 3)


def election(argv: list[str]) -> LeaderElectionConfiguration:
    """The controller-manager's leader election as the command line sets it up."""
    return leaderelectionconfig.configuration(parse_args(argv), COMPONENT)


def test_leader_election_defaults_are_kubernetes() -> None:
    assert election([]) == LeaderElectionConfiguration(
        resource_name="kube-controller-manager",
        leader_elect=True,
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=2.0,
        resource_namespace="kube-system",
    )
    with pytest.raises(ValueError, match="leaseDuration \\(10s\\) must be greater"):
        election(["--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=10s"])
    assert not election(
        ["--leader-elect=false", "--leader-elect-lease-duration=1s"]
    ).leader_elect, "timings of an election that does not happen are not checked"


def _holder(cluster: Cluster) -> str:
    try:
        lease = cluster.get(LEASES, "kube-system", "kube-controller-manager")
    except Exception:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


def _lists(cluster: Cluster) -> int:
    """The lists of service accounts: one per informer, so one per running term."""
    return len([r for r in cluster.calls("GET", "/serviceaccounts") if "watch" not in r.query])


def test_only_the_leader_runs_controllers_and_a_successor_takes_over(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubelab.controller-manager")
    new_object(cluster, NAMESPACES, "a")
    config = cluster.config()
    options = Options(
        controllers=(SERVICE_ACCOUNT_CONTROLLER,),
        root_ca=b"ca",
        workers={},
        qps=100.0,
        burst=100,
    )
    elected = election(ELECTION)
    stops = [threading.Event(), threading.Event()]
    statuses: list[int] = []
    threads = [
        threading.Thread(
            target=lambda stop=stop: statuses.append(
                run_with_leader_election(ControllerManager(config, options), config, elected, stop)
            ),
            daemon=True,
        )
        for stop in stops
    ]
    threads[0].start()
    eventually(lambda: cluster.exists(SERVICE_ACCOUNTS, "a", "default"))
    # As kube-controller-manager says it, for each controller a term starts.
    assert "Starting serviceaccount controller (serviceaccount-controller, 1 workers)" in (
        caplog.text
    )
    first = _holder(cluster)
    renewals = len(cluster.calls("GET", "/leases/"))
    threads[1].start()  # it reads the lease at once, then every 50-110 ms
    eventually(lambda: len(cluster.calls("GET", "/leases/")) >= renewals + 10)
    assert _lists(cluster) == 1, "the candidate that does not lead runs nothing"

    stops[0].set()
    threads[0].join(30)
    assert statuses == [0]
    eventually(lambda: _holder(cluster) not in ("", first))  # released: it cannot expire
    eventually(lambda: _lists(cluster) == 2)
    cluster.delete(SERVICE_ACCOUNTS, "a", "default")
    eventually(lambda: cluster.exists(SERVICE_ACCOUNTS, "a", "default"))
    stops[1].set()
    threads[1].join(30)
    assert statuses == [0, 0]


class _Scripted(ControllerManager):
    """A manager whose term runs `body(stop)` instead of controllers."""

    def __init__(self, config: ClientConfig, body: Callable[[threading.Event], None]) -> None:
        super().__init__(config, OPTIONS)
        self._body = body

    def run(self, stop: threading.Event) -> None:
        self._body(stop)


OPTIONS = Options(controllers=(), root_ca=b"ca", workers={}, qps=100.0, burst=100)


def test_the_lease_is_released_only_after_the_terms_workers_have_stopped(
    cluster: Cluster,
) -> None:
    config = cluster.config()
    finishing = threading.Event()
    holders: list[str] = []

    def work(stop: threading.Event) -> None:
        stop.wait()
        finishing.set()
        time.sleep(0.3)  # the workers finish the keys they hold
        holders.append(_holder(cluster))

    stop = threading.Event()
    statuses: list[int] = []
    thread = threading.Thread(
        target=lambda: statuses.append(
            run_with_leader_election(_Scripted(config, work), config, election(ELECTION), stop)
        ),
        daemon=True,
    )
    thread.start()
    eventually(lambda: _holder(cluster) != "")
    holder = _holder(cluster)
    stop.set()
    thread.join(30)
    assert finishing.is_set() and holders == [holder], "held while the workers finished"
    assert statuses == [0] and _holder(cluster) == "", "then released"


def test_a_term_whose_controllers_fail_ends_and_releases_the_lease(cluster: Cluster) -> None:
    config = cluster.config()

    def broken(stop: threading.Event) -> None:
        raise RuntimeError("cannot build the controllers")

    stop = threading.Event()
    statuses: list[int] = []
    thread = threading.Thread(
        target=lambda: statuses.append(
            run_with_leader_election(_Scripted(config, broken), config, election(ELECTION), stop)
        ),
        daemon=True,
    )
    thread.start()
    thread.join(30)
    stop.set()
    assert statuses == [1], "the manager exits instead of renewing a lease it does not use"
    assert _holder(cluster) == "", "released"
