"""Property tests of the MVCC state machine: commands round-trip, replicas restored from a
snapshot stay identical, and history, event log, listeners and leases agree."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlplane.store.mvcc import (
    CompactionRequest,
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    Event,
    EventType,
    KeyValue,
    LeaseGrantRequest,
    LeaseRevokeRequest,
    MVCCError,
    MVCCStore,
    PutRequest,
    RangeRequest,
    Request,
    RequestOp,
    SortOrder,
    SortTarget,
    TxnRequest,
    encode_command,
)
from controlplane.store.mvcc.encoding import decode_command
from tests.unit.test_mvcc import assert_same_state

INT_TARGETS = [t for t in CompareTarget if t is not CompareTarget.VALUE]


def request_strategy(
    keys: st.SearchStrategy[bytes],
    ends: st.SearchStrategy[bytes],
    values: st.SearchStrategy[bytes],
    ints: st.SearchStrategy[int],
    leases: st.SearchStrategy[int],
    lease_ids: st.SearchStrategy[int],
    rare: st.SearchStrategy[bool],
) -> st.SearchStrategy[Request]:
    """Requests of every type, nested txns included, built from the given field values."""
    ranges = st.builds(
        RangeRequest,
        keys,
        ends,
        limit=ints,
        revision=ints,
        keys_only=rare,
        count_only=rare,
        sort_order=st.sampled_from(SortOrder),
        sort_target=st.sampled_from(SortTarget),
        min_mod_revision=ints,
        max_mod_revision=ints,
        min_create_revision=ints,
        max_create_revision=ints,
    )
    puts = st.builds(PutRequest, keys, values, leases, st.booleans(), rare, rare)
    deletes = st.builds(DeleteRangeRequest, keys, ends, st.booleans())
    compares = st.one_of(
        st.builds(
            Compare,
            st.sampled_from(CompareResult),
            st.just(CompareTarget.VALUE),
            keys,
            values,
            ends,
        ),
        st.builds(
            Compare, st.sampled_from(CompareResult), st.sampled_from(INT_TARGETS), keys, ints, ends
        ),
    )

    def txns(ops: st.SearchStrategy[RequestOp]) -> st.SearchStrategy[TxnRequest]:
        return st.builds(
            TxnRequest,
            st.lists(compares, max_size=2),
            st.lists(ops, max_size=3),
            st.lists(ops, max_size=3),
        )

    op_trees: st.SearchStrategy[RequestOp] = st.recursive(
        st.one_of(ranges, puts, deletes), txns, max_leaves=8
    )
    return st.one_of(
        ranges,
        puts,
        puts,
        puts,
        deletes,
        txns(op_trees),
        txns(op_trees),
        st.builds(CompactionRequest, ints, st.booleans()),
        st.builds(LeaseGrantRequest, lease_ids, st.sampled_from([-1, 5, 60])),
        st.builds(LeaseRevokeRequest, lease_ids),
    )


# Wide values, for the codec.
any_request = request_strategy(
    keys=st.binary(max_size=6),
    ends=st.binary(max_size=6),
    values=st.binary(max_size=10),
    ints=st.integers(-(2**63), 2**63 - 1),
    leases=st.integers(-(2**63), 2**63 - 1),
    lease_ids=st.integers(-(2**63), 2**63 - 1),
    rare=st.booleans(),
)

# Few keys, revisions and leases, so that ops collide and every rule gets exercised.
store_ops = request_strategy(
    keys=st.sampled_from([b"a", b"a1", b"b", b"c"]),
    ends=st.sampled_from([b"", b"", b"\0", b"b", b"c1", b"a"]),
    values=st.sampled_from([b"", b"x", b"yy"]),
    ints=st.sampled_from([0, 0, 0, 0, 1, 2, 3, 5, 8]),
    leases=st.sampled_from([0, 0, 0, 0, 1, 2]),
    lease_ids=st.sampled_from([1, 2, 0]),
    rare=st.sampled_from([False] * 7 + [True]),
)

# Sequences start by granting the leases puts use, or most leased puts would just fail.
op_sequences = st.lists(store_ops, min_size=20, max_size=50).map(
    lambda ops: [LeaseGrantRequest(1, 60), LeaseGrantRequest(2, 60), *ops]
)

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(store: MVCCStore, index: int, req: Request) -> Any:
    try:
        return store.apply(index, encode_command(req))
    except MVCCError as exc:
        return (type(exc), exc.message)


@settings(max_examples=300, deadline=None)
@given(any_request)
def test_every_request_round_trips_through_its_command(req: Request) -> None:
    assert decode_command(encode_command(req), 1) == req


@SETTINGS
@given(op_sequences, st.data())
def test_a_replica_restored_midway_stays_identical(ops: list[Request], data: st.DataObject) -> None:
    split = data.draw(st.integers(0, len(ops)), label="split")
    leader = MVCCStore()
    for i, op in enumerate(ops[:split]):
        outcome(leader, i, op)
    follower = MVCCStore()
    follower.restore(leader.snapshot())
    assert_same_state(leader, follower)
    for i, op in enumerate(ops[split:], split):
        assert outcome(leader, i, op) == outcome(follower, i, op)
    assert_same_state(leader, follower)


def everything(store: MVCCStore, revision: int) -> list[KeyValue]:
    return store.range(RangeRequest(b"\0", b"\0", revision=revision)).kvs


@SETTINGS
@given(op_sequences)
def test_history_event_log_listeners_and_leases_agree(ops: list[Request]) -> None:
    store = MVCCStore()
    heard: list[tuple[int, list[Event]]] = []
    store.subscribe(lambda rev, events: heard.append((rev, events)))
    for i, op in enumerate(ops):
        outcome(store, i, op)

    start = max(store.compact_revision, 1)
    logged = store.events(b"\0", b"\0", start)
    assert logged == [e for rev, events in heard if rev >= start for e in events]
    assert all(e.kv.mod_revision == rev for rev, events in heard for e in events)
    by_revision: dict[int, list[Event]] = defaultdict(list)
    for e in logged:
        by_revision[e.kv.mod_revision].append(e)

    # Replaying the events onto the state at the compact revision gives every later state.
    state = {kv.key: kv for kv in everything(store, start)}
    for rev in range(start + 1, store.revision + 1):
        before = dict(state)
        for e in by_revision[rev]:
            if e.type is EventType.PUT:
                created = e.kv.create_revision == e.kv.mod_revision
                assert e.prev_kv == (None if created else before.get(e.kv.key))
                state[e.kv.key] = e.kv
            else:
                assert e.prev_kv == before.get(e.kv.key)
                assert e.kv == KeyValue(e.kv.key, 0, rev, 0, b"")
                del state[e.kv.key]
        assert sorted(state.values(), key=lambda kv: kv.key) == everything(store, rev)

    live = everything(store, 0)
    assert all(kv.lease == 0 or kv.lease in store.leases for kv in live)
    for lease_id, lease in store.leases.items():
        assert lease.keys == {kv.key for kv in live if kv.lease == lease_id}
