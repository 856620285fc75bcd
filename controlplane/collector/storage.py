"""The collector's store of recent traces: one sqlite3 database in the data directory,
bounded by a number of traces and a number of bytes, the oldest trace (by when its
first span arrived) evicted first.

The bytes are those of the spans' public JSON, the rows' payload; the database file
adds its indexes on top. Freed pages are reused by later spans, so the file does not
grow past its high-water mark. A trace is evicted whole: `labctl trace` never shows
half of one. Spans that arrive for a trace already evicted start it again, as the
newest.

Spans are indexed by what the query API asks for: trace id, the object's uid, its
kind/namespace/name (kind case-insensitively: a user types `deployment/web`), its
owner's uid (labctl walks an owner chain down with it), the traces a span links to
(`linked_trace_ids`: labctl finds the reconcile that a deleted pod's event queued, which
is in its owner's trace, by its link into the deletion's), and the arrival sequence
(`after`, the cursor of `labctl trace --follow`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubelab import tracing

from .otlp import Public

_SCHEMA = """
CREATE TABLE IF NOT EXISTS spans (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    trace_id TEXT NOT NULL,
    start TEXT NOT NULL,
    kind TEXT COLLATE NOCASE,
    namespace TEXT,
    name TEXT,
    uid TEXT,
    owner_uid TEXT,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS spans_by_trace ON spans (trace_id);
CREATE INDEX IF NOT EXISTS spans_by_uid ON spans (uid);
CREATE INDEX IF NOT EXISTS spans_by_object ON spans (kind, namespace, name);
CREATE INDEX IF NOT EXISTS spans_by_owner ON spans (owner_uid);
CREATE TABLE IF NOT EXISTS links (
    seq INTEGER NOT NULL,
    trace_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS links_by_trace ON links (trace_id);
CREATE INDEX IF NOT EXISTS links_by_span ON links (seq);
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    first_seq INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_by_age ON traces (first_seq);
"""

DATABASE = "traces.sqlite3"


@dataclass(frozen=True)
class Query:
    """What the query API's parameters select; every given one must match, and a span
    matches any of `trace_ids`."""

    trace_ids: Sequence[str] = ()
    linked_trace_ids: Sequence[str] = ()
    """Spans that link to any of these traces (in a trace of their own or not)."""
    uid: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    owner_uid: str = ""
    since: str = ""
    """Spans that started at or after this time (RFC 3339, as the public shape writes it)."""
    after: int = 0
    """Spans that arrived after this cursor (a previous answer's `next`)."""
    limit: int = 10_000


@dataclass
class Stored:
    """The figures `/metrics` reports."""

    traces: int = 0
    bytes: int = 0
    evicted: int = 0


class TraceStore:
    """Recent traces within `max_traces` and `max_bytes` (module docstring)."""

    def __init__(self, data_dir: Path, max_traces: int, max_bytes: int) -> None:
        if max_traces < 1 or max_bytes < 1:
            raise ValueError("the bounds must be positive")
        data_dir.mkdir(parents=True, exist_ok=True)
        self.max_traces = max_traces
        self.max_bytes = max_bytes
        # One connection shared by the server's threads, behind the lock.
        self._db = sqlite3.connect(data_dir / DATABASE, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        count, size = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM traces"
        ).fetchone()
        self.stored = Stored(traces=count, bytes=size)
        with self._lock, self._db:
            self._evict()  # the bounds may have shrunk since the last run

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, spans: Iterable[Public]) -> None:
        """Keep `spans` (one request's, in one transaction), then evict to the bounds."""
        with self._lock, self._db:
            for span in spans:
                body = json.dumps(span, separators=(",", ":"))
                attributes = span["attributes"]
                seq = self._db.execute(
                    "INSERT INTO spans (trace_id, start, kind, namespace, name, uid, owner_uid,"
                    " body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        span["trace_id"],
                        span["start"],
                        attributes.get(tracing.OBJECT_KIND),
                        attributes.get(tracing.OBJECT_NAMESPACE, ""),
                        attributes.get(tracing.OBJECT_NAME),
                        attributes.get(tracing.OBJECT_UID),
                        attributes.get(tracing.OBJECT_OWNER_UID),
                        body,
                    ),
                ).lastrowid
                self._db.executemany(
                    "INSERT INTO links (seq, trace_id) VALUES (?, ?)",
                    [(seq, trace_id) for trace_id in {ln["trace_id"] for ln in span["links"]}],
                )
                new = self._db.execute(
                    "INSERT INTO traces (trace_id, first_seq, bytes) VALUES (?, ?, ?)"
                    " ON CONFLICT (trace_id) DO UPDATE SET bytes = bytes + excluded.bytes"
                    " RETURNING first_seq = ?",
                    (span["trace_id"], seq, len(body), seq),
                ).fetchone()[0]
                self.stored.traces += 1 if new else 0
                self.stored.bytes += len(body)
            self._evict()

    def _evict(self) -> None:
        while self.stored.traces > self.max_traces or self.stored.bytes > self.max_bytes:
            trace_id, size = self._db.execute(
                "SELECT trace_id, bytes FROM traces ORDER BY first_seq LIMIT 1"
            ).fetchone()
            self._db.execute(
                "DELETE FROM links WHERE seq IN (SELECT seq FROM spans WHERE trace_id = ?)",
                (trace_id,),
            )
            self._db.execute("DELETE FROM spans WHERE trace_id = ?", (trace_id,))
            self._db.execute("DELETE FROM traces WHERE trace_id = ?", (trace_id,))
            self.stored.traces -= 1
            self.stored.bytes -= size
            self.stored.evicted += 1

    def query(self, query: Query) -> tuple[list[Public], int]:
        """The spans `query` selects in arrival order, and the cursor after the last
        one (for the next `after`; `query.after` itself when there is none)."""
        clauses: list[str] = ["seq > ?"]
        values: list[str | int] = [query.after]
        if query.trace_ids:
            clauses.append(f"trace_id IN ({', '.join('?' * len(query.trace_ids))})")
            values.extend(query.trace_ids)
        if query.linked_trace_ids:
            marks = ", ".join("?" * len(query.linked_trace_ids))
            clauses.append(f"seq IN (SELECT seq FROM links WHERE trace_id IN ({marks}))")
            values.extend(query.linked_trace_ids)
        for column in ("uid", "kind", "namespace", "name", "owner_uid"):
            if value := getattr(query, column):
                clauses.append(f"{column} = ?")
                values.append(value)
        if query.since:
            clauses.append("start >= ?")
            values.append(query.since)
        sql = f"SELECT seq, body FROM spans WHERE {' AND '.join(clauses)} ORDER BY seq LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, (*values, query.limit)).fetchall()
        cursor = rows[-1][0] if rows else query.after
        return [json.loads(body) for _, body in rows], cursor
