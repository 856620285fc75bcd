"""kubelab's store at its limits and fed bad input, as real `kubelab-store` processes.

What is checked, and why it matters:

* size: a request over etcd's --max-request-bytes (1.5 MiB) is refused as etcd refuses it
  ("etcdserver: request is too large", InvalidArgument) and leaves no trace;
* quota: past --quota-backend-bytes every member raises NOSPACE at the same log index;
  writes are refused with etcd's error while reads, deletes and compaction still work,
  and `alarm disarm` after compacting brings writes back (the runbook etcd documents);
* bad input: any malformed, unknown or mistyped field is a 400 with a JSON error body
  naming it, never a traceback, an HTML page or a hung stream;
* client TLS: with --client-cert-auth only certificates from the cluster's CA get in;
* /metrics: the etcd-named series Prometheus dashboards use exist and move.

Single-member clusters where membership does not matter (they start in about a second);
the quota test uses three members because the alarm is replicated state.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from kubelab import pki
from kubelab.storeclient import (
    InvalidArgument,
    Put,
    ResourceExhausted,
    StoreClient,
    Unavailable,
)
from lab.localcluster import LocalCluster, Member, metric_samples

MIB = 1024 * 1024
TOO_LARGE = "etcdserver: request is too large"
NO_SPACE = "etcdserver: mvcc: database space exceeded"


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("limits") / "lab", 1)
    cluster.start_all()
    try:
        cluster.wait_leader()
        yield cluster
    finally:
        cluster.stop_all()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# -- request size ------------------------------------------------------------------------


def test_request_over_the_size_limit_is_refused_and_writes_nothing(single: LocalCluster) -> None:
    """etcd 3.4 measures the decoded request: a value just under 1.5 MiB is taken although
    its JSON is 2 MiB, one just over is refused with InvalidArgument; so is a txn whose
    ops only add up to too much, and a body too large to even decode."""
    with StoreClient([single.members[0].client_url], timeout=30) as client:
        base = client.put("size/ok", b"x" * (int(1.5 * MIB) - 1024)).header.revision
        with pytest.raises(InvalidArgument) as err:
            client.put("size/big", b"x" * (int(1.5 * MIB) + 16))
        assert (err.value.code, err.value.message) == (3, TOO_LARGE)
        with pytest.raises(InvalidArgument, match=f"^{TOO_LARGE}$"):
            client.txn([], [Put(b"size/t1", b"x" * 800 * 1024), Put(b"size/t2", b"x" * 800 * 1024)])
        r = requests.post(
            single.members[0].client_url + "/v3/kv/put",
            json={"key": b64("size/huge"), "value": base64.b64encode(b"x" * 3 * MIB).decode()},
            timeout=30,
        )
        assert (r.status_code, r.json()) == (
            400,
            {"error": TOO_LARGE, "message": TOO_LARGE, "code": 3},
        )
        after = client.get("size/", prefix=True, keys_only=True)
        assert after.header.revision == base
        assert [kv.key for kv in after.kvs] == [b"size/ok"]


# -- bad input ---------------------------------------------------------------------------

# (path, raw body, a word the message must contain)
BAD_BODIES = [
    ("/v3/kv/range", '{"key": "YQ==",', "malformed JSON"),
    ("/v3/kv/put", "\xff\xfe", "not valid UTF-8"),
    ("/v3/kv/txn", "[1, 2]", "expected a JSON object"),
    ("/v3/kv/range", '{"key": "YQ==", "prefix": true}', "prefix"),
    ("/v3/kv/put", '{"key": "YQ==", "val": "Yg=="}', "val"),
    ("/v3/kv/deleterange", '{"key": "YQ==", "prevKv": true}', "prevKv"),
    ("/v3/kv/txn", '{"compare": [], "then": []}', "then"),
    ("/v3/kv/txn", '{"success": [{"request_get": {"key": "YQ=="}}]}', "request_get"),
    ("/v3/kv/compaction", '{"rev": "1"}', "rev"),
    ("/v3/lease/grant", '{"ttl": "5"}', "ttl"),
    ("/v3/lease/timetolive", '{"ID": "1", "withKeys": true}', "withKeys"),
    ("/v3/maintenance/status", '{"verbose": true}', "verbose"),
    ("/v3/cluster/member/list", '{"all": true}', "all"),
    ("/v3/kv/range", '{"key": "YQ==", "limit": "ten"}', "limit"),
    ("/v3/kv/range", '{"key": "YQ==", "limit": 1.5}', "limit"),
    ("/v3/kv/range", '{"key": 5}', "key"),
    ("/v3/kv/range", '{"key": "not base64!"}', "key"),
    ("/v3/kv/range", '{"key": "YQ==", "keys_only": "yes"}', "keys_only"),
    ("/v3/kv/range", '{"key": "YQ==", "sort_order": "UP"}', "sort_order"),
    ("/v3/kv/put", '{"key": "YQ==", "lease": true}', "lease"),
    ("/v3/kv/txn", '{"compare": {"key": "YQ=="}}', "compare"),
    ("/v3/kv/txn", '{"compare": [{"key": "YQ==", "result": "BIG"}]}', "result"),
    ("/v3/kv/txn", '{"success": [{"request_put": {"key": []}}]}', "key"),
    ("/v3/lease/grant", '{"TTL": [5]}', "TTL"),
    ("/v3/lease/revoke", '{"ID": "lease-1"}', "ID"),
    ("/v3/maintenance/alarm", '{"action": "SNOOZE"}', "action"),
    ("/v3/watch", '{"create_request": {"key": 5}}', "key"),
    ("/v3/watch", '{"create_request": {"key": "YQ==", "filters": ["NOGET"]}}', "filters"),
    ("/v3/watch", '{"watch_request": {}}', "watch_request"),
    ("/v3/lease/keepalive", '{"ID": {}}', "ID"),
]


@pytest.mark.parametrize(("path", "body", "word"), BAD_BODIES)
def test_bad_input_is_a_400_with_an_error_body_naming_it(
    single: LocalCluster, path: str, body: str, word: str
) -> None:
    r = requests.post(single.members[0].client_url + path, data=body.encode("latin-1"), timeout=5)
    assert r.status_code == 400, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    answer = r.json()
    assert sorted(answer) == ["code", "error", "message"]
    assert answer["code"] == 3 and answer["error"] == answer["message"]
    assert word in answer["message"]


def test_bad_input_left_no_traceback_in_the_log(single: LocalCluster) -> None:
    """Runs after the bad-input cases (module order): the member logged no exception."""
    log = (single.dir / f"{single.members[0].name}.log").read_text()
    assert "Traceback" not in log


# -- quota -------------------------------------------------------------------------------


def alarm_view(c: StoreClient) -> tuple[list[str], list[str], bool, str]:
    """One member's alarms as its alarm list, status and health show them. The alarm list
    comes first: it is a linearizable read, so the member has applied everything before."""
    alarms = [a.alarm for a in c.alarm_list().alarms]
    status, health = c.status(), c.health()
    errors = [e.replace(f"memberID:{status.header.member_id} ", "memberID:self ")
              for e in status.errors]  # fmt: skip
    return alarms, errors, health.healthy, health.reason


def test_quota_raises_nospace_and_the_runbook_recovers(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "lab", 3, extra_args=["--quota-backend-bytes", "65536"])
    cluster.start_all()
    try:
        cluster.wait_leader()
        for m in cluster.members:
            cluster.wait_serving(m)
        with contextlib.ExitStack() as stack:
            members = [stack.enter_context(StoreClient([m.client_url])) for m in cluster.members]
            client = members[0]
            written = 0
            with pytest.raises(ResourceExhausted) as err:
                for written in range(1, 200):  # 1 KiB values: the quota is reached near 60
                    client.put(f"quota/{written:03}", b"v" * 1024)
            assert (err.value.code, err.value.message) == (8, NO_SPACE)
            assert 30 < written < 150

            # Every member raised the alarm.
            raised = (["NOSPACE"], ["memberID:self alarm:NOSPACE "], False, "ALARM NOSPACE")
            assert [alarm_view(c) for c in members] == [raised] * len(members)
            # Anything that could grow the store is refused ...
            with pytest.raises(ResourceExhausted):
                client.lease_grant(60)
            with pytest.raises(ResourceExhausted):
                client.txn([], [Put(b"quota/txn", b"v")])
            # ... while reads and deletes are served.
            assert client.get("quota/", prefix=True, count_only=True).count == written - 1
            deleted = client.delete("quota/", prefix=True)
            assert deleted.deleted == written - 1
            with pytest.raises(ResourceExhausted):
                client.put("quota/after-delete", "v")  # the alarm outlives its cause

            client.compact(deleted.header.revision)
            disarmed = client.alarm_disarm()
            assert [a.alarm for a in disarmed.alarms] == ["NOSPACE"]
            assert [alarm_view(c) for c in members] == [([], [], True, "")] * len(members)
            assert client.put("quota/again", "v").header.revision == deleted.header.revision + 1
    finally:
        cluster.stop_all()


# -- client TLS --------------------------------------------------------------------------


class TLSCluster(LocalCluster):
    """A LocalCluster whose members serve clients over HTTPS and require a client
    certificate from the cluster's CA (LocalCluster itself serves clients plain HTTP).
    Each member's certificate is valid for 127.0.0.1 and both server and client use, so it
    serves clients as well as peers."""

    def https_url(self, m: Member) -> str:
        return f"https://127.0.0.1:{m.client_port}"

    def command(self, m: Member, *args: Any, **kwargs: Any) -> list[str]:
        cmd = super().command(m, *args, **kwargs)
        cmd[cmd.index("--listen-client-urls") + 1] = self.https_url(m)
        pki_dir = self.dir / "pki"
        return [
            *cmd,
            "--cert-file", str(pki_dir / f"{m.name}.crt"),
            "--key-file", str(pki_dir / f"{m.name}.key"),
            "--trusted-ca-file", str(pki_dir / "ca.crt"),
            "--client-cert-auth",
        ]  # fmt: skip


def wait_ready(client: StoreClient, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if client.status().leader:
                return
        except Unavailable:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def tls12_handshake(port: int, ca_file: Path, pair: tuple[Path, Path] | None) -> None:
    """Handshake over TLS 1.2, where the server checks the client's certificate within
    the handshake (over TLS 1.3 a refusal only shows as a closed connection later)."""
    ctx = ssl.create_default_context(cafile=str(ca_file))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if pair is not None:
        ctx.load_cert_chain(*pair)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as sock,
        ctx.wrap_socket(sock, server_hostname="127.0.0.1"),
    ):
        pass


def test_client_tls_admits_only_certificates_from_the_cluster_ca(tmp_path: Path) -> None:
    cluster = TLSCluster(tmp_path / "lab", 1)
    cluster.start_all()
    try:
        pki_dir = cluster.dir / "pki"
        ca_file = pki_dir / "ca.crt"
        good = pki.write_pair(pki.issue(pki.load_pair(pki_dir, "ca"), "labctl", client=True),
                              tmp_path / "good", "client")  # fmt: skip
        stranger_ca = pki.new_ca("some-other-ca")
        bad = pki.write_pair(pki.issue(stranger_ca, "labctl", client=True), tmp_path / "bad",
                             "client")  # fmt: skip
        member = cluster.members[0]
        url = cluster.https_url(member)

        with StoreClient([url], ca_file=ca_file, cert_file=good[0], key_file=good[1]) as client:
            wait_ready(client)
            client.put("tls/k", "v")
            assert client.get("tls/k").kvs[0].value == b"v"
        tls12_handshake(member.client_port, ca_file, good)

        # Refused: no client certificate, and a certificate from another CA.
        for pair in (None, bad):
            with pytest.raises(ssl.SSLError):
                tls12_handshake(member.client_port, ca_file, pair)
            cert = {"cert_file": pair[0], "key_file": pair[1]} if pair else {}
            with StoreClient([url], ca_file=ca_file, **cert) as client, pytest.raises(Unavailable):
                client.get("tls/k")
        with pytest.raises(requests.ConnectionError):
            requests.post(url.replace("https", "http") + "/v3/kv/range", json={}, timeout=5)
    finally:
        cluster.stop_all()


# -- metrics -----------------------------------------------------------------------------


def scrape(m: Member) -> dict[str, float]:
    """Every sample of /metrics by name (labels folded into the name when present)."""
    r = requests.get(m.client_url + "/metrics", timeout=5)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    return metric_samples(r.text)


def test_metrics_are_served_and_move_with_writes(single: LocalCluster) -> None:
    m = single.members[0]
    before = scrape(m)
    assert before["etcd_server_has_leader"] == 1.0
    assert before["etcd_server_is_leader"] == 1.0
    assert before["etcd_server_leader_changes_seen_total"] >= 1.0
    assert before["kubelab_store_raft_term"] >= 1.0
    assert before["etcd_server_proposals_failed_total"] == 0.0
    with StoreClient([m.client_url]) as client:
        for i in range(5):
            client.put(f"metrics/{i}", b"v" * 100)
        with client.watch("metrics/", prefix=True) as watch:
            next(iter(watch))  # created: the watcher is registered
            during = scrape(m)
    after = scrape(m)
    assert (
        after["etcd_server_proposals_committed_total"]
        >= before["etcd_server_proposals_committed_total"] + 5
    )
    assert after["etcd_mvcc_db_total_size_in_bytes"] > before["etcd_mvcc_db_total_size_in_bytes"]
    fsyncs = "etcd_disk_wal_fsync_duration_seconds_count"
    assert after[fsyncs] >= before[fsyncs] + 5
    assert after["etcd_disk_wal_fsync_duration_seconds_bucket{le=+Inf}"] == after[fsyncs]
    assert during["etcd_debugging_mvcc_watcher_total"] == 1.0
    puts = "kubelab_store_requests_total{code=200,path=/v3/kv/put}"
    assert after[puts] - before.get(puts, 0.0) == 5
