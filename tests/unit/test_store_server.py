"""The store's HTTP API in process: one member, its JSON gateway, no child processes.

Each test pins an answer that the differential tests (tests/integration/
test_store_differential.py) found differing from etcd 3.4's and that was fixed: the
expected values are what a real etcd 3.4.23 answered.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controlplane.store import gateway
from controlplane.store.node import NodeConfig
from controlplane.store.server import MAX_BODY_BYTES, MAX_REQUEST_BYTES, Store
from controlplane.store.service import NOSPACE, StoreStateMachine, alarm_command

Scenario = Callable[[TestClient[Any, Any], Store], Awaitable[None]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@asynccontextmanager
async def serving(data_dir: Path) -> AsyncIterator[tuple[TestClient[Any, Any], Store]]:
    """A single-member store (fast ticks: it elects itself in tens of milliseconds)."""
    port = _free_port()
    config = NodeConfig(
        name="s1",
        data_dir=data_dir,
        peer_listen=("127.0.0.1", port),
        initial_cluster={"s1": ("127.0.0.1", port)},
        tick_interval=0.01,
        election_ticks=5,
    )
    store = Store(config, quota_bytes=0, progress_interval=600.0)
    await store.start()
    try:
        while not store.node.status().leader:
            await asyncio.sleep(0.01)
        async with TestClient(TestServer(store.app())) as client:
            yield client, store
    finally:
        await store.stop()


def run(tmp_path: Path, scenario: Scenario) -> None:
    async def main() -> None:
        async with serving(tmp_path) as (client, store):
            await scenario(client, store)

    asyncio.run(main())


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def call(client: TestClient[Any, Any], path: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, str) else json.dumps(body)
    r = await client.post(path, data=data)
    return r.status, await r.json()


async def stream_lines(client: TestClient[Any, Any], path: str, body: str, n: int) -> list[Any]:
    """The first `n` frames of a streamed call."""
    r = await client.post(path, data=body)
    assert r.status == 200, await r.text()
    frames = []
    while len(frames) < n:
        line = await asyncio.wait_for(r.content.readline(), 5)
        if not line:
            break
        frames.append(json.loads(line))
    r.close()
    return frames


def test_failed_precondition_is_http_412_as_grpc_gateway_maps_it(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        assert (await call(client, "/v3/lease/grant", {"ID": "7", "TTL": "30"}))[0] == 200
        status, body = await call(client, "/v3/lease/grant", {"ID": "7", "TTL": "30"})
        assert (status, body["code"]) == (412, 9)
        assert body["message"] == "etcdserver: lease already exists"

    run(tmp_path, scenario)


def test_cluster_calls_answer_with_a_header_without_revision(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        status, body = await call(client, "/v3/cluster/member/list", {})
        assert status == 200
        assert sorted(body["header"]) == ["cluster_id", "member_id", "raft_term"]

    run(tmp_path, scenario)


def test_watch_from_a_compacted_revision_is_canceled_as_etcd_does(tmp_path: Path) -> None:
    """etcd: compact_revision, a header without revision, and no cancel_reason."""

    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        for value in (b"1", b"2", b"3"):
            await call(client, "/v3/kv/put", {"key": b64(b"k"), "value": b64(value)})
        await call(client, "/v3/kv/compaction", {"revision": "3"})
        create = {"create_request": {"key": b64(b"k"), "start_revision": "2"}}
        created, canceled = await stream_lines(client, "/v3/watch", json.dumps(create), 2)
        assert created["result"]["created"] is True
        result = canceled["result"]
        assert sorted(result["header"]) == ["cluster_id", "member_id", "raft_term"]
        assert {k: v for k, v in result.items() if k != "header"} == {
            "canceled": True,
            "compact_revision": "3",
        }

    run(tmp_path, scenario)


def test_watch_catching_up_reports_the_store_revision(tmp_path: Path) -> None:
    """History sent at creation carries the store's revision, not its last event's: here
    a later write to another key makes the two differ."""

    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        await call(client, "/v3/kv/put", {"key": b64(b"k"), "value": b64(b"1")})
        await call(client, "/v3/kv/put", {"key": b64(b"other"), "value": b64(b"1")})
        create = {"create_request": {"key": b64(b"k"), "start_revision": "1"}}
        _, history = await stream_lines(client, "/v3/watch", json.dumps(create), 2)
        assert history["result"]["header"]["revision"] == "3"
        assert [e["kv"]["mod_revision"] for e in history["result"]["events"]] == ["2"]

    run(tmp_path, scenario)


def test_malformed_watch_requests_get_an_error_not_a_silent_stream(tmp_path: Path) -> None:
    """A bad first request is a plain 400; a bad later one ends the stream with an error
    frame in grpc-gateway's shape (before, both left the stream open and silent)."""

    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        status, body = await call(client, "/v3/watch", {"create_request": {"key": 5}})
        assert (status, body["code"]) == (400, 3) and "key" in body["message"]
        good = json.dumps({"create_request": {"key": b64(b"k")}})
        bad = json.dumps({"create_request": {"key": b64(b"k"), "filters": ["NOPE"]}})
        created, error = await stream_lines(client, "/v3/watch", good + bad, 2)
        assert created["result"]["created"] is True
        assert error["error"]["grpc_code"] == 3 and error["error"]["http_code"] == 400
        assert "filters" in error["error"]["message"]

    run(tmp_path, scenario)


def test_malformed_keepalive_is_a_400(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        status, body = await call(client, "/v3/lease/keepalive", {"ID": "x"})
        assert (status, body["code"]) == (400, 3) and "ID" in body["message"]

    run(tmp_path, scenario)


def test_alarm_calls_answer_like_etcd(tmp_path: Path) -> None:
    """No header; ACTIVATE and DEACTIVATE name the alarm they changed; GET filters."""

    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        me = str(store.node.id)
        nospace = [{"memberID": me, "alarm": "NOSPACE"}]
        path = "/v3/maintenance/alarm"
        assert await call(client, path, {"action": "GET"}) == (200, {})
        activate = {"action": "ACTIVATE", "memberID": me, "alarm": "NOSPACE"}
        assert await call(client, path, activate) == (200, {"alarms": nospace})
        assert await call(client, path, {"action": "GET"}) == (200, {"alarms": nospace})
        assert await call(client, path, {"action": "GET", "alarm": "CORRUPT"}) == (200, {})
        health = await client.get("/health")
        assert (health.status, await health.json()) == (
            503,
            {"health": "false", "reason": "ALARM NOSPACE"},
        )
        deactivate = {"action": "DEACTIVATE", "memberID": me, "alarm": "NOSPACE"}
        assert await call(client, path, deactivate) == (200, {"alarms": nospace})
        assert await call(client, path, deactivate) == (200, {})
        status, body = await call(client, path, {"action": "ACTIVATE", "alarm": "CORRUPT"})
        assert (status, body["code"]) == (400, 3)

    run(tmp_path, scenario)


def test_alarm_entries_answer_with_the_alarm_they_changed() -> None:
    sm = StoreStateMachine()
    assert sm.apply(1, alarm_command(False)) == []
    assert sm.apply(2, alarm_command(True)) == [NOSPACE]
    assert sm.apply(3, alarm_command(True)) == [NOSPACE]
    assert sm.apply(4, alarm_command(False)) == [NOSPACE]
    assert sm.alarms == set()


def test_health_and_version_answer_as_etcd_34(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        health = await client.get("/health")
        assert (health.status, await health.json()) == (200, {"health": "true"})
        version = await client.get("/version")
        assert sorted(await version.json()) == ["etcdcluster", "etcdserver"]

    run(tmp_path, scenario)


def test_request_size_is_measured_on_the_request_not_its_json(tmp_path: Path) -> None:
    """etcd takes a value just under 1.5 MiB (its JSON, in base64, is 2 MiB) and refuses
    one just over; a body beyond the gRPC-sized limit is refused before decoding."""

    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        def put(size: int) -> dict[str, str]:
            return {"key": b64(b"big"), "value": b64(b"x" * size)}

        status, _ = await call(client, "/v3/kv/put", put(MAX_REQUEST_BYTES - 1024))
        assert status == 200
        for size in (MAX_REQUEST_BYTES + 16, MAX_BODY_BYTES):
            status, body = await call(client, "/v3/kv/put", put(size))
            assert (status, body) == (
                400,
                {
                    "error": "etcdserver: request is too large",
                    "message": "etcdserver: request is too large",
                    "code": 3,
                },
            )
        assert store.sm.mvcc.revision == 2

    run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"create_request": {"key": "aw==", "prefix": True}}, "prefix"),
        ({"create_request": {"key": "aw==", "filters": "NOPUT"}}, "filters"),
        ({"create_request": {"key": "aw==", "filters": [True]}}, "filters"),
        ({"create_request": {"key": "aw==", "filters": [{}]}}, "filters"),
        ({"create_request": {}, "cancel_request": {}}, "exactly one"),
        ({"cancel_request": {"watch_id": "x"}}, "watch_id"),
        ([], "JSON object"),
    ],
)
def test_watch_requests_are_decoded_strictly(body: Any, field: str) -> None:
    with pytest.raises(gateway.BadRequest, match=field):
        gateway.watch_request(body)


def test_watch_request_filters_by_name_or_number() -> None:
    req = gateway.watch_request({"create_request": {"key": "aw==", "filters": ["NOPUT", 1]}})
    assert isinstance(req, gateway.WatchCreate)
    assert (req.key, req.filter_put, req.filter_delete) == (b"k", True, True)
    assert isinstance(gateway.watch_request({"progress_request": {}}), gateway.WatchProgress)


def test_metrics_have_etcds_types(tmp_path: Path) -> None:
    """etcd exposes leader changes and failed proposals as counters, the rest as gauges
    (a dashboard's rate() and Prometheus's type checks rely on it)."""

    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        text = await (await client.get("/metrics")).text()
        types = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE"))
        assert types["etcd_server_leader_changes_seen_total"] == "counter"
        assert types["etcd_server_proposals_failed_total"] == "counter"
        assert types["etcd_server_proposals_committed_total"] == "gauge"
        assert types["etcd_disk_wal_fsync_duration_seconds"] == "histogram"

    run(tmp_path, scenario)


def test_zero_fields_are_left_out_as_proto3_does(tmp_path: Path) -> None:
    """Time-to-live of lease 0 has no ID; a defragment answer has not even a header."""

    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        status, body = await call(client, "/v3/lease/timetolive", {"ID": "0"})
        assert (status, sorted(body)) == (200, ["TTL", "header"])
        assert await call(client, "/v3/maintenance/defragment", {}) == (200, {})

    run(tmp_path, scenario)
