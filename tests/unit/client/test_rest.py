"""`RestClient` against the real apiserver in-process (`lab.testenv`): verbs, errors,
retries, rate limit, TLS, tokens and watch streams. Failures the apiserver does not
produce on demand (a 429, a proxy's HTML page, a dropped connection) are injected with
`apiserver.faults`; what the client sent is read from `apiserver.record()`."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from kubelab import pki, tracing
from kubelab.api import errors
from kubelab.api.errors import StatusError
from kubelab.api.resources import by_kind
from kubelab.client.clock import FakeClock
from kubelab.client.flowcontrol import Backoff, TokenBucket
from kubelab.client.kubeconfig import ClientConfig, load_kubeconfig
from kubelab.client.rest import (
    ClientClosed,
    PatchType,
    Preconditions,
    ResourceExpired,
    RestClient,
    ServerUnreachable,
    resource_for,
)
from lab.testenv import Environment
from tests.conftest import new_namespace
from tests.unit.client.conftest import FAST_BACKOFF, AutoClock, eventually

PODS = resource_for("v1", "Pod")
NODES = resource_for("v1", "Node")
DEPLOYMENTS = resource_for("apps/v1", "Deployment")
SERVICE_ACCOUNTS = resource_for("v1", "ServiceAccount")


def pod(name: str, namespace: str, **labels: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }


def deployment(name: str, namespace: str) -> dict[str, object]:
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": pod(name, namespace)["spec"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": labels}, "template": template},
    }


def auto_client(env: Environment, clock: FakeClock, **kwargs: object) -> RestClient:
    kwargs.setdefault("qps", None)
    return RestClient(env.client_config(), clock=clock, **kwargs)  # type: ignore[arg-type]


def service_account_token(admin: RestClient, namespace: str, name: str) -> str:
    """A bearer token of a new ServiceAccount `name` (a TokenRequest, as `kubectl create
    token` makes): the apiserver authenticates it as system:serviceaccount:<ns>:<name>."""
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
    admin.create(SERVICE_ACCOUNTS, account, namespace)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    path = SERVICE_ACCOUNTS.path(namespace, name) + "/token"
    return str(admin.request("POST", path, body=request)["status"]["token"])


def whoami(c: RestClient) -> str:
    """The user the apiserver authenticated `c` as (`kubectl auth whoami`)."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answer = c.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review)
    return str(answer["status"]["userInfo"]["username"])


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


def test_create_get_and_list_round_trip(
    client: RestClient, apiserver: Environment, namespace: str
) -> None:
    other_ns = new_namespace(apiserver, "zz-" + namespace)  # listed after `namespace`
    with apiserver.record() as log:
        created = client.create(PODS, pod("web", namespace, app="web"))
    assert created["metadata"]["uid"]
    assert log.calls("POST")[0].path == f"/api/v1/namespaces/{namespace}/pods"
    assert client.get(PODS, "web", namespace)["metadata"]["uid"] == created["metadata"]["uid"]
    client.create(PODS, pod("db", namespace, app="db"))
    client.create(PODS, pod("other", other_ns, app="web"))

    everything = client.list(PODS)
    mine = [p for p in everything["items"] if p["metadata"]["namespace"] in (namespace, other_ns)]
    assert [p["metadata"]["name"] for p in mine] == ["db", "web", "other"]
    assert everything["metadata"]["resourceVersion"]
    web = client.list(PODS, namespace, label_selector="app=web")
    assert [p["metadata"]["name"] for p in web["items"]] == ["web"]
    named = client.list(PODS, field_selector="metadata.name=other")
    namespaces = [p["metadata"]["namespace"] for p in named["items"]]
    assert other_ns in namespaces and namespace not in namespaces


def test_list_pages_with_limit_and_continue(
    client: RestClient, apiserver: Environment, namespace: str
) -> None:
    for name in "abc":
        client.create(PODS, pod(name, namespace))
    first = client.list(PODS, namespace, limit=2)
    assert len(first["items"]) == 2
    token = first["metadata"]["continue"]
    with apiserver.record() as log:
        rest = client.list(PODS, namespace, limit=2, continue_token=token)
    assert [p["metadata"]["name"] for p in rest["items"]] == ["c"]
    assert log.calls("GET")[-1].query == {"limit": "2", "continue": token}


def test_errors_are_status_errors_with_the_servers_reason(
    client: RestClient, namespace: str
) -> None:
    with pytest.raises(StatusError) as missing:
        client.get(PODS, "ghost", namespace)
    assert (missing.value.code, missing.value.reason) == (404, "NotFound")
    assert str(missing.value) == 'pods "ghost" not found'

    client.create(PODS, pod("web", namespace))
    with pytest.raises(StatusError) as exists:
        client.create(PODS, pod("web", namespace))
    assert (exists.value.code, exists.value.reason) == (409, "AlreadyExists")


def test_update_is_refused_when_the_object_changed_since_it_was_read(
    client: RestClient, namespace: str
) -> None:
    first = client.create(PODS, pod("web", namespace))
    first["metadata"]["labels"] = {"v": "1"}
    updated = client.update(PODS, first)
    assert updated["metadata"]["labels"] == {"v": "1"}
    assert updated["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]

    stale = dict(first, metadata=dict(first["metadata"], labels={"v": "stale"}))
    with pytest.raises(StatusError) as conflict:
        client.update(PODS, stale)
    assert (conflict.value.code, conflict.value.reason) == (409, "Conflict")


def test_update_status_writes_the_status_subresource(
    client: RestClient, apiserver: Environment, namespace: str
) -> None:
    created = client.create(PODS, pod("web", namespace))
    created["status"] = {"phase": "Running"}
    created["spec"]["nodeName"] = "ignored-by-the-status-subresource"
    with apiserver.record() as log:
        result = client.update_status(PODS, created)
    assert log.calls("PUT")[0].path == f"/api/v1/namespaces/{namespace}/pods/web/status"
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
    client: RestClient,
    apiserver: Environment,
    namespace: str,
    patch_type: PatchType,
    body: object,
) -> None:
    client.create(PODS, pod("web", namespace, app="web"))
    with apiserver.record() as log:
        patched = client.patch(PODS, "web", body, namespace, patch_type=patch_type)  # type: ignore[arg-type]
    assert patched["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert log.calls("PATCH")[0].headers["Content-Type"] == patch_type.value


def test_delete_sends_its_options_and_preconditions(
    client: RestClient, apiserver: Environment, namespace: str
) -> None:
    created = client.create(DEPLOYMENTS, deployment("web", namespace))
    with pytest.raises(StatusError) as refused:
        client.delete(DEPLOYMENTS, "web", namespace, preconditions=Preconditions(uid="other"))
    assert refused.value.code == 409

    with apiserver.record() as log:
        client.delete(
            DEPLOYMENTS,
            "web",
            namespace,
            propagation_policy="Foreground",
            grace_period_seconds=0,
            preconditions=Preconditions(uid=created["metadata"]["uid"]),
        )
    assert log.calls("DELETE")[-1].body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": created["metadata"]["uid"]},
    }
    # Foreground: the object stays, marked, until the garbage collector (not running
    # here) has deleted its dependents and removed the finalizer.
    marked = client.get(DEPLOYMENTS, "web", namespace)["metadata"]
    assert marked["deletionTimestamp"] and "foregroundDeletion" in marked["finalizers"]


def test_cluster_scoped_resources_have_no_namespace_in_their_path(
    client: RestClient, apiserver: Environment, namespace: str
) -> None:
    client.create(NODES, {"metadata": {"name": namespace}})
    with apiserver.record() as log:
        assert client.get(NODES, namespace)["metadata"]["name"] == namespace
    assert log.calls("GET")[0].path == f"/api/v1/nodes/{namespace}"


def test_request_reaches_subresources_json_or_text(client: RestClient, namespace: str) -> None:
    client.create(PODS, pod("web", namespace))
    binding = {"apiVersion": "v1", "kind": "Binding", "target": {"kind": "Node", "name": "n1"}}
    status = client.request("POST", PODS.path(namespace, "web") + "/binding", body=binding)
    assert status["status"] == "Success"
    assert client.get(PODS, "web", namespace)["spec"]["nodeName"] == "n1"
    # A pod's log comes from its node's kubelet (there is none here); the health check
    # answers text too.
    assert client.request("GET", "/healthz") == "ok"


def test_requests_carry_the_user_agent(apiserver: Environment) -> None:
    config = apiserver.client_config()
    with apiserver.record() as log, RestClient(config, user_agent="kube-scheduler/test") as c:
        c.list(PODS)
    assert log.calls()[0].headers["User-Agent"] == "kube-scheduler/test"


# -- errors that are not Status bodies ---------------------------------------------------


def test_a_non_json_error_body_becomes_a_status_error(
    client: RestClient, apiserver: Environment
) -> None:
    apiserver.faults.answer(502, "<html><h1>502 Bad Gateway</h1></html>")
    with pytest.raises(StatusError) as err:
        client.list(PODS)
    assert (err.value.code, err.value.reason) == (502, "InternalError")
    assert "502 Bad Gateway to GET /api/v1/pods: <html><h1>502 Bad Gateway" in str(err.value)


# -- retries -----------------------------------------------------------------------------


def test_503_is_retried_for_reads_after_the_servers_retry_after(
    apiserver: Environment, namespace: str
) -> None:
    clock = AutoClock()
    apiserver.faults.store_error(count=2, retry_after=2)
    with apiserver.record() as log, auto_client(apiserver, clock) as c:
        assert c.list(PODS, namespace)["items"] == []
    assert len(log.calls("GET")) == 3
    assert clock.slept == [2, 2]


def test_503_is_not_retried_for_a_create(apiserver: Environment, namespace: str) -> None:
    clock = AutoClock()
    apiserver.faults.store_error(retry_after=1)
    c = auto_client(apiserver, clock)
    with apiserver.record() as log, c, pytest.raises(StatusError) as err:
        c.create(PODS, pod("web", namespace))
    assert err.value.code == 503 and err.value.retry_after == 1
    assert len(log.calls("POST")) == 1 and clock.slept == []


def test_429_is_retried_for_any_verb_since_the_server_did_nothing(
    apiserver: Environment, namespace: str
) -> None:
    clock = AutoClock()
    apiserver.faults.status(errors.too_many_requests("slow down", retry_after=3))
    with apiserver.record() as log, auto_client(apiserver, clock) as c:
        c.create(PODS, pod("web", namespace))
    assert len(log.calls("POST")) == 2 and clock.slept == [3]


def test_retries_stop_after_max_retries_with_the_last_error(apiserver: Environment) -> None:
    clock = AutoClock()
    without_retry_after = StatusError(429, "TooManyRequests", "slow down")
    apiserver.faults.status(without_retry_after, count=10)
    c = auto_client(apiserver, clock, max_retries=3, backoff=Backoff(1.0, 10.0))
    with apiserver.record() as log, c, pytest.raises(StatusError) as err:
        c.list(PODS)
    assert err.value.code == 429
    assert clock.slept == [1, 2, 4]  # no Retry-After: exponential back-off
    assert len(log.calls("GET")) == 4


def test_closing_the_client_cuts_a_pending_retry_short(apiserver: Environment) -> None:
    apiserver.faults.store_error(retry_after=60)  # a retry a minute from now (real time)
    c = RestClient(apiserver.client_config(), qps=None)
    errors: list[Exception] = []

    def get() -> None:
        try:
            c.list(PODS)
        except Exception as exc:
            errors.append(exc)

    with apiserver.record() as log:
        thread = threading.Thread(target=get, daemon=True)
        thread.start()
        eventually(lambda: len(log.calls("GET")) == 1)
        started = time.monotonic()
        c.close()
        thread.join(5)
        assert not thread.is_alive() and time.monotonic() - started < 2
        assert len(errors) == 1 and isinstance(errors[0], ClientClosed)
        with pytest.raises(ClientClosed):
            c.list(PODS)  # and nothing more is sent
    assert "closed" in str(errors[0]) and len(log.calls("GET")) == 1


def test_closing_the_client_cuts_a_rate_limit_wait_short(apiserver: Environment) -> None:
    c = RestClient(apiserver.client_config(), qps=0.01, burst=1)
    errors: list[Exception] = []
    with apiserver.record() as log:
        c.list(PODS)  # the only token for the next 100 s
        thread = threading.Thread(target=lambda: errors.append(_raised(c)), daemon=True)
        thread.start()
        time.sleep(0.1)
        c.close()
        thread.join(5)
    assert not thread.is_alive() and isinstance(errors[0], ClientClosed)
    assert len(log.calls("GET")) == 1


def _raised(c: RestClient) -> Exception:
    try:
        c.list(PODS)
    except Exception as exc:
        return exc
    raise AssertionError("the request was sent")


def test_a_refused_connection_is_retried_then_reported() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    clock = AutoClock()
    config = ClientConfig(server=f"http://127.0.0.1:{port}")
    c = RestClient(config, clock=clock, qps=None, max_retries=2, backoff=Backoff(1.0, 10.0))
    with c, pytest.raises(ServerUnreachable, match=r"after 3 attempt.*Connection refused"):
        c.create(PODS, pod("web", "default"))  # even a POST: nothing was sent
    assert clock.slept == [1, 2]


def test_a_broken_connection_is_retried_only_for_idempotent_verbs(
    apiserver: Environment, client: RestClient, namespace: str
) -> None:
    apiserver.faults.disconnect(method="GET")
    with apiserver.record() as log:
        assert client.list(PODS, namespace)["items"] == []
    assert len(log.calls("GET")) == 2

    apiserver.faults.disconnect(method="POST")
    applied = pytest.raises(ServerUnreachable, match="may or may not have been applied")
    with apiserver.record() as log, applied:
        client.create(PODS, pod("web", namespace))
    assert len(log.calls("POST")) == 1


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


def test_the_client_throttles_itself_at_5_qps_burst_10_by_default(
    apiserver: Environment,
) -> None:
    clock = AutoClock()
    with RestClient(apiserver.client_config(), clock=clock) as c:
        for _ in range(12):
            c.list(PODS)
    assert clock.slept == [0.2, 0.2]


# -- authentication ----------------------------------------------------------------------


def test_a_bearer_token_is_sent(apiserver: Environment, admin: RestClient, namespace: str) -> None:
    token = service_account_token(admin, namespace, "bob")
    ca = apiserver.client_config().ca_data
    with RestClient(ClientConfig(server=apiserver.url, ca_data=ca, token=token)) as c:
        assert whoami(c) == f"system:serviceaccount:{namespace}:bob"
    anonymous = RestClient(ClientConfig(server=apiserver.url, ca_data=ca))
    with anonymous, pytest.raises(StatusError) as e:
        anonymous.list(PODS)
    assert e.value.code == 401


def test_a_token_file_is_read_again_once_a_minute(
    tmp_path: Path, apiserver: Environment, admin: RestClient, namespace: str
) -> None:
    first, second = (service_account_token(admin, namespace, n) for n in ("one", "two"))
    token_file = tmp_path / "token"
    token_file.write_text(first + "\n")
    clock = AutoClock()
    ca = apiserver.client_config().ca_data
    config = ClientConfig(server=apiserver.url, ca_data=ca, token_file=token_file)
    with RestClient(config, clock=clock) as c:
        users = [whoami(c)]
        token_file.write_text(second + "\n")
        users.append(whoami(c))
        clock.step(60)
        users.append(whoami(c))
    account = f"system:serviceaccount:{namespace}:"
    assert users == [account + "one", account + "one", account + "two"]


def test_tls_with_a_client_certificate_from_a_kubeconfig(
    apiserver: Environment, namespace: str
) -> None:
    path = apiserver.kubeconfig_for("alice", ["devs"])
    with RestClient(load_kubeconfig(path)) as c:
        assert whoami(c) == "alice"
        with pytest.raises(StatusError) as denied:  # authenticated, but granted nothing
            c.create(PODS, pod("web", namespace))
    assert denied.value.code == 403 and 'User "alice" cannot create' in str(denied.value)


def test_a_server_outside_the_ca_is_refused_without_retries(apiserver: Environment) -> None:
    other_ca = pki.new_ca("another-ca")
    config = ClientConfig(server=apiserver.url, ca_data=other_ca.cert_pem(), source="test")
    clock = AutoClock()
    with RestClient(config, clock=clock) as c, pytest.raises(ServerUnreachable) as err:
        c.list(PODS)
    assert "TLS with" in str(err.value) and "certificate" in str(err.value)
    assert clock.slept == []


def test_tls_material_lives_in_private_files_removed_on_close(
    apiserver: Environment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    config = apiserver.client_config("alice", ["devs"])
    c = RestClient(config)
    (directory,) = temp.iterdir()
    assert directory.name.startswith("kubelab-client-")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = sorted(directory.iterdir())
    assert [f.name for f in files] == ["ca.crt", "client.crt", "client.key"]
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}
    assert (directory / "client.key").read_bytes() == config.client_key_data
    c.close()
    assert not directory.exists()
    assert os.listdir(temp) == []


# -- watch -------------------------------------------------------------------------------


def test_watch_yields_changes_after_the_lists_resource_version(
    client: RestClient, apiserver: Environment, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bookmark as soon as the watch is quiet (the apiserver looks once a second).
    monkeypatch.setattr(apiserver.server.registry, "bookmark_every", 0.0)
    client.create(PODS, pod("before", namespace))
    rv = client.list(PODS, namespace)["metadata"]["resourceVersion"]
    web = client.create(PODS, pod("web", namespace))
    web["metadata"]["labels"] = {"v": "2"}
    client.update(PODS, web)
    client.delete(PODS, "web", namespace, grace_period_seconds=0)
    client.create(PODS, pod("elsewhere", new_namespace(apiserver, namespace)))

    seen = []
    with apiserver.record() as log:
        w = client.watch(PODS, namespace, resource_version=rv, timeout_seconds=3)
    with w:
        for kind, obj in w:
            seen.append((kind, obj["metadata"].get("name")))
            if kind == "BOOKMARK":
                break
    assert seen == [("ADDED", "web"), ("MODIFIED", "web"), ("DELETED", "web"), ("BOOKMARK", None)]
    query = log.calls("GET")[-1].query
    assert query == {
        "watch": "1",
        "resourceVersion": rv,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "3",
    }


def test_watch_from_a_compacted_resource_version_raises_resource_expired(
    client: RestClient, apiserver: Environment, namespace: str
) -> None:
    """Kubernetes' watch cache answers a resourceVersion it no longer holds with 200 and
    one ERROR event (kubelab's apiserver answers 410 at once: the next test)."""
    rv = client.list(PODS, namespace)["metadata"]["resourceVersion"]
    client.create(PODS, pod("web", namespace))
    apiserver.faults.watch_error(errors.gone(f"too old resource version: {rv} ({int(rv) + 1})"))
    w = client.watch(PODS, namespace, resource_version=rv)
    with pytest.raises(ResourceExpired) as err:
        list(w)
    assert err.value.code == 410 and "too old resource version" in str(err.value)


def test_a_410_answer_to_the_watch_request_is_resource_expired(
    client: RestClient, apiserver: Environment
) -> None:
    apiserver.faults.gone(path="/pods")
    with pytest.raises(ResourceExpired):
        client.watch(PODS, resource_version="5")


def test_an_error_event_other_than_410_is_a_status_error(
    client: RestClient, apiserver: Environment
) -> None:
    apiserver.faults.watch_error(errors.internal_error("injected watch error"))
    with pytest.raises(StatusError) as err:
        list(client.watch(PODS))
    assert err.value.code == 500 and not isinstance(err.value, ResourceExpired)


def test_the_watch_ends_when_the_server_closes_the_stream(
    client: RestClient, namespace: str
) -> None:
    w = client.watch(PODS, namespace, timeout_seconds=1)
    started = time.monotonic()
    assert list(w) == []
    assert time.monotonic() - started < 5


def test_close_from_another_thread_ends_a_blocked_watch_at_once(
    client: RestClient, apiserver: Environment, namespace: str
) -> None:
    w = client.watch(PODS, namespace)
    events: list[object] = []
    reader = threading.Thread(target=lambda: events.extend(w))
    reader.start()
    apiserver.wait_for_watches(1, PODS, namespace)
    client.create(PODS, pod("web", namespace))
    eventually(lambda: len(events) == 1)
    started = time.monotonic()
    w.close()
    reader.join(5)
    assert not reader.is_alive() and time.monotonic() - started < 2
    assert [e[0] for e in events] == ["ADDED"]  # type: ignore[index]


def test_close_ends_a_blocked_watch_over_tls(apiserver: Environment, namespace: str) -> None:
    """Closing the socket under TLS (every connection to the test apiserver is TLS with
    a client certificate) must wake the reader too."""
    with RestClient(apiserver.client_config(), backoff=FAST_BACKOFF) as c:
        w = c.watch(PODS, namespace)
        reader = threading.Thread(target=lambda: list(w))
        reader.start()
        apiserver.wait_for_watches(1, PODS, namespace)
        w.close()
        reader.join(5)
        assert not reader.is_alive()


# -- tracing -----------------------------------------------------------------------------


def test_requests_carry_the_current_spans_traceparent(apiserver: Environment) -> None:
    traced, exporter = _tracing()
    with apiserver.record() as log, RestClient(apiserver.client_config()) as c:
        c.list(PODS)
        with traced.tracer.start_as_current_span("Controller.reconcile") as span:
            c.list(PODS)
    outside, inside = log.calls()
    assert "traceparent" not in {name.lower() for name in outside.headers}
    headers = {name.lower(): value for name, value in inside.headers.items()}
    context = span.get_span_context()
    assert headers["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
    traced.force_flush()
    assert [s.name for s in exporter.get_finished_spans()] == ["Controller.reconcile"]


def test_with_a_tracer_each_write_is_a_span_naming_the_object(
    apiserver: Environment, namespace: str
) -> None:
    traced, exporter = _tracing()
    config = apiserver.client_config()
    with (
        apiserver.record() as log,
        RestClient(config, tracer=traced.tracer) as c,
        traced.tracer.start_as_current_span("Controller.reconcile"),
    ):
        created = c.create(PODS, pod("traced", namespace))
        c.patch(PODS, "traced", {"metadata": {"labels": {"a": "b"}}}, namespace)
        c.list(PODS, namespace)  # a read: no span
        with pytest.raises(StatusError):
            c.delete(PODS, "absent", namespace)
    traced.force_flush()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"Controller.reconcile", "Client.create", "Client.patch", "Client.delete"}
    create = spans["Client.create"]
    assert create.parent is not None
    assert create.parent.span_id == spans["Controller.reconcile"].context.span_id
    assert create.attributes is not None
    assert create.attributes[tracing.OBJECT_UID] == created["metadata"]["uid"]
    assert create.attributes[tracing.OBJECT_KIND] == "Pod"
    assert create.attributes["http.request.method"] == "POST"
    # The request carried the write span's own context: the apiserver's spans are its.
    headers = {name.lower(): value for name, value in log.calls()[0].headers.items()}
    assert f"{create.context.span_id:016x}" in headers["traceparent"]
    delete = spans["Client.delete"]
    assert delete.attributes is not None
    assert delete.attributes["http.response.status_code"] == 404
    assert not delete.status.is_ok


def _tracing() -> tuple[tracing.Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    traced = tracing.setup("controller-manager", "cp1", CollectorRegistry(), exporter=exporter)
    return traced, exporter
