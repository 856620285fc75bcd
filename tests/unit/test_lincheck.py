"""Behaviour of the linearizability checker on known-good and known-bad histories."""

import math
import random
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kubelab.lincheck import (
    UNKNOWN,
    CheckOutcome,
    CheckResult,
    KVInput,
    KVModel,
    KVOutput,
    KVValue,
    Operation,
    RegisterInput,
    RegisterModel,
    check,
)


def op(client: int, call: float, ret: float, input: KVInput, output: KVOutput = None) -> Operation:
    return Operation(client, call, ret, input, output)


def put(client: int, call: float, ret: float, key: str, value: str) -> Operation:
    return op(client, call, ret, KVInput.put(key, value))


def get(client: int, call: float, ret: float, key: str, seen: str | None) -> Operation:
    return op(client, call, ret, KVInput.get(key), seen)


def cas(
    client: int, call: float, ret: float, key: str, expected: str | None, new: str, won: bool
) -> Operation:
    return op(client, call, ret, KVInput.cas(key, expected, new), won)


def kv(history: list[Operation]) -> CheckResult:
    return check(KVModel(), history)


def assert_illegal_on(result: CheckResult, key: str) -> None:
    assert result.result is CheckOutcome.ILLEGAL, str(result)
    assert result.violation is not None
    assert result.violation.partition == f"key {key!r}"
    assert f"key {key!r}" in str(result)


# --- linearizable histories ------------------------------------------------------------


def test_empty_history_is_ok() -> None:
    result = kv([])
    assert result.ok
    assert str(result) == "OK: 0 operations in 0 partition(s) are linearizable"


def test_sequential_history_is_ok() -> None:
    result = kv(
        [
            get(1, 0, 1, "a", None),
            put(1, 2, 3, "a", "1"),
            get(2, 4, 5, "a", "1"),
            cas(2, 6, 7, "a", "1", "2", True),
            cas(1, 8, 9, "a", "1", "3", False),
            get(1, 10, 11, "a", "2"),
            op(2, 12, 13, KVInput.delete("a")),
            get(1, 14, 15, "a", None),
            cas(1, 16, 17, "a", None, "4", True),
            get(2, 18, 19, "a", "4"),
        ]
    )
    assert result.result is CheckOutcome.OK
    assert result.violation is None


@pytest.mark.parametrize("seen", [None, "1", "2"])
def test_read_overlapping_writes_may_see_any_of_them(seen: str | None) -> None:
    history = [
        put(1, 0, 10, "a", "1"),
        put(2, 1, 9, "a", "2"),
        get(3, 2, 8, "a", seen),
    ]
    assert kv(history).ok


def test_concurrent_reads_may_see_the_write_in_either_order_of_visibility() -> None:
    # A later-returning read may see the old value as long as the two reads overlap.
    history = [
        put(1, 0, 10, "a", "1"),
        get(2, 1, 3, "a", "1"),
        get(3, 2, 4, "a", None),
    ]
    assert kv(history).ok


def test_cas_race_with_exactly_one_winner_is_ok() -> None:
    history = [
        put(1, 0, 1, "a", "0"),
        cas(1, 2, 6, "a", "0", "x", False),
        cas(2, 2, 6, "a", "0", "y", True),
        cas(3, 3, 5, "a", "0", "z", False),
        get(1, 7, 8, "a", "y"),
    ]
    assert kv(history).ok


def test_independent_keys_are_checked_separately() -> None:
    history = [put(1, 0, 1, "a", "1"), put(2, 0, 1, "b", "2")]
    result = kv([*history, get(3, 2, 3, "a", "1"), get(3, 2, 3, "b", "2")])
    assert result.ok
    assert result.partition_count == 2


def test_operations_touching_at_one_instant_count_as_concurrent() -> None:
    # The documented tie-break: the read starts exactly when the write ends, so it may be
    # ordered before it and see the initial (absent) value.
    assert kv([put(1, 0, 1, "a", "1"), get(2, 1, 2, "a", None)]).ok


# --- violations ------------------------------------------------------------------------


def test_stale_read_after_completed_write_is_illegal() -> None:
    result = kv(
        [
            put(1, 0, 1, "a", "1"),
            put(1, 2, 3, "a", "2"),
            get(2, 4, 5, "a", "1"),
        ]
    )
    assert_illegal_on(result, "a")
    assert result.violation is not None
    assert [d.text for d in result.violation.prefix] == [
        "put('a', '1') -> ok",
        "put('a', '2') -> ok",
    ]
    assert result.violation.state == "'2'"
    assert result.violation.blocking.text == "get('a') -> '1'"


def test_read_of_a_value_never_written_is_illegal() -> None:
    result = kv([put(1, 0, 1, "k", "1"), get(2, 0.5, 3, "k", "ghost")])
    assert_illegal_on(result, "k")
    assert result.violation is not None
    [candidate] = result.violation.candidates
    assert candidate.text == "get('k') -> 'ghost'"


def test_two_cas_winners_on_the_same_expected_value_is_illegal() -> None:
    result = kv(
        [
            put(1, 0, 1, "a", "0"),
            cas(1, 2, 6, "a", "0", "x", True),
            cas(2, 2, 6, "a", "0", "y", True),
        ]
    )
    assert_illegal_on(result, "a")


def test_lost_acknowledged_write_is_illegal() -> None:
    result = kv(
        [
            put(1, 0, 1, "a", "1"),
            put(2, 2, 3, "a", "2"),
            get(1, 4, 5, "a", "2"),
            get(2, 6, 7, "a", "1"),  # the acknowledged "2" vanished, "1" came back
        ]
    )
    assert_illegal_on(result, "a")


def test_write_acknowledged_then_absent_is_illegal() -> None:
    assert_illegal_on(kv([put(1, 0, 1, "a", "1"), get(2, 2, 3, "a", None)]), "a")


def test_violation_names_the_failing_key_among_healthy_ones() -> None:
    history = [put(c, 0, 1, key, "v") for c, key in enumerate(["a", "b", "c"])]
    history += [get(1, 2, 3, "a", "v"), get(2, 2, 3, "b", None), get(3, 2, 3, "c", "v")]
    result = kv(history)
    assert_illegal_on(result, "b")
    assert "'a'" not in str(result)


def test_explanation_lists_prefix_state_and_candidates() -> None:
    history = [
        put(1, 0, 1, "a", "1"),
        get(2, 2, 4, "a", "3"),
        get(3, 3, 5, "a", "9"),
    ]
    assert str(kv(history)) == (
        "ILLEGAL: not linearizable on key 'a' (3 operations)\n"
        "longest linearizable prefix: 1 of 3 operations:\n"
        "  client 1: put('a', '1') -> ok  [call 0, return 1]\n"
        "state after it: '1'\n"
        "next response due: client 2: get('a') -> '3'  [call 2, return 4]\n"
        "operations that could take effect before it, none possible in that state:\n"
        "  client 2: get('a') -> '3'  [call 2, return 4]\n"
        "  client 3: get('a') -> '9'  [call 3, return 5]"
    )


def test_explanation_shows_only_the_end_of_a_long_prefix() -> None:
    history = [put(1, 2 * i, 2 * i + 1, "a", str(i)) for i in range(30)]
    history.append(get(2, 100, 101, "a", "0"))
    text = str(kv(history))
    assert "longest linearizable prefix: 30 of 31 operations, last 10 shown:" in text
    assert "put('a', '29')" in text
    assert "put('a', '19')" not in text


# --- requests with unknown outcome -----------------------------------------------------


def test_timed_out_put_later_read_is_ok() -> None:
    history = [
        Operation.timeout(1, 0, KVInput.put("a", "1")),
        get(2, 5, 6, "a", "1"),
        get(2, 7, 8, "a", "1"),
    ]
    assert kv(history).ok


def test_timed_out_put_never_observed_is_ok() -> None:
    history = [
        put(1, 0, 1, "a", "0"),
        Operation.timeout(2, 2, KVInput.put("a", "1")),
        get(1, 3, 4, "a", "0"),
        get(1, 5, 6, "a", "0"),
    ]
    assert kv(history).ok


def test_timed_out_reads_constrain_nothing() -> None:
    history = [
        put(1, 0, 1, "a", "0"),
        Operation.timeout(2, 0.5, KVInput.get("a")),
        Operation.timeout(3, 2, KVInput.get("a")),
        get(1, 3, 4, "a", "0"),
    ]
    assert history[1].timed_out
    assert not history[0].timed_out
    assert kv(history).ok


def test_timed_out_put_cannot_flicker() -> None:
    # Once a read has seen the lost write take effect, it cannot un-happen.
    history = [
        put(1, 0, 1, "a", "0"),
        Operation.timeout(2, 2, KVInput.put("a", "1")),
        get(1, 3, 4, "a", "1"),
        get(1, 5, 6, "a", "0"),
    ]
    assert_illegal_on(kv(history), "a")


def test_timed_out_cas_takes_effect_only_if_its_expectation_holds() -> None:
    base = [put(1, 0, 1, "a", "0"), Operation.timeout(2, 2, KVInput.cas("a", "0", "1"))]
    assert kv([*base, get(1, 3, 4, "a", "1")]).ok
    mismatched = [put(1, 0, 1, "a", "0"), Operation.timeout(2, 2, KVInput.cas("a", "9", "1"))]
    assert_illegal_on(kv([*mismatched, get(1, 3, 4, "a", "1")]), "a")


@pytest.mark.parametrize("writer_ret", [20.0, math.inf])
def test_read_of_a_value_written_only_after_the_read_returned_is_illegal(
    writer_ret: float,
) -> None:
    writer = op(
        2, 10, writer_ret, KVInput.put("a", "1"), None if writer_ret < math.inf else UNKNOWN
    )
    assert_illegal_on(kv([get(1, 0, 5, "a", "1"), writer]), "a")


# --- register model, validation and the time budget ------------------------------------


def test_register_model() -> None:
    model = RegisterModel(initial=0)
    w1 = Operation(1, 0, 2, RegisterInput.write(1), None)
    r_new = Operation(2, 1, 3, RegisterInput.read(), 1)
    r_old = Operation(3, 1, 3, RegisterInput.read(), 0)
    assert check(model, [w1, r_new, r_old]).ok
    stale = Operation(3, 4, 5, RegisterInput.read(), 0)
    result = check(model, [w1, r_new, stale])
    assert result.result is CheckOutcome.ILLEGAL
    assert result.violation is not None
    assert result.violation.partition == "the whole history"
    assert result.violation.blocking.text == "read() -> 0"


def test_operation_ending_before_it_starts_is_rejected() -> None:
    with pytest.raises(ValueError, match="returns before it is called"):
        kv([put(1, 2, 1, "a", "1")])
    with pytest.raises(ValueError, match="returns before it is called"):
        kv([put(1, math.nan, 1, "a", "1")])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: KVInput("put", "a"), "put needs a value"),
        (lambda: KVInput("get", "a", "v"), "get takes no value"),
        (lambda: KVInput("delete", "a", expected="v"), "only cas takes an expected value"),
    ],
)
def test_malformed_kv_inputs_are_rejected(make: Callable[[], KVInput], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_malformed_outputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="cas output must be a bool"):
        kv([op(1, 0, 1, KVInput.cas("a", None, "1"), "yes")])
    with pytest.raises(ValueError, match="put output must be None"):
        kv([op(1, 0, 1, KVInput.put("a", "1"), True)])
    with pytest.raises(ValueError, match="get output must be a value or None"):
        kv([op(1, 0, 1, KVInput.get("a"), False)])


def test_exhausted_time_budget_gives_unknown() -> None:
    history = [put(1, 0, 1, "a", "1"), get(2, 2, 3, "a", "1")]
    result = check(KVModel(), history, timeout_s=0.0)
    assert result.result is CheckOutcome.UNKNOWN
    assert result.violation is None
    assert str(result) == (
        "UNKNOWN: 2 operations in 1 partition(s); timed out while checking key 'a'"
    )
    assert check(KVModel(), history, timeout_s=60.0).ok


# --- generated histories ---------------------------------------------------------------

KEYS = ["a", "b", "c"]
VALUES = ["0", "1", "2", "3"]
NEVER_WRITTEN = "never-written"


@st.composite
def linearizable_histories(draw: st.DrawFn) -> list[Operation]:
    """A random sequential run against a dict, each op's window widened around its instant.

    Operation k takes effect at time k; its [call, ret] window contains k, so the run's
    own order is a valid linearization. Some operations are turned into timeouts (the
    effect stays, the output is forgotten), and a few timed-out operations that never
    took effect are mixed in.
    """
    store: dict[str, KVValue] = {}
    history: list[Operation] = []
    width = st.floats(min_value=0.0, max_value=3.0)
    for k in range(draw(st.integers(min_value=1, max_value=40))):
        key = draw(st.sampled_from(KEYS))
        kind = draw(st.sampled_from(["put", "get", "cas", "delete"]))
        current = store.get(key)
        output: KVOutput = None
        if kind == "put":
            value = draw(st.sampled_from(VALUES))
            request, store[key] = KVInput.put(key, value), value
        elif kind == "get":
            request, output = KVInput.get(key), current
        elif kind == "cas":
            expected = draw(st.sampled_from([None, *VALUES]))
            value = draw(st.sampled_from(VALUES))
            request, output = KVInput.cas(key, expected, value), current == expected
            if output:
                store[key] = value
        else:
            request = KVInput.delete(key)
            store.pop(key, None)
        call = k - draw(width)
        if draw(st.integers(0, 9)) == 0:
            history.append(Operation.timeout(k % 5, call, request))
        else:
            history.append(Operation(k % 5, call, k + draw(width), request, output))
        if draw(st.integers(0, 19)) == 0:
            phantom = KVInput.put(draw(st.sampled_from(KEYS)), draw(st.sampled_from(VALUES)))
            history.append(Operation.timeout(9, k - draw(width), phantom))
    return history


@settings(deadline=None, max_examples=200)
@given(linearizable_histories())
def test_generated_linearizable_histories_are_ok(history: list[Operation]) -> None:
    result = kv(history)
    assert result.ok, str(result)


@settings(deadline=None, max_examples=200)
@given(linearizable_histories(), st.data())
def test_a_read_of_a_never_written_value_makes_it_illegal(
    history: list[Operation], data: st.DataObject
) -> None:
    reads = [
        i
        for i, o in enumerate(history)
        if o.input.op == "get" and not o.timed_out and o.output is not UNKNOWN
    ]
    assume(reads)
    i = data.draw(st.sampled_from(reads))
    history[i] = replace(history[i], output=NEVER_WRITTEN)
    assert_illegal_on(kv(history), history[i].input.key)


def concurrent_single_key_history(
    n: int, clients: int, timeout_rate: float, seed: int
) -> list[Operation]:
    """``n`` operations on one key from ``clients`` clients issuing requests back to back.

    Each request takes effect at a random instant inside its window; outputs come from
    replaying those instants in order against a dict. A ``timeout_rate`` fraction of
    requests time out (half of those never take effect), after which the client moves on.
    """
    rng = random.Random(seed)
    clock = [rng.random() for _ in range(clients)]
    planned: list[tuple[float, int, float, float, KVInput, bool]] = []
    for i in range(n):
        client = min(range(clients), key=clock.__getitem__)
        call = clock[client]
        ret = call + rng.uniform(0.5, 2.0)
        roll = rng.random()
        if roll < 0.4:
            request = KVInput.put("k", f"v{i}")
        elif roll < 0.8:
            request = KVInput.get("k")
        elif roll < 0.95:
            request = KVInput.cas("k", f"v{i - rng.randint(1, 8)}", f"v{i}")
        else:
            request = KVInput.delete("k")
        timed_out = rng.random() < timeout_rate
        applied = not timed_out or rng.random() < 0.5
        instant = rng.uniform(call, ret)
        planned.append((instant, client, call, math.inf if timed_out else ret, request, applied))
        clock[client] = ret
    value: KVValue | None = None
    history: list[Operation] = []
    for _, client, call, ret, request, applied in sorted(planned, key=lambda p: p[0]):
        output: KVOutput = None
        if applied:
            if request.op == "get":
                output = value
            elif request.op == "cas":
                output = value == request.expected
                value = request.value if output else value
            else:
                value = request.value
        history.append(
            Operation.timeout(client, call, request)
            if ret == math.inf
            else Operation(client, call, ret, request, output)
        )
    return history


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_two_thousand_concurrent_operations_with_timeouts_are_ok(seed: int) -> None:
    history = concurrent_single_key_history(2000, clients=5, timeout_rate=0.01, seed=seed)
    assert sum(o.timed_out for o in history) >= 10
    assert kv(history).ok


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_two_thousand_concurrent_operations_with_a_bad_read_are_illegal(seed: int) -> None:
    # Without timed-out requests: each one still pending multiplies what a *failing*
    # search must rule out, so a violation among many of them can exhaust a time budget.
    history = concurrent_single_key_history(2000, clients=5, timeout_rate=0.0, seed=seed)
    reads = [i for i, o in enumerate(history) if o.input.op == "get"]
    bad = reads[len(reads) // 2]
    history[bad] = replace(history[bad], output=NEVER_WRITTEN)
    result = kv(history)
    assert_illegal_on(result, "k")
    assert result.violation is not None
    assert result.violation.blocking.operation == history[bad]
