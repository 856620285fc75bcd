"""`RestClient` against the fake API server: verbs, errors, retries, rate limit, TLS,
tokens and watch streams."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kubelab import pki
from kubelab.api.errors import StatusError
from kubelab.api.resources import by_kind
from kubelab.client.clock import FakeClock
from kubelab.client.flowcontrol import Backoff, TokenBucket
from kubelab.client.kubeconfig import ClientConfig, load_kubeconfig, write_kubeconfig
from kubelab.client.rest import (
    ClientClosed,
    PatchType,
    Preconditions,
    ResourceExpired,
    RestClient,
    ServerUnreachable,
    resource_for,
)
from tests.unit.client.conftest import FAST_BACKOFF, AutoClock, eventually
from tests.unit.client.fakeapi import FakeApiServer, TLSFiles

PODS = resource_for("v1", "Pod")
NODES = resource_for("v1", "Node")
DEPLOYMENTS = resource_for("apps/v1", "Deployment")


def pod(name: str, namespace: str = "default", **labels: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }


def auto_client(api: FakeApiServer, clock: FakeClock, **kwargs: object) -> RestClient:
    kwargs.setdefault("qps", None)
    return RestClient(ClientConfig(server=api.url), clock=clock, **kwargs)  # type: ignore[arg-type]


# -- addressing --------------------------------------------------------------------------


def test_resource_for_finds_the_table_entry_and_names_an_unknown_kind() -> None:
    assert resource_for("apps/v1", "Deployment") == by_kind("apps/v1", "Deployment")
    with pytest.raises(ValueError, match="no kind 'Deploymnt' in 'apps/v1'"):
        resource_for("apps/v1", "Deploymnt")


def test_a_namespaced_object_cannot_be_addressed_without_its_namespace(
    client: RestClient,
) -> None:
    with pytest.raises(ValueError, match="a namespace is needed"):
        client.get(PODS, "web")
    with pytest.raises(ValueError, match="needs a namespace"):
        client.create(PODS, {"metadata": {"name": "web"}})


# -- verbs -------------------------------------------------------------------------------


def test_create_get_and_list_round_trip(client: RestClient, api: FakeApiServer) -> None:
    created = client.create(PODS, pod("web", app="web"))
    assert created["metadata"]["uid"]
    assert api.calls("POST")[0].path == "/api/v1/namespaces/default/pods"
    assert client.get(PODS, "web", "default")["metadata"]["uid"] == created["metadata"]["uid"]
    client.create(PODS, pod("db", app="db"))
    client.create(PODS, pod("other", "kube-system", app="web"))

    everything = client.list(PODS)
    assert [p["metadata"]["name"] for p in everything["items"]] == ["db", "web", "other"]
    assert everything["metadata"]["resourceVersion"]
    web = client.list(PODS, "default", label_selector="app=web")
    assert [p["metadata"]["name"] for p in web["items"]] == ["web"]
    named = client.list(PODS, field_selector="metadata.name=other")
    assert [p["metadata"]["namespace"] for p in named["items"]] == ["kube-system"]


def test_list_pages_with_limit_and_continue(client: RestClient, api: FakeApiServer) -> None:
    for name in "abc":
        client.create(PODS, pod(name))
    first = client.list(PODS, "default", limit=2)
    assert len(first["items"]) == 2
    rest = client.list(PODS, "default", limit=2, continue_token=first["metadata"]["continue"])
    assert [p["metadata"]["name"] for p in rest["items"]] == ["c"]
    assert api.calls("GET")[-1].query == {"limit": "2", "continue": "2"}


def test_errors_are_status_errors_with_the_servers_reason(client: RestClient) -> None:
    with pytest.raises(StatusError) as missing:
        client.get(PODS, "ghost", "default")
    assert (missing.value.code, missing.value.reason) == (404, "NotFound")
    assert str(missing.value) == 'pods "ghost" not found'

    client.create(PODS, pod("web"))
    with pytest.raises(StatusError) as exists:
        client.create(PODS, pod("web"))
    assert (exists.value.code, exists.value.reason) == (409, "AlreadyExists")


def test_update_is_refused_when_the_object_changed_since_it_was_read(
    client: RestClient,
) -> None:
    first = client.create(PODS, pod("web"))
    first["metadata"]["labels"] = {"v": "1"}
    updated = client.update(PODS, first)
    assert updated["metadata"]["labels"] == {"v": "1"}
    assert updated["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]

    stale = dict(first, metadata=dict(first["metadata"], labels={"v": "stale"}))
    with pytest.raises(StatusError) as conflict:
        client.update(PODS, stale)
    assert (conflict.value.code, conflict.value.reason) == (409, "Conflict")


def test_update_status_writes_the_status_subresource(
    client: RestClient, api: FakeApiServer
) -> None:
    created = client.create(PODS, pod("web"))
    created["status"] = {"phase": "Running"}
    created["spec"]["nodeName"] = "ignored-by-the-status-subresource"
    result = client.update_status(PODS, created)
    assert api.calls("PUT")[0].path == "/api/v1/namespaces/default/pods/web/status"
    assert result["status"] == {"phase": "Running"}
    assert "nodeName" not in result["spec"]


@pytest.mark.parametrize(
    ("patch_type", "body"),
    [
        (PatchType.MERGE, {"metadata": {"labels": {"tier": "front"}}}),
        (PatchType.STRATEGIC_MERGE, {"metadata": {"labels": {"tier": "front"}}}),
        (PatchType.JSON, [{"op": "add", "path": "/metadata/labels/tier", "value": "front"}]),
    ],
)
def test_patch_sends_the_content_type_of_its_format(
    client: RestClient, api: FakeApiServer, patch_type: PatchType, body: object
) -> None:
    client.create(PODS, pod("web", app="web"))
    patched = client.patch(PODS, "web", body, "default", patch_type=patch_type)  # type: ignore[arg-type]
    assert patched["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert api.calls("PATCH")[0].headers["Content-Type"] == patch_type.value


def test_delete_sends_its_options_and_preconditions(client: RestClient, api: FakeApiServer) -> None:
    created = client.create(DEPLOYMENTS, {"metadata": {"name": "web", "namespace": "prod"}})
    with pytest.raises(StatusError) as refused:
        client.delete(DEPLOYMENTS, "web", "prod", preconditions=Preconditions(uid="other"))
    assert refused.value.code == 409

    client.delete(
        DEPLOYMENTS,
        "web",
        "prod",
        propagation_policy="Foreground",
        grace_period_seconds=0,
        preconditions=Preconditions(uid=created["metadata"]["uid"]),
    )
    assert api.calls("DELETE")[-1].body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": created["metadata"]["uid"]},
    }
    with pytest.raises(StatusError):
        client.get(DEPLOYMENTS, "web", "prod")


def test_cluster_scoped_resources_have_no_namespace_in_their_path(
    client: RestClient, api: FakeApiServer
) -> None:
    client.create(NODES, {"metadata": {"name": "node-1"}})
    assert client.get(NODES, "node-1")["metadata"]["name"] == "node-1"
    assert api.calls("GET")[0].path == "/api/v1/nodes/node-1"


def test_request_reaches_subresources_json_or_text(client: RestClient) -> None:
    client.create(PODS, pod("web"))
    binding = {"apiVersion": "v1", "kind": "Binding", "target": {"kind": "Node", "name": "n1"}}
    status = client.request("POST", PODS.path("default", "web") + "/binding", body=binding)
    assert status["status"] == "Success"
    assert client.get(PODS, "web", "default")["spec"]["nodeName"] == "n1"
    assert client.request("GET", PODS.path("default", "web") + "/log") == "log of web\n"


def test_requests_carry_the_user_agent(api: FakeApiServer) -> None:
    with RestClient(ClientConfig(server=api.url), user_agent="kube-scheduler/test") as c:
        c.list(PODS)
    assert api.calls()[0].headers["User-Agent"] == "kube-scheduler/test"


# -- errors that are not Status bodies ---------------------------------------------------


def test_a_non_json_error_body_becomes_a_status_error(
    client: RestClient, api: FakeApiServer
) -> None:
    api.inject(502, body="<html><h1>502 Bad Gateway</h1></html>")
    with pytest.raises(StatusError) as err:
        client.list(PODS)
    assert (err.value.code, err.value.reason) == (502, "InternalError")
    assert "502 Bad Gateway to GET /api/v1/pods: <html><h1>502 Bad Gateway" in str(err.value)


# -- retries -----------------------------------------------------------------------------


def test_503_is_retried_for_reads_after_the_servers_retry_after(api: FakeApiServer) -> None:
    clock = AutoClock()
    api.inject(503, retry_after=2, times=2)
    with auto_client(api, clock) as c:
        assert c.list(PODS)["items"] == []
    assert len(api.calls("GET")) == 3
    assert clock.slept == [2, 2]


def test_503_is_not_retried_for_a_create(api: FakeApiServer) -> None:
    clock = AutoClock()
    api.inject(503, retry_after=1)
    with auto_client(api, clock) as c, pytest.raises(StatusError) as err:
        c.create(PODS, pod("web"))
    assert err.value.code == 503 and err.value.retry_after == 1
    assert len(api.calls("POST")) == 1 and clock.slept == []


def test_429_is_retried_for_any_verb_since_the_server_did_nothing(api: FakeApiServer) -> None:
    clock = AutoClock()
    api.inject(429, retry_after=3)
    with auto_client(api, clock) as c:
        c.create(PODS, pod("web"))
    assert len(api.calls("POST")) == 2 and clock.slept == [3]


def test_retries_stop_after_max_retries_with_the_last_error(api: FakeApiServer) -> None:
    clock = AutoClock()
    api.inject(429, times=10)
    c = auto_client(api, clock, max_retries=3, backoff=Backoff(1.0, 10.0))
    with c, pytest.raises(StatusError) as err:
        c.list(PODS)
    assert err.value.code == 429
    assert clock.slept == [1, 2, 4]  # no Retry-After: exponential back-off
    assert len(api.calls("GET")) == 4


def test_closing_the_client_cuts_a_pending_retry_short(api: FakeApiServer) -> None:
    api.inject(503, retry_after=60)  # a retry a minute from now (real time)
    c = RestClient(ClientConfig(server=api.url), qps=None)
    errors: list[Exception] = []

    def get() -> None:
        try:
            c.list(PODS)
        except Exception as exc:
            errors.append(exc)

    thread = threading.Thread(target=get, daemon=True)
    thread.start()
    eventually(lambda: len(api.calls("GET")) == 1)
    started = time.monotonic()
    c.close()
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 2
    assert len(errors) == 1 and isinstance(errors[0], ClientClosed)
    assert "closed" in str(errors[0]) and len(api.calls("GET")) == 1
    with pytest.raises(ClientClosed):
        c.list(PODS)  # and nothing more is sent


def test_closing_the_client_cuts_a_rate_limit_wait_short(api: FakeApiServer) -> None:
    c = RestClient(ClientConfig(server=api.url), qps=0.01, burst=1)
    c.list(PODS)  # the only token for the next 100 s
    errors: list[Exception] = []
    thread = threading.Thread(target=lambda: errors.append(_raised(c)), daemon=True)
    thread.start()
    time.sleep(0.1)
    c.close()
    thread.join(5)
    assert not thread.is_alive() and isinstance(errors[0], ClientClosed)
    assert len(api.calls("GET")) == 1


def _raised(c: RestClient) -> Exception:
    try:
        c.list(PODS)
    except Exception as exc:
        return exc
    raise AssertionError("the request was sent")


def test_a_refused_connection_is_retried_then_reported(api: FakeApiServer) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    clock = AutoClock()
    config = ClientConfig(server=f"http://127.0.0.1:{port}")
    c = RestClient(config, clock=clock, qps=None, max_retries=2, backoff=Backoff(1.0, 10.0))
    with c, pytest.raises(ServerUnreachable, match=r"after 3 attempt.*Connection refused"):
        c.create(PODS, pod("web"))  # even a POST: nothing was sent
    assert clock.slept == [1, 2]


def test_a_broken_connection_is_retried_only_for_idempotent_verbs(
    api: FakeApiServer, client: RestClient
) -> None:
    api.inject(0, method="GET", disconnect=True)
    assert client.list(PODS)["items"] == []
    assert len(api.calls("GET")) == 2

    api.inject(0, method="POST", disconnect=True)
    with pytest.raises(ServerUnreachable, match="may or may not have been applied"):
        client.create(PODS, pod("web"))
    assert len(api.calls("POST")) == 1


# -- rate limiting -----------------------------------------------------------------------


def test_token_bucket_allows_a_burst_then_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=5, burst=10, clock=clock)
    assert [bucket.reserve() for _ in range(10)] == [0.0] * 10
    assert bucket.reserve() == pytest.approx(0.2)
    assert bucket.reserve() == pytest.approx(0.4)  # reservations queue up behind each other
    clock.step(0.4)
    assert bucket.reserve() == pytest.approx(0.2)
    clock.step(100)  # a quiet client regains its burst, and no more
    assert [bucket.reserve() for _ in range(10)] == [0.0] * 10
    assert bucket.reserve() > 0


def test_the_client_throttles_itself_at_5_qps_burst_10_by_default(api: FakeApiServer) -> None:
    clock = AutoClock()
    with RestClient(ClientConfig(server=api.url), clock=clock) as c:
        for _ in range(12):
            c.list(PODS)
    assert clock.slept == [0.2, 0.2]


# -- authentication ----------------------------------------------------------------------


def test_a_bearer_token_is_sent() -> None:
    with FakeApiServer(tokens={"s3cret": "bob"}) as api:
        with RestClient(ClientConfig(server=api.url, token="s3cret")) as c:
            c.list(PODS)
        assert api.calls()[0].user == "bob"
        with RestClient(ClientConfig(server=api.url)) as anonymous, pytest.raises(StatusError) as e:
            anonymous.list(PODS)
        assert e.value.code == 401


def test_a_token_file_is_read_again_once_a_minute(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    clock = AutoClock()
    with FakeApiServer(tokens={"first": "one", "second": "two"}) as api:
        with RestClient(ClientConfig(server=api.url, token_file=token_file), clock=clock) as c:
            c.list(PODS)
            token_file.write_text("second\n")
            c.list(PODS)
            clock.step(60)
            c.list(PODS)
        assert [r.user for r in api.calls()] == ["one", "one", "two"]


def test_tls_with_a_client_certificate_from_a_kubeconfig(
    tls_files: TLSFiles, tmp_path: Path
) -> None:
    with FakeApiServer(tls=tls_files) as api:
        path = write_kubeconfig(
            tmp_path / "kubeconfig",
            cluster_name="lab",
            server=api.url,
            ca_data=tls_files.ca.cert_pem(),
            user_name="alice",
            client_cert_data=tls_files.client.cert_pem(),
            client_key_data=tls_files.client.key_pem(),
        )
        with RestClient(load_kubeconfig(path)) as c:
            c.create(PODS, pod("web"))
        assert api.calls()[0].user == "alice"


def test_a_server_outside_the_ca_is_refused_without_retries(tls_files: TLSFiles) -> None:
    other_ca = pki.new_ca("another-ca")
    with FakeApiServer(tls=tls_files) as api:
        config = ClientConfig(server=api.url, ca_data=other_ca.cert_pem(), source="test")
        clock = AutoClock()
        with RestClient(config, clock=clock) as c, pytest.raises(ServerUnreachable) as err:
            c.list(PODS)
    assert "TLS with" in str(err.value) and "certificate" in str(err.value)
    assert clock.slept == []


def test_tls_material_lives_in_private_files_removed_on_close(
    tls_files: TLSFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    config = ClientConfig(
        server="https://127.0.0.1:1",
        ca_data=tls_files.ca.cert_pem(),
        client_cert_data=tls_files.client.cert_pem(),
        client_key_data=tls_files.client.key_pem(),
    )
    c = RestClient(config)
    (directory,) = temp.iterdir()
    assert directory.name.startswith("kubelab-client-")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = sorted(directory.iterdir())
    assert [f.name for f in files] == ["ca.crt", "client.crt", "client.key"]
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}
    assert (directory / "client.key").read_bytes() == tls_files.client.key_pem()
    c.close()
    assert not directory.exists()
    assert os.listdir(temp) == []


# -- watch -------------------------------------------------------------------------------


def test_watch_yields_changes_after_the_lists_resource_version(
    client: RestClient, api: FakeApiServer
) -> None:
    client.create(PODS, pod("before"))
    rv = client.list(PODS, "default")["metadata"]["resourceVersion"]
    web = client.create(PODS, pod("web"))
    web["metadata"]["labels"] = {"v": "2"}
    client.update(PODS, web)
    client.delete(PODS, "web", "default")
    api.bookmark(PODS)

    seen = []
    with client.watch(PODS, "default", resource_version=rv, timeout_seconds=1) as w:
        for kind, obj in w:
            seen.append((kind, obj["metadata"].get("name")))
            if kind == "BOOKMARK":
                break
    assert seen == [("ADDED", "web"), ("MODIFIED", "web"), ("DELETED", "web"), ("BOOKMARK", None)]
    query = api.calls("GET")[-1].query
    assert query == {
        "watch": "1",
        "resourceVersion": rv,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "1",
    }


def test_watch_from_a_compacted_resource_version_raises_resource_expired(
    client: RestClient, api: FakeApiServer
) -> None:
    rv = client.list(PODS)["metadata"]["resourceVersion"]
    client.create(PODS, pod("web"))
    api.compact()
    w = client.watch(PODS, resource_version=rv)
    with pytest.raises(ResourceExpired) as err:
        list(w)
    assert err.value.code == 410 and "too old resource version" in str(err.value)


def test_a_410_answer_to_the_watch_request_is_resource_expired(
    client: RestClient, api: FakeApiServer
) -> None:
    api.inject(410, path="/pods")
    with pytest.raises(ResourceExpired):
        client.watch(PODS, resource_version="5")


def test_an_error_event_other_than_410_is_a_status_error(
    client: RestClient, api: FakeApiServer
) -> None:
    api.inject(500, in_watch=True)
    with pytest.raises(StatusError) as err:
        list(client.watch(PODS))
    assert err.value.code == 500 and not isinstance(err.value, ResourceExpired)


def test_the_watch_ends_when_the_server_closes_the_stream(
    client: RestClient, api: FakeApiServer
) -> None:
    w = client.watch(PODS, timeout_seconds=1)
    started = time.monotonic()
    assert list(w) == []
    assert time.monotonic() - started < 5


def test_close_from_another_thread_ends_a_blocked_watch_at_once(
    client: RestClient, api: FakeApiServer
) -> None:
    w = client.watch(PODS)
    events: list[object] = []
    reader = threading.Thread(target=lambda: events.extend(w))
    reader.start()
    api.wait_for_watches(1)
    client.create(PODS, pod("web"))
    eventually(lambda: len(events) == 1)
    started = time.monotonic()
    w.close()
    reader.join(5)
    assert not reader.is_alive() and time.monotonic() - started < 2
    assert [e[0] for e in events] == ["ADDED"]  # type: ignore[index]


def test_close_ends_a_blocked_watch_over_tls(tls_files: TLSFiles) -> None:
    with FakeApiServer(tls=tls_files) as api:
        config = ClientConfig(
            server=api.url,
            ca_data=tls_files.ca.cert_pem(),
            client_cert_data=tls_files.client.cert_pem(),
            client_key_data=tls_files.client.key_pem(),
        )
        with RestClient(config, backoff=FAST_BACKOFF) as c:
            w = c.watch(PODS)
            reader = threading.Thread(target=lambda: list(w))
            reader.start()
            api.wait_for_watches(1)
            w.close()
            reader.join(5)
            assert not reader.is_alive()
