"""Linearizability checking of recorded client histories (in the style of porcupine).

A history is a set of :class:`Operation` records: which client sent which request
(``input``), when it was sent (``call``), when the answer came back (``ret``) and what
the answer was (``output``). The history is *linearizable* with respect to a sequential
:class:`Model` if every operation can be given one instant, between its call and its
return, at which it takes effect atomically, such that applying the operations in the
order of those instants to the model reproduces every observed output. For the store
this is the guarantee a Raft-replicated key-value store promises: every client behaves
as if it talked to a single, non-replicated map, and nothing it was told is ever
contradicted later (no stale reads, no lost acknowledged writes).

:func:`check` partitions the history (by key, for :class:`KVModel`), searches each part
and returns a :class:`CheckResult` that is OK, ILLEGAL (with a :class:`Violation`
naming the partition, the longest linearizable prefix and the operations that could
not be placed after it) or UNKNOWN when the optional time budget ran out.

Requests whose outcome is unknown (a timeout, a dropped connection) are recorded with
``ret = math.inf`` and ``output = UNKNOWN`` (see :meth:`Operation.timeout`). Such a
request may take effect at any time after it was sent, or never: it is placed anywhere
after its call, including after everything else, which is indistinguishable from not
happening. The models accept any result for it, so it constrains the history only
through what later reads observe of its effect. (An operation with a finite ``ret`` but
an UNKNOWN output is one known to have taken effect by ``ret`` whose result was lost.)

Cost: a linearizable history is usually confirmed in time roughly linear in its length.
A violating one must have every alternative ruled out, and each timed-out request still
pending is an extra yes/no choice at every point, so a violation among many concurrent
timeouts can take exponential time; ``timeout_s`` turns that into an UNKNOWN verdict.

Operations that end and start at exactly the same instant are treated as concurrent
(call events sort before return events at equal times), so a tie between timestamps
never produces a violation.
"""

from kubelab.lincheck.checker import (
    CheckOutcome,
    CheckResult,
    DescribedOperation,
    Violation,
    check,
)
from kubelab.lincheck.models import (
    UNKNOWN,
    KVInput,
    KVKey,
    KVModel,
    KVOutput,
    KVValue,
    Model,
    Operation,
    RegisterInput,
    RegisterModel,
    Unknown,
)

__all__ = [
    "UNKNOWN",
    "CheckOutcome",
    "CheckResult",
    "DescribedOperation",
    "KVInput",
    "KVKey",
    "KVModel",
    "KVOutput",
    "KVValue",
    "Model",
    "Operation",
    "RegisterInput",
    "RegisterModel",
    "Unknown",
    "Violation",
    "check",
]
