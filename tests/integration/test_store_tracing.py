"""A traced write through three real store processes, into the real collector: the
client's put through a follower is the follower's `Store.put` and `Raft.propose`, every
member's `Raft.fsync` and `Raft.apply` (the same revision everywhere) and the leader's
`Raft.commit` naming the quorum, all in the client's trace; and tracing on costs the
store nothing visible: an untraced put adds no span."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client import CollectorRegistry

from kubelab import tracing
from kubelab.storeclient import StoreClient
from lab.localcluster import LocalCluster, free_port
from tests.integration.test_collector_process import healthy
from tests.waiting import until


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "controlplane.collector", "--bind-address", "127.0.0.1"]
    command += ["--port", str(port), "--data-dir", str(tmp_path / "collector")]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL, env=os.environ)
    try:
        until(lambda: healthy(url), "the collector's /healthz")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def spans_of(url: str, trace_id: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{url}/api/v1/spans", params={"trace_id": trace_id}, timeout=10)
    spans: list[dict[str, Any]] = answer.json()["spans"]
    return spans


def test_a_traced_put_is_traced_on_every_member_in_the_clients_trace(
    tmp_path: Path, collector: str
) -> None:
    cluster = LocalCluster(tmp_path / "lab", 3, extra_args=["--tracing-endpoint", collector])
    cluster.start_all()
    try:
        leader = cluster.wait_leader()
        follower = next(m for m in cluster.members if m is not leader)
        apiserver = tracing.setup("apiserver", "control-plane1", CollectorRegistry(), collector)
        client = StoreClient([follower.client_url], timeout=10)
        client.put("/registry/untraced", "x")
        with apiserver.tracer.start_as_current_span("apiserver request") as request:
            revision = client.put("/registry/pods/default/web", "{}").header.revision
        apiserver.force_flush()
        apiserver.shutdown()
        client.close()
        trace_id = f"{request.get_span_context().trace_id:032x}"
        names = {m.name for m in cluster.members}

        def every_member_reported() -> bool:
            found = spans_of(collector, trace_id)
            applied = {s["node"] for s in found if s["name"] == "Raft.apply"}
            return applied == names and any(s["name"] == "Raft.commit" for s in found)

        # The members export every 5 s.
        until(every_member_reported, "every member's spans of the put", timeout=40)
        found = spans_of(collector, trace_id)
        by_id = {s["span_id"]: s for s in found}
        (put,) = [s for s in found if s["name"] == "Store.put"]
        (propose,) = [s for s in found if s["name"] == "Raft.propose"]
        (commit,) = [s for s in found if s["name"] == "Raft.commit"]
        assert put["component"] == "store" and put["node"] == follower.name
        assert by_id[put["parent_span_id"]]["name"] == "apiserver request"
        assert propose["parent_span_id"] == put["span_id"]
        assert propose["node"] == follower.name
        assert commit["node"] == leader.name
        assert commit["parent_span_id"] == propose["span_id"]
        assert len(commit["attributes"]["kubelab.raft.acknowledged"]) >= 2
        applies = [s for s in found if s["name"] == "Raft.apply"]
        assert {s["attributes"]["kubelab.store.revision"] for s in applies} == {revision}
        fsyncs = {s["node"] for s in found if s["name"] == "Raft.fsync"}
        assert fsyncs == names
        assert all(
            s["parent_span_id"] == propose["span_id"]
            for s in found
            if s["name"] in ("Raft.fsync", "Raft.apply")
        )
        assert {s["component"] for s in found} == {"apiserver", "store"}
        everything = requests.get(f"{collector}/api/v1/spans", timeout=10).json()["spans"]
        assert {s["trace_id"] for s in everything} == {trace_id}, "the untraced put made spans"
    finally:
        cluster.stop_all()
