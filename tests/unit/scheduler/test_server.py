"""The scheduler's process logic against the in-process apiserver (`lab.testenv`):
flags over the configuration file, and a lost lease followed by a new term (a local
plane has no supervisor to restart a scheduler that exited)."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from pathlib import Path

from controlplane.scheduler import server
from controlplane.scheduler.config import load
from kubelab.client import RestClient, resource_for
from kubelab.client.leaderelection import Term
from lab.testenv import Environment

LEASES = resource_for("coordination.k8s.io/v1", "Lease")


def test_flags_override_the_configuration_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "leaderElection: {leaseDuration: 30s, resourceName: from-file}\n"
        "clientConnection: {qps: 5}\n"
    )
    args = server.parse_args(["--config", str(path), "--leader-elect-lease-duration", "20s"])
    settings = server.Settings(args, load(path))
    assert settings.leader_election.lease_duration == 20.0
    assert settings.leader_election.resource_name == "from-file"
    assert settings.qps == 5.0
    assert settings.leader_election.renew_deadline == 10.0


class CountingTerm(Term):
    """A term that only records that it led, and leads until its lease is lost."""

    terms: list[CountingTerm] = []

    def __init__(self) -> None:
        super().__init__(lambda leading: leading.wait())
        CountingTerm.terms.append(self)


def test_a_lost_lease_starts_a_new_term(apiserver: Environment) -> None:
    name = "scheduler-term-test"
    args = server.parse_args(
        [
            "--leader-elect-lease-duration",
            "2s",
            "--leader-elect-renew-deadline",
            "1500ms",
            "--leader-elect-retry-period",
            "200ms",
            "--leader-elect-resource-name",
            name,
        ]
    )
    settings = server.Settings(args, load(None))
    config = apiserver.client_config()
    stop = threading.Event()
    CountingTerm.terms = []
    runner = threading.Thread(
        target=server.campaign, args=(settings, config, "me", CountingTerm, stop), daemon=True
    )
    runner.start()
    try:
        assert _until(lambda: bool(CountingTerm.terms) and CountingTerm.terms[0].led.is_set())
        with RestClient(config, qps=None) as admin:
            lease = admin.get(LEASES, name, "kube-system")
            now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            lease["spec"].update(holderIdentity="someone-else", renewTime=now)
            admin.update(LEASES, lease)  # the lease is taken from us
        # The first term ends; once someone-else's lease expires, a second one leads.
        assert _until(lambda: len(CountingTerm.terms) >= 2 and CountingTerm.terms[1].led.is_set())
    finally:
        stop.set()
        runner.join(15)
    assert not runner.is_alive()


def _until(check: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False
