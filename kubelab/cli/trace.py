"""`labctl trace KIND/NAME [-n NS] [-o json] [--follow]`: one object's life through the
components, from the spans the lab's trace collector keeps (controlplane/collector).

What it gathers (`gather`): the spans about the object (by kind, namespace and name),
then down its owner chain (the spans whose `k8s.object.owner_uid` is a uid found so
far: Deployment -> ReplicaSets -> Pods), then every span of the traces those spans are
in or link to (the store's, kube-proxy's, which name no object of the chain), and the
spans of other traces that link into those, with what they caused (their descendants):
a ReplicaSet's reconcile stays in the ReplicaSet's trace, linked to the deleted pod's
event that queued it, and the replacement it creates is its descendant. It asks
only the collector, so it works for objects already deleted, as long as their traces
have not aged out.

What it prints: the waterfall (`render`), one line per span with the step of the seeds'
flow its component is (1 kubectl, 2 apiserver, 3 controller-manager, 4 scheduler,
5 kubelet, then kube-proxy), the component, the node, the span, its start offset from
the first span and its duration, grouped by object down the owner chain; or with
`-o json` the spans in the public shape (docs/architecture.md, "Tracing"), sorted by
start. A bad name, an object the collector has no span of, and a collector that does
not answer each get a message and exit 1, never a traceback.

With `--follow` (`follow`) the steps stream as they arrive, while the user works in
another terminal: what the collector has of the object first (nothing yet is fine: the
object may be about to be made), then a poll of the query API every `POLL_SECONDS`
from a cursor (`after`: arrival order), each new span of the object printed as a line
(`-o json`: one span a line, JSON Lines). The same spans as `gather` finds: a span is
the object's when it names it, or an owner the chain already holds, or is in a trace
one of those spans is in or links to. Spans arrive in any order (each component sends
its own batches, every few seconds), so a span that belongs to no known trace yet is
held back, the most recent `HELD_SPANS` of them, and printed once a later span makes
its trace the object's. Ctrl-C ends it (exit 130, as after any Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kubelab import tracing
from kubelab.api import resources

from .output import EXIT_ERROR, EXIT_INTERRUPTED, CommandError

Span = dict[str, Any]
Page = Callable[[dict[str, Any]], tuple[list[Span], int]]
"""The collector's query API: parameters in, spans (public shape) and the cursor after
them (`next`) out."""
Fetch = Callable[[dict[str, Any]], list[Span]]
"""The same, spans only."""

COLLECTOR_VARIABLE = "KUBELAB_COLLECTOR"
DEFAULT_COLLECTOR = "http://127.0.0.1:4318"
STEPS = {
    "apiserver": "2",
    "controller-manager": "3",
    "scheduler": "4",
    "kubelet": "5",
    "kube-proxy": "then",
}
"""The seeds' numbered steps by component; kubectl (1) is the client of an apiserver
request whose user agent names it."""
USER_AGENT = "user_agent.original"
BAR_WIDTH = 30
POLL_SECONDS = 1.0
HELD_SPANS = 20_000
"""Spans `--follow` keeps that may yet turn out to be the object's."""
LATE_SECONDS = 10.0
"""How far back `--follow` starts: spans that started this long before it and arrive
after it (the components export every 5 s) are still shown."""
START_HINT = (
    "Start it with `python -m controlplane.collector --data-dir DIR`, or name where it "
    f"runs with --collector URL or {COLLECTOR_VARIABLE}"
)


class CollectorUnreachable(CommandError):
    """The collector did not answer, or answered with an error."""


def collector_page(url: str, hint: str = START_HINT, timeout: float = 10.0) -> Page:
    """The query API of the collector at `url`; `hint` says how to start it when it
    does not answer."""
    session = requests.Session()
    session.trust_env = False  # the lab's collector is on this machine's networks

    def page(params: dict[str, Any]) -> tuple[list[Span], int]:
        try:
            # A short connect timeout: a stopped lab's address may not refuse, only drop.
            answer = session.get(f"{url}/api/v1/spans", params=params, timeout=(3.0, timeout))
        except requests.RequestException as e:
            raise CollectorUnreachable(
                f"cannot reach the trace collector at {url} ({type(e).__name__}). {hint}"
            ) from e
        if answer.status_code != 200:
            raise CollectorUnreachable(
                f"the trace collector at {url} answered {answer.status_code}: "
                f"{answer.text.strip()[:200]}"
            )
        body = answer.json()
        return body["spans"], int(body["next"])

    return page


def collector_fetch(url: str, hint: str = START_HINT) -> Fetch:
    """The collector's query API at `url`, spans only."""
    page = collector_page(url, hint)
    return lambda params: page(params)[0]


def collector_of(args: argparse.Namespace, hint: str = START_HINT) -> Fetch:
    """The query API of the collector `add_collector_argument`'s flag names, else the
    default one."""
    return collector_fetch(args.collector or DEFAULT_COLLECTOR, hint)


def resolve_kind(text: str) -> tuple[str, bool]:
    """The Kind a user's `deployment`, `deploy` or `deployments` names, and whether it is
    namespaced; an unknown word is taken as a Kind as written (a custom resource's), in a
    namespace."""
    word = text.lower()
    for r in resources.RESOURCES:
        if word in (r.singular, r.plural, *r.short_names):
            return r.kind, r.namespaced
    return text, True


def gather(fetch: Fetch, kind: str, namespace: str, name: str) -> list[Span]:
    """The object's spans, down its owner chain, and the rest of their traces (module
    docstring); empty when the collector has none."""
    found: dict[str, Span] = {}

    def add(spans: Iterable[Span]) -> None:
        for span in spans:
            found.setdefault(span["span_id"], span)

    add(fetch({"kind": kind, "namespace": namespace, "name": name}))
    frontier = {_uid(s) for s in found.values()} - {""}
    seen: set[str] = set()
    while frontier - seen:
        uid = min(frontier - seen)
        seen.add(uid)
        children = fetch({"owner_uid": uid})
        add(children)
        frontier |= {_uid(s) for s in children} - {""}
    add(traces_of(fetch, list(found.values())))
    return sorted(found.values(), key=lambda s: (s["start"], s["span_id"]))


def traces_of(fetch: Fetch, spans: Sequence[Span]) -> list[Span]:
    """Every span of the traces `spans` are in or link to, and the spans of other traces
    that link into those with their descendants (module docstring; `labctl flows`
    gathers an operation's traces with it too)."""
    traces = {s["trace_id"] for s in spans}
    traces |= {link["trace_id"] for s in spans for link in s["links"]}
    found = _in_batches(fetch, "trace_id", traces)
    linking = [
        s for s in _in_batches(fetch, "linked_trace_id", traces) if s["trace_id"] not in traces
    ]
    if linking:
        found += _descendants(
            _in_batches(fetch, "trace_id", {s["trace_id"] for s in linking}), linking
        )
    return found


def _in_batches(fetch: Fetch, parameter: str, traces: Iterable[str]) -> list[Span]:
    """The spans `parameter` (a repeatable trace id) selects for each of `traces`."""
    ordered = sorted(traces)
    found: list[Span] = []
    for i in range(0, len(ordered), 50):  # a bounded URL per request
        found += fetch({parameter: ordered[i : i + 50]})
    return found


def _descendants(spans: Sequence[Span], roots: Sequence[Span]) -> list[Span]:
    """`roots` and the spans among `spans` below them."""
    children: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        if span["parent_span_id"]:
            children[span["parent_span_id"]].append(span)
    found: dict[str, Span] = {}
    pending = list(roots)
    while pending:
        span = pending.pop()
        if span["span_id"] not in found:
            found[span["span_id"]] = span
            pending += children[span["span_id"]]
    return list(found.values())


def _uid(span: Span) -> str:
    """The uid of the object the span names; empty when it names none, or one without a
    uid (a list, a write refused before the object was made): never an owner to follow,
    as the query API takes an empty parameter as no condition."""
    return str((span["object"] or {}).get("uid") or "")


def moment(text: str) -> datetime:
    """A span's `start` or `end` (RFC 3339) as a datetime (`labctl flows` reads them too)."""
    return datetime.fromisoformat(text)


def millis(seconds: float) -> str:
    """Seconds as the milliseconds `labctl trace` and `labctl flows` print."""
    return f"{seconds * 1000:.1f} ms"


def _groups(spans: Sequence[Span]) -> list[tuple[int, str, list[Span]]]:
    """The spans grouped by object, down the owner chain: (depth, heading, spans). A span
    that names no object joins its nearest ancestor's group that does."""
    by_id = {s["span_id"]: s for s in spans}

    def object_uid(span: Span | None) -> str:
        for _ in range(len(by_id)):  # bounded: a malformed chain may loop
            if span is None:
                return ""
            if span["object"]:
                return str(span["object"]["uid"])
            span = by_id.get(span["parent_span_id"] or "")
        return ""

    members: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        members[object_uid(span)].append(span)
    owner: dict[str, str] = {}
    heading: dict[str, str] = {"": "(no object)"}
    for span in spans:
        if span["object"]:
            o = span["object"]
            uid = o["uid"]
            place = f"{o['namespace']}/{o['name']}" if o["namespace"] else o["name"]
            heading.setdefault(uid, f"{o['kind']} {place}")
            owner_uid = span["attributes"].get(tracing.OBJECT_OWNER_UID, "")
            if owner_uid and owner_uid != uid:
                owner.setdefault(uid, owner_uid)
    children: dict[str, list[str]] = defaultdict(list)
    roots = []
    for uid in members:  # in order of each group's first span
        if uid and owner.get(uid) in members:
            children[owner[uid]].append(uid)
        elif uid:
            roots.append(uid)
    ordered: list[tuple[int, str, list[Span]]] = []

    def visit(uid: str, depth: int) -> None:
        ordered.append((depth, heading[uid], members[uid]))
        for child in children[uid]:
            visit(child, depth + 1)

    for uid in roots:
        visit(uid, 0)
    if "" in members:
        ordered.append((0, heading[""], members[""]))
    return ordered


def render(spans: Sequence[Span], console: Console) -> None:
    """The waterfall (module docstring)."""
    start = min(moment(s["start"]) for s in spans)
    finish = max(moment(s["end"]) for s in spans)
    total = max((finish - start).total_seconds(), 1e-6)
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("step", "component", "node", "span", "start", "duration", "waterfall"):
        right = column in ("start", "duration")
        table.add_column(column, justify="right" if right else "left", no_wrap=column != "span")
    for depth, heading, members in _groups(spans):
        table.add_row("", "", "", Text("  " * depth + heading, style="bold"), "", "", "")
        for span in members:
            offset = (moment(span["start"]) - start).total_seconds()
            duration = (moment(span["end"]) - moment(span["start"])).total_seconds()
            cells = (millis(offset), millis(duration), _bar(offset, duration, total))
            agent = str(span["attributes"].get(USER_AGENT, ""))
            if span["component"] == "apiserver" and agent.startswith("kubectl"):
                table.add_row("1", "kubectl", "", "  " * (depth + 1) + agent, *cells)
            step = STEPS.get(span["component"], "")
            name = "  " * (depth + 1) + span["name"]
            table.add_row(step, span["component"], span["node"], name, *cells)
    console.print(table)


class Follower:
    """Which spans arriving for `--follow` are the object's (module docstring): the
    rule of `gather`, applied as spans come in any order."""

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        self.object = (kind.lower(), namespace, name)
        self.uids: set[str] = set()
        self.traces: set[str] = set()
        self.shown: set[str] = set()
        self.held: deque[Span] = deque(maxlen=HELD_SPANS)

    def _direct(self, span: Span) -> bool:
        """Whether the span names the object or an object down its owner chain."""
        o = span["object"]
        if not o:
            return False
        if (o["kind"].lower(), o["namespace"], o["name"]) == self.object:
            return True
        return span["attributes"].get(tracing.OBJECT_OWNER_UID, "") in self.uids - {""}

    def take(self, spans: Iterable[Span]) -> list[Span]:
        """The object's spans among `spans` and those held back, not shown before,
        sorted by start; the others are held back."""
        new: list[Span] = []
        pending = [*self.held, *spans]
        self.held.clear()
        grew = True
        while grew:  # a span taken may make earlier ones the object's
            grew, rest = False, []
            for span in pending:
                if span["span_id"] in self.shown:
                    continue
                if self._direct(span):
                    self.uids.add(_uid(span))
                    self.traces.add(span["trace_id"])
                    self.traces.update(link["trace_id"] for link in span["links"])
                    grew = True
                elif span["trace_id"] not in self.traces:
                    rest.append(span)
                    continue
                self.shown.add(span["span_id"])
                new.append(span)
            pending = rest
        self.held.extend(pending)
        return sorted(new, key=lambda s: (s["start"], s["span_id"]))


def follow(
    page: Page, kind: str, namespace: str, name: str, *, poll: float = POLL_SECONDS
) -> Iterator[list[Span]]:
    """The object's spans as they arrive (`Follower`), a list per poll of the collector
    (empty when nothing new came); the first holds what the collector had already."""
    follower = Follower(kind, namespace, name)
    yield follower.take(gather(lambda params: page(params)[0], kind, namespace, name))
    since = (datetime.now(UTC) - timedelta(seconds=LATE_SECONDS)).isoformat()
    cursor = 0
    while True:
        spans, cursor = page({"since": since, "after": cursor})
        yield follower.take(spans)
        time.sleep(poll)


def follow_line(span: Span, start: datetime) -> str:
    """One span of `--follow` as a line: the seeds' step, component, node, span, its
    object, its start from the first span shown, its duration."""
    offset = (moment(span["start"]) - start).total_seconds()
    duration = (moment(span["end"]) - moment(span["start"])).total_seconds()
    o = span["object"]
    about = f"{o['kind']} {o['namespace'] + '/' if o['namespace'] else ''}{o['name']}" if o else ""
    agent = str(span["attributes"].get(USER_AGENT, ""))
    step = STEPS.get(span["component"], "")
    if span["component"] == "apiserver" and agent.startswith("kubectl"):
        step = "1"
    return (
        f"{step:>4}  {span['component']:<18} {span['node']:<12} {span['name']:<34} "
        f"{about:<40} {millis(offset):>11} {millis(duration):>10}"
    )


def _bar(offset: float, duration: float, total: float) -> Text:
    begin = min(int(offset / total * BAR_WIDTH), BAR_WIDTH - 1)
    length = max(1, round(duration / total * BAR_WIDTH))
    return Text(" " * begin + "█" * min(length, BAR_WIDTH - begin), style="cyan")


DESCRIPTION = "an object's path through the components, from the lab's traces"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`labctl trace`'s arguments, on its parser (labctl's subcommand, or `parse_args`')."""
    parser.add_argument("object", help="KIND/NAME, e.g. deployment/nginx")
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument("-o", "--output", choices=("waterfall", "json"), default="waterfall")
    parser.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="stream the steps as they happen (one line a span; -o json: one span a line) "
        "until Ctrl-C",
    )
    add_collector_argument(parser)


def add_collector_argument(parser: argparse.ArgumentParser) -> None:
    """How a command names the trace collector (`labctl trace`'s and `labctl flows`'):
    None when neither the flag nor the variable does (labctl then asks the lab's state);
    `collector_of` reads it back."""
    parser.add_argument(
        "--collector",
        default=os.environ.get(COLLECTOR_VARIABLE) or None,
        metavar="URL",
        help=f"the trace collector (default: ${COLLECTOR_VARIABLE}, else the lab's, else "
        f"{DEFAULT_COLLECTOR})",
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="labctl trace", description=DESCRIPTION)
    add_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """`labctl trace` from its arguments alone."""
    return run(parse_args(argv))


def run(args: argparse.Namespace, hint: str = START_HINT) -> int:
    """Print the trace of the object `args` names; return the exit status. `hint` says
    how to start the collector when it does not answer."""
    try:
        kind_text, slash, name = args.object.partition("/")
        if not slash or not kind_text or not name or "/" in name:
            raise CommandError(
                f"name the object as KIND/NAME (e.g. deployment/nginx), not {args.object!r}"
            )
        kind, namespaced = resolve_kind(kind_text)
        namespace = args.namespace if namespaced else ""
        page = collector_page(args.collector or DEFAULT_COLLECTOR, hint)
        if args.follow:
            return _follow(page, kind, namespace, name, json_lines=args.output == "json")
        spans = gather(lambda params: page(params)[0], kind, namespace, name)
        if not spans:
            where = f" in namespace {namespace}" if namespace else ""
            raise CommandError(
                f"no trace of {kind} {name}{where}: it never existed, or its traces aged out "
                "of the collector (it keeps the most recent ones within its --max-traces and "
                "--max-bytes)"
            )
    except CommandError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    if args.output == "json":
        print(json.dumps({"spans": spans}, indent=2))
    else:
        render(spans, Console())
    return 0


def _follow(page: Page, kind: str, namespace: str, name: str, *, json_lines: bool) -> int:
    """`--follow`'s output until Ctrl-C (or until the collector stops answering: exit 1)."""
    where = f" in namespace {namespace}" if namespace else ""
    if not json_lines:
        print(f"following {kind} {name}{where} (Ctrl-C ends it)", file=sys.stderr, flush=True)
    start: datetime | None = None
    for spans in follow(page, kind, namespace, name):
        for span in spans:
            if json_lines:
                print(json.dumps(span), flush=True)
                continue
            if start is None:
                start = moment(span["start"])
                print(
                    f"{'step':>4}  {'component':<18} {'node':<12} {'span':<34} {'object':<40} "
                    f"{'start':>11} {'duration':>10}"
                )
            print(follow_line(span, start), flush=True)
    return 0
