"""`labctl trace KIND/NAME [-n NS] [-o json]`: one object's life through the components,
from the spans the lab's trace collector keeps (controlplane/collector).

What it gathers (`gather`): the spans about the object (by kind, namespace and name),
then down its owner chain (the spans whose `k8s.object.owner_uid` is a uid found so
far: Deployment -> ReplicaSets -> Pods), then every span of the traces those spans are
in or link to (the store's, kube-proxy's, which name no object of the chain). It asks
only the collector, so it works for objects already deleted, as long as their traces
have not aged out.

What it prints: the waterfall (`render`), one line per span with the step of the seeds'
flow its component is (1 kubectl, 2 apiserver, 3 controller-manager, 4 scheduler,
5 kubelet, then kube-proxy), the component, the node, the span, its start offset from
the first span and its duration, grouped by object down the owner chain; or with
`-o json` the spans in the public shape (docs/architecture.md, "Tracing"), sorted by
start. A bad name, an object the collector has no span of, and a collector that does
not answer each get a message and exit 1, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import requests
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kubelab import tracing
from kubelab.api import resources

from .output import EXIT_ERROR, EXIT_INTERRUPTED, CommandError

Span = dict[str, Any]
Fetch = Callable[[dict[str, Any]], list[Span]]
"""The collector's query API: parameters in, spans (public shape) out."""

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


class CollectorUnreachable(CommandError):
    """The collector did not answer, or answered with an error."""


def collector_fetch(url: str, timeout: float = 10.0) -> Fetch:
    """The query API of the collector at `url`."""

    def fetch(params: dict[str, Any]) -> list[Span]:
        try:
            answer = requests.get(f"{url}/api/v1/spans", params=params, timeout=timeout)
        except requests.RequestException as e:
            raise CollectorUnreachable(
                f"cannot reach the trace collector at {url} ({type(e).__name__}). Start it "
                "with `python -m controlplane.collector --data-dir DIR`, or name where it "
                f"runs with --collector URL or {COLLECTOR_VARIABLE}"
            ) from e
        if answer.status_code != 200:
            raise CollectorUnreachable(
                f"the trace collector at {url} answered {answer.status_code}: "
                f"{answer.text.strip()[:200]}"
            )
        spans: list[Span] = answer.json()["spans"]
        return spans

    return fetch


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
    frontier = {s["object"]["uid"] for s in found.values() if s["object"]}
    seen: set[str] = set()
    while frontier - seen:
        uid = min(frontier - seen)
        seen.add(uid)
        children = fetch({"owner_uid": uid})
        add(children)
        frontier |= {s["object"]["uid"] for s in children if s["object"]}
    traces = {s["trace_id"] for s in found.values()}
    traces |= {link["trace_id"] for s in found.values() for link in s["links"]}
    ordered = sorted(traces)
    for i in range(0, len(ordered), 50):  # a bounded URL per request
        add(fetch({"trace_id": ordered[i : i + 50]}))
    return sorted(found.values(), key=lambda s: (s["start"], s["span_id"]))


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _millis(seconds: float) -> str:
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
    start = min(_time(s["start"]) for s in spans)
    finish = max(_time(s["end"]) for s in spans)
    total = max((finish - start).total_seconds(), 1e-6)
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("step", "component", "node", "span", "start", "duration", "waterfall"):
        right = column in ("start", "duration")
        table.add_column(column, justify="right" if right else "left", no_wrap=column != "span")
    for depth, heading, members in _groups(spans):
        table.add_row("", "", "", Text("  " * depth + heading, style="bold"), "", "", "")
        for span in members:
            offset = (_time(span["start"]) - start).total_seconds()
            duration = (_time(span["end"]) - _time(span["start"])).total_seconds()
            cells = (_millis(offset), _millis(duration), _bar(offset, duration, total))
            agent = str(span["attributes"].get(USER_AGENT, ""))
            if span["component"] == "apiserver" and agent.startswith("kubectl"):
                table.add_row("1", "kubectl", "", "  " * (depth + 1) + agent, *cells)
            step = STEPS.get(span["component"], "")
            name = "  " * (depth + 1) + span["name"]
            table.add_row(step, span["component"], span["node"], name, *cells)
    console.print(table)


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
        "--collector",
        default=os.environ.get(COLLECTOR_VARIABLE, DEFAULT_COLLECTOR),
        metavar="URL",
        help=f"the trace collector (default: ${COLLECTOR_VARIABLE} or {DEFAULT_COLLECTOR})",
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="labctl trace", description=DESCRIPTION)
    add_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, fetch: Fetch | None = None) -> int:
    """`labctl trace` from its arguments alone; `fetch` replaces the collector's query API
    (tests)."""
    return run(parse_args(argv), fetch)


def run(args: argparse.Namespace, fetch: Fetch | None = None) -> int:
    """Print the trace of the object `args` names; return the exit status."""
    try:
        kind_text, slash, name = args.object.partition("/")
        if not slash or not kind_text or not name or "/" in name:
            raise CommandError(
                f"name the object as KIND/NAME (e.g. deployment/nginx), not {args.object!r}"
            )
        kind, namespaced = resolve_kind(kind_text)
        namespace = args.namespace if namespaced else ""
        spans = gather(fetch or collector_fetch(args.collector), kind, namespace, name)
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
