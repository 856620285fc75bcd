"""The node agents' shared pieces without a kernel: the restore input `Tables` renders,
how `Iptables` hooks and removes its chains, and the `SyncLoop` that drives a sync."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from kubelab import tracing
from kubelab.client import ClientConfig, RestClient, SharedInformer, resource_for
from kubelab.iptables import Iptables, Jump, Tables
from kubelab.nodeagent import SyncLoop, SyncTracing
from tests.waiting import until

SERVICES = resource_for("v1", "Service")


def test_tables_declare_fill_and_delete_chains_in_one_input_per_table() -> None:
    t = Tables()
    t.add("nat", "MY-CHAIN", "-m", "comment", "--comment", "a b", "-j", "RETURN")
    t.delete("nat", "MY-OLD")
    t.chain("filter", "MY-EMPTY")
    assert t.render().splitlines() == [
        "*nat",
        ":MY-CHAIN - [0:0]",
        ":MY-OLD - [0:0]",
        '-A MY-CHAIN -m comment --comment "a b" -j RETURN',
        "-X MY-OLD",
        "COMMIT",
        "*filter",
        ":MY-EMPTY - [0:0]",
        "COMMIT",
    ]


class Kernel:
    """A fake iptables: `present` jumps answer -C with 0, -D removes one copy."""

    def __init__(self, jumps: list[list[str]], chains: str = "") -> None:
        self.jumps = jumps
        self.chains = chains
        self.calls: list[list[str]] = []

    def __call__(
        self, argv: Sequence[str], stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = list(argv)
        self.calls.append(argv)
        code, out = 0, ""
        if "-C" in argv:
            code = 0 if argv[argv.index("-C") + 1 :] in self.jumps else 1
        elif "-D" in argv:
            rule = argv[argv.index("-D") + 1 :]
            code = 0 if rule in self.jumps else 1
            if code == 0:
                self.jumps.remove(rule)
        elif argv[0] == "iptables-save":
            out = self.chains
        return subprocess.CompletedProcess(argv, code, out, "")


JUMP = Jump("nat", "POSTROUTING", "MY-CHAIN", comment="mine")
RULE = ["POSTROUTING", "-m", "comment", "--comment", "mine", "-j", "MY-CHAIN"]


def test_a_jump_is_inserted_once() -> None:
    kernel = Kernel([])
    Iptables(kernel).ensure_jumps([JUMP])
    kernel.jumps.append(RULE)
    Iptables(kernel).ensure_jumps([JUMP])
    assert [c for c in kernel.calls if "-I" in c] == [
        ["iptables", "--wait", "-t", "nat", "-I", *RULE]
    ]


def test_remove_deletes_every_copy_of_a_jump_then_only_the_chains_that_exist() -> None:
    kernel = Kernel([RULE, RULE], chains="*nat\n:POSTROUTING ACCEPT [0:0]\n:MY-CHAIN - [0:0]\n")
    Iptables(kernel).remove([JUMP], {"nat": ["MY-CHAIN", "MY-GONE"]})
    assert kernel.jumps == []
    restore = [c for c in kernel.calls if c[0] == "iptables-restore"]
    assert len(restore) == 1


def test_the_sync_loop_syncs_at_start_on_a_poke_and_again_after_a_failure() -> None:
    calls: list[int] = []
    fail_once = threading.Event()

    def sync() -> None:
        calls.append(1)
        if fail_once.is_set():
            fail_once.clear()
            raise RuntimeError("the first retry fails")

    loop = SyncLoop("test", sync, min_interval=0.0, resync=60.0, max_backoff=1.0)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=([], stop), daemon=True)
    thread.start()
    try:
        until(lambda: loop.syncs == 1, "the first sync", timeout=5)
        fail_once.set()
        loop.poke()
        # The failed sync is retried after the back-off (1 s here), with no new poke.
        until(lambda: loop.syncs == 2, "the retry after a failed sync", timeout=5)
        assert len(calls) == 3
    finally:
        stop.set()
        loop.poke()
        thread.join(5)
    assert not thread.is_alive()


def test_a_traced_sync_links_to_the_writers_of_the_objects_that_changed() -> None:
    exporter = InMemorySpanExporter()
    traced = tracing.setup("kube-proxy", "w1", CollectorRegistry(), exporter=exporter)
    writer = traced.tracer.start_span("kubectl expose")
    service: dict[str, Any] = {"metadata": {"name": "web", "namespace": "ns", "uid": "s1"}}
    tracing.inject(service["metadata"], trace.set_span_in_context(writer))
    informer = SharedInformer(RestClient(ClientConfig(server="http://127.0.0.1:1")), SERVICES)
    synced: list[int] = []
    loop = SyncLoop(
        "proxy",
        lambda: synced.append(1),
        sync_tracing=SyncTracing(traced.tracer, "Proxy.sync", "Proxy.syncRules"),
    )
    informer.indexer.add(service)
    loop.watch(informer)  # the cached Service is notified as added
    loop._traced_sync()
    loop._traced_sync()  # a resync that no change caused: not traced
    traced.force_flush()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"Proxy.sync", "Proxy.syncRules"}
    sync, rules = spans["Proxy.sync"], spans["Proxy.syncRules"]
    assert sync.parent is None  # a trace of its own ...
    writer_context = writer.get_span_context()
    assert [link.context.span_id for link in sync.links] == [writer_context.span_id]
    assert rules.parent is not None and rules.parent.span_id == sync.context.span_id
    assert rules.attributes is not None and rules.attributes[tracing.OBJECT_UID] == "s1"
    assert rules.attributes[tracing.OBJECT_KIND] == "Service"
    assert [link.context.trace_id for link in rules.links] == [writer_context.trace_id]
    assert len(synced) == 2
