"""Linearizability search: Wing & Gong's algorithm with Lowe's memoisation.

The history of one partition becomes a time-ordered list of call and return events.
The search walks that list trying to pick the next operation to linearize: any
operation whose call event comes before the first remaining return event may go next
(it was in flight at that moment). Picking one removes ("lifts") both of its events
from the list and advances the model; hitting a return event means the operation that
owns it should already have been linearized, so the last choice is undone and the next
candidate tried. The history is linearizable iff the list can be emptied.

Lowe's improvement makes this practical: two search paths that have linearized the same
set of operations and reached the same model state have identical futures, so each
(set, state) pair is explored at most once. The set is an int used as a bitset.

Events at equal times are ordered calls first. That treats an operation that starts
exactly when another ends as concurrent with it, which can only add permitted orders,
so the checker never reports a violation that rests on how a tie between timestamps is
broken; it also keeps an operation with ``call == ret`` well formed.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kubelab.lincheck.models import Model, Operation

StateT = TypeVar("StateT", bound=Hashable)

_DEADLINE_CHECK_MASK = 0x3FF
"""Look at the clock once every 1024 search steps: often enough to honour a timeout
closely, rarely enough that the clock costs nothing next to the search."""

_PREFIX_SHOWN = 10
"""How many of the last linearized operations an explanation lists."""


class CheckOutcome(enum.Enum):
    """Verdict of :func:`check`."""

    OK = "ok"
    ILLEGAL = "illegal"
    UNKNOWN = "unknown"
    """The time budget ran out before the search finished."""


@dataclass(frozen=True, slots=True)
class DescribedOperation:
    """An operation together with the model's rendering of it."""

    operation: Operation
    text: str

    def __str__(self) -> str:
        op = self.operation
        ret = "no response" if op.timed_out else f"return {op.ret:g}"
        return f"client {op.client_id}: {self.text}  [call {op.call:g}, {ret}]"


@dataclass(frozen=True, slots=True)
class Violation:
    """Where a partition's search got stuck, for a human to debug.

    ``prefix`` is the longest linearization the search built (the first found of that
    length), ``state`` the model state after it, ``blocking`` the remaining operation
    with the earliest response (something must take effect before it) and
    ``candidates`` every remaining operation invoked by then. The model rejects each
    candidate in ``state``: had it accepted one, the search would have built a longer
    prefix.
    """

    partition: str
    operation_count: int
    prefix: tuple[DescribedOperation, ...]
    state: str
    blocking: DescribedOperation
    candidates: tuple[DescribedOperation, ...]

    def explain(self) -> str:
        """Multi-line, human-readable account of the violation."""
        total = self.operation_count
        lines = [f"not linearizable on {self.partition} ({total} operations)"]
        shown = self.prefix[-_PREFIX_SHOWN:]
        heading = f"longest linearizable prefix: {len(self.prefix)} of {total} operations"
        if len(shown) < len(self.prefix):
            heading += f", last {len(shown)} shown"
        lines.append(heading + ":" if shown else heading)
        lines.extend(f"  {d}" for d in shown)
        lines.append(f"state after it: {self.state}")
        lines.append(f"next response due: {self.blocking}")
        lines.append("operations that could take effect before it, none possible in that state:")
        lines.extend(f"  {d}" for d in self.candidates)
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Outcome of :func:`check`; ``str()`` gives a readable summary."""

    result: CheckOutcome
    operation_count: int
    partition_count: int
    violation: Violation | None = None
    """Set iff ``result`` is ILLEGAL."""
    timed_out_partition: str | None = None
    """Set iff ``result`` is UNKNOWN: the partition being searched when time ran out."""

    @property
    def ok(self) -> bool:
        """Whether the history was proven linearizable."""
        return self.result is CheckOutcome.OK

    def explain(self) -> str:
        """Multi-line, human-readable account of the verdict."""
        size = f"{self.operation_count} operations in {self.partition_count} partition(s)"
        if self.violation is not None:
            return f"ILLEGAL: {self.violation.explain()}"
        if self.timed_out_partition is not None:
            return f"UNKNOWN: {size}; timed out while checking {self.timed_out_partition}"
        return f"OK: {size} are linearizable"

    def __str__(self) -> str:
        return self.explain()


def check(
    model: Model[StateT, Any, Any],
    history: Sequence[Operation],
    timeout_s: float | None = None,
) -> CheckResult:
    """Decide whether ``history`` is linearizable with respect to ``model``.

    Partitions are searched smallest first, so that cheap violations are found before
    an expensive partition can use up the time budget; the first violation ends the
    check. ``timeout_s`` bounds the whole check (None: no bound); when it runs out the
    result is UNKNOWN.
    """
    for op in history:
        if not op.call <= op.ret:  # also rejects NaN
            raise ValueError(f"operation returns before it is called: {op!r}")
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    partitions = [p for p in model.partition(history) if p]
    for ops in sorted(partitions, key=len):
        outcome, longest = _search(model, ops, deadline)
        if outcome is CheckOutcome.UNKNOWN:
            return CheckResult(
                outcome,
                len(history),
                len(partitions),
                timed_out_partition=model.describe_partition(ops),
            )
        if outcome is CheckOutcome.ILLEGAL:
            violation = _violation(model, ops, longest)
            return CheckResult(outcome, len(history), len(partitions), violation)
    return CheckResult(CheckOutcome.OK, len(history), len(partitions))


def _search(
    model: Model[StateT, Any, Any], ops: Sequence[Operation], deadline: float | None
) -> tuple[CheckOutcome, list[int]]:
    """Search one partition.

    Returns the verdict and, when it is ILLEGAL, the indices (into ``ops``, in
    linearization order) of the longest prefix that could be linearized.

    The event list is doubly linked over arrays: node 0 is the head sentinel, nodes
    1..2n the events in time order, node 2n+1 the tail sentinel. Lifting unlinks nodes
    but leaves their own links intact, so undoing lifts in reverse order relinks them
    exactly (Knuth's dancing links) without allocating.

    Candidates are tried in call order, so a timed-out request (return event at +inf,
    hence never forcing a backtrack by itself) is tried as early as it may take effect.
    On linearizable histories that absorbs such requests quickly instead of carrying
    them along as extra choices at every later backtrack.
    """
    n = len(ops)
    events = sorted(
        [(op.call, 0, i) for i, op in enumerate(ops)] + [(op.ret, 1, i) for i, op in enumerate(ops)]
    )
    tail = 2 * n + 1
    nxt = list(range(1, tail + 2))
    prv = list(range(-1, tail))
    node_op = [0] * (tail + 1)
    is_call = [False] * (tail + 1)
    ret_node = [0] * n
    for node, (_, kind, i) in enumerate(events, start=1):
        node_op[node] = i
        if kind == 0:
            is_call[node] = True
        else:
            ret_node[i] = node
    inputs = [op.input for op in ops]
    outputs = [op.output for op in ops]
    step = model.step
    monotonic = time.monotonic

    state = model.init()
    linearized = 0  # bit i set: ops[i] has been linearized
    seen: set[tuple[int, StateT]] = set()
    lifted: list[int] = []  # call nodes, in linearization order
    before: list[StateT] = []  # state before each lifted operation
    longest: list[int] = []
    entry = nxt[0]
    steps = 0
    while nxt[0] != tail:
        if deadline is not None and steps & _DEADLINE_CHECK_MASK == 0 and monotonic() >= deadline:
            return CheckOutcome.UNKNOWN, []
        steps += 1
        if is_call[entry]:
            i = node_op[entry]
            legal, new_state = step(state, inputs[i], outputs[i])
            if legal:
                new_linearized = linearized | (1 << i)
                key = (new_linearized, new_state)
                if key not in seen:
                    seen.add(key)
                    lifted.append(entry)
                    before.append(state)
                    state = new_state
                    linearized = new_linearized
                    r = ret_node[i]
                    p, q = prv[entry], nxt[entry]
                    nxt[p] = q
                    prv[q] = p
                    p, q = prv[r], nxt[r]
                    nxt[p] = q
                    prv[q] = p
                    entry = nxt[0]
                    continue
            entry = nxt[entry]
        else:
            # The earliest outstanding response, and nothing invoked before it could be
            # linearized: undo the last choice and try the candidate after it.
            if not lifted:
                return CheckOutcome.ILLEGAL, longest
            if len(lifted) > len(longest):
                longest = [node_op[call] for call in lifted]
            entry = lifted.pop()
            state = before.pop()
            i = node_op[entry]
            linearized &= ~(1 << i)
            r = ret_node[i]
            nxt[prv[r]] = r
            prv[nxt[r]] = r
            nxt[prv[entry]] = entry
            prv[nxt[entry]] = entry
            entry = nxt[entry]
    return CheckOutcome.OK, []


def _violation(
    model: Model[StateT, Any, Any], ops: Sequence[Operation], prefix: list[int]
) -> Violation:
    """Describe where the search of ``ops`` got stuck after linearizing ``prefix``."""

    def describe(i: int) -> DescribedOperation:
        return DescribedOperation(ops[i], model.describe_operation(ops[i].input, ops[i].output))

    state = model.init()
    for i in prefix:
        state = model.step(state, ops[i].input, ops[i].output)[1]
    done = set(prefix)
    rest = [i for i in range(len(ops)) if i not in done]
    # Same tie-breaking as the event order of _search: by time, then by index.
    blocking = min(rest, key=lambda i: (ops[i].ret, i))
    deadline = ops[blocking].ret
    candidates = sorted((i for i in rest if ops[i].call <= deadline), key=lambda i: ops[i].call)
    return Violation(
        partition=model.describe_partition(ops),
        operation_count=len(ops),
        prefix=tuple(describe(i) for i in prefix),
        state=model.describe_state(state),
        blocking=describe(blocking),
        candidates=tuple(describe(i) for i in candidates),
    )
