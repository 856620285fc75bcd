"""Histories and the sequential specifications ("models") they are checked against.

A model is the single-threaded reference behaviour of an object: from a state, an input
paired with the output a client observed either is possible (and yields a next state)
or is not. The checker never looks inside inputs, outputs or states; it only needs
states to be hashable so that it can remember which (linearized set, state) pairs it
has already explored.
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeAlias, TypeVar


class Unknown(enum.Enum):
    """Type of :data:`UNKNOWN`.

    An enum member rather than a bare ``object()`` so that it has a precise type for
    mypy, compares by identity after copying or pickling, and prints readably.
    """

    UNKNOWN = "UNKNOWN"

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = Unknown.UNKNOWN
"""Output of an operation whose response was never seen (e.g. the request timed out).

The bundled models accept any result for such an operation, so it constrains the
history only through its effect on the state, never through what it returned.
"""


@dataclass(frozen=True, slots=True)
class Operation:
    """One client request as observed from the outside.

    ``call`` and ``ret`` are the invocation and response times on one clock shared by
    all clients. A request whose response never arrived has ``ret == math.inf``: it may
    have taken effect at any moment after ``call``, or never (which is indistinguishable
    from taking effect after every other operation), and its ``output`` should be
    :data:`UNKNOWN`.
    """

    client_id: int
    call: float
    ret: float
    input: Any
    output: Any

    @classmethod
    def timeout(cls, client_id: int, call: float, input: Any) -> Operation:
        """Build a request that was sent at ``call`` and never answered."""
        return cls(client_id, call, math.inf, input, UNKNOWN)

    @property
    def timed_out(self) -> bool:
        """Whether the response never arrived (so the request may still take effect)."""
        return self.ret == math.inf


StateT = TypeVar("StateT", bound=Hashable)
InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")


class Model(ABC, Generic[StateT, InputT, OutputT]):
    """Sequential specification of an object, plus how to split and describe histories.

    Subclasses must implement :meth:`init` and :meth:`step`; the other hooks have
    defaults suitable for an object that cannot be partitioned.
    """

    def partition(self, history: Sequence[Operation]) -> list[list[Operation]]:
        """Split a history into independently checkable parts.

        Linearizability is compositional (Herlihy & Wing): a history is linearizable iff
        its restriction to each object is. Checking parts separately turns one search
        that is exponential in the total concurrency into several small ones. The
        default keeps the whole history together.
        """
        return [list(history)]

    def describe_partition(self, operations: Sequence[Operation]) -> str:
        """Name one part returned by :meth:`partition` for error messages."""
        return "the whole history"

    @abstractmethod
    def init(self) -> StateT:
        """State of the object before any operation."""

    @abstractmethod
    def step(self, state: StateT, input: InputT, output: OutputT) -> tuple[bool, StateT]:
        """Apply ``input`` to ``state``.

        Returns whether ``output`` is a result the object could have produced from that
        state, and the state afterwards. The returned state is ignored when the flag is
        false.
        """

    def describe_operation(self, input: InputT, output: OutputT) -> str:
        """Render an input and its output for error messages."""
        return f"{input!r} -> {output!r}"

    def describe_state(self, state: StateT) -> str:
        """Render a state for error messages."""
        return repr(state)


KVKey: TypeAlias = str | bytes
KVValue: TypeAlias = str | bytes
KVOpName: TypeAlias = Literal["put", "get", "cas", "delete"]
KVOutput: TypeAlias = KVValue | bool | Unknown | None
"""What a client saw: ``get`` -> value or None (absent); ``cas`` -> bool; ``put`` and
``delete`` -> None; any of them -> UNKNOWN when the response never arrived."""


@dataclass(frozen=True, slots=True)
class KVInput:
    """One request against a single key of the key-value store.

    A small frozen dataclass rather than a tuple so that every field has a name and a
    type and malformed requests are rejected when built, not halfway through a search.
    Prefer the ``put``/``get``/``cas``/``delete`` constructors.

    ``value`` is the value written by ``put`` and the new value of ``cas``;
    ``expected`` is the value ``cas`` compares against, where None means "the key must
    be absent".
    """

    op: KVOpName
    key: KVKey
    value: KVValue | None = None
    expected: KVValue | None = None

    def __post_init__(self) -> None:
        if self.op in ("put", "cas") and self.value is None:
            raise ValueError(f"{self.op} needs a value")
        if self.op in ("get", "delete") and self.value is not None:
            raise ValueError(f"{self.op} takes no value")
        if self.op != "cas" and self.expected is not None:
            raise ValueError(f"only cas takes an expected value, not {self.op}")

    @classmethod
    def put(cls, key: KVKey, value: KVValue) -> KVInput:
        """Unconditionally set ``key`` to ``value``."""
        return cls("put", key, value)

    @classmethod
    def get(cls, key: KVKey) -> KVInput:
        """Read ``key``."""
        return cls("get", key)

    @classmethod
    def cas(cls, key: KVKey, expected: KVValue | None, value: KVValue) -> KVInput:
        """Set ``key`` to ``value`` iff it currently holds ``expected`` (None: absent)."""
        return cls("cas", key, value, expected)

    @classmethod
    def delete(cls, key: KVKey) -> KVInput:
        """Remove ``key`` (a no-op if it is absent)."""
        return cls("delete", key)


def _show_value(value: KVValue | None) -> str:
    return "absent" if value is None else repr(value)


def _show_output(output: KVOutput, none: str) -> str:
    """Render an output; ``none`` is how None reads for this operation (ok / absent)."""
    if output is UNKNOWN:
        return "?"
    if isinstance(output, bool):
        return "true" if output else "false"
    return none if output is None else repr(output)


class KVModel(Model[KVValue | None, KVInput, KVOutput]):
    """A key-value map with put, get, compare-and-swap and delete.

    Histories are partitioned by key, so the state is just the value of that one key
    (None when absent); this keeps states tiny and makes the memoisation effective.
    """

    def partition(self, history: Sequence[Operation]) -> list[list[Operation]]:
        """Group by key, leaving out reads whose result was never seen.

        Such a read changes nothing and may be placed anywhere, so it cannot make a
        history illegal; kept, it would only double the configurations a failing search
        has to rule out for as long as it is pending.
        """
        by_key: dict[KVKey, list[Operation]] = {}
        for op in history:
            if not isinstance(op.input, KVInput):
                raise TypeError(f"KVModel expects KVInput inputs, got {op.input!r}")
            if op.input.op == "get" and op.output is UNKNOWN:
                continue
            by_key.setdefault(op.input.key, []).append(op)
        return list(by_key.values())

    def describe_partition(self, operations: Sequence[Operation]) -> str:
        return f"key {operations[0].input.key!r}"

    def init(self) -> KVValue | None:
        return None

    def step(
        self, state: KVValue | None, input: KVInput, output: KVOutput
    ) -> tuple[bool, KVValue | None]:
        op = input.op
        unknown = output is UNKNOWN
        if op == "get":
            if not unknown and isinstance(output, bool):
                raise ValueError(f"get output must be a value or None, got {output!r}")
            return unknown or output == state, state
        if op == "cas":
            if not unknown and not isinstance(output, bool):
                raise ValueError(f"cas output must be a bool, got {output!r}")
            # Whether the swap happens is decided by the state alone, so an unknown
            # outcome needs no branching: it simply is whatever the state implies.
            swapped = state == input.expected
            return unknown or output is swapped, input.value if swapped else state
        if not unknown and output is not None:
            raise ValueError(f"{op} output must be None, got {output!r}")
        return True, input.value if op == "put" else None

    def describe_operation(self, input: KVInput, output: KVOutput) -> str:
        key = repr(input.key)
        if input.op == "get":
            return f"get({key}) -> {_show_output(output, 'absent')}"
        if input.op == "put":
            call = f"put({key}, {input.value!r})"
        elif input.op == "cas":
            call = f"cas({key}, {_show_value(input.expected)} => {input.value!r})"
        else:
            call = f"delete({key})"
        return f"{call} -> {_show_output(output, 'ok')}"

    def describe_state(self, state: KVValue | None) -> str:
        return _show_value(state)


RegisterOpName: TypeAlias = Literal["read", "write"]


@dataclass(frozen=True, slots=True)
class RegisterInput:
    """A read, or a write of ``value``, on a single register."""

    op: RegisterOpName
    value: Hashable = None

    @classmethod
    def read(cls) -> RegisterInput:
        """Read the register; the output is the value seen."""
        return cls("read")

    @classmethod
    def write(cls, value: Hashable) -> RegisterInput:
        """Overwrite the register; the output is None."""
        return cls("write", value)


class RegisterModel(Model[Hashable, RegisterInput, Hashable]):
    """One read/write register: the smallest model worth checking, handy in tests."""

    def __init__(self, initial: Hashable = None) -> None:
        self._initial = initial

    def init(self) -> Hashable:
        return self._initial

    def step(
        self, state: Hashable, input: RegisterInput, output: Hashable
    ) -> tuple[bool, Hashable]:
        if input.op == "write":
            return True, input.value
        return output is UNKNOWN or output == state, state

    def describe_operation(self, input: RegisterInput, output: Hashable) -> str:
        if input.op == "write":
            return f"write({input.value!r})"
        return f"read() -> {'?' if output is UNKNOWN else repr(output)}"
