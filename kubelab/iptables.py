"""iptables for the node agents (the pod network agent and kube-proxy): whole chains
written in one `iptables-restore --noflush` transaction, and the jump rules that hook
those chains into the built-in ones.

Why this shape, as kube-proxy's iptables mode has it: a chain declared in a restore
input (`:NAME - [0:0]`) is flushed and refilled atomically, so a sync replaces every rule
of its own chains at once and never shows a half-written state; `--noflush` leaves every
chain the input does not name alone (dockerd's, the other agent's). The jumps from the
built-in chains are single rules checked with `-C` and added with `-I` only when
missing, so dockerd's own insertions and a restart of either never duplicate them.

The runner is injectable so that the generated rules are tested as text without a
kernel, and run for real inside node containers only (never in the machine's own
network namespace).
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

MAX_JUMP_COPIES = 64

Runner = Callable[[Sequence[str], str | None], subprocess.CompletedProcess[str]]


def run_command(argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real runner: the command's output, never raising on a failed exit."""
    return subprocess.run(
        list(argv), input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


class IptablesError(RuntimeError):
    """An iptables command failed; the message holds the command and its stderr."""


@dataclass(frozen=True)
class Jump:
    """A rule in a built-in chain sending packets to one of our chains."""

    table: str
    chain: str
    target: str
    match: tuple[str, ...] = ()
    comment: str = ""

    def rule(self) -> list[str]:
        comment = ["-m", "comment", "--comment", self.comment] if self.comment else []
        return [*self.match, *comment, "-j", self.target]


@dataclass
class Tables:
    """A restore input under construction: per table, chains to declare and rules."""

    chains: dict[str, list[str]] = field(default_factory=dict)
    rules: dict[str, list[str]] = field(default_factory=dict)
    deleted: dict[str, list[str]] = field(default_factory=dict)

    def chain(self, table: str, name: str) -> None:
        declared = self.chains.setdefault(table, [])
        if name not in declared:
            declared.append(name)
        self.rules.setdefault(table, [])

    def add(self, table: str, chain: str, *rule: str) -> None:
        """Append `-A chain rule...`; arguments with spaces are quoted for the parser."""
        self.chain(table, chain)
        self.rules[table].append(" ".join(["-A", chain, *(_quote(arg) for arg in rule)]))

    def delete(self, table: str, name: str) -> None:
        """Flush and delete chain `name` in the same transaction (a stale chain of ours:
        a Service or endpoint that is gone)."""
        self.chain(table, name)
        self.deleted.setdefault(table, []).append(name)

    def render(self) -> str:
        out: list[str] = []
        for table, chains in self.chains.items():
            out.append(f"*{table}")
            out.extend(f":{name} - [0:0]" for name in chains)
            out.extend(self.rules[table])
            out.extend(f"-X {name}" for name in self.deleted.get(table, []))
            out.append("COMMIT")
        return "\n".join(out) + "\n"


def _quote(arg: str) -> str:
    return f'"{arg}"' if (" " in arg or not arg) else arg


@dataclass
class Iptables:
    """iptables in the current network namespace, through `runner`."""

    runner: Runner = run_command
    binary: str = "iptables"

    def _check(self, argv: Sequence[str], stdin: str | None = None) -> str:
        done = self.runner(argv, stdin)
        if done.returncode != 0:
            raise IptablesError(f"`{' '.join(argv)}` failed: {done.stderr.strip()}")
        return done.stdout

    def restore(self, tables: Tables) -> None:
        """Replace the chains `tables` declares, in one transaction."""
        self._check([f"{self.binary}-restore", "--noflush", "--wait"], tables.render())

    def ensure_jumps(self, jumps: Iterable[Jump]) -> None:
        """Insert each jump at the top of its chain unless an identical rule is there."""
        for jump in jumps:
            rule = jump.rule()
            probe = self.runner(
                [self.binary, "--wait", "-t", jump.table, "-C", jump.chain, *rule], None
            )
            if probe.returncode != 0:
                self._check([self.binary, "--wait", "-t", jump.table, "-I", jump.chain, *rule])
                log.info("iptables: added jump %s/%s -> %s", jump.table, jump.chain, jump.target)

    def chains(self, table: str) -> list[str]:
        """The chains of `table` (iptables-save's declarations)."""
        out = self._check([f"{self.binary}-save", "-t", table])
        return [line[1:].split()[0] for line in out.splitlines() if line.startswith(":")]

    def save(self, table: str) -> str:
        return self._check([f"{self.binary}-save", "-t", table])

    def remove(self, jumps: Iterable[Jump], chains: dict[str, list[str]]) -> None:
        """Undo: delete the jumps (every copy), then flush and delete the chains."""
        for jump in jumps:
            delete = [self.binary, "--wait", "-t", jump.table, "-D", jump.chain, *jump.rule()]
            # Every copy (a crashed agent may have left more than one); -D fails when none
            # is left. Bounded, in case a runner never fails.
            for _ in range(MAX_JUMP_COPIES):
                if self.runner(delete, None).returncode != 0:
                    break
        doomed = Tables()
        for table, names in chains.items():
            for name in set(self.chains(table)) & set(names):
                doomed.delete(table, name)
        if doomed.chains:
            self.restore(doomed)
