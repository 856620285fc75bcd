"""The apiserver while its store loses members: writes go on after the election, nothing
acknowledged is lost, a watching client misses no event, and /readyz says when the store
has no quorum.

A control plane of its own (3 store members, no controller-manager): the store's leader
is killed, and then the member the apiserver was talking to.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from lab.localcluster import Member
from lab.localplane import LocalControlPlane

NAMESPACE = "faults"


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[LocalControlPlane]:
    p = LocalControlPlane(tmp_path, store_members=3, controller_manager=False, scheduler=False)
    try:
        p.start(timeout=120)
        yield p
    finally:
        p.stop()


class _Watcher(threading.Thread):
    """A client watching ConfigMaps as client-go does: when the stream ends it watches
    again from the last resourceVersion it saw, so every event must still arrive."""

    def __init__(self, plane: LocalControlPlane, resource_version: str) -> None:
        super().__init__(daemon=True)
        self.session = plane.session()
        self.url = f"{plane.server}/api/v1/namespaces/{NAMESPACE}/configmaps"
        self.rv = resource_version
        self.added: list[str] = []
        self.gone = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                with self.session.get(
                    self.url,
                    params={"watch": "1", "resourceVersion": self.rv, "timeoutSeconds": "5"},
                    stream=True,
                    timeout=(5, 15),
                ) as r:
                    if r.status_code != 200:
                        time.sleep(0.2)  # 5xx while the store elects: try again
                        continue
                    for line in r.iter_lines():
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            self.gone += event["object"].get("code") == 410
                            break
                        self.rv = event["object"]["metadata"]["resourceVersion"]
                        if event["type"] == "ADDED":
                            self.added.append(event["object"]["metadata"]["name"])
            except requests.RequestException:
                time.sleep(0.2)


def _create(session: requests.Session, url: str, name: str, deadline: float) -> None:
    """Create ConfigMap `name`, retrying as a client would while the store has no leader;
    every failure meanwhile must be a Status that says what happened."""
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    while True:
        try:
            r = session.post(url, json=body, timeout=10)
        except requests.RequestException:
            r = None
        if r is not None and r.status_code in (201, 409):  # 409: an earlier try got in
            return
        if r is not None:
            assert r.status_code >= 500, r.text
            status = r.json()
            assert status["kind"] == "Status" and status["message"], r.text
        assert time.monotonic() < deadline, f"{name} could not be created: {r and r.text}"
        time.sleep(0.2)


def _kill(plane: LocalControlPlane, member: Member) -> None:
    assert plane.store is not None
    plane.store.kill(member, signal.SIGKILL)


def test_members_killed_lose_no_write_and_no_watch_event(plane: LocalControlPlane) -> None:
    assert plane.store is not None
    session = plane.session()
    created = session.post(
        f"{plane.server}/api/v1/namespaces",
        json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        timeout=10,
    )
    assert created.status_code == 201, created.text
    url = f"{plane.server}/api/v1/namespaces/{NAMESPACE}/configmaps"
    watcher = _Watcher(plane, created.json()["metadata"]["resourceVersion"])
    watcher.start()
    names = [f"cm-{i:02d}" for i in range(30)]

    for name in names[:10]:
        _create(session, url, name, time.monotonic() + 10)
    leader = plane.store.wait_leader()
    _kill(plane, leader)
    for name in names[10:20]:
        _create(session, url, name, time.monotonic() + 20)

    # Now the member the apiserver talks to first (it may have been the leader).
    plane.store.start(leader)
    first = plane.store.members[0]
    if first is not leader:
        plane.store.wait_serving(leader)
        _kill(plane, first)
    for name in names[20:]:
        _create(session, url, name, time.monotonic() + 20)

    listed = session.get(url, timeout=10).json()
    assert sorted(item["metadata"]["name"] for item in listed["items"]) == names
    deadline = time.monotonic() + 30
    while sorted(set(watcher.added)) != names and time.monotonic() < deadline:
        time.sleep(0.2)
    watcher.stopping.set()
    assert sorted(set(watcher.added)) == names
    assert len(watcher.added) == len(names), "an event was delivered twice"
    assert watcher.gone == 0, "the watch was told its resourceVersion is too old"


def test_readyz_fails_its_etcd_check_while_the_store_has_no_quorum(
    plane: LocalControlPlane,
) -> None:
    """The etcd check reads one key linearizably, as kube-apiserver's does: with two of
    three members down it fails (and a load balancer stops sending requests here), and it
    passes again once they are back."""
    assert plane.store is not None
    session = plane.session()

    def readyz() -> requests.Response:
        return session.get(f"{plane.server}/readyz?verbose", timeout=30)

    assert "[+]etcd ok" in readyz().text
    down = plane.store.members[1:]
    for member in down:
        _kill(plane, member)
    r = readyz()
    assert r.status_code == 500 and "[-]etcd failed" in r.text, r.text
    for member in down:
        plane.store.start(member)
    plane.store.wait_leader()
    deadline = time.monotonic() + 30
    while (r := readyz()).status_code != 200:
        assert time.monotonic() < deadline, r.text
        time.sleep(0.5)
    assert "[+]etcd ok" in r.text


def test_a_full_store_refuses_writes_with_what_to_do(tmp_path: Path) -> None:
    plane = LocalControlPlane(
        tmp_path,
        store_members=1,
        controller_manager=False,
        scheduler=False,
        store_args=["--quota-backend-bytes", str(2 * 1024 * 1024)],
    )
    try:
        plane.start(timeout=120)
        session = plane.session()
        url = f"{plane.server}/api/v1/namespaces/default/configmaps"
        big = "x" * 200_000
        refused = None
        for i in range(40):
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"big-{i}"},
                "data": {"blob": big},
            }
            r = session.post(url, json=body, timeout=10)
            if r.status_code != 201:
                refused = r
                break
        assert refused is not None, "the store never filled up"
        status = refused.json()
        assert refused.status_code == 500 and status["kind"] == "Status", refused.text
        assert "database space exceeded" in status["message"]
        assert "labctl store alarm disarm" in status["message"]
        # Reads still work.
        listed = session.get(url, timeout=10)
        assert listed.status_code == 200 and len(listed.json()["items"]) == i
    finally:
        plane.stop()
