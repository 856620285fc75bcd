"""The store under mixed load and faults, as real `kubelab-store` processes: every answer
a client got must be linearizable, and every watcher must see every event exactly once.

The run (one 3-member cluster, about 20 s, shared by the first four tests):

1. Four client threads send puts, compare-and-swaps (a txn: value == expected, then put;
   "absent" is mod_revision == 0) and linearizable gets on five keys, each request to a
   random member. Three watchers follow key prefixes from the revision the run started
   at: two move on to another member whenever theirs goes away, one stays with its
   member through crashes (an apiserver that talks only to its local store member):
   first the leader, then the member that gets replaced.
2. The leader is killed (SIGKILL) and, once another member leads, restarted on its data.
3. The member leading now is removed (`member remove`: it steps down and the other two
   elect a leader), killed, and its data dir wiped. It is added back as a learner with
   its peer URL, started with `--initial-cluster-state existing`, left to catch up and
   promoted to voter. Members snapshot every 200 entries and keep 50 for slow
   followers, so the restarted member and the new one both catch up by installing the
   leader's snapshot, with a watcher waiting on them.
4. The load goes on with three voters again, then stops.

Each phase waits for a number of requests to succeed in it, so that the load overlaps
every fault rather than pausing around it.

Why the checks suffice:

* Linearizability. Every request is recorded with the instants it was sent and
  answered, on one monotonic clock shared by the threads. An error that proves the
  request was not executed (no member took the connection, so it was never sent; or
  the member answered "no leader", which it does only when Raft refused the proposal,
  before anything was appended) leaves it out of the history. Any other failure (a
  timeout, a connection lost after sending) leaves its outcome unknown: it may take
  effect at any instant after it was sent, or never (a read without an answer is
  dropped: it changed nothing). `kubelab.lincheck` then searches for one order of all
  requests, each at an instant between its sending and its answer, in which a single
  key-value map gives every answer the clients saw: no stale read, no lost acknowledged
  write, no compare-and-swap that saw a state that never existed.
* Watches. The reference is read back from the store's MVCC history once the load has
  stopped (each key walked back one version at a time from the final revision), not
  from any watch. Nothing but the load writes, and each write is one put, so the
  reference must hold exactly one event for every revision of the run: a hole would mean
  the reference itself is incomplete. Every acknowledged write must be in it at the
  revision its answer named, no write left out as "not executed" (nor a compare-and-swap
  answered "failed") may be, and no value may appear twice (a write applied twice).
  Each watcher's events, across all its reconnections, must then equal the reference
  restricted to its prefix: same revisions, keys and values in the same order, so
  nothing is missing, repeated or out of order.
* Replicas. Once caught up, every member, the replaced one included, holds the
  reference's final value of every key.

Two shorter tests then pin the member replacement down without load.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import requests

from kubelab.lincheck import KVInput, KVModel, KVOutput, Operation, check
from kubelab.storeclient import (
    Compare,
    DeadlineExceeded,
    Put,
    StoreClient,
    StoreError,
    Unavailable,
    Unreachable,
    Watch,
)
from lab.localcluster import LocalCluster, Member

KEYS = ("fault/a/0", "fault/a/1", "fault/b/0", "fault/b/1", "fault/b/2")
ROAMING_PREFIXES = ("fault/a/", "fault/b/")  # one watcher each, and one on "fault/"
CLIENTS = 4
REQUEST_TIMEOUT = 3.0  # seconds; below the store's own 5 s, so some writes end unknown
SNAPSHOTTING = ["--snapshot-count", "200", "--experimental-snapshot-catchup-entries", "50"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Write:
    """One event: the put of `value` to `key` at `revision`."""

    revision: int
    key: str
    value: str


def _never_executed(err: StoreError) -> bool:
    """Whether an error proves the request was not executed: no member took the
    connection (the client never sent it), or the member answered UNAVAILABLE ("no
    leader"; for a membership change also "not the leader" or "a change is pending"),
    which it does only when Raft refused the proposal, before appending it. (The client's
    own UNAVAILABLE for a connection lost after sending names the endpoint instead.)"""
    if isinstance(err, Unreachable):
        return True
    return isinstance(err, Unavailable) and err.message.startswith("etcdserver: ")


def _send(client: StoreClient, op: KVInput) -> tuple[KVOutput, int]:
    """Run `op`: what it answered, as the model reads it, and the revision it wrote (0 if
    it wrote nothing)."""
    key = str(op.key)
    if op.op == "get":
        kvs = client.get(key).kvs
        return (kvs[0].value.decode() if kvs else None), 0
    value = str(op.value).encode()
    if op.op == "put":
        return None, client.put(key, value).header.revision
    if op.expected is None:
        compare = Compare.mod(key, "=", 0)  # the key is absent
    else:
        compare = Compare.value(key, "=", op.expected)
    txn = client.txn([compare], [Put(key.encode(), value)])
    return txn.succeeded, txn.header.revision if txn.succeeded else 0


class Load:
    """Client threads sending puts, compare-and-swaps and gets to random members."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.operations: list[Operation] = []
        self.acknowledged: dict[int, Write] = {}  # by the revision its answer named
        self.never_applied: set[str] = set()  # values of writes that did not happen
        self.answered = 0
        self.unknown = 0
        self.left_out = 0
        self.unexpected: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(cid,), daemon=True) for cid in range(CLIENTS)
        ]

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2 * REQUEST_TIMEOUT)
            assert not t.is_alive(), "a client thread did not stop"

    def wait_answers(self, count: int, timeout: float = 20.0) -> None:
        """Wait until `count` more requests have been answered."""
        target = self.answered + count
        deadline = time.monotonic() + timeout
        while self.answered < target:
            assert time.monotonic() < deadline, f"the load made no progress: {self.answered}"
            time.sleep(0.05)

    def _run(self, cid: int) -> None:
        rng = random.Random(cid)
        clients = [
            StoreClient([m.client_url], timeout=REQUEST_TIMEOUT) for m in self.cluster.members
        ]
        seen: dict[str, str | None] = {}  # the last value this client saw or wrote, by key
        for n in itertools.count():
            if self._stop.is_set():
                break
            key = rng.choice(KEYS)
            value = f"{cid}.{n}"
            kind = rng.choices(("get", "put", "cas"), weights=(4, 3, 3))[0]
            if kind == "get":
                op = KVInput.get(key)
            elif kind == "put":
                op = KVInput.put(key, value)
            else:
                op = KVInput.cas(key, seen.get(key), value)
            call = time.monotonic()
            try:
                output, revision = _send(rng.choice(clients), op)
            except (StoreError, requests.RequestException) as err:
                self._failed(cid, call, op, err)
                time.sleep(0.02)  # not to spin on a member that is down
                continue
            ret = time.monotonic()
            if kind == "get":
                seen[key] = output if isinstance(output, str) else None
            elif revision:
                seen[key] = value
            with self._lock:
                self.operations.append(Operation(cid, call, ret, op, output))
                self.answered += 1
                if revision:
                    self.acknowledged[revision] = Write(revision, key, value)
                elif kind == "cas":
                    self.never_applied.add(value)
        for client in clients:
            client.close()

    def _failed(self, cid: int, call: float, op: KVInput, err: Exception) -> None:
        if not isinstance(err, Unavailable | DeadlineExceeded):
            with self._lock:
                self.unexpected.append(f"{op}: {type(err).__name__}: {err}")
        if op.op == "get":
            return  # a read with no answer constrains nothing
        with self._lock:
            if isinstance(err, StoreError) and _never_executed(err):
                self.left_out += 1
                self.never_applied.add(str(op.value))
            else:
                self.unknown += 1
                self.operations.append(Operation.timeout(cid, call, op))


class Reflector:
    """Follows a key prefix from a start revision, as a Kubernetes reflector does: when
    its stream breaks it watches again from the last revision it saw plus one.

    Without a home member it then goes on to the next member, as a client of the whole
    cluster does. With one it goes back to that member, waiting while it is down, as an
    apiserver that talks only to the store member on its own machine does (kubeadm's
    stacked control plane); `move` gives it a new home and switches to it at once.
    """

    def __init__(
        self,
        cluster: LocalCluster,
        prefix: str,
        start: int,
        home: Member | None = None,
        first: int = 0,
    ) -> None:
        self.prefix = prefix
        self.start = start
        self.events: list[Write] = []
        self.streams = 0
        self.canceled = ""
        self._members = cluster.members
        self._clients = {
            m.name: StoreClient([m.client_url], timeout=REQUEST_TIMEOUT) for m in cluster.members
        }
        self._home = home
        self._first = first
        self._lock = threading.Lock()
        self._watch: Watch | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def last_revision(self) -> int:
        return self.events[-1].revision if self.events else self.start - 1

    def move(self, home: Member) -> None:
        with self._lock:
            self._home = home
            if self._watch is not None:
                self._watch.close()

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
            if self._watch is not None:
                self._watch.close()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), f"the watcher of {self.prefix} did not stop"
        for client in self._clients.values():
            client.close()

    def _run(self) -> None:
        roaming = itertools.count(self._first)
        while not self._stop.is_set():
            member = self._home or self._members[next(roaming) % len(self._members)]
            try:
                watch = self._clients[member.name].watch(
                    self.prefix, prefix=True, start_revision=self.last_revision + 1
                )
            except StoreError:
                time.sleep(0.05)  # the member is down
                continue
            with self._lock:  # `move` and `stop` close what is published here
                self._watch = watch
                if self._stop.is_set() or self._home not in (None, member):
                    watch.close()
                    continue
            self.streams += 1
            try:
                for response in watch:
                    if response.canceled:
                        self.canceled = response.cancel_reason or "canceled"
                        return
                    self.events.extend(
                        Write(e.kv.mod_revision, e.kv.key.decode(), e.kv.value.decode())
                        for e in response.events
                    )
            except StoreError:
                pass  # the member went away


@dataclass
class FaultRun:
    load: Load
    reference: list[Write]  # every write of the run, in revision order
    first_revision: int
    last_revision: int
    reflectors: list[Reflector]
    final_values: dict[str, dict[str, str]]  # member name -> key -> value


def _member_call(
    cluster: LocalCluster, among: list[Member], call: Callable[[StoreClient], _T]
) -> _T:
    """Run a membership call on the leader (only it accepts one), again while there is
    none or it changes, which leave the request unexecuted."""
    deadline = time.monotonic() + 20
    while True:
        leader = cluster.wait_leader(timeout=20, among=among)
        with StoreClient([leader.client_url], timeout=REQUEST_TIMEOUT) as client:
            try:
                return call(client)
            except StoreError as err:
                if not _never_executed(err) or time.monotonic() > deadline:
                    raise
        time.sleep(0.1)


def _member_id(m: Member) -> int:
    with StoreClient([m.client_url], timeout=REQUEST_TIMEOUT) as client:
        return client.status().header.member_id


def _wait_caught_up(cluster: LocalCluster, m: Member, leader: Member) -> None:
    """Wait until `m` has applied everything the leader had committed when called."""
    status = cluster.status(leader)
    assert status is not None, f"{leader.name} does not answer"
    target = int(status["raftIndex"])
    deadline = time.monotonic() + 20
    while True:
        st = cluster.status(m)
        if st is not None and int(st["raftAppliedIndex"]) >= target:
            return
        assert time.monotonic() < deadline, f"{m.name} did not catch up to index {target}"
        time.sleep(0.1)


def _remove(cluster: LocalCluster, victim: Member) -> int:
    """`member remove` `victim`, kill it and wipe its data dir (its disk is replaced);
    return its member id."""
    victim_id = _member_id(victim)
    _member_call(cluster, cluster.members, lambda c: c.member_remove(victim_id))
    cluster.kill(victim)
    cluster.wipe(victim)
    return victim_id


def _add_back(cluster: LocalCluster, victim: Member, victim_id: int) -> None:
    """`member add --learner` `victim` with its peer URL, start it to join the cluster,
    wait until it has caught up, promote it: the cluster has its voters back."""
    others = [m for m in cluster.members if m is not victim]
    added = _member_call(cluster, others, lambda c: c.member_add([victim.peer_url], True))
    assert added.member.id == victim_id and added.member.is_learner
    cluster.start(victim, initial_cluster_state="existing")
    cluster.wait_serving(victim)
    _wait_caught_up(cluster, victim, cluster.wait_leader(among=others))
    _member_call(cluster, others, lambda c: c.member_promote(victim_id))
    members = _member_call(cluster, cluster.members, lambda c: c.member_list()).members
    assert sorted(m.id for m in members if not m.is_learner) == sorted(
        _member_id(m) for m in cluster.members
    )


def _reference(cluster: LocalCluster, first: int, last: int) -> list[Write]:
    """Every write from revision `first` to `last`, from the store's MVCC history."""
    leader = cluster.wait_leader()
    writes: list[Write] = []
    with StoreClient([leader.client_url], timeout=REQUEST_TIMEOUT) as client:
        for key in KEYS:
            revision = last
            while revision >= first:
                kvs = client.get(key, revision=revision).kvs
                if not kvs or kvs[0].mod_revision < first:
                    break
                writes.append(Write(kvs[0].mod_revision, key, kvs[0].value.decode()))
                revision = kvs[0].mod_revision - 1
    return sorted(writes, key=lambda w: w.revision)


def _settled_revision(cluster: LocalCluster) -> int:
    """The revision once writes have stopped: a write that timed out may still commit
    (its entry reached the leader's log), so wait until the revision stops moving."""
    revision = -1
    deadline = time.monotonic() + 20
    while True:
        leader = cluster.wait_leader()
        with StoreClient([leader.client_url], timeout=REQUEST_TIMEOUT) as client:
            now = client.get(KEYS[0]).header.revision
        if now == revision:
            return revision
        assert time.monotonic() < deadline, "the revision keeps moving after the load stopped"
        revision = now
        time.sleep(1.0)


def _final_values(cluster: LocalCluster) -> dict[str, dict[str, str]]:
    leader = cluster.wait_leader()
    out = {}
    for m in cluster.members:
        _wait_caught_up(cluster, m, leader)
        with StoreClient([m.client_url], timeout=REQUEST_TIMEOUT) as client:
            values = {}
            for key in KEYS:
                kvs = client.get(key, serializable=True).kvs
                if kvs:
                    values[key] = kvs[0].value.decode()
        out[m.name] = values
    return out


def _wait_for_watchers(reflectors: list[Reflector], reference: list[Write]) -> None:
    """Give the watchers up to 20 s to deliver the last events on their prefixes; what is
    still missing then shows in the comparison."""
    deadline = time.monotonic() + 20
    for r in reflectors:
        last = max((w.revision for w in reference if w.key.startswith(r.prefix)), default=0)
        while r.last_revision < last and not r.canceled and time.monotonic() < deadline:
            time.sleep(0.1)


def _fault_run(cluster: LocalCluster) -> FaultRun:
    """The run described at the top of this module."""
    started = time.monotonic()
    leader = cluster.wait_leader()
    with StoreClient([leader.client_url], timeout=REQUEST_TIMEOUT) as client:
        first = client.status().header.revision + 1
    local = Reflector(cluster, "fault/", first, home=leader)
    reflectors = [local] + [
        Reflector(cluster, p, first, first=i) for i, p in enumerate(ROAMING_PREFIXES, 1)
    ]
    try:
        with Load(cluster) as load:
            load.wait_answers(150)

            # kill -9 the leader; once another member leads, restart it on its data.
            cluster.kill(leader)
            survivors = [m for m in cluster.members if m is not leader]
            cluster.wait_leader(timeout=15, among=survivors)
            load.wait_answers(100)
            cluster.start(leader)
            cluster.wait_serving(leader)
            load.wait_answers(100)

            # Replace the member leading now: remove, wipe, add as a learner, promote.
            victim = cluster.wait_leader()
            local.move(victim)
            victim_id = _remove(cluster, victim)
            load.wait_answers(50)
            _add_back(cluster, victim, victim_id)
            load.wait_answers(150)
        last = _settled_revision(cluster)
        reference = _reference(cluster, first, last)
        _wait_for_watchers(reflectors, reference)
    finally:
        for r in reflectors:
            r.stop()
    final_values = _final_values(cluster)
    print(
        f"\nfault run: {len(load.operations)} operations ({load.unknown} unknown, "
        f"{load.left_out} left out as not executed), {len(reference)} writes in "
        f"revisions {first}..{last}, watch streams opened {[r.streams for r in reflectors]}, "
        f"{time.monotonic() - started:.1f}s"
    )
    return FaultRun(load, reference, first, last, reflectors, final_values)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultRun]:
    cluster = LocalCluster(tmp_path_factory.mktemp("faults") / "lab", 3, extra_args=SNAPSHOTTING)
    cluster.start_all()
    try:
        yield _fault_run(cluster)
    finally:
        for m in cluster.members:
            cluster.kill(m)


def test_history_under_faults_is_linearizable(run: FaultRun) -> None:
    assert not run.load.unexpected, "unexpected errors:\n" + "\n".join(run.load.unexpected[:10])
    result = check(KVModel(), run.load.operations, timeout_s=60)
    assert result.ok, result.explain()


def test_store_history_holds_each_executed_write_once(run: FaultRun) -> None:
    revisions = [w.revision for w in run.reference]
    assert revisions == list(range(run.first_revision, run.last_revision + 1)), (
        "the MVCC history has holes or events of other writers"
    )
    by_revision = {w.revision: w for w in run.reference}
    wrong = [w for r, w in run.load.acknowledged.items() if by_revision.get(r) != w]
    assert not wrong, (
        f"acknowledged writes not at the revision they were answered with: {wrong[:5]}"
    )
    values = [w.value for w in run.reference]
    assert len(set(values)) == len(values), "a write was applied twice"
    ghosts = [w for w in run.reference if w.value in run.load.never_applied]
    assert not ghosts, f"writes that were reported as not executed were applied: {ghosts[:5]}"


def test_every_watcher_sees_every_event_once_in_order(run: FaultRun) -> None:
    for r in run.reflectors:
        assert not r.canceled, f"the watch of {r.prefix} was canceled: {r.canceled}"
        expected = [w for w in run.reference if w.key.startswith(r.prefix)]
        if r.events != expected:
            at = next(
                (i for i, (a, b) in enumerate(zip(r.events, expected, strict=False)) if a != b),
                min(len(r.events), len(expected)),
            )
            pytest.fail(
                f"the watcher of {r.prefix!r} ({r.streams} streams) differs from the "
                f"store's history at event {at}: saw {r.events[at : at + 3]}, "
                f"expected {expected[at : at + 3]} ({len(r.events)} vs {len(expected)} events)"
            )


def test_every_member_ends_with_the_same_data(run: FaultRun) -> None:
    expected = {w.key: w.value for w in run.reference}
    for name, values in run.final_values.items():
        assert values == expected, f"{name} differs from the store's history"


# -- membership changes, focused -----------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    snapshotting = ["--snapshot-count", "20", "--experimental-snapshot-catchup-entries", "5"]
    c = LocalCluster(tmp_path / "lab", 3, extra_args=snapshotting)
    c.start_all()
    try:
        yield c
    finally:
        for m in c.members:
            c.kill(m)


def test_a_member_replaced_with_an_empty_data_dir_joins_and_is_promoted(
    cluster: LocalCluster,
) -> None:
    """The joining member knows no peers until the leader's snapshot names them: it must
    dial those its `--initial-cluster` lists, or it cannot even answer the leader."""
    leader = cluster.wait_leader()
    victim = next(m for m in cluster.members if m is not leader)
    victim_id = _remove(cluster, victim)
    cluster.put(leader, "after-removal", "x")
    _add_back(cluster, victim, victim_id)
    assert cluster.get(victim, "after-removal") == "x"


def test_a_member_that_missed_a_removal_survives_the_member_coming_back(
    cluster: LocalCluster,
) -> None:
    """A member down while another is removed catches up from a snapshot taken after the
    removal; when the removed member is added back, it must take it as a new peer."""
    leader = cluster.wait_leader()
    behind, victim = (m for m in cluster.members if m is not leader)
    cluster.kill(behind)
    for i in range(60):  # several snapshots: `behind` will need one
        cluster.put(leader, f"k{i}", "x")
    victim_id = _remove(cluster, victim)
    cluster.start(behind)
    cluster.wait_serving(behind)
    _wait_caught_up(cluster, behind, cluster.wait_leader(among=[leader, behind]))
    _add_back(cluster, victim, victim_id)
    cluster.put(behind, "after", "x")
    assert all(cluster.get(m, "after") == "x" for m in cluster.members)
