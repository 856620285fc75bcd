"""kubeadm's phase workflow: a command is a list of phases run in order by one runner.

A `Phase` is a value (name, short help, `run(data)`, optional sub-phases). The same list
gives `labadm init` (every phase), `labadm init phase <name>` (one phase, or one
sub-phase as `certs/ca`) and `--skip-phases certs,kubeconfig/admin`, so there is no
second description of what `init` does. Phases share one run-data object (paths,
flags, clients) instead of globals, and report through `say`, which prefixes each line
with the phase (`[certs] Generating "ca"`), as kubeadm's output reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

D = TypeVar("D")


class PhaseError(RuntimeError):
    """A phase failed; the message says what to do about it."""


@dataclass(frozen=True)
class Phase(Generic[D]):
    name: str
    help: str
    run: Callable[[D], None] | None = None
    phases: Sequence[Phase[D]] = field(default_factory=tuple)

    def walk(self, prefix: str = "") -> Iterator[tuple[str, Phase[D]]]:
        """This phase and its sub-phases with their full names (`certs/ca`)."""
        path = f"{prefix}{self.name}"
        yield path, self
        for sub in self.phases:
            yield from sub.walk(f"{path}/")


@dataclass(frozen=True)
class Workflow(Generic[D]):
    """The phases of one command, and the runner that executes them."""

    phases: Sequence[Phase[D]]

    def names(self) -> list[str]:
        return [path for phase in self.phases for path, _ in phase.walk()]

    def find(self, name: str) -> Phase[D]:
        for phase in self.phases:
            for path, found in phase.walk():
                if path == name:
                    return found
        raise PhaseError(f"no phase {name!r}; the phases are: {', '.join(self.names())}")

    def run(self, data: D, *, only: str | None = None, skip: Sequence[str] = ()) -> None:
        """Every phase in order (or only the phase `only` with its sub-phases), leaving
        out the phases in `skip` and what lies below them."""
        for name in skip:
            self.find(name)  # an unknown name is a typo the user wants to hear about
        roots = [(only, self.find(only))] if only else [(p.name, p) for p in self.phases]
        for root_name, root in roots:
            prefix = root_name.rpartition("/")[0]
            for path, phase in root.walk(f"{prefix}/" if prefix else ""):
                if any(path == s or path.startswith(f"{s}/") for s in skip):
                    continue
                if phase.run is not None:
                    phase.run(data)


def say(phase: str, message: str) -> None:
    """One line of progress, as kubeadm prints them: `[phase] message`."""
    print(f"[{phase}] {message}", flush=True)


def check(failed: list[str], command: str) -> None:
    """The end of a preflight phase: every failed check in one error, or a pass."""
    if failed:
        listed = "\n".join(f"  [ERROR] {line}" for line in failed)
        raise PhaseError(
            f"[preflight] {len(failed)} check(s) failed:\n{listed}\nfix them and run "
            f"`labadm {command}` again"
        )
    say("preflight", "Checks passed")
