"""The store as real processes on loopback: crashes under write load lose nothing.

Three `kubelab-store` processes talk over mutual TLS. Writers keep putting unique keys
through random members while the test kills (SIGKILL) the leader, restarts it, kills a
follower, then takes two members down so the survivor has no quorum: its writes must
fail with an error within the request timeout, never hang. Once everyone is back, every
write that was acknowledged must be readable, linearizably, from every member. The
leader's skipped heartbeats cost no election.
"""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from kubelab.storeclient import FailedPrecondition, StoreClient
from lab.localcluster import LocalCluster, free_port
from tests.waiting import until


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "lab", 3)
    c.start_all()
    try:
        yield c
    finally:
        c.stop_all()


class Writers:
    """Background writers recording which puts were acknowledged."""

    def __init__(self, cluster: LocalCluster, count: int = 2) -> None:
        self.cluster = cluster
        self.acked: dict[str, str] = {}
        self.failures = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(count)
        ]

    def _run(self, wid: int) -> None:
        rng = random.Random(wid)
        n = 0
        while not self._stop.is_set():
            alive = self.cluster.alive()
            if not alive:
                time.sleep(0.05)
                continue
            key, value = f"w{wid}-{n}", f"v{n}"
            n += 1
            try:
                self.cluster.put(rng.choice(alive), key, value, timeout=3.0)
            except (requests.RequestException, ValueError):
                with self._lock:
                    self.failures += 1
                continue
            with self._lock:
                self.acked[key] = value

    def __enter__(self) -> Writers:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)


def _wait_for_acks(writers: Writers, more_than: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while len(writers.acked) <= more_than:
        assert time.monotonic() < deadline, "writes made no progress"
        time.sleep(0.05)


def test_kill_leader_and_followers_under_load_loses_no_acknowledged_write(
    cluster: LocalCluster,
) -> None:
    cluster.wait_leader()
    with Writers(cluster) as writers:
        _wait_for_acks(writers, 20)

        # kill -9 the leader: a new one is elected and writes go on.
        old_leader = cluster.wait_leader()
        cluster.kill(old_leader)
        survivors = [m for m in cluster.members if m is not old_leader]
        new_leader = cluster.wait_leader(timeout=15, among=survivors)
        assert new_leader is not old_leader
        _wait_for_acks(writers, len(writers.acked) + 10)
        cluster.start(old_leader)

        # kill -9 a follower, restart it.
        follower = next(m for m in cluster.members if m is not cluster.wait_leader())
        cluster.kill(follower)
        _wait_for_acks(writers, len(writers.acked) + 10)
        cluster.start(follower)
        _wait_for_acks(writers, len(writers.acked) + 10)

    # Two members down: the survivor has no quorum. A write fails with an error in
    # bounded time instead of hanging.
    lone = cluster.members[0]
    cluster.wait_serving(lone)
    for m in cluster.members[1:]:
        cluster.kill(m)
    started = time.monotonic()
    with pytest.raises(requests.HTTPError) as err:
        cluster.put(lone, "during-outage", "x", timeout=30.0)
    assert time.monotonic() - started < 15.0
    assert err.value.response.status_code in (503, 504)
    assert "etcdserver" in err.value.response.json()["message"]

    # Everyone back: every acknowledged write is there, on every member.
    for m in cluster.members[1:]:
        cluster.start(m)
    for m in cluster.members:
        cluster.wait_serving(m)
    cluster.wait_leader(timeout=30)
    assert len(writers.acked) > 40
    for m in cluster.members:
        missing = [k for k, v in writers.acked.items() if cluster.get(m, k) != v]
        assert not missing, f"{m.name} lost acknowledged writes: {missing[:10]}"


def test_member_with_corrupted_wal_refuses_to_start_and_names_the_file(
    cluster: LocalCluster,
) -> None:
    lead = cluster.wait_leader()
    for i in range(50):
        cluster.put(lead, f"k{i}", "x" * 100)
    victim = next(m for m in cluster.members if m is not lead)
    cluster.kill(victim)
    wal = sorted((cluster.dir / victim.name / "member" / "wal").glob("*.wal"))[0]
    data = bytearray(wal.read_bytes())
    data[len(data) // 2] ^= 0xFF  # rot a byte in the middle of the log
    wal.write_bytes(bytes(data))

    proc = subprocess.run(cluster.command(victim), capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert wal.name in proc.stderr and "offset" in proc.stderr
    assert "remove" in proc.stderr or "restore" in proc.stderr


def test_lagging_follower_catches_up_from_a_snapshot_and_restarts_from_it(
    tmp_path: Path,
) -> None:
    snapshotting = ["--snapshot-count", "20", "--experimental-snapshot-catchup-entries", "5"]
    cluster = LocalCluster(tmp_path / "lab", 3, extra_args=snapshotting)
    cluster.start_all()
    try:
        lead = cluster.wait_leader()
        follower = next(m for m in cluster.members if m is not lead)
        cluster.kill(follower)
        for i in range(120):  # several snapshots; the entries it misses are compacted
            cluster.put(lead, f"k{i}", f"v{i}")
        cluster.start(follower)
        cluster.wait_serving(follower)
        deadline = time.monotonic() + 30
        while cluster.get(follower, "k119", serializable=True) != "v119":
            assert time.monotonic() < deadline, "the follower never caught up"
            time.sleep(0.1)
        # It caught up by installing a snapshot (sent by whichever member led by then:
        # leadership may move while a loaded machine runs the suite).
        follower_log = (cluster.dir / f"{follower.name}.log").read_text()
        assert "restored snapshot" in follower_log
        # It restarts from its own snapshot plus the WAL after it.
        cluster.kill(follower)
        cluster.start(follower)
        cluster.wait_serving(follower)
        assert all(cluster.get(follower, f"k{i}") == f"v{i}" for i in range(120))
        snaps = list((cluster.dir / follower.name / "member" / "snap").glob("*.snap"))
        assert snaps, "the follower saved no snapshot"
    finally:
        cluster.stop_all()


def test_a_member_with_open_watches_stops_promptly_on_sigterm(cluster: LocalCluster) -> None:
    """A graceful stop ends the watch streams first; it used to wait on them forever."""
    cluster.wait_leader()
    member = cluster.members[0]
    cluster.wait_serving(member)
    watch = StoreClient([member.client_url]).watch("x", prefix=True)
    assert next(iter(watch)).created
    started = time.monotonic()
    cluster.kill(member, signal.SIGTERM)
    assert time.monotonic() - started < 10
    watch.close()


def test_promoting_a_learner_that_has_not_caught_up_is_refused(cluster: LocalCluster) -> None:
    """As etcd: the leader refuses to promote a learner whose log lags its own (here one
    that was added and never started), and the cluster keeps its three voters."""
    leader = cluster.wait_leader()
    cluster.wait_serving(leader)
    cluster.put(leader, "promote/k", "v")
    with StoreClient([leader.client_url]) as client:
        added = client.member_add([f"http://127.0.0.1:{free_port()}"], is_learner=True)
        with pytest.raises(FailedPrecondition, match="in sync with leader"):
            client.member_promote(added.member.id)
        members = client.member_remove(added.member.id).members
    assert len(members) == 3 and not any(m.is_learner for m in members)


def test_the_leader_skips_heartbeats_its_appends_made_redundant(cluster: LocalCluster) -> None:
    """A follower that got an append within the heartbeat interval is not sent the
    regular heartbeat (kubelab departs from etcd here, to spare an idle lab's CPU): under
    steady writes heartbeats are skipped, yet no follower's election timer runs out, and
    at rest every heartbeat goes out again."""
    skipped = "kubelab_store_heartbeats_skipped_total"
    leader = cluster.wait_leader()
    cluster.wait_serving(leader)
    terms = {m.name: cluster.metrics(m)["kubelab_store_raft_term"] for m in cluster.members}
    # Each member publishes its attributes once it has a leader (etcd's publish); once
    # those are in, ten heartbeat intervals with no appends must skip nothing.
    committed = "etcd_server_proposals_committed_total"
    until(
        lambda: cluster.metrics(leader)[committed] >= len(cluster.members),
        "the members' attributes",
    )
    time.sleep(0.2)
    at_rest = cluster.metrics(leader)[skipped]
    time.sleep(1.0)
    assert cluster.metrics(leader)[skipped] == at_rest

    for i in range(60):  # about 20 writes a second, through every member
        cluster.put(cluster.members[i % 3], f"beat/{i}", "v")
        time.sleep(0.05)
    assert cluster.metrics(leader)[skipped] > at_rest
    for m in cluster.members:
        samples = cluster.metrics(m)
        assert samples["kubelab_store_raft_term"] == terms[m.name], f"{m.name} saw an election"
        assert samples["etcd_server_is_leader"] == (1.0 if m is leader else 0.0)
