"""The store's spans (issue 23; docs/architecture.md, "Tracing"): what a traced write
costs on its way through Raft, on every member.

A client request that carries a W3C `traceparent` header (the apiserver's store calls)
is a `Store.<call>` span on the member that took it (`server`), and a write in it a
`Raft.propose` span there, from the proposal to the result. The proposal's entry carries
that span's traceparent (the entry's fourth field, `node._encode_request`), so that
every member that writes and applies the entry continues the same trace:

* `Raft.fsync`: the WAL write and fdatasync of a Ready holding traced entries, with the
  Ready's entry count, the bytes written and the fdatasync's own seconds.
* `Raft.commit`: on the leader, from the entry's append to its log until it is committed,
  with its index and term and the voters that had acknowledged it by then.
* `Raft.apply`: the state machine's apply, with the index and the revision it made.

One fsync (and one append to the followers) serves every proposal of a batch. Its span
is the child of the batch's first traced entry, with links to the others': a viewer and
`labctl trace` show a trace by its id, so a span in a trace of its own, linked to the
requests, would be in none of their waterfalls; the first request shows the shared
fsync in place and the others reach it by their link. One span per batch keeps the cost
per fsync, not per request.

Nothing is traced that no client traced: a request without a `traceparent` and the
member's own proposals (lease revocations, publishing its URLs) make no span, so the
store's spans stay within the traces of the requests that caused them. Entries are
recognised as traced by their first byte (a msgpack array of four, `TRACED_ENTRY`), so a
member with tracing on decodes only traced entries, and one with tracing off (no
`RaftSpans`) does nothing at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from controlplane.store.raft import Entry, EntryType

TRACED_ENTRY = 0x94
"""The first byte of a traced entry's data: a msgpack array of four (proposer, request
id, payload, traceparent), where an untraced one is an array of three (0x93)."""

INDEX = "kubelab.raft.index"
TERM = "kubelab.raft.term"
ACKNOWLEDGED = "kubelab.raft.acknowledged"
"""The voters (member ids in hex, as `member list` shows them) holding the entry when the
leader saw it committed: the quorum that committed it, and any voter that caught up in
the same moment."""
REVISION = "kubelab.store.revision"
WAL_ENTRIES = "kubelab.wal.entries"
WAL_BYTES = "kubelab.wal.bytes"
WAL_FDATASYNC_SECONDS = "kubelab.wal.fdatasync_seconds"

_PROPAGATOR = TraceContextTextMapPropagator()


def traceparent() -> str:
    """The current span's traceparent if it records (a traced proposal), else ""."""
    if not trace.get_current_span().is_recording():
        return ""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent", "")


def is_traced(entry: Entry) -> bool:
    """Whether the entry carries a traceparent, without decoding it."""
    return entry.type is EntryType.NORMAL and entry.data[:1] == b"\x94"


def context_of(traceparent: str) -> Context:
    """The context whose span is the proposal's, to continue its trace."""
    return _PROPAGATOR.extract({"traceparent": traceparent})


@dataclass(frozen=True)
class Sync:
    """One WAL write and fdatasync, as measured in the WAL's thread."""

    start_ns: int
    end_ns: int
    fdatasync_seconds: float
    nbytes: int


class RaftSpans:
    """A member's Raft spans (module docstring). The Raft loop calls `appended` with the
    traced entries of each Ready it persists, `synced` after the fsync, `applied` for each
    traced entry it applies; `lost_leadership` when it stops leading."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer
        # The leader's traced entries not yet committed: index -> (context, appended at).
        self._appended: dict[int, tuple[Context, int]] = {}

    def appended(self, entries: Iterable[tuple[Entry, str]], leading: bool) -> list[Context]:
        """The contexts of a Ready's traced entries, noting when the leader appended them."""
        now = time.time_ns()
        contexts = []
        for entry, parent in entries:
            context = context_of(parent)
            contexts.append(context)
            if leading:
                self._appended[entry.index] = (context, now)
        return contexts

    def synced(self, contexts: Sequence[Context], sync: Sync, entries: int) -> None:
        """The `Raft.fsync` span of a Ready: the first traced entry's child, linked to
        the others (module docstring)."""
        links = [trace.Link(trace.get_current_span(c).get_span_context()) for c in contexts[1:]]
        span = self._tracer.start_span(
            "Raft.fsync", context=contexts[0], links=links, start_time=sync.start_ns
        )
        span.set_attributes(
            {
                WAL_ENTRIES: entries,
                WAL_BYTES: sync.nbytes,
                WAL_FDATASYNC_SECONDS: sync.fdatasync_seconds,
            }
        )
        span.end(sync.end_ns)

    def committed(self, entry: Entry, acknowledged: Callable[[int], Sequence[int]]) -> None:
        """The `Raft.commit` span of an entry this member appended as the leader;
        `acknowledged(index)` names the voters holding it (asked only then)."""
        appended = self._appended.pop(entry.index, None)
        if appended is None:
            return
        context, start = appended
        span = self._tracer.start_span("Raft.commit", context=context, start_time=start)
        span.set_attributes(
            {
                INDEX: entry.index,
                TERM: entry.term,
                ACKNOWLEDGED: [f"{member:x}" for member in acknowledged(entry.index)],
            }
        )
        span.end()

    def applied(self, entry: Entry, parent: str, start_ns: int, revision: object) -> None:
        """The `Raft.apply` span of a traced entry applied from `start_ns` until now;
        `revision` the store revision of the result, if it has one (an int)."""
        span = self._tracer.start_span(
            "Raft.apply", context=context_of(parent), start_time=start_ns
        )
        span.set_attribute(INDEX, entry.index)
        if isinstance(revision, int):
            span.set_attribute(REVISION, revision)
        span.end()

    def lost_leadership(self) -> None:
        """Forget the entries appended as the leader: a new leader commits or replaces
        them, and this member no longer sees their commit as the one who decides it."""
        self._appended.clear()
