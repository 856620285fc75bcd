"""kube-proxy's iptables proxier: on each sync, the whole rule set from the caches in
one `iptables-restore --noflush` transaction (see `agents.proxy.rules` for the chains),
with the chains of Services and endpoints that are gone deleted in the same one.
`cleanup` removes every chain and jump of ours (`--cleanup`, labadm reset)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agents.proxy.rules import FIXED_CHAINS, JUMPS, OWN_PREFIXES, generate, service_ports
from kubelab.client import Object
from kubelab.iptables import Iptables, Runner, run_command

log = logging.getLogger("kubelab.proxy")


@dataclass
class Proxier:
    cluster_cidr: str
    runner: Runner = run_command

    def __post_init__(self) -> None:
        self.iptables = Iptables(self.runner)

    def _our_chains(self) -> dict[str, list[str]]:
        return {
            table: [name for name in self.iptables.chains(table) if name.startswith(OWN_PREFIXES)]
            for table in ("nat", "filter")
        }

    def sync(self, services: list[Object], slices: list[Object]) -> None:
        ports = service_ports(services, slices)
        tables = generate(ports, self.cluster_cidr, self._our_chains())
        self.iptables.restore(tables)
        self.iptables.ensure_jumps(JUMPS)
        for table, gone in tables.deleted.items():
            for name in gone:
                log.info(
                    "proxy: removed chain %s/%s (its Service or endpoint is gone)", table, name
                )
        log.debug(
            "proxy: synced %d service ports, %d endpoints",
            len(ports),
            sum(len(p.endpoints) for p in ports),
        )

    def cleanup(self) -> None:
        chains = {table: [*names] for table, names in FIXED_CHAINS.items()}
        for table, names in self._our_chains().items():
            chains.setdefault(table, []).extend(names)
        self.iptables.remove(JUMPS, chains)
        log.info("proxy: removed every chain and jump of kube-proxy")
