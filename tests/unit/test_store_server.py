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


def single_member_config(data_dir: Path) -> NodeConfig:
    """A one-member cluster with fast ticks: it elects itself in tens of milliseconds."""
    port = _free_port()
    return NodeConfig(
        name="s1",
        data_dir=data_dir,
        peer_listen=("127.0.0.1", port),
        initial_cluster={"s1": ("127.0.0.1", port)},
        tick_interval=0.01,
        election_ticks=5,
    )


@asynccontextmanager
async def serving(data_dir: Path) -> AsyncIterator[tuple[TestClient[Any, Any], Store]]:
    """A single-member store, served through aiohttp's test client."""
    store = Store(single_member_config(data_dir), quota_bytes=0, progress_interval=600.0)
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


# -- the gateway's edges (issue 14): what once answered a 500, and etcd's bounds ----------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"key": "aw==", "limit": str(2**63)}, "out of range for int64"),
        ({"key": "aw==", "limit": -(2**63) - 1}, "out of range for int64"),
        ({"key": "aw==", "revision": "9" * 5000}, "out of range"),
        ({"key": "aw==", "limit": "1e3"}, "not an integer"),
        ({"key": "aw==", "limit": "010"}, "not an integer"),
        ({"key": "aw==", "limit": "1_0"}, "not an integer"),
        ({"key": "aw==", "sort_order": 7}, "sort_order"),
        ({"key": "aw==", "sort_target": 7}, "sort_target"),
        ({"key": "aw==", "sort_order": True}, "sort_order"),
        ({"key": "\u00e9"}, "base64"),
    ],
)
def test_range_fields_are_held_to_their_protobuf_types(body: Any, field: str) -> None:
    with pytest.raises(gateway.BadRequest, match=field):
        gateway.range_request(body)


def test_integer_bounds_are_etcds() -> None:
    """int64 and uint64 limits are accepted up to the last value, as etcd accepts them;
    base64 may hold line breaks, as Go's decoder skips them."""
    req, _ = gateway.range_request({"key": "Y\r\nQ==", "limit": str(2**63 - 1), "revision": " 7 "})
    assert (req.key, req.limit, req.revision) == (b"a", 2**63 - 1, 7)
    assert gateway.alarm_request({"memberID": str(2**64 - 1)})[1] == 2**64 - 1
    with pytest.raises(gateway.BadRequest, match="uint64"):
        gateway.alarm_request({"memberID": "-1"})
    with pytest.raises(gateway.BadRequest, match="uint64"):
        gateway.member_id({"ID": str(2**64)}, "member remove")
    with pytest.raises(gateway.BadRequest, match="int64"):
        gateway.lease_id({"ID": str(2**63)})


def test_txn_ops_and_nesting_are_unambiguous() -> None:
    """Two kinds in one op are refused (etcd drops one silently), as is an enum number
    that names nothing (etcd: `result: 7` makes the compare always true) and a nesting
    deeper than MAX_TXN_DEPTH."""
    two = {"request_range": {"key": "aw=="}, "request_put": {"key": "aw=="}}
    with pytest.raises(gateway.BadRequest, match="exactly one"):
        gateway.txn_request({"success": [two]})
    with pytest.raises(gateway.BadRequest, match="result"):
        gateway.txn_request({"compare": [{"key": "aw==", "result": 7}]})
    body: dict[str, Any] = {}
    for _ in range(gateway.MAX_TXN_DEPTH - 1):
        body = {"success": [{"request_txn": body}]}
    gateway.txn_request(body)
    with pytest.raises(gateway.BadRequest, match="nested"):
        gateway.txn_request({"success": [{"request_txn": body}]})


@pytest.mark.parametrize(
    "raw",
    [
        b'{"key": "\xff"}',
        b"[" * 100_000 + b"]" * 100_000,
        b"\xff\xfe{\x00}\x00",
        b'{"limit": ' + b"9" * 5000 + b"}",
    ],
    ids=["invalid UTF-8", "nested 100,000 deep", "UTF-16", "5000-digit number"],
)
def test_undecodable_bodies_are_a_400_not_a_500(tmp_path: Path, raw: bytes) -> None:
    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        for path in ("/v3/kv/range", "/v3/kv/put", "/v3/watch", "/v3/lease/keepalive"):
            r = await client.post(path, data=raw)
            body = await r.json()
            assert (r.status, body["code"]) == (400, 3), (path, body)

    run(tmp_path, scenario)


def test_a_stream_split_inside_a_character_is_decoded_whole(tmp_path: Path) -> None:
    """A stream is decoded as it arrives: a character split across two chunks is still
    one character (here a bad key, so the answer names the key, not the encoding)."""

    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        data = json.dumps({"create_request": {"key": "\u00e9"}}, ensure_ascii=False).encode()
        cut = data.index("\u00e9".encode()) + 1

        async def chunks() -> AsyncIterator[bytes]:
            yield data[:cut]
            await asyncio.sleep(0.05)
            yield data[cut:]

        r = await client.post("/v3/watch", data=chunks())
        body = await r.json()
        assert (r.status, body["code"]) == (400, 3) and body["message"].startswith("key:")

    run(tmp_path, scenario)


def test_watch_edges_answer_as_etcd_does(tmp_path: Path) -> None:
    """An empty message is ignored; a range_end not after the key is cancelled at once
    with etcd's reason and watch_id -1; a start revision beyond int64 is a 400."""

    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        empty = json.dumps({"create_request": {"key": b64(b"b"), "range_end": b64(b"a")}})
        good = json.dumps({"create_request": {"key": b64(b"k")}})
        canceled, created = await stream_lines(client, "/v3/watch", "{}" + empty + good, 2)
        assert canceled["result"]["watch_id"] == "-1"
        assert canceled["result"]["canceled"] is True and canceled["result"]["created"] is True
        assert canceled["result"]["cancel_reason"] == "mvcc: watcher range is empty"
        assert created["result"]["created"] is True and "canceled" not in created["result"]
        far = {"create_request": {"key": b64(b"k"), "start_revision": str(2**70)}}
        status, body = await call(client, "/v3/watch", far)
        assert (status, body["code"]) == (400, 3) and "start_revision" in body["message"]

    run(tmp_path, scenario)


def test_txn_sub_responses_carry_only_a_revision(tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        ops = [{"request_put": {"key": b64(b"t"), "value": b64(b"v")}},
               {"request_range": {"key": b64(b"t")}}]  # fmt: skip
        status, body = await call(client, "/v3/kv/txn", {"success": ops})
        assert status == 200
        assert sorted(body["header"]) == ["cluster_id", "member_id", "raft_term", "revision"]
        for resp in body["responses"]:
            (inner,) = resp.values()
            assert inner["header"] == {"revision": body["header"]["revision"]}

    run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("failure", "told"),
    [
        (OSError(28, "No space left on device"), "a storage failure: [Errno 28]"),
        (KeyError("bug"), "an internal error (KeyError: 'bug'); see the member's log"),
    ],
)
def test_a_member_whose_raft_loop_failed_says_why(
    tmp_path: Path, failure: BaseException, told: str
) -> None:
    """A failed write to the WAL (a full disk) or a bug stops the member's Raft loop;
    the request in flight and every later one are refused naming which it was, not
    always "storage"."""

    async def scenario(client: TestClient[Any, Any], store: Store) -> None:
        wal = store.node._wal
        assert wal is not None

        def fail(*args: object) -> None:
            raise failure

        wal.save = fail  # type: ignore[method-assign,assignment]
        # The write in flight when the loop stopped, then one that came after.
        for _ in range(2):
            status, body = await call(client, "/v3/kv/put", {"key": b64(b"k"), "value": b64(b"v")})
            assert status == 500 and body["code"] == 13
            assert f"member stopped after {told}" in body["message"]

    run(tmp_path, scenario)
