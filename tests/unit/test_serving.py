"""kubelab.serving: the HTTPS /healthz, /readyz and /metrics of a component, with a
self-signed certificate made once in its --cert-dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client import CollectorRegistry, Counter

from kubelab.serving import HealthServer, serving_context


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, dict[str, str | None]]]:
    problems: dict[str, str | None] = {"cache": None}
    registry = CollectorRegistry()
    Counter("syncs", "Syncs done.", registry=registry).inc(3)
    context = serving_context(None, None, tmp_path, "kube-thing")
    server = HealthServer(
        ("127.0.0.1", 0),
        context,
        registry,
        healthz={"ping": lambda: None},
        readyz={"cache": lambda: problems["cache"]},
    )
    server.start()
    try:
        yield f"https://127.0.0.1:{server.port}", tmp_path / "kube-thing-ca.crt", problems
    finally:
        server.stop()


def test_health_readiness_and_metrics(served: tuple[str, Path, dict[str, str | None]]) -> None:
    base, ca, problems = served

    def get(path: str) -> requests.Response:
        return requests.get(base + path, verify=str(ca), timeout=5)

    assert (get("/healthz").status_code, get("/healthz").text) == (200, "ok")
    assert get("/readyz").text == "ok"
    assert "syncs_total 3.0" in get("/metrics").text
    problems["cache"] = "not synced"
    r = get("/readyz?verbose")
    assert r.status_code == 500
    assert "[+]ping ok" in r.text and "[-]cache failed" in r.text
    assert get("/healthz").status_code == 200  # readiness is not liveness
    assert get("/readyz/ping").status_code == 200
    assert get("/readyz/nothing").status_code == 404
    assert get("/nothing").status_code == 404


def test_the_self_signed_certificate_is_kept_for_the_next_start(tmp_path: Path) -> None:
    serving_context(None, None, tmp_path, "kube-thing")
    first = (tmp_path / "kube-thing.crt").read_bytes()
    serving_context(None, None, tmp_path, "kube-thing")
    assert (tmp_path / "kube-thing.crt").read_bytes() == first
