"""`kubelab.storeclient` against a real etcd: every call, its typed result, its errors.

What these tests assert is etcd's behaviour as seen through its JSON gateway, so that the
same tests can later hold kubelab's store to it. The KV and watch tests (fixture
`kvstore`) also hold `lab.memstore`, the in-process store of the test apiserver, to it.
Each test uses its own key prefix; the module shares one single-member etcd, and tests
that stop members or need TLS start their own.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import requests

from kubelab.storeclient import (
    CompactedError,
    Compare,
    Delete,
    DeleteResult,
    Event,
    FailedPrecondition,
    FutureRevisionError,
    Get,
    GrpcCode,
    InvalidArgument,
    KeyValue,
    KVStore,
    NotFound,
    Put,
    PutResult,
    RangeResult,
    ResourceExhausted,
    StoreClient,
    Txn,
    TxnResult,
    Unavailable,
    Unimplemented,
    Unreachable,
    WatchCreate,
    error_from,
    prefix_end,
)
from lab.memstore import MemStore
from tests.integration.etcd_fixture import (
    ETCD,
    EtcdCluster,
    free_port,
    start_etcd_cluster,
)

needs_etcd = pytest.mark.skipif(
    ETCD is None, reason="etcd not installed (apt-get install etcd-server)"
)


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    if ETCD is None:
        pytest.skip("etcd not installed (apt-get install etcd-server)")
    cluster = start_etcd_cluster(tmp_path_factory.mktemp("etcd"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def client(etcd: EtcdCluster) -> Iterator[StoreClient]:
    with StoreClient(etcd.endpoints) as c:
        yield c


@pytest.fixture(params=["etcd", "memstore"])
def kvstore(request: pytest.FixtureRequest) -> Iterator[KVStore]:
    """The KV and watch expectations hold for a real etcd and for the in-process
    `lab.memstore` the test apiserver runs on alike."""
    if request.param == "memstore":
        with MemStore() as store:
            yield store
    else:
        with StoreClient(request.getfixturevalue("etcd").endpoints) as c:
            yield c


# -- pure helpers ------------------------------------------------------------------------


def test_prefix_end_follows_etcds_rule() -> None:
    assert prefix_end(b"abc") == b"abd"
    assert prefix_end("a\xff".encode("latin-1")) == b"b"
    assert prefix_end(b"\xff\xff") == b"\0"
    assert prefix_end(b"") == b"\0"


def test_errors_map_by_code_and_message() -> None:
    compacted = error_from(11, "etcdserver: mvcc: required revision has been compacted")
    assert isinstance(compacted, CompactedError)
    future = error_from(11, "etcdserver: mvcc: required revision is a future revision")
    assert isinstance(future, FutureRevisionError)
    assert isinstance(error_from(14, "etcdserver: no leader"), Unavailable)
    unknown = error_from(99, "strange")
    assert type(unknown).__name__ == "StoreError" and unknown.code == 99
    assert str(unknown) == "strange"


def test_txn_and_compare_bodies_carry_only_set_fields() -> None:
    """Zero-valued fields are left out (the gateway's style, and a subset server's need),
    except a compare's operand, which selects the field compared."""
    assert Get(b"k").body() == {"key": "aw=="}
    assert WatchCreate(b"k").body() == {"key": "aw=="}
    assert WatchCreate(b"k", b"l", 7, prev_kv=True).body() == {
        "key": "aw==",
        "range_end": "bA==",
        "start_revision": "7",
        "prev_kv": True,
    }
    assert Compare.mod("k", "=", 0).body() == {
        "key": "aw==",
        "target": "MOD",
        "result": "EQUAL",
        "mod_revision": "0",
    }
    nested = Txn([], [Put(b"a", b"1", lease=0x10)], [Delete(b"a", prev_kv=True)])
    assert nested.op() == {
        "request_txn": {
            "success": [{"request_put": {"key": "YQ==", "value": "MQ==", "lease": "16"}}],
            "failure": [{"request_delete_range": {"key": "YQ==", "prev_kv": True}}],
        }
    }


# -- KV ----------------------------------------------------------------------------------


def test_put_get_roundtrip_with_metadata(kvstore: KVStore) -> None:
    first = kvstore.put(b"rt/k", b"v1")
    assert first.prev_kv is None
    assert first.header.revision > 0 and first.header.member_id != 0
    second = kvstore.put("rt/k", "v2", prev_kv=True)
    assert second.prev_kv is not None and second.prev_kv.value == b"v1"
    got = kvstore.get("rt/k")
    assert got.count == 1 and not got.more
    kv = got.kvs[0]
    assert kv == KeyValue(
        b"rt/k", b"v2", first.header.revision, second.header.revision, version=2, lease=0
    )
    assert got.raw["kvs"][0]["key"] == base64.b64encode(b"rt/k").decode()

    missing = kvstore.get("rt/missing")
    assert missing.kvs == [] and missing.count == 0


def test_binary_keys_and_values(kvstore: KVStore) -> None:
    key, value = b"bin/\x00\xff\n", bytes(range(256))
    kvstore.put(key, value)
    assert kvstore.get(key).kvs[0].value == value


def test_ranges_prefix_limit_keys_only_count_only_sort(kvstore: KVStore) -> None:
    for name in ("a", "b", "c"):
        kvstore.put(f"rg/{name}", f"value-{name}")
    kvstore.put("rh", "outside the prefix")

    everything = kvstore.get("rg/", prefix=True)
    assert [kv.key for kv in everything.kvs] == [b"rg/a", b"rg/b", b"rg/c"]

    limited = kvstore.get("rg/", prefix=True, limit=2)
    assert len(limited.kvs) == 2 and limited.more and limited.count == 3

    assert [kv.key for kv in kvstore.get("rg/a", "rg/c").kvs] == [b"rg/a", b"rg/b"]

    keys = kvstore.get("rg/", prefix=True, keys_only=True)
    assert [kv.value for kv in keys.kvs] == [b"", b"", b""]

    counted = kvstore.get("rg/", prefix=True, count_only=True)
    assert counted.kvs == [] and counted.count == 3

    backwards = kvstore.get("rg/", prefix=True, sort_order="DESCEND", sort_target="KEY")
    assert [kv.key for kv in backwards.kvs] == [b"rg/c", b"rg/b", b"rg/a"]

    serial = kvstore.get("rg/a", serializable=True)
    assert serial.kvs[0].value == b"value-a"

    all_keys = kvstore.get(b"", prefix=True, keys_only=True)
    assert {b"rg/a", b"rh"} <= {kv.key for kv in all_keys.kvs}


def test_empty_key_is_invalid_argument(kvstore: KVStore) -> None:
    with pytest.raises(InvalidArgument, match="key is not provided") as info:
        kvstore.put(b"", b"x")
    assert info.value.code == GrpcCode.INVALID_ARGUMENT


def test_reads_at_past_and_future_revisions(kvstore: KVStore) -> None:
    r1 = kvstore.put("rev/k", "one").header.revision
    r2 = kvstore.put("rev/k", "two").header.revision
    assert kvstore.get("rev/k", revision=r1).kvs[0].value == b"one"
    assert kvstore.get("rev/k", revision=r2).kvs[0].value == b"two"
    with pytest.raises(FutureRevisionError, match="future revision") as info:
        kvstore.get("rev/k", revision=r2 + 1000)
    assert info.value.code == GrpcCode.OUT_OF_RANGE


def test_compaction_makes_old_revisions_unreadable(kvstore: KVStore) -> None:
    old = kvstore.put("cmp/k", "old").header.revision
    new = kvstore.put("cmp/k", "new").header.revision
    kvstore.compact(new, physical=True)
    with pytest.raises(CompactedError, match="required revision has been compacted") as info:
        kvstore.get("cmp/k", revision=old)
    assert info.value.code == GrpcCode.OUT_OF_RANGE
    assert kvstore.get("cmp/k", revision=new).kvs[0].value == b"new"
    with pytest.raises(CompactedError):
        kvstore.compact(new)  # compacting to the same revision again


def test_delete_single_range_and_prefix(kvstore: KVStore) -> None:
    for name in ("a", "b", "c"):
        kvstore.put(f"del/{name}", name)
    one = kvstore.delete("del/a", prev_kv=True)
    assert one.deleted == 1 and [kv.value for kv in one.prev_kvs] == [b"a"]
    assert kvstore.delete("del/a").deleted == 0
    rest = kvstore.delete("del/", prefix=True)
    assert rest.deleted == 2 and rest.prev_kvs == []
    assert kvstore.get("del/", prefix=True).count == 0


# -- txn ---------------------------------------------------------------------------------


def test_txn_create_if_absent(kvstore: KVStore) -> None:
    def create(value: str) -> bool:
        return kvstore.txn(
            [Compare.mod("txn/lock", "=", 0)],
            [Put(b"txn/lock", value.encode())],
            [Get(b"txn/lock")],
        ).succeeded

    assert create("first")
    assert not create("second")
    assert kvstore.get("txn/lock").kvs[0].value == b"first"


def test_txn_responses_are_typed_and_nested(kvstore: KVStore) -> None:
    kvstore.put("txn2/a", "1")
    result = kvstore.txn(
        [Compare.value("txn2/a", "=", "1"), Compare.version("txn2/a", ">", 0)],
        [
            Put(b"txn2/b", b"2"),
            Get(b"txn2/", prefix_end(b"txn2/")),
            Delete(b"txn2/a", prev_kv=True),
            # Nested compares are evaluated before any operation of the outer txn:
            # txn2/b does not exist yet for them.
            Txn(
                [Compare.create("txn2/b", "!=", 0)],
                [Put(b"txn2/c", b"then")],
                [Put(b"txn2/c", b"else")],
            ),
        ],
    )
    assert result.succeeded
    put, rng, dele, nested = result.responses
    assert isinstance(put, PutResult) and put.header.revision == result.header.revision
    assert isinstance(rng, RangeResult)
    assert [kv.key for kv in rng.kvs] == [b"txn2/a", b"txn2/b"]
    assert isinstance(dele, DeleteResult) and dele.deleted == 1
    assert isinstance(nested, TxnResult) and not nested.succeeded
    assert kvstore.get("txn2/c").kvs[0].value == b"else"

    failed = kvstore.txn([Compare.value("txn2/a", "=", "1")], [], [Get(b"txn2/b")])
    assert not failed.succeeded
    (got,) = failed.responses
    assert isinstance(got, RangeResult) and got.kvs[0].value == b"2"


def test_txn_with_two_writes_to_one_key_is_invalid(kvstore: KVStore) -> None:
    with pytest.raises(InvalidArgument, match="duplicate key"):
        kvstore.txn([], [Put(b"txn3/k", b"1"), Put(b"txn3/k", b"2")])


def test_txn_lease_compare(client: StoreClient) -> None:
    lease = client.lease_grant(60).id
    client.put("txn4/k", "v", lease=lease)
    assert client.txn([Compare.lease("txn4/k", "=", lease)]).succeeded
    assert not client.txn([Compare.lease("txn4/k", "=", 0)]).succeeded


# -- leases ------------------------------------------------------------------------------


def test_lease_lifecycle(client: StoreClient) -> None:
    grant = client.lease_grant(60)
    assert grant.id > 0 and grant.ttl == 60
    client.put("lease/a", "1", lease=grant.id)
    client.put("lease/b", "2", lease=grant.id)
    assert client.get("lease/a").kvs[0].lease == grant.id

    ttl = client.lease_timetolive(grant.id, keys=True)
    assert ttl.granted_ttl == 60 and 0 < ttl.ttl <= 60
    assert sorted(ttl.keys) == [b"lease/a", b"lease/b"]
    assert client.lease_timetolive(grant.id).keys == []

    alive = client.lease_keepalive_once(grant.id)
    assert alive.id == grant.id and alive.ttl == 60
    assert grant.id in client.lease_leases().ids

    client.lease_revoke(grant.id)
    assert client.get("lease/", prefix=True).count == 0
    gone = client.lease_timetolive(grant.id)
    assert gone.ttl == -1 and gone.granted_ttl == 0
    with pytest.raises(NotFound, match="requested lease not found"):
        client.lease_keepalive_once(grant.id)
    with pytest.raises(NotFound):
        client.lease_revoke(grant.id)


def test_lease_with_chosen_id_and_unknown_lease(client: StoreClient) -> None:
    chosen = 0x7E57_0001
    assert client.lease_grant(30, id=chosen).id == chosen
    with pytest.raises(FailedPrecondition, match="lease already exists"):
        client.lease_grant(30, id=chosen)
    with pytest.raises(NotFound, match="requested lease not found") as info:
        client.put("lease2/k", "v", lease=0x7E57_0002)
    assert info.value.code == GrpcCode.NOT_FOUND


# -- watch -------------------------------------------------------------------------------


def test_watch_from_a_past_revision_with_prev_kv(kvstore: KVStore) -> None:
    start = kvstore.put("w1/k", "a").header.revision
    kvstore.put("w1/k", "b")
    kvstore.delete("w1/k")
    kvstore.put("w1/other", "c")
    with kvstore.watch("w1/", prefix=True, start_revision=start, prev_kv=True) as watch:
        created = next(watch)
        assert created.created and not created.events
        events: list[Event] = []
        while len(events) < 4:
            events.extend(next(watch).events)
    kinds = [(e.type, e.kv.key, e.kv.value) for e in events]
    assert kinds == [
        ("PUT", b"w1/k", b"a"),
        ("PUT", b"w1/k", b"b"),
        ("DELETE", b"w1/k", b""),
        ("PUT", b"w1/other", b"c"),
    ]
    assert events[0].prev_kv is None
    assert events[1].prev_kv is not None and events[1].prev_kv.value == b"a"
    assert events[2].prev_kv is not None and events[2].prev_kv.value == b"b"
    assert events[2].kv.mod_revision == start + 2


def test_watch_sees_live_events_and_close_from_another_thread(kvstore: KVStore) -> None:
    watch = kvstore.watch("w2/k")
    assert next(watch).created
    kvstore.put("w2/k", "live")
    (event,) = next(watch).events
    assert (event.type, event.kv.value) == ("PUT", b"live")

    threading.Timer(0.3, watch.close).start()
    began = time.monotonic()
    assert list(watch) == []  # blocked waiting for events until closed
    assert time.monotonic() - began < 5


def test_watch_from_a_compacted_revision_is_canceled(kvstore: KVStore) -> None:
    old = kvstore.put("w3/k", "old").header.revision
    now = kvstore.put("w3/k", "new").header.revision
    kvstore.compact(now)
    with kvstore.watch("w3/k", start_revision=old) as watch:
        responses = list(watch)
    assert responses[0].created
    last = responses[-1]
    assert last.canceled and last.compact_revision == now and not last.events


def test_watch_progress_notify_is_accepted(kvstore: KVStore) -> None:
    with kvstore.watch("w4/k", progress_notify=True) as watch:
        assert next(watch).created


# -- cluster and maintenance -------------------------------------------------------------


def test_status_member_list_health(etcd: EtcdCluster, client: StoreClient) -> None:
    st = client.status()
    assert st.is_leader and not st.is_learner
    assert st.version.startswith("3.")
    assert st.db_size > 0 and st.raft_index >= st.raft_applied_index > 0 and st.raft_term > 0
    members = client.member_list().members
    assert len(members) == 1
    (m,) = members
    assert m.id == st.header.member_id and m.name == "etcd1"
    assert m.client_urls == etcd.endpoints and not m.is_learner
    health = client.health()
    assert health.healthy and health.endpoint == etcd.endpoints[0]


def test_member_add_learner_promote_refused_then_remove(client: StoreClient) -> None:
    peer = f"http://127.0.0.1:{free_port()}"
    added = client.member_add([peer], is_learner=True)
    new = added.member
    assert new.is_learner and new.peer_urls == [peer] and new.name == ""
    assert new.id in {m.id for m in added.members}
    with pytest.raises(FailedPrecondition, match="in sync with leader"):
        client.member_promote(new.id)
    remaining = client.member_remove(new.id).members
    assert new.id not in {m.id for m in remaining}
    with pytest.raises(NotFound, match="member not found"):
        client.member_remove(new.id)


def test_snapshot_save_streams_the_database_with_its_sha256(
    client: StoreClient, tmp_path: Path
) -> None:
    client.put("snap/k", "v" * 1000)
    target = tmp_path / "etcd.snapshot"
    saved = client.snapshot_save(target)
    data = target.read_bytes()
    assert saved.size == len(data) > 32
    assert not (tmp_path / "etcd.snapshot.part").exists()
    # etcd appends the SHA-256 of the database as the last chunk.
    assert hashlib.sha256(data[:-32]).digest() == data[-32:]


def test_alarms_list_and_disarm(etcd: EtcdCluster, client: StoreClient) -> None:
    assert client.alarm_list().alarms == []
    member_id = client.status().header.member_id
    # Raise a NOSPACE alarm by hand, as etcd does when its quota is exceeded.
    requests.post(
        etcd.endpoints[0] + "/v3/maintenance/alarm",
        json={"action": "ACTIVATE", "memberID": str(member_id), "alarm": "NOSPACE"},
        timeout=5,
    ).raise_for_status()
    try:
        (alarm,) = client.alarm_list().alarms
        assert (alarm.member_id, alarm.alarm) == (member_id, "NOSPACE")
        with pytest.raises(ResourceExhausted, match="database space exceeded"):
            client.put("alarm/k", "v")
    finally:
        disarmed = client.alarm_disarm()
    assert [a.alarm for a in disarmed.alarms] == ["NOSPACE"]
    assert client.alarm_list().alarms == []
    client.put("alarm/k", "v")


def test_unknown_path_is_unimplemented(client: StoreClient) -> None:
    with pytest.raises(Unimplemented, match="HTTP 404"):
        client._post("/v3/no/such/call", {}, idempotent=True)


# -- endpoints and failover --------------------------------------------------------------


def test_fails_over_past_dead_endpoints(etcd: EtcdCluster) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with StoreClient([dead, *etcd.endpoints]) as c:
        c.put("fo/k", "v")
        assert c.last_endpoint == etcd.endpoints[0]
        with c.watch("fo/k", start_revision=1) as watch:
            assert next(watch).created
        assert c.lease_keepalive_once(c.lease_grant(10).id).ttl == 10


def test_all_endpoints_dead_names_each(etcd: EtcdCluster) -> None:
    dead = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    with StoreClient(dead, timeout=1) as c:
        began = time.monotonic()
        with pytest.raises(Unreachable) as info:
            c.get("x")
        assert time.monotonic() - began < 5
        with pytest.raises(Unreachable):
            c.watch("x")
    message = str(info.value)
    assert all(f"{d} (Connection refused)" in message for d in dead)
    assert info.value.code == GrpcCode.UNAVAILABLE


@needs_etcd
def test_watch_raises_unavailable_when_the_member_goes_away(tmp_path: Path) -> None:
    cluster = start_etcd_cluster(tmp_path)
    try:
        c = StoreClient(cluster.endpoints)
        watch = c.watch("gone/k")
        assert next(watch).created
        cluster.stop()
        with pytest.raises(Unavailable):
            next(watch)
    finally:
        cluster.stop()


# -- TLS ---------------------------------------------------------------------------------


@needs_etcd
def test_mutual_tls(tmp_path: Path) -> None:
    cluster = start_etcd_cluster(tmp_path, tls=True)
    try:
        (endpoint,) = cluster.endpoints
        assert endpoint.startswith("https://")
        with StoreClient(
            cluster.endpoints,
            ca_file=cluster.ca_file,
            cert_file=cluster.cert_file,
            key_file=cluster.key_file,
        ) as c:
            c.put("tls/k", "v")
            assert c.get("tls/k").kvs[0].value == b"v"
            with c.watch("tls/k", start_revision=1) as watch:
                next(watch)
                assert next(watch).events[0].kv.value == b"v"
            assert c.lease_keepalive_once(c.lease_grant(10).id).ttl == 10
            assert c.snapshot_save(tmp_path / "snap").size > 0
            assert c.health().healthy

        with pytest.raises(Unreachable, match="TLS"):
            StoreClient(cluster.endpoints, ca_file=cluster.ca_file).get("tls/k")
        with pytest.raises(Unreachable, match="server certificate not trusted"):
            StoreClient(cluster.endpoints).get("tls/k")
    finally:
        cluster.stop()


@needs_etcd
def test_learner_joins_and_is_promoted(tmp_path: Path) -> None:
    cluster = start_etcd_cluster(tmp_path)
    try:
        with StoreClient(cluster.endpoints) as c:
            c.put("join/k", "v")
            joiner = cluster.new_member("etcd2")
            new_id = c.member_add([joiner.peer_url], is_learner=True).member.id
            cluster.join(joiner)
            with StoreClient([joiner.client_url]) as j:
                # A learner serves no linearizable reads; the gateway says UNAVAILABLE.
                with pytest.raises(Unavailable, match="rpc not supported for learner"):
                    j.get("join/k")
                members = _eventually(lambda: c.member_promote(new_id).members)
                assert not {m.id: m for m in members}[new_id].is_learner

                # The learner applies its promotion a moment after the leader does.
                def promoted() -> None:
                    if j.status().is_learner:
                        raise _NotYet

                _eventually(promoted)
                assert j.get("join/k").kvs[0].value == b"v"
                assert j.status().header.member_id == new_id
    finally:
        cluster.stop()


class _NotYet(Exception):
    """Not there yet: try again."""


_R = TypeVar("_R")


def _eventually(attempt: Callable[[], _R], timeout: float = 30.0) -> _R:
    """`attempt()`, retried while it fails with `FailedPrecondition` or `_NotYet`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return attempt()
        except (FailedPrecondition, _NotYet):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
