"""The collector as its own process (`python -m controlplane.collector`): a component's
spans reach it through the SDK's OTLP exporter and come back from the query API; it keeps
its bound, stops on SIGTERM with exit 0, and refuses bad flags with a message."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import requests
from prometheus_client import CollectorRegistry

from kubelab import tracing
from tests.waiting import until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def healthy(url: str) -> bool:
    try:
        return requests.get(f"{url}/healthz", timeout=2).ok
    except requests.ConnectionError:
        return False


def test_the_collector_process_receives_keeps_and_answers(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "controlplane.collector", "--bind-address", "127.0.0.1"]
    command += ["--port", str(port), "--data-dir", str(tmp_path), "--max-traces", "2"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=os.environ)
    try:
        until(lambda: healthy(url), "the collector's /healthz")
        traced = tracing.setup("controller-manager", "control-plane1", CollectorRegistry(), url)
        for name in ("first", "second", "third"):
            with traced.tracer.start_as_current_span(name):
                pass
            traced.force_flush()
        traced.shutdown()
        spans = requests.get(f"{url}/api/v1/spans", timeout=10).json()["spans"]
        assert [s["name"] for s in spans] == ["second", "third"]
        assert {s["component"] for s in spans} == {"controller-manager"}
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert "at most 2 traces" in stderr


def test_bad_bounds_are_refused_with_a_message(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "controlplane.collector", "--data-dir", str(tmp_path)]
    done = subprocess.run([*command, "--max-traces", "0"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "the bounds must be positive" in done.stderr
