"""The leader election of a control-plane component, set up once for kube-scheduler and
kube-controller-manager: component-base's LeaderElectionConfiguration, its
`--leader-elect-*` flags, and the campaign that runs terms of leadership with it
(`kubelab.client.leaderelection.campaign`, the algorithm).

    --leader-elect[=BOOL]                  lead before working (true)
    --leader-elect-lease-duration          how long a silent holder keeps the Lease (15s)
    --leader-elect-renew-deadline          how long a holder retries renewing (10s)
    --leader-elect-retry-period            between attempts (2s)
    --leader-elect-resource-namespace      the Lease's namespace (kube-system)
    --leader-elect-resource-name           the Lease's name (the component's)

The defaults are Kubernetes' for both components. kube-scheduler also reads them from
its configuration file (`leaderElection`: leaderElect, leaseDuration, renewDeadline,
retryPeriod, resourceNamespace, resourceName); a flag given wins over the file.

The election's requests go through a client of their own, whose rate limit busy
workers cannot use up, with no retries, and whose requests time out within a quarter of the renew
deadline: an attempt is two requests (read the Lease, write it), so a holder whose
apiserver answers slowly still gets a second attempt before its deadline passes.
"""

from __future__ import annotations

import argparse
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.client import ClientConfig, RestClient
from kubelab.client.leaderelection import (
    LEASE_DURATION,
    RENEW_DEADLINE,
    RETRY_PERIOD,
    Term,
    campaign,
    check_timings,
)
from kubelab.flags import duration, flag_bool

REQUESTS_PER_RENEW_DEADLINE = 4
"""The election client's request timeout is the renew deadline over this (module
docstring)."""


@dataclass(frozen=True)
class LeaderElectionConfiguration:
    """component-base's LeaderElectionConfiguration (seconds for durations)."""

    resource_name: str
    leader_elect: bool = True
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD
    resource_namespace: str = "kube-system"


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The `--leader-elect-*` flags (module docstring). They default to None, "not
    given", so that a configuration file can sit between them and the defaults."""
    parser.add_argument("--leader-elect", type=flag_bool, nargs="?", const=True)
    parser.add_argument("--leader-elect-lease-duration", type=duration)
    parser.add_argument("--leader-elect-renew-deadline", type=duration)
    parser.add_argument("--leader-elect-retry-period", type=duration)
    parser.add_argument("--leader-elect-resource-namespace")
    parser.add_argument("--leader-elect-resource-name")


def configuration(
    args: argparse.Namespace, resource_name: str, file: Mapping[str, Any] | None = None
) -> LeaderElectionConfiguration:
    """The flags of `add_flags` over a configuration file's `leaderElection` over the
    defaults (the Lease `kube-system/<resource_name>`); a ValueError that names the
    setting if the timings cannot keep two leaders apart."""
    from_file = file or {}

    def pick(flag: Any, key: str, default: Any) -> Any:
        return flag if flag is not None else from_file.get(key, default)

    def seconds(flag: float | None, key: str, default: float) -> float:
        if flag is not None:
            return flag
        value = from_file.get(key)
        try:
            return duration(str(value)) if value else default
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"leaderElection.{key}: {exc}") from None

    config = LeaderElectionConfiguration(
        leader_elect=bool(pick(args.leader_elect, "leaderElect", True)),
        lease_duration=seconds(args.leader_elect_lease_duration, "leaseDuration", LEASE_DURATION),
        renew_deadline=seconds(args.leader_elect_renew_deadline, "renewDeadline", RENEW_DEADLINE),
        retry_period=seconds(args.leader_elect_retry_period, "retryPeriod", RETRY_PERIOD),
        resource_namespace=str(
            pick(args.leader_elect_resource_namespace, "resourceNamespace", "kube-system")
        ),
        resource_name=str(pick(args.leader_elect_resource_name, "resourceName", resource_name)),
    )
    if config.leader_elect:
        check_timings(config.lease_duration, config.renew_deadline, config.retry_period)
    return config


def new_identity() -> str:
    """A candidate's identity, as both components make it: the host's name and a UUID,
    so that two candidates on one host (or one restarted) are told apart."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def run(
    config: LeaderElectionConfiguration,
    client_config: ClientConfig,
    *,
    component: str,
    identity: str,
    new_term: Callable[[], Term],
    stop: threading.Event,
    stop_timeout: float,
) -> int:
    """Campaign for the Lease of `config` as `identity`, lead `new_term()`s until `stop`
    is set (`kubelab.client.leaderelection.campaign`); the exit status. `component`
    names the election client in the apiserver's logs (its user agent)."""
    with RestClient(
        client_config,
        user_agent=f"{component}/leader-election",
        timeout=config.renew_deadline / REQUESTS_PER_RENEW_DEADLINE,
        max_retries=0,
    ) as client:
        return campaign(
            client,
            name=config.resource_name,
            namespace=config.resource_namespace,
            identity=identity,
            new_term=new_term,
            stop=stop,
            lease_duration=config.lease_duration,
            renew_deadline=config.renew_deadline,
            retry_period=config.retry_period,
            stop_timeout=stop_timeout,
        )
