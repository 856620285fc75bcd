"""The MVCC state machine's etcd v3 semantics.

Expected answers marked "etcd 3.4:" were obtained from a real etcd 3.4.23 running the same
operations on a fresh data directory (through its JSON gateway), so these tests pin our
behaviour to etcd's, quirks included.
"""

from __future__ import annotations

import logging

import pytest

from controlplane.store.mvcc import (
    MAX_TXN_OPS,
    CompactedError,
    CompactionRequest,
    CompactionResponse,
    Compare,
    CompareResult,
    CompareTarget,
    CorruptDataError,
    DeleteRangeRequest,
    DeleteRangeResponse,
    Event,
    EventType,
    FutureRevisionError,
    InvalidRequestError,
    KeyValue,
    LeaseExistsError,
    LeaseGrantRequest,
    LeaseGrantResponse,
    LeaseNotFoundError,
    LeaseRevokeRequest,
    LeaseRevokeResponse,
    LeaseTTLTooLargeError,
    MVCCStore,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    Request,
    RequestOp,
    Response,
    SortOrder,
    SortTarget,
    TxnRequest,
    TxnResponse,
    check_request,
    encode_command,
)

EQ, GT, LT, NE = (
    CompareResult.EQUAL,
    CompareResult.GREATER,
    CompareResult.LESS,
    CompareResult.NOT_EQUAL,
)


def apply(store: MVCCStore, req: Request) -> Response:
    return store.apply(0, encode_command(req))


def put(store: MVCCStore, key: bytes, value: bytes = b"v", **kw: object) -> PutResponse:
    resp = apply(store, PutRequest(key, value, **kw))  # type: ignore[arg-type]
    assert isinstance(resp, PutResponse)
    return resp


def delete(store: MVCCStore, key: bytes, range_end: bytes = b"", **kw: bool) -> DeleteRangeResponse:
    resp = apply(store, DeleteRangeRequest(key, range_end, **kw))
    assert isinstance(resp, DeleteRangeResponse)
    return resp


def txn(
    store: MVCCStore,
    compare: list[Compare],
    success: list[RequestOp],
    failure: list[RequestOp] | None = None,
) -> TxnResponse:
    resp = apply(store, TxnRequest(compare, success, failure or []))
    assert isinstance(resp, TxnResponse)
    return resp


def get(store: MVCCStore, key: bytes, range_end: bytes = b"", **kw: object) -> RangeResponse:
    return store.range(RangeRequest(key, range_end, **kw))  # type: ignore[arg-type]


def keys(resp: RangeResponse) -> list[bytes]:
    return [kv.key for kv in resp.kvs]


def value(store: MVCCStore, key: bytes, revision: int = 0) -> bytes | None:
    kvs = get(store, key, revision=revision).kvs
    return kvs[0].value if kvs else None


def grant(store: MVCCStore, lease_id: int, ttl: int = 60) -> LeaseGrantResponse:
    resp = apply(store, LeaseGrantRequest(lease_id, ttl))
    assert isinstance(resp, LeaseGrantResponse)
    return resp


def revoke(store: MVCCStore, lease_id: int) -> LeaseRevokeResponse:
    resp = apply(store, LeaseRevokeRequest(lease_id))
    assert isinstance(resp, LeaseRevokeResponse)
    return resp


def compact(store: MVCCStore, revision: int) -> CompactionResponse:
    resp = apply(store, CompactionRequest(revision))
    assert isinstance(resp, CompactionResponse)
    return resp


# -- revisions and versions ------------------------------------------------------------


def test_empty_store_is_at_revision_1_and_each_write_bumps_it_by_one() -> None:
    store = MVCCStore()
    assert store.revision == 1  # etcd 3.4: header.revision "1" on a fresh member
    assert put(store, b"a").revision == 2
    assert put(store, b"a").revision == 3
    assert delete(store, b"a").revision == 4
    assert store.revision == 4


def test_version_counts_puts_and_create_revision_resets_on_recreate() -> None:
    store = MVCCStore()
    put(store, b"a", b"1")
    put(store, b"a", b"2")
    assert get(store, b"a").kvs == [KeyValue(b"a", 2, 3, 2, b"2")]
    resp = delete(store, b"a", prev_kv=True)
    assert (resp.deleted, resp.prev_kvs, resp.revision) == (1, [KeyValue(b"a", 2, 3, 2, b"2")], 4)
    put(store, b"a", b"3")
    # etcd 3.4: after delete and re-create, create_revision 5, version 1.
    assert get(store, b"a").kvs == [KeyValue(b"a", 5, 5, 1, b"3")]


def test_deleting_nothing_does_not_bump_the_revision() -> None:
    store = MVCCStore()
    put(store, b"a")
    resp = delete(store, b"zz")
    assert (resp.deleted, resp.revision, store.revision) == (0, 2, 2)
    assert delete(store, b"b", b"c").deleted == 0
    assert store.revision == 2


def test_put_returns_prev_kv_only_when_asked() -> None:
    store = MVCCStore()
    assert put(store, b"a", b"1", prev_kv=True).prev_kv is None
    assert put(store, b"a", b"2").prev_kv is None
    assert put(store, b"a", b"3", prev_kv=True).prev_kv == KeyValue(b"a", 2, 3, 2, b"2")


def test_reads_at_past_revisions_see_the_history() -> None:
    store = MVCCStore()
    put(store, b"a", b"1")  # 2
    put(store, b"a", b"2")  # 3
    delete(store, b"a")  # 4
    put(store, b"a", b"3")  # 5
    assert [value(store, b"a", r) for r in (1, 2, 3, 4, 5)] == [None, b"1", b"2", None, b"3"]
    # etcd 3.4: the header of a past read carries the current revision, not the asked one.
    assert get(store, b"a", revision=2).revision == 5
    # etcd 3.4: a negative revision reads the current one.
    assert value(store, b"a", -1) == b"3"


def test_read_at_a_future_revision_fails_with_out_of_range() -> None:
    store = MVCCStore()
    put(store, b"a")
    with pytest.raises(FutureRevisionError) as info:
        get(store, b"a", revision=3)
    # etcd 3.4: HTTP 400, code 11, this message.
    assert info.value.grpc_code == 11
    assert info.value.message == "etcdserver: mvcc: required revision is a future revision"


# -- ranges ----------------------------------------------------------------------------


def abcde() -> MVCCStore:
    store = MVCCStore()
    for k in (b"a", b"b", b"c", b"d", b"e"):
        put(store, k, k * 2)
    return store


def test_range_end_selects_one_key_a_half_open_range_or_everything_from_key() -> None:
    store = abcde()
    assert keys(get(store, b"b")) == [b"b"]
    assert keys(get(store, b"bb")) == []
    assert keys(get(store, b"b", b"d")) == [b"b", b"c"]
    assert keys(get(store, b"c", b"\0")) == [b"c", b"d", b"e"]
    assert keys(get(store, b"\0", b"\0")) == [b"a", b"b", b"c", b"d", b"e"]
    # etcd 3.4: range_end before key is an empty range, not an error.
    assert keys(get(store, b"d", b"a")) == []


def test_deleted_keys_are_not_in_ranges_or_counts() -> None:
    store = abcde()
    delete(store, b"b")
    resp = get(store, b"a", b"\0")
    assert (keys(resp), resp.count) == ([b"a", b"c", b"d", b"e"], 4)


def test_limit_sets_more_and_count_is_the_whole_range() -> None:
    store = abcde()
    resp = get(store, b"a", b"\0", limit=2)
    assert (keys(resp), resp.more, resp.count) == ([b"a", b"b"], True, 5)
    resp = get(store, b"a", b"\0", limit=5)
    assert (keys(resp), resp.more, resp.count) == ([b"a", b"b", b"c", b"d", b"e"], False, 5)


def test_count_only_and_keys_only() -> None:
    store = abcde()
    resp = get(store, b"a", b"\0", count_only=True, limit=2)
    assert (resp.kvs, resp.more, resp.count) == ([], False, 5)  # etcd 3.4: no "more"
    resp = get(store, b"b", keys_only=True)
    assert resp.kvs == [KeyValue(b"b", 3, 3, 1, b"")]


def sort_fixture() -> MVCCStore:
    """Four keys with versions p/1: 3, p/2: 1, p/3: 2, p/4: 1 (etcd 3.4 ran the same)."""
    store = MVCCStore()
    for k, v in [(b"p/1", b"x"), (b"p/2", b"zz"), (b"p/3", b"a"), (b"p/4", b"m")]:
        put(store, k, v)  # revisions 2..5
    put(store, b"p/1", b"y")  # 6
    put(store, b"p/3", b"b")  # 7
    put(store, b"p/1", b"c")  # 8
    return store


@pytest.mark.parametrize(
    ("options", "expected", "more"),
    [
        # etcd 3.4: without a sort order the first limit+1 keys are taken in key order,
        # then sorted by the target (ascending), then cut to the limit.
        ({"sort_target": SortTarget.VERSION, "limit": 2}, [b"p/2", b"p/3"], True),
        (
            {"sort_target": SortTarget.VERSION, "sort_order": SortOrder.ASCEND},
            [b"p/2", b"p/4", b"p/3", b"p/1"],
            False,
        ),
        (
            {"sort_target": SortTarget.VERSION, "sort_order": SortOrder.DESCEND},
            [b"p/1", b"p/3", b"p/2", b"p/4"],
            False,
        ),
        (
            {"sort_target": SortTarget.VERSION, "sort_order": SortOrder.DESCEND, "limit": 2},
            [b"p/1", b"p/3"],
            True,
        ),
        ({"sort_order": SortOrder.DESCEND, "limit": 3}, [b"p/4", b"p/3", b"p/2"], True),
        (
            {"sort_target": SortTarget.VALUE, "sort_order": SortOrder.ASCEND},
            [b"p/3", b"p/1", b"p/4", b"p/2"],
            False,
        ),
        (
            {"sort_target": SortTarget.MOD, "sort_order": SortOrder.DESCEND},
            [b"p/1", b"p/3", b"p/4", b"p/2"],
            False,
        ),
        (
            {"sort_target": SortTarget.CREATE, "sort_order": SortOrder.DESCEND},
            [b"p/4", b"p/3", b"p/2", b"p/1"],
            False,
        ),
        # etcd 3.4: filters apply before the limit; count stays the unfiltered total.
        ({"min_mod_revision": 5, "limit": 1}, [b"p/1"], True),
        ({"max_create_revision": 3, "limit": 5}, [b"p/1", b"p/2"], False),
        ({"min_create_revision": 3, "max_mod_revision": 6}, [b"p/2", b"p/4"], False),
    ],
)
def test_sorting_and_filters_match_etcd(
    options: dict[str, object], expected: list[bytes], more: bool
) -> None:
    resp = get(sort_fixture(), b"p/", b"p0", **options)
    assert (keys(resp), resp.more, resp.count) == (expected, more, 4)


def test_range_at_a_past_revision_honours_limit_and_sort() -> None:
    store = sort_fixture()
    resp = get(
        store, b"p/", b"p0", revision=5, sort_target=SortTarget.VALUE, sort_order=SortOrder.DESCEND
    )
    # etcd 3.4: the same (values zz, x, m, a at revision 5).
    assert keys(resp) == [b"p/2", b"p/1", b"p/4", b"p/3"]


def test_empty_key_is_refused_everywhere() -> None:
    store = MVCCStore()
    bad: list[Request] = [
        PutRequest(b"", b"v"),
        DeleteRangeRequest(b""),
        TxnRequest([Compare(EQ, CompareTarget.VERSION, b"", 0)]),
        TxnRequest([], [], [RangeRequest(b"")]),
    ]
    for req in bad:
        with pytest.raises(InvalidRequestError, match=r"^etcdserver: key is not provided$"):
            apply(store, req)
    with pytest.raises(InvalidRequestError) as info:
        store.range(RangeRequest(b""))
    assert info.value.grpc_code == 3
    assert store.revision == 1


# -- txn -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "operand", "outcomes"),
    [
        # a is at create 2, mod 3, version 2, value "2", lease 7 when compared.
        (CompareTarget.VERSION, 2, {EQ: True, GT: False, LT: False, NE: False}),
        (CompareTarget.VERSION, 1, {EQ: False, GT: True, LT: False, NE: True}),
        (CompareTarget.CREATE, 3, {EQ: False, GT: False, LT: True, NE: True}),
        (CompareTarget.MOD, 3, {EQ: True, GT: False, LT: False, NE: False}),
        (CompareTarget.VALUE, b"2", {EQ: True, GT: False, LT: False, NE: False}),
        (CompareTarget.VALUE, b"10", {EQ: False, GT: True, LT: False, NE: True}),
        (CompareTarget.LEASE, 7, {EQ: True, GT: False, LT: False, NE: False}),
        (CompareTarget.LEASE, 8, {EQ: False, GT: False, LT: True, NE: True}),
    ],
)
def test_compare_each_target_and_result(
    target: CompareTarget, operand: int | bytes, outcomes: dict[CompareResult, bool]
) -> None:
    store = MVCCStore()
    grant(store, 7)
    put(store, b"a", b"1")
    put(store, b"a", b"2", lease=7)
    for result, expected in outcomes.items():
        resp = txn(store, [Compare(result, target, b"a", operand)], [], [])
        assert resp.succeeded is expected, (result, target, operand)


@pytest.mark.parametrize(
    ("compare", "succeeded"),
    [
        # etcd 3.4: a missing key has create/mod/version/lease 0 ...
        (Compare(EQ, CompareTarget.VERSION, b"missing", 0), True),
        (Compare(EQ, CompareTarget.CREATE, b"missing", 0), True),
        (Compare(EQ, CompareTarget.MOD, b"missing", 0), True),
        (Compare(EQ, CompareTarget.LEASE, b"missing", 0), True),
        (Compare(LT, CompareTarget.MOD, b"missing", 1), True),
        # ... but any VALUE compare on it fails, NOT_EQUAL and empty value included.
        (Compare(EQ, CompareTarget.VALUE, b"missing", b""), False),
        (Compare(NE, CompareTarget.VALUE, b"missing", b"x"), False),
        # The same for an empty range.
        (Compare(EQ, CompareTarget.MOD, b"n", 0, b"o"), True),
        (Compare(NE, CompareTarget.VALUE, b"n", b"x", b"o"), False),
    ],
)
def test_compare_on_missing_keys(compare: Compare, succeeded: bool) -> None:
    store = MVCCStore()
    put(store, b"other")
    assert txn(store, [compare], []).succeeded is succeeded


def test_compare_over_a_range_must_hold_for_every_live_key() -> None:
    store = MVCCStore()
    put(store, b"l1", b"a")
    put(store, b"l1", b"b")
    put(store, b"l2", b"b")
    put(store, b"l2", b"c")
    put(store, b"l3", b"gone")
    delete(store, b"l3")  # deleted keys do not take part
    put(store, b"m", b"a")  # outside the range
    assert txn(store, [Compare(EQ, CompareTarget.VERSION, b"l", 2, b"m")], []).succeeded
    assert txn(store, [Compare(GT, CompareTarget.VALUE, b"l", b"a", b"m")], []).succeeded
    assert not txn(store, [Compare(GT, CompareTarget.VALUE, b"l", b"b", b"m")], []).succeeded
    assert txn(store, [Compare(GT, CompareTarget.VALUE, b"l", b"b", b"\0")], []).succeeded is False
    assert txn(store, [Compare(LT, CompareTarget.MOD, b"l", 6, b"\0")], []).succeeded is False


def test_txn_branches_run_at_one_revision() -> None:
    store = MVCCStore()
    put(store, b"a", b"1")
    is_one = Compare(EQ, CompareTarget.VALUE, b"a", b"1")
    resp = txn(
        store,
        [is_one],
        [PutRequest(b"b", b"yes"), PutRequest(b"c", b"yes"), DeleteRangeRequest(b"a")],
        [PutRequest(b"b", b"no")],
    )
    assert resp.succeeded and resp.revision == 3 == store.revision
    assert [kv.mod_revision for kv in get(store, b"b", b"d").kvs] == [3, 3]
    assert value(store, b"a") is None
    resp = txn(store, [is_one], [PutRequest(b"b", b"yes")], [PutRequest(b"b", b"no")])
    assert not resp.succeeded and resp.revision == 4
    assert value(store, b"b") == b"no"


def test_txns_without_changes_do_not_bump_the_revision() -> None:
    store = MVCCStore()
    put(store, b"a")
    fails_ = Compare(EQ, CompareTarget.VERSION, b"a", 5)
    assert txn(store, [], [RangeRequest(b"a")]).revision == 2  # read-only
    assert txn(store, [fails_], [PutRequest(b"a")]).revision == 2  # no failure ops
    assert txn(store, [], [DeleteRangeRequest(b"nope")]).revision == 2  # deletes nothing
    assert txn(store, [], []).revision == 2
    assert store.revision == 2


def test_txn_op_responses_carry_the_revision_as_of_that_op() -> None:
    """etcd 3.4: a range before the txn's first write reports the old revision, ops after
    it the new one; a nested txn's own response has an empty header (revision 0)."""
    store = MVCCStore()
    put(store, b"t", b"1")
    resp = txn(
        store,
        [],
        [
            RangeRequest(b"t"),
            PutRequest(b"t", b"2", prev_kv=True),
            RangeRequest(b"t"),
            DeleteRangeRequest(b"nope"),
            TxnRequest([], [RangeRequest(b"t")]),
        ],
    )
    first, put_resp, second, del_resp, nested = resp.responses
    assert isinstance(first, RangeResponse) and isinstance(second, RangeResponse)
    assert (first.revision, first.kvs[0].value) == (2, b"1")
    assert isinstance(put_resp, PutResponse)
    assert put_resp == PutResponse(KeyValue(b"t", 2, 2, 1, b"1"), 3)
    assert (second.revision, second.kvs[0].value) == (3, b"2")  # sees the txn's own write
    assert del_resp == DeleteRangeResponse(0, [], 3)
    assert isinstance(nested, TxnResponse)
    assert nested.revision == 0
    inner = nested.responses[0]
    assert isinstance(inner, RangeResponse) and inner.revision == 3


def test_nested_txn_compares_see_the_state_before_the_outer_txn() -> None:
    """etcd 3.4 decides every branch before executing anything: on a store without n1,
    put n1=1 followed by a nested txn comparing n1 == "1" takes the nested failure."""
    store = MVCCStore()
    nested = TxnRequest(
        [Compare(EQ, CompareTarget.VALUE, b"n1", b"1")],
        [PutRequest(b"n2", b"yes")],
        [PutRequest(b"n2", b"no")],
    )
    resp = txn(store, [], [PutRequest(b"n1", b"1"), nested])
    assert value(store, b"n2") == b"no"
    inner = resp.responses[1]
    assert isinstance(inner, TxnResponse) and inner.succeeded is False


def test_nested_txn_failure_branch_and_deeper_nesting() -> None:
    store = MVCCStore()
    put(store, b"x", b"1")
    deep = TxnRequest(
        [Compare(EQ, CompareTarget.VERSION, b"x", 1)],
        [TxnRequest([Compare(NE, CompareTarget.VALUE, b"x", b"1")], [], [PutRequest(b"z")])],
    )
    resp = txn(store, [Compare(EQ, CompareTarget.VERSION, b"x", 9)], [], [deep])
    assert not resp.succeeded
    assert get(store, b"z").kvs == [KeyValue(b"z", 3, 3, 1, b"")]


@pytest.mark.parametrize(
    "success",
    [
        [PutRequest(b"d"), PutRequest(b"d")],
        [DeleteRangeRequest(b"d", b"e"), PutRequest(b"d1")],
        [PutRequest(b"d1"), DeleteRangeRequest(b"d", b"e")],
        [DeleteRangeRequest(b"d"), TxnRequest([], [PutRequest(b"d")])],
        [TxnRequest([], [PutRequest(b"d")]), PutRequest(b"d")],
        [TxnRequest([], [DeleteRangeRequest(b"a", b"z")]), PutRequest(b"d")],
        [TxnRequest([], [PutRequest(b"d")]), TxnRequest([], [], [PutRequest(b"d")])],
        [TxnRequest([], [DeleteRangeRequest(b"d")]), TxnRequest([], [PutRequest(b"d")])],
    ],
)
def test_duplicate_keys_in_a_txn_are_refused(success: list[RequestOp]) -> None:
    store = MVCCStore()
    with pytest.raises(InvalidRequestError) as info:
        txn(store, [], success)
    assert (info.value.grpc_code, info.value.message) == (
        3,
        "etcdserver: duplicate key given in txn request",
    )
    assert store.revision == 1


@pytest.mark.parametrize(
    "success",
    [
        # Both branches of one nested txn may put the same key: only one runs.
        [TxnRequest([], [PutRequest(b"d", b"1")], [PutRequest(b"d", b"2")])],
        # Deletes may overlap (etcd 3.4 accepts this).
        [DeleteRangeRequest(b"d", b"e"), DeleteRangeRequest(b"d1")],
        # A nested txn's puts are not checked against deletes in nested txns after it.
        [TxnRequest([], [PutRequest(b"d")]), TxnRequest([], [DeleteRangeRequest(b"d")])],
        # etcd 3.4: a delete to range_end "\0" conflicts with nothing, even its own key.
        [DeleteRangeRequest(b"d", b"\0"), PutRequest(b"d")],
    ],
)
def test_what_etcd_does_not_count_as_duplicates(success: list[RequestOp]) -> None:
    store = MVCCStore()
    put(store, b"d", b"0")
    put(store, b"d1", b"0")
    assert txn(store, [], success).succeeded
    assert store.revision == 4


def test_failure_branch_is_checked_for_duplicates_on_its_own() -> None:
    store = MVCCStore()
    ok = txn(store, [], [PutRequest(b"a")], [PutRequest(b"a")])
    assert ok.succeeded
    with pytest.raises(InvalidRequestError, match="duplicate key"):
        txn(store, [], [], [PutRequest(b"a"), PutRequest(b"a")])


def test_txn_operation_limit_is_per_list_and_per_nesting_level() -> None:
    store = MVCCStore()
    many: list[RequestOp] = [PutRequest(b"k%d" % i) for i in range(MAX_TXN_OPS)]
    assert txn(store, [], many, list(many)).succeeded  # etcd 3.4: 128 + 128 accepted
    too_many: list[Request] = [
        TxnRequest([], [*many, PutRequest(b"one-more")]),
        TxnRequest([Compare(EQ, CompareTarget.VERSION, b"k", 0)] * (MAX_TXN_OPS + 1)),
        TxnRequest([], [TxnRequest([], [RangeRequest(b"r")] * (MAX_TXN_OPS + 1))]),
    ]
    for req in too_many:
        with pytest.raises(InvalidRequestError) as info:
            apply(store, req)
        assert info.value.message == "etcdserver: too many operations in txn request"
        assert info.value.grpc_code == 3


def test_failed_txn_changes_nothing() -> None:
    store = MVCCStore()
    put(store, b"a", b"1")
    with pytest.raises(LeaseNotFoundError):
        txn(store, [], [PutRequest(b"b"), PutRequest(b"c", lease=99)])
    compact(store, 2)
    with pytest.raises(CompactedError):
        txn(store, [], [PutRequest(b"b"), RangeRequest(b"a", revision=1)])
    assert (store.revision, keys(get(store, b"\0", b"\0"))) == (2, [b"a"])
    assert store.events(b"\0", b"\0", 2) == [Event(EventType.PUT, KeyValue(b"a", 2, 2, 1, b"1"))]


def test_txn_range_revisions_are_checked_against_the_revision_before_the_txn() -> None:
    store = MVCCStore()
    put(store, b"q")
    # etcd 3.4: a range at the txn's own new revision is a future revision.
    with pytest.raises(FutureRevisionError):
        txn(store, [], [PutRequest(b"q"), RangeRequest(b"q", revision=3)])
    resp = txn(store, [], [PutRequest(b"q", b"new"), RangeRequest(b"q", revision=2)])
    past = resp.responses[1]
    assert isinstance(past, RangeResponse) and past.kvs[0].mod_revision == 2


def test_checks_only_apply_to_the_branch_taken() -> None:
    store = MVCCStore()
    put(store, b"q")
    # etcd 3.4: an unknown lease in the branch not taken is not an error.
    resp = txn(
        store,
        [Compare(EQ, CompareTarget.VERSION, b"q", 5)],
        [PutRequest(b"q", lease=4242)],
        [PutRequest(b"qq")],
    )
    assert not resp.succeeded and store.revision == 3


# -- put options -----------------------------------------------------------------------


def test_ignore_value_and_ignore_lease_keep_the_current_ones() -> None:
    store = MVCCStore()
    grant(store, 5)
    put(store, b"k", b"orig", lease=5)
    put(store, b"k", b"", ignore_value=True, lease=5)
    assert get(store, b"k").kvs == [KeyValue(b"k", 2, 3, 2, b"orig", 5)]
    put(store, b"k", b"new", ignore_lease=True)
    assert get(store, b"k").kvs == [KeyValue(b"k", 2, 4, 3, b"new", 5)]
    assert store.lease_keys(5) == [b"k"]
    put(store, b"k", b"", ignore_value=True)  # the lease is not ignored: 0 detaches
    assert get(store, b"k").kvs == [KeyValue(b"k", 2, 5, 4, b"new", 0)]
    assert store.lease_keys(5) == []


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (PutRequest(b"ghost", ignore_value=True), "etcdserver: key not found"),
        (PutRequest(b"ghost", b"", ignore_lease=True), "etcdserver: key not found"),
        (PutRequest(b"x", b"v", ignore_value=True), "etcdserver: value is provided"),
        (PutRequest(b"x", lease=5, ignore_lease=True), "etcdserver: lease is provided"),
    ],
)
def test_put_option_errors_are_invalid_argument(req: PutRequest, message: str) -> None:
    store = MVCCStore()
    put(store, b"x")
    for attempt in (req, TxnRequest([], [req])):
        with pytest.raises(InvalidRequestError) as info:
            apply(store, attempt)
        assert (info.value.grpc_code, info.value.message) == (3, message)
    assert store.revision == 2


def test_ignore_value_on_a_key_deleted_earlier_in_the_txn_is_key_not_found() -> None:
    """etcd 3.4 accepts this txn (the "\\0" delete conflicts with nothing), then fails
    the put mid-txn and panics ("unexpected error during txn: etcdserver: key not found",
    seen while fuzzing it); we refuse the txn before changing anything."""
    store = MVCCStore()
    put(store, b"k", b"v")
    with pytest.raises(InvalidRequestError, match=r"^etcdserver: key not found$"):
        txn(store, [], [DeleteRangeRequest(b"a", b"\0"), PutRequest(b"k", ignore_value=True)])
    assert value(store, b"k") == b"v"


def test_unknown_lease_error_order_differs_for_put_and_txn() -> None:
    """etcd 3.4: a plain put checks the lease first, a put in a txn the key first."""
    store = MVCCStore()
    req = PutRequest(b"ghost", lease=999, ignore_value=True)
    with pytest.raises(LeaseNotFoundError) as info:
        apply(store, req)
    assert (info.value.grpc_code, info.value.message) == (
        5,
        "etcdserver: requested lease not found",
    )
    with pytest.raises(InvalidRequestError, match="key not found"):
        txn(store, [], [req])


# -- leases ----------------------------------------------------------------------------


def test_lease_grant_validation_and_minimum_ttl() -> None:
    store = MVCCStore()
    assert grant(store, 77, 60) == LeaseGrantResponse(77, 60, 1)
    with pytest.raises(LeaseExistsError) as exists:
        grant(store, 77)
    assert (exists.value.grpc_code, exists.value.message) == (9, "etcdserver: lease already exists")
    # etcd 3.4 (default timing): TTL 0 and -5 become 2; a negative id is fine.
    assert grant(store, 78, -5).ttl == 2
    assert grant(store, 79, 0).ttl == 2
    assert grant(store, -3, 10).ttl == 10
    assert MVCCStore(min_lease_ttl=15).apply(0, encode_command(LeaseGrantRequest(1, 5))) == (
        LeaseGrantResponse(1, 15, 1)
    )
    with pytest.raises(LeaseTTLTooLargeError) as large:
        grant(store, 80, 9_000_000_001)
    assert (large.value.grpc_code, large.value.message) == (11, "etcdserver: too large lease TTL")
    with pytest.raises(LeaseNotFoundError):
        grant(store, 0)  # etcd's lessor: id 0 means "no lease"
    assert store.lease_ids() == [-3, 77, 78, 79]
    assert store.revision == 1


def test_lease_attachment_follows_the_latest_put() -> None:
    store = MVCCStore()
    grant(store, 500)
    grant(store, 501)
    put(store, b"l1", lease=500)
    put(store, b"l2", lease=500)
    put(store, b"l3", lease=500)
    put(store, b"l2", b"b")  # a put without a lease detaches
    put(store, b"l3", lease=501)  # moves to the other lease
    put(store, b"l1", b"d", ignore_lease=True)  # keeps its lease
    # etcd 3.4 timetolive --keys: 500 -> [l1], 501 -> [l3].
    assert store.lease_keys(500) == [b"l1"]
    assert store.lease_keys(501) == [b"l3"]
    assert [kv.lease for kv in get(store, b"l", b"m").kvs] == [500, 0, 501]
    delete(store, b"l3")
    assert store.lease_keys(501) == []
    assert store.leases[500].keys == {b"l1"} and store.leases[500].ttl == 60


def test_revoke_deletes_the_lease_keys_in_one_revision() -> None:
    store = MVCCStore()
    grant(store, 500)
    put(store, b"l4", lease=500)
    put(store, b"l1", lease=500)
    put(store, b"other")
    resp = revoke(store, 500)
    assert resp.revision == 5 == store.revision
    assert keys(get(store, b"\0", b"\0")) == [b"other"]
    events = store.events(b"\0", b"\0", 5)
    assert [(e.type, e.kv, e.prev_kv and e.prev_kv.key) for e in events] == [
        (EventType.DELETE, KeyValue(b"l1", 0, 5, 0, b""), b"l1"),
        (EventType.DELETE, KeyValue(b"l4", 0, 5, 0, b""), b"l4"),
    ]
    assert store.lease_ids() == []
    with pytest.raises(LeaseNotFoundError):
        revoke(store, 500)
    with pytest.raises(LeaseNotFoundError):
        store.lease_keys(500)
    with pytest.raises(LeaseNotFoundError):
        put(store, b"x", lease=500)


def test_revoking_a_lease_without_keys_does_not_bump_the_revision() -> None:
    store = MVCCStore()
    grant(store, 502)
    assert revoke(store, 502).revision == 1


# -- compaction ------------------------------------------------------------------------


def test_compaction_bounds_and_errors() -> None:
    store = MVCCStore()
    for i in range(4):
        put(store, b"a", b"%d" % i)  # revisions 2..5
    with pytest.raises(FutureRevisionError):
        compact(store, 6)
    assert compact(store, 3) == CompactionResponse(5)
    assert store.compact_revision == 3 and store.revision == 5
    for rev in (3, 2):
        with pytest.raises(CompactedError) as info:
            compact(store, rev)
        assert info.value.grpc_code == 11
        assert info.value.message == "etcdserver: mvcc: required revision has been compacted"
    with pytest.raises(CompactedError) as read:
        get(store, b"a", revision=2)
    assert read.value.compact_revision == 3
    assert value(store, b"a", 3) == b"1"  # reading at exactly the compact revision is fine
    assert compact(store, 5).revision == 5  # up to the current revision


def test_compaction_at_zero_succeeds_once_on_a_fresh_store() -> None:
    store = MVCCStore()
    compact(store, 0)  # etcd 3.4: accepted (its compact revision starts at -1)
    with pytest.raises(CompactedError):
        compact(store, 0)
    assert store.compact_revision == 0


def test_compaction_keeps_the_latest_versions_and_drops_deleted_keys() -> None:
    store = MVCCStore()
    put(store, b"live", b"1")  # 2
    put(store, b"live", b"2")  # 3
    put(store, b"dead", b"x" * 1000)  # 4
    delete(store, b"dead")  # 5
    put(store, b"late", b"1")  # 6
    put(store, b"late", b"2")  # 7
    before = store.size_bytes()
    compact(store, 6)
    assert store.size_bytes() < before - 1000
    assert keys(get(store, b"\0", b"\0", revision=6)) == [b"late", b"live"]
    assert [value(store, b"late", r) for r in (6, 7)] == [b"1", b"2"]
    assert get(store, b"live", revision=6).kvs == [KeyValue(b"live", 2, 3, 2, b"2")]
    assert [e.kv.mod_revision for e in store.events(b"\0", b"\0", 6)] == [6, 7]
    # After compacting past it the tombstone, and with it the key, is gone for good.
    assert b"dead" not in store.snapshot()


def test_compaction_keeps_a_deletion_at_the_compact_revision_for_watchers() -> None:
    """etcd 3.4 drops a tombstone at exactly the compact revision once the compaction has
    run on disk, so a watch from there misses that delete (observed). We keep the events
    of the compact revision, with prev_kv, so a watch from there is complete."""
    store = MVCCStore()
    put(store, b"z", b"1")  # 2
    delete(store, b"z")  # 3
    compact(store, 3)
    assert store.events(b"z", b"", 3) == [
        Event(EventType.DELETE, KeyValue(b"z", 0, 3, 0, b""), KeyValue(b"z", 2, 2, 1, b"1"))
    ]
    with pytest.raises(CompactedError) as info:
        store.events(b"z", b"", 2)
    assert info.value.compact_revision == 3
    assert value(store, b"z", 3) is None


# -- events and listeners --------------------------------------------------------------


def test_events_from_a_past_revision_with_prev_kv() -> None:
    store = MVCCStore()
    put(store, b"w1", b"a")  # 2
    put(store, b"x", b"outside")  # 3
    put(store, b"w1", b"b")  # 4
    delete(store, b"w1")  # 5
    put(store, b"w2", b"c")  # 6
    # etcd 3.4 watch --prev-kv: a create has no prev_kv; a DELETE's kv is only the key
    # and the delete's revision.
    assert store.events(b"w", b"x", 2) == [
        Event(EventType.PUT, KeyValue(b"w1", 2, 2, 1, b"a")),
        Event(EventType.PUT, KeyValue(b"w1", 2, 4, 2, b"b"), KeyValue(b"w1", 2, 2, 1, b"a")),
        Event(EventType.DELETE, KeyValue(b"w1", 0, 5, 0, b""), KeyValue(b"w1", 2, 4, 2, b"b")),
        Event(EventType.PUT, KeyValue(b"w2", 6, 6, 1, b"c")),
    ]
    assert [e.kv.mod_revision for e in store.events(b"w1", b"", 4)] == [4, 5]
    assert [e.kv.key for e in store.events(b"w", b"\0", 5)] == [b"w1", b"w2"]
    assert [e.kv.key for e in store.events(b"w2", b"\0", 3)] == [b"x", b"w2"]
    assert store.events(b"w", b"x", 7) == []


def test_events_of_a_txn_share_its_revision_in_op_order() -> None:
    store = MVCCStore()
    put(store, b"b")
    txn(store, [], [PutRequest(b"c"), DeleteRangeRequest(b"b"), PutRequest(b"a")])
    assert [(e.type, e.kv.key, e.kv.mod_revision) for e in store.events(b"a", b"\0", 3)] == [
        (EventType.PUT, b"c", 3),
        (EventType.DELETE, b"b", 3),
        (EventType.PUT, b"a", 3),
    ]


def test_event_prev_kv_when_a_txn_writes_a_key_twice() -> None:
    """etcd 3.4 reads an event's prev_kv at revision - 1 and gives creates none: a put
    then delete of d in one txn has the DELETE report d's value before the txn, and a
    delete then put of d makes the PUT a create without prev_kv (both seen fuzzing)."""
    store = MVCCStore()
    put(store, b"d", b"y")  # 2
    resp = txn(
        store,
        [],
        [
            TxnRequest([], [PutRequest(b"d", b"zz")]),
            TxnRequest([], [DeleteRangeRequest(b"d", prev_kv=True)]),
        ],
    )
    nested = resp.responses[1]
    assert isinstance(nested, TxnResponse)
    deleted = nested.responses[0]
    assert isinstance(deleted, DeleteRangeResponse)
    assert deleted.prev_kvs == [KeyValue(b"d", 2, 3, 2, b"zz")]  # the response sees the put
    assert [e.prev_kv for e in store.events(b"d", b"", 3)] == [
        KeyValue(b"d", 2, 2, 1, b"y"),
        KeyValue(b"d", 2, 2, 1, b"y"),
    ]
    put(store, b"d", b"again")  # 4
    txn(store, [], [DeleteRangeRequest(b"c", b"\0"), PutRequest(b"d", b"new")])  # 5
    assert store.events(b"d", b"", 5) == [
        Event(EventType.DELETE, KeyValue(b"d", 0, 5, 0, b""), KeyValue(b"d", 4, 4, 1, b"again")),
        Event(EventType.PUT, KeyValue(b"d", 5, 5, 1, b"new")),
    ]
    assert get(store, b"d").kvs == [KeyValue(b"d", 5, 5, 1, b"new")]


def test_listeners_get_each_write_revision_in_order() -> None:
    store = MVCCStore()
    seen: list[tuple[int, list[Event]]] = []
    unsubscribe = store.subscribe(lambda rev, events: seen.append((rev, events)))
    put(store, b"a", b"1")
    delete(store, b"nothing")
    txn(store, [], [PutRequest(b"b"), DeleteRangeRequest(b"a")])
    txn(store, [], [RangeRequest(b"b")])
    assert [(rev, [(e.type, e.kv.key) for e in events]) for rev, events in seen] == [
        (2, [(EventType.PUT, b"a")]),
        (3, [(EventType.PUT, b"b"), (EventType.DELETE, b"a")]),
    ]
    assert seen[1][1] == store.events(b"\0", b"\0", 3)
    unsubscribe()
    unsubscribe()  # idempotent
    put(store, b"c")
    assert len(seen) == 2


def test_a_failing_listener_does_not_fail_the_write_or_other_listeners(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MVCCStore()
    seen: list[int] = []

    def broken(rev: int, events: list[Event]) -> None:
        raise RuntimeError("boom")

    store.subscribe(broken)
    store.subscribe(lambda rev, events: seen.append(rev))
    with caplog.at_level(logging.ERROR):
        assert put(store, b"a").revision == 2
    assert seen == [2]
    assert "boom" in caplog.text


# -- snapshots, commands, reads --------------------------------------------------------


def busy_store() -> MVCCStore:
    store = MVCCStore()
    grant(store, 1)
    grant(store, 2, 30)
    for i in range(30):
        put(store, b"k%02d" % (i % 7), b"v%d" % i, lease=(i % 3) if i % 3 != 0 else 0)
        if i % 5 == 0:
            delete(store, b"k%02d" % (i % 4))
    txn(store, [], [PutRequest(b"t1"), DeleteRangeRequest(b"k00", b"k02")])
    return store


def assert_same_state(a: MVCCStore, b: MVCCStore) -> None:
    assert (a.revision, a.compact_revision, a.size_bytes()) == (
        b.revision,
        b.compact_revision,
        b.size_bytes(),
    )
    assert {i: (v.ttl, v.keys) for i, v in a.leases.items()} == {
        i: (v.ttl, v.keys) for i, v in b.leases.items()
    }
    for rev in range(max(a.compact_revision, 1), a.revision + 1):
        assert get(a, b"\0", b"\0", revision=rev) == get(b, b"\0", b"\0", revision=rev)
    start = max(a.compact_revision, 1)
    assert a.events(b"\0", b"\0", start) == b.events(b"\0", b"\0", start)
    assert a.snapshot() == b.snapshot()


@pytest.mark.parametrize("compact_at", [None, 10, 25])
def test_snapshot_restore_reproduces_the_store(compact_at: int | None) -> None:
    store = busy_store()
    if compact_at is not None:
        compact(store, compact_at)
    copy = MVCCStore()
    put(copy, b"stale")
    copy.restore(store.snapshot())
    assert_same_state(store, copy)
    for s in (store, copy):  # and they go on identically
        put(s, b"k03", b"after", lease=2)
        revoke(s, 1)
    assert_same_state(store, copy)


def test_restore_of_garbage_is_refused_and_leaves_an_empty_store() -> None:
    for data in (b"", b"\x93\x01\x02", encode_command(PutRequest(b"x"))):
        store = busy_store()
        with pytest.raises(CorruptDataError):
            store.restore(data)
        assert (store.revision, store.lease_ids(), get(store, b"\0", b"\0").count) == (1, [], 0)


def test_corrupt_commands_are_internal_errors() -> None:
    store = MVCCStore()
    for command in (
        b"\xc1",
        b"\x92\xa3put\x01",
        b"\x91\xa4nope",
        encode_command(PutRequest(b"k"))[:-1],
    ):
        with pytest.raises(CorruptDataError) as info:
            store.apply(7, command)
        assert info.value.grpc_code == 13
        assert "index 7" in info.value.message
    assert store.revision == 1


def test_compare_value_type_must_match_its_target() -> None:
    with pytest.raises(TypeError):
        Compare(EQ, CompareTarget.VALUE, b"k", 1)
    with pytest.raises(TypeError):
        Compare(EQ, CompareTarget.MOD, b"k", b"1")


def test_read_txn_serves_read_only_txns_and_refuses_writes() -> None:
    store = abcde()
    resp = store.read_txn(
        TxnRequest(
            [Compare(EQ, CompareTarget.VALUE, b"a", b"aa")],
            [RangeRequest(b"a", b"c"), TxnRequest([], [], [RangeRequest(b"e")])],
            [RangeRequest(b"x")],
        )
    )
    assert resp.succeeded and resp.revision == 6
    first = resp.responses[0]
    assert isinstance(first, RangeResponse) and keys(first) == [b"a", b"b"]
    with pytest.raises(InvalidRequestError):
        store.read_txn(TxnRequest([], [TxnRequest([], [], [DeleteRangeRequest(b"a")])]))
    assert store.revision == 6


def test_check_request_catches_invalid_requests_before_proposing() -> None:
    check_request(TxnRequest([], [PutRequest(b"a")], [PutRequest(b"a")]))
    with pytest.raises(InvalidRequestError, match="duplicate key"):
        check_request(TxnRequest([], [PutRequest(b"a"), PutRequest(b"a")]))
    with pytest.raises(InvalidRequestError, match="value is provided"):
        check_request(
            TxnRequest([], [], [TxnRequest([], [PutRequest(b"a", b"x", ignore_value=True)])])
        )


def test_a_large_store_ranges_a_prefix_and_round_trips_through_a_snapshot() -> None:
    """The apiserver's shape of data: thousands of 2 KiB objects under one prefix.
    (Speed is measured by the benchmarks, not asserted here.)"""
    store = MVCCStore()
    body = b"x" * 2048
    for i in range(5000):
        put(store, b"/registry/pods/ns/p%05d" % i, body)
    for i in range(5000):
        put(store, b"/registry/zz/%05d" % i, b"y")
    resp = get(store, b"/registry/pods/", b"/registry/pods0")
    assert resp.count == 5000 and len(resp.kvs) == 5000
    assert get(store, b"/registry/pods/ns/p00042").kvs[0].value == body
    copy = MVCCStore()
    copy.restore(store.snapshot())
    assert copy.revision == store.revision


def test_keepalive_is_checked_and_every_lease_change_reaches_the_lessor_hook() -> None:
    from controlplane.store.mvcc import LeaseEvent, LeaseKeepAliveRequest, LeaseKeepAliveResponse

    store = MVCCStore()
    seen: list[tuple[LeaseEvent, int, int]] = []
    store.lease_listener = lambda kind, lid, ttl: seen.append((kind, lid, ttl))
    grant(store, 9, ttl=30)
    rev = store.revision
    resp = apply(store, LeaseKeepAliveRequest(9))
    assert resp == LeaseKeepAliveResponse(9, 30, rev)
    assert store.revision == rev, "a keep-alive changes no key"
    apply(store, LeaseRevokeRequest(9))
    with pytest.raises(LeaseNotFoundError):
        apply(store, LeaseKeepAliveRequest(9))
    assert seen == [
        (LeaseEvent.GRANTED, 9, 30),
        (LeaseEvent.RENEWED, 9, 30),
        (LeaseEvent.REVOKED, 9, 0),
    ]
