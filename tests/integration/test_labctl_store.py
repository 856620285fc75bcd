"""`labctl store ...` against a real etcd, and next to the real etcdctl.

The outputs etcdctl users read (put, get, del, txn, watch, member list, the endpoint
tables) are compared byte for byte with etcdctl's own against the same etcd; the other
verbs are checked for etcdctl's wording. `main` runs in-process with capsys, except for
`watch`, which runs as a real process so Ctrl-C (SIGINT) can end it.
"""

from __future__ import annotations

import io
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.store import labutl as labutl_module
from controlplane.store.labutl import SnapshotStatus
from controlplane.store.labutl import main as labutl_main
from kubelab.cli import store
from kubelab.storeclient import StoreClient
from lab.labctl.cli import main
from lab.localcluster import LocalCluster
from tests.integration.etcd_fixture import ETCD, ETCDCTL, EtcdCluster, free_port, start_etcd_cluster

needs_etcdctl = pytest.mark.skipif(ETCDCTL is None, reason="etcdctl not installed")


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    if ETCD is None:
        pytest.skip("etcd not installed (apt-get install etcd-server)")
    cluster = start_etcd_cluster(tmp_path_factory.mktemp("etcd"))
    try:
        yield cluster
    finally:
        cluster.stop()


class Labctl:
    """Runs ``labctl store --endpoints <etcd> ARGS`` in-process and captures its output."""

    def __init__(self, etcd: EtcdCluster, capsys: pytest.CaptureFixture[str]) -> None:
        self.endpoints = ",".join(etcd.endpoints)
        self.capsys = capsys

    def __call__(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        self.capsys.readouterr()
        saved = sys.stdin
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        try:
            code = main(["store", "--endpoints", self.endpoints, *args])
        finally:
            sys.stdin = saved
        out, err = self.capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err

    def ok(self, *args: str, stdin: str | None = None) -> str:
        code, out, err = self(*args, stdin=stdin)
        assert code == 0, err
        return out


@pytest.fixture
def lab(etcd: EtcdCluster, capsys: pytest.CaptureFixture[str]) -> Labctl:
    return Labctl(etcd, capsys)


def etcdctl(etcd: EtcdCluster, *args: str, stdin: str | None = None) -> str:
    assert ETCDCTL is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL_")}
    env["ETCDCTL_API"] = "3"
    done = subprocess.run(
        [ETCDCTL, "--endpoints", ",".join(etcd.endpoints), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=True,
    )
    return done.stdout


def _revision(etcd: EtcdCluster) -> int:
    with StoreClient(etcd.endpoints) as c:
        return c.status().header.revision


# -- the verbs etcdctl users read most, byte for byte ------------------------------------


@needs_etcdctl
def test_put_and_get_print_what_etcdctl_prints(etcd: EtcdCluster, lab: Labctl) -> None:
    assert lab.ok("put", "same/k1", "v1") == etcdctl(etcd, "put", "same/k0", "v0") == "OK\n"
    assert lab.ok("put", "same/k1", "v2", "--prev-kv") == "OK\nsame/k1\nv1\n"
    assert etcdctl(etcd, "put", "same/k0", "v9", "--prev-kv") == "OK\nsame/k0\nv0\n"
    lab.ok("put", "same/k2", "hello world")
    rev = _revision(etcd)
    lab.ok("put", "same/k2", "changed")

    for args in (
        ["get", "same/k1"],
        ["get", "same/", "--prefix"],
        ["get", "same/", "--prefix", "--keys-only"],
        ["get", "same/", "--prefix", "--print-value-only"],
        ["get", "same/", "--prefix", "--limit", "1"],
        ["get", "same/", "--prefix", "--order", "DESCEND", "--sort-by", "MODIFY"],
        ["get", "same/k0", "same/k2"],
        ["get", "same/k1", "--from-key"],
        ["get", "same/k2", "--rev", str(rev)],
        ["get", "same/k1", "--consistency", "s"],
        ["get", "same/nothing"],
        ["get", "same/", "--prefix", "-w", "json"],
        ["get", "same/nothing", "-w", "json"],
    ):
        assert lab.ok(*args) == etcdctl(etcd, *args), args
    assert lab.ok("get", "same/", "--prefix", "--count-only") == "3\n"


@needs_etcdctl
def test_del_prints_what_etcdctl_prints(etcd: EtcdCluster, lab: Labctl) -> None:
    for family in ("dl/", "dc/"):
        for name in ("a", "b", "c"):
            lab.ok("put", family + name, name * 3)
    assert lab.ok("del", "dl/a") == etcdctl(etcd, "del", "dc/a") == "1\n"
    assert lab.ok("del", "dl/a") == etcdctl(etcd, "del", "dc/a") == "0\n"
    ours = lab.ok("del", "dl/", "--prefix", "--prev-kv")
    theirs = etcdctl(etcd, "del", "dc/", "--prefix", "--prev-kv")
    assert ours == theirs.replace("dc/", "dl/") == "2\ndl/b\nbbb\ndl/c\nccc\n"


@needs_etcdctl
def test_txn_reads_etcdctls_syntax_and_prints_like_it(etcd: EtcdCluster, lab: Labctl) -> None:
    script = (
        'value("{p}flag") = "on"\n'
        'mod("{p}flag") > "0"\n'
        "\n"
        'put {p}out "hello there"\n'
        "get {p}flag\n"
        "del {p}flag\n"
        "get {p} --prefix\n"
        "\n"
        "get {p}out\n"
        "\n"
    )
    for family in ("tl/", "tc/"):
        lab.ok("put", family + "flag", "on")
    ours = lab.ok("txn", stdin=script.format(p="tl/"))
    theirs = etcdctl(etcd, "txn", stdin=script.format(p="tc/"))
    assert ours == theirs.replace("tc/", "tl/")
    assert ours.startswith("SUCCESS\n\nOK\n\ntl/flag\non\n\n1\n\ntl/out\nhello there\n")

    # The flag is gone now: the failure branch runs.
    ours = lab.ok("txn", stdin=script.format(p="tl/"))
    assert ours == etcdctl(etcd, "txn", stdin=script.format(p="tc/")).replace("tc/", "tl/")
    assert ours == "FAILURE\n\ntl/out\nhello there\n"


def test_txn_interactive_prompts_and_compare_forms(lab: Labctl) -> None:
    lab.ok("put", "ti/k", "v")
    out = lab.ok(
        "txn",
        "-i",
        stdin='ver("ti/k") = "1"\nc("ti/k") != "0"\nval("ti/k") < "w"\n\nput ti/k2 x --prev-kv\n\n',
    )
    assert out == (
        "compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\n"
        "SUCCESS\n\nOK\n"
    )
    lease = lab.ok("lease", "grant", "60").split()[1]
    lab.ok("put", "ti/leased", "v", "--lease", lease)
    out = lab.ok("txn", "-w", "json", stdin=f'lease("ti/leased") = "{lease}"\n\n\n')
    assert json.loads(out)["succeeded"] is True


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ('bogus("k") = "1"\n\n\n', "unknown target bogus"),
        ('mod("k") > "x"\n\n\n', "is not a number"),
        ("mod(k) > 1\n\n\n", "malformed comparison"),
        ("\nfrob k\n\n", "expected get, put or del"),
        ("\nput onlykey\n\n", "put: the following arguments are required: value"),
    ],
)
def test_txn_rejects_malformed_lines(lab: Labctl, script: str, message: str) -> None:
    code, out, err = lab("txn", stdin=script)
    assert code == 1 and out == ""
    assert err.startswith("Error: ") and message in err


@needs_etcdctl
def test_watch_prints_events_like_etcdctl_until_ctrl_c(etcd: EtcdCluster, lab: Labctl) -> None:
    start = _revision(etcd) + 1
    lab.ok("put", "wt/k", "a")
    lab.ok("put", "wt/k", "b")
    lab.ok("del", "wt/k")
    lab.ok("put", "wt/other", "c")
    args = ["watch", "wt/", "--prefix", "--rev", str(start), "--prev-kv"]
    expected = [
        *("PUT", "wt/k", "a"),
        *("PUT", "wt/k", "a", "wt/k", "b"),
        *("DELETE", "wt/k", "b", "wt/k", ""),
        *("PUT", "wt/other", "c"),
    ]
    labctl_cmd = [sys.executable, "-m", "lab.labctl", "store"]
    with Running([*labctl_cmd, "--endpoints", lab.endpoints, *args]) as ours:
        assert ours.lines(len(expected)) == expected
    assert ours.code == 130 and "Traceback" not in ours.stderr, ours.stderr
    assert ETCDCTL is not None
    with Running([ETCDCTL, "--endpoints", lab.endpoints, *args]) as theirs:
        assert theirs.lines(len(expected)) == expected


class Running:
    """A long-running command (a watch) whose output lines are read as they come; leaving
    the `with` block ends it with Ctrl-C (SIGINT) and records its status and stderr."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, ETCDCTL_API="3"),
            cwd=Path(__file__).resolve().parents[2],
        )
        self.code: int | None = None
        self.stderr = ""
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))

    def lines(self, count: int, timeout: float = 20.0) -> list[str]:
        return [self._lines.get(timeout=timeout) for _ in range(count)]

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.proc.send_signal(signal.SIGINT)
        # Generous: on a loaded 2-core machine a Python process can take a while to be
        # scheduled; a real hang still fails.
        self.code = self.proc.wait(timeout=60)
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()


def test_watch_carries_on_when_its_member_goes_away(tmp_path: Path) -> None:
    """Three members: the watch's member stops; labctl re-watches from the next revision
    on another member, so the event written meanwhile is printed once."""
    if ETCD is None:
        pytest.skip("etcd not installed")
    cluster = start_etcd_cluster(tmp_path, members=3)
    try:
        endpoints = ",".join(cluster.endpoints)
        command = [sys.executable, "-m", "lab.labctl", "store", "--endpoints", endpoints]
        with StoreClient(cluster.endpoints[1:]) as survivors:
            start = str(survivors.status().header.revision + 1)
            with Running([*command, "watch", "failover/k", "--rev", start]) as watch:
                survivors.put("failover/k", "before")
                assert watch.lines(3) == ["PUT", "failover/k", "before"]
                cluster.stop_member(cluster.members[0])  # the first endpoint: the watch's
                survivors.put("failover/k", "after")
                assert watch.lines(3) == ["PUT", "failover/k", "after"]
        assert watch.code == 130
        assert "re-watching from revision" in watch.stderr
    finally:
        cluster.stop()


def test_endpoint_status_of_a_three_member_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if ETCD is None:
        pytest.skip("etcd not installed")
    cluster = start_etcd_cluster(tmp_path, members=3)
    try:
        first = cluster.endpoints[0]
        assert main(["store", "--endpoints", first, "endpoint", "status", "--cluster"]) == 0
        rows = [line.split(", ") for line in capsys.readouterr().out.splitlines()]
        assert sorted(row[0] for row in rows) == sorted(cluster.endpoints)
        assert [row[4] for row in rows].count("true") == 1  # one leader
        assert len({row[1] for row in rows}) == 3  # three member IDs
    finally:
        cluster.stop()


def test_endpoint_status_cluster_finds_every_kubelab_member(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kubelab's members publish their client URLs through Raft, as etcd's do, so
    `--cluster` can find all three from one endpoint."""
    cluster = LocalCluster(tmp_path / "kubelab", 3)
    cluster.start_all()
    try:
        cluster.wait_leader()
        endpoints = sorted(m.client_url for m in cluster.members)
        first = cluster.members[0].client_url
        with StoreClient([first]) as client:
            for _ in range(100):  # members publish once a leader accepts their proposal
                listed = client.member_list().raw.get("members", [])
                if sorted(u for m in listed for u in m.get("clientURLs", [])) == endpoints:
                    break
                time.sleep(0.1)
        capsys.readouterr()
        assert main(["store", "--endpoints", first, "endpoint", "status", "--cluster"]) == 0
        rows = [line.split(", ") for line in capsys.readouterr().out.splitlines()]
        assert sorted(row[0] for row in rows) == endpoints
        assert [row[4] for row in rows].count("true") == 1
        names = {m["name"] for m in listed}
        assert names == {m.name for m in cluster.members}
    finally:
        cluster.stop_all()


# -- membership and endpoints ------------------------------------------------------------


@needs_etcdctl
def test_member_list_matches_etcdctl(etcd: EtcdCluster, lab: Labctl) -> None:
    assert lab.ok("member", "list") == etcdctl(etcd, "member", "list")
    assert lab.ok("member", "list", "-w", "table") == etcdctl(etcd, "member", "list", "-w", "table")
    ours = json.loads(lab.ok("member", "list", "-w", "json"))
    assert ours == json.loads(etcdctl(etcd, "member", "list", "-w", "json"))


@needs_etcdctl
def test_endpoint_status_table_has_etcdctls_shape(etcd: EtcdCluster, lab: Labctl) -> None:
    ours = lab.ok("endpoint", "status", "-w", "table").splitlines()
    theirs = etcdctl(etcd, "endpoint", "status", "-w", "table").splitlines()
    assert len(ours) == len(theirs) == 5
    assert ours[:3] == theirs[:3]  # rule, headings, rule: same columns, same widths
    ours_cells = [c.strip() for c in ours[3].split("|")]
    theirs_cells = [c.strip() for c in theirs[3].split("|")]
    # Endpoint, ID, version, DB size, leader, learner, term agree; indexes move on.
    assert ours_cells[:8] == theirs_cells[:8]
    assert lab.ok("endpoint", "status", "--cluster", "-w", "table").splitlines()[:3] == ours[:3]

    simple = lab.ok("endpoint", "status").rstrip("\n").split(", ")
    assert simple[:8] == ours_cells[1:9]
    (status,) = json.loads(lab.ok("endpoint", "status", "-w", "json"))
    assert status["Endpoint"] == etcd.endpoints[0]
    assert isinstance(status["Status"]["raftIndex"], int)


def test_endpoint_health(etcd: EtcdCluster, lab: Labctl) -> None:
    (endpoint,) = etcd.endpoints
    out = lab.ok("endpoint", "health", "--cluster")
    assert re.fullmatch(
        re.escape(endpoint) + r" is healthy: successfully committed proposal: took = "
        r"[0-9.]+(ns|µs|ms|s)\n",
        out,
    )
    table = lab.ok("endpoint", "health", "-w", "table").splitlines()
    assert [c.strip() for c in table[1].split("|")][1:-1] == ["ENDPOINT", "HEALTH", "TOOK", "ERROR"]
    (health,) = json.loads(lab.ok("endpoint", "health", "-w", "json"))
    assert health["endpoint"] == endpoint and health["health"] is True


def test_endpoint_health_and_status_report_a_dead_endpoint(
    etcd: EtcdCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    endpoints = ",".join([*etcd.endpoints, dead])
    assert main(["store", "--endpoints", endpoints, "endpoint", "health"]) == 1
    out, err = capsys.readouterr()
    assert "is healthy" in out
    assert f"{dead} is unhealthy: failed to commit proposal: " in err
    assert err.rstrip().endswith("Error: unhealthy cluster")

    assert main(["store", "--endpoints", endpoints, "endpoint", "status"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith(etcd.endpoints[0] + ", ")
    assert f"Failed to get the status of endpoint {dead} (" in err


def test_member_add_and_remove_print_like_etcdctl(etcd: EtcdCluster, lab: Labctl) -> None:
    peer = f"http://127.0.0.1:{free_port()}"
    out = lab.ok("member", "add", "newbie", "--peer-urls", peer, "--learner")
    first, blank, *env = out.splitlines()
    match = re.fullmatch(
        r"Member ([0-9a-f ]{16}) added as learner to cluster ([0-9a-f ]{16})", first
    )
    assert match and blank == ""
    new_id = match[1].strip()
    name, initial, advertise, state = env
    assert name == 'ETCD_NAME="newbie"'
    assert initial.startswith('ETCD_INITIAL_CLUSTER="') and initial.endswith('"')
    members = initial.removeprefix('ETCD_INITIAL_CLUSTER="').removesuffix('"').split(",")
    assert sorted(members) == [f"etcd1={etcd.members[0].peer_url}", f"newbie={peer}"]
    assert advertise == f'ETCD_INITIAL_ADVERTISE_PEER_URLS="{peer}"'
    assert state == 'ETCD_INITIAL_CLUSTER_STATE="existing"'
    assert f"{new_id}, unstarted, , {peer}, , true" in lab.ok("member", "list")

    code, _, err = lab("member", "promote", new_id)
    assert code == 1
    assert (
        err == "Error: etcdserver: can only promote a learner member which is in sync with leader\n"
    )
    out = lab.ok("member", "remove", new_id)
    # etcdctl pads IDs in these messages to 16 columns (Go's %16x).
    padded = f"{int(new_id, 16):16x}"
    assert re.fullmatch(rf"Member {padded} removed from cluster [0-9a-f ]{{16}}\n", out)


# -- leases, compaction, maintenance -----------------------------------------------------


def test_lease_verbs(lab: Labctl) -> None:
    out = lab.ok("lease", "grant", "100")
    match = re.fullmatch(r"lease ([0-9a-f]{16}) granted with TTL\(100s\)\n", out)
    assert match
    lease = match[1]
    lab.ok("put", "ls/a", "1", "--lease", lease)
    lab.ok("put", "ls/b", "2", "--lease", lease)
    out = lab.ok("lease", "timetolive", lease, "--keys")
    assert re.fullmatch(
        rf"lease {lease} granted with TTL\(100s\), remaining\(\d+s\), "
        r"attached keys\(\[(ls/a ls/b|ls/b ls/a)\]\)\n",  # etcd lists them in any order
        out,
    )
    assert lab.ok("lease", "keep-alive", "--once", lease) == (
        f"lease {lease} keepalived with TTL(100)\n"
    )
    listing = lab.ok("lease", "list").splitlines()
    assert re.fullmatch(r"found \d+ leases", listing[0]) and lease in listing[1:]
    assert json.loads(lab.ok("lease", "grant", "5", "-w", "json"))["TTL"] == 5

    assert lab.ok("lease", "revoke", lease) == f"lease {lease} revoked\n"
    assert lab.ok("get", "ls/", "--prefix") == ""
    assert lab.ok("lease", "timetolive", lease) == f"lease {lease} already expired\n"
    assert lab.ok("lease", "keep-alive", lease) == f"lease {lease} expired or revoked.\n"
    code, _, err = lab("lease", "keep-alive", "--once", lease)
    assert (code, err) == (1, "Error: etcdserver: requested lease not found\n")
    code, _, err = lab("lease", "revoke", "not-hex")
    assert code == 1 and "expecting ID in hex" in err


def test_compaction_then_reading_the_past_fails(etcd: EtcdCluster, lab: Labctl) -> None:
    lab.ok("put", "cp/k", "old")
    old = _revision(etcd)
    lab.ok("put", "cp/k", "new")
    now = _revision(etcd)
    assert lab.ok("compaction", str(now), "--physical") == f"compacted revision {now}\n"
    code, out, err = lab("get", "cp/k", "--rev", str(old))
    assert (code, out) == (1, "")
    assert err == "Error: etcdserver: mvcc: required revision has been compacted\n"

    code, _, err = lab("watch", "cp/k", "--rev", str(old))
    assert code == 1
    assert err.startswith("Error: watch canceled: etcdserver: mvcc: required revision has been")


def test_snapshot_save_and_the_store_specific_verbs(
    lab: Labctl, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "backup.db"
    code, out, err = lab("snapshot", "save", str(target))
    assert code == 0 and out == f"Snapshot saved at {target}\n"
    assert target.stat().st_size > 0 and "fetched snapshot from http://127.0.0.1:" in err
    assert "no-op" in lab.ok("defrag")

    # The offline verbs are labutl's (labctl names the command: tests/unit/test_labctl_offline.py).
    def labutl(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = labutl_main(argv)
        out, err = capsys.readouterr()
        return code, out, err

    # An etcd (bbolt) snapshot is not a kubelab store snapshot: refused, clearly.
    code, _, err = labutl("snapshot", "status", str(target))
    assert code == 1 and "is not a kubelab store snapshot" in err
    code, _, err = labutl("snapshot", "restore", str(target), "--data-dir", str(tmp_path / "r"))
    assert code == 1 and "is not a kubelab store snapshot" in err

    status = SnapshotStatus(hash=0x32AA5DCB, revision=327, total_keys=339, total_size=438272)
    monkeypatch.setattr(labutl_module, "read_snapshot_status", lambda path: status)
    assert labutl("snapshot", "status", str(target))[1] == "32aa5dcb, 327, 339, 438 kB\n"
    assert labutl("snapshot", "status", str(target), "-w", "table")[1].splitlines()[1] == (
        "|   HASH   | REVISION | TOTAL KEYS | TOTAL SIZE |"
    )
    assert json.loads(labutl("snapshot", "status", str(target), "-w", "json")[1]) == {
        "hash": 0x32AA5DCB,
        "revision": 327,
        "totalKey": 339,
        "totalSize": 438272,
    }


def test_alarm_list_and_disarm_with_no_alarms(lab: Labctl) -> None:
    assert lab.ok("alarm", "list") == ""
    assert lab.ok("alarm", "disarm") == ""


# -- flags and errors --------------------------------------------------------------------


def test_global_flags_anywhere_and_endpoints_without_scheme(
    etcd: EtcdCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = etcd.endpoints[0].removeprefix("http://")
    assert main(["store", "--endpoints", bare, "put", "gf/k", "v"]) == 0
    assert main(["store", "-w", "json", "get", "gf/k", "--endpoints", bare]) == 0
    assert main(["--command-timeout", "2s", "store", "get", "gf/k", "--endpoints", bare]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "OK"
    assert json.loads(out[1])["kvs"][0]["version"] == 1
    assert out[2:] == ["gf/k", "v"]


def test_unreachable_store_names_the_endpoints_and_make_up_local(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = [f"http://127.0.0.1:{free_port()}" for _ in range(3)]
    monkeypatch.setattr(store, "DEFAULT_ENDPOINTS", ",".join(dead))
    assert main(["store", "get", "k"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("Error: no store endpoint could serve the request: ")
    assert all(f"{d} (Connection refused)" in err for d in dead)
    assert "`make up-local`" in err

    assert main(["store", "--endpoints", dead[0], "put", "k", "v"]) == 1
    err = capsys.readouterr().err
    assert dead[0] in err and "check --endpoints" in err


def test_usage_errors(lab: Labctl) -> None:
    code, out, err = lab("get", "k", "-w", "table")
    assert (code, out, err) == (1, "", "Error: table not supported as output format\n")
    code, _, err = lab("get", "k", "--prefix", "--from-key")
    assert code == 1 and "cannot be set at the same time" in err
    code, _, err = lab("--cert", "c.pem", "get", "k")
    assert (code, err) == (1, "Error: --cert and --key must be given together\n")
    code, _, err = lab("put", "", "v")
    assert (code, err) == (1, "Error: etcdserver: key is not provided\n")
    with pytest.raises(SystemExit) as info:
        main(["store", "frobnicate"])
    assert info.value.code == 2


def test_tls_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if ETCD is None:
        pytest.skip("etcd not installed")
    cluster = start_etcd_cluster(tmp_path, tls=True)
    try:
        bare = cluster.endpoints[0].removeprefix("https://")
        tls = [
            f"--cacert={cluster.ca_file}",
            f"--cert={cluster.cert_file}",
            f"--key={cluster.key_file}",
        ]
        assert main(["store", "--endpoints", bare, *tls, "put", "secure", "yes"]) == 0
        assert main(["store", "--endpoints", bare, *tls, "get", "secure"]) == 0
        assert capsys.readouterr().out == "OK\nsecure\nyes\n"
        assert (
            main(["store", "--endpoints", bare, "--cacert", str(cluster.ca_file), "get", "x"]) == 1
        )
        err = capsys.readouterr().err
        assert err.startswith("Error: no store endpoint could serve the request: https://")
        assert "TLS" in err
    finally:
        cluster.stop()
