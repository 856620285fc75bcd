"""`lab.testenv`: the real apiserver in-process, as the real kubectl, the official client
and kubelab's own client see it, with its identities and its injected faults.

These run against the session's `apiserver` fixture (tests/conftest.py), each test in a
namespace of its own, exactly as the client library's and the controllers' tests do.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
import requests

from kubelab.api.errors import StatusError
from kubelab.client import ResourceExpired, RestClient, ServerUnreachable, resource_for
from lab.testenv import Environment

KUBECTL = str(Path(sys.executable).parent / "kubectl")
CONFIGMAPS = resource_for("v1", "ConfigMap")
NODES = resource_for("v1", "Node")
SECRETS = resource_for("v1", "Secret")


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def configmap(name: str, **data: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@pytest.fixture
def admin(apiserver: Environment) -> Iterator[RestClient]:
    # No retries: a fault's answer must reach the test as it is.
    with RestClient(apiserver.client_config(), qps=None, max_retries=0) as client:
        yield client


def test_an_environment_of_its_own_is_ready_at_once_and_keeps_a_given_directory(
    tmp_path: Path,
) -> None:
    with Environment.start(directory=tmp_path) as env:
        assert kubectl(env.kubeconfig, "get", "--raw", "/readyz").stdout == "ok"
        assert env.kubeconfig.parent == tmp_path
    assert (tmp_path / "ca.crt").exists(), "a directory the caller gave is the caller's"
    with pytest.raises(requests.ConnectionError):
        requests.get(env.url + "/readyz", verify=False, timeout=5)


def test_the_real_kubectl_creates_applies_and_reads(apiserver: Environment, namespace: str) -> None:
    created = kubectl(
        apiserver.kubeconfig, "-n", namespace, "create", "configmap", "web", "--from-literal=a=1"
    )
    assert created.returncode == 0, created.stderr
    manifest = json.dumps(configmap("web", a="2"))
    applied = subprocess.run(
        [KUBECTL, "--kubeconfig", str(apiserver.kubeconfig), "-n", namespace, "apply", "-f", "-"],
        input=manifest,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert applied.returncode == 0, applied.stderr
    got = json.loads(
        kubectl(apiserver.kubeconfig, "-n", namespace, "get", "cm", "web", "-o", "json").stdout
    )
    assert got["data"] == {"a": "2"}
    table = kubectl(apiserver.kubeconfig, "get", "namespaces")
    assert namespace in table.stdout and "Active" in table.stdout


def test_other_identities_are_authorized_for_real(apiserver: Environment, namespace: str) -> None:
    node = apiserver.kubeconfig_for("system:node:n1", ["system:nodes"])
    denied = kubectl(node, "-n", namespace, "get", "secrets")
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()
    assert 'User "system:node:n1"' in denied.stderr

    with RestClient(apiserver.client_config("system:node:n1", ["system:nodes"]), qps=None) as n1:
        n1.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        with pytest.raises(StatusError) as info:
            n1.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}})
    assert info.value.code == 403


def test_the_official_client_lists_and_watches(apiserver: Environment, namespace: str) -> None:
    api_client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    core = kubernetes.client.CoreV1Api(api_client)
    listed = core.list_namespaced_config_map(namespace)
    timer = threading.Timer(
        0.2,
        lambda: core.create_namespaced_config_map(
            namespace, kubernetes.client.V1ConfigMap(metadata={"name": "later"})
        ),
    )
    timer.start()
    began = time.monotonic()
    events = kubernetes.watch.Watch().stream(
        core.list_namespaced_config_map,
        namespace,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=10,
    )
    event = next(events)
    events.close()
    timer.join()
    assert (event["type"], event["object"].metadata.name) == ("ADDED", "later")
    assert time.monotonic() - began < 5  # streamed, not held until the watch ended
    api_client.close()


def test_connections_are_kept_alive(apiserver: Environment, namespace: str) -> None:
    """A client's later requests reuse its connection (one TLS handshake, as against the
    production server), also after a watch and after an error answer."""
    with apiserver.record() as log, RestClient(apiserver.client_config(), qps=None) as client:
        client.create(CONFIGMAPS, configmap("a"), namespace)
        client.list(CONFIGMAPS, namespace)
        with pytest.raises(StatusError):
            client.get(CONFIGMAPS, "missing", namespace)
        with client.watch(CONFIGMAPS, namespace, timeout_seconds=1) as watch:
            assert [ev.object["metadata"]["name"] for ev in watch] == ["a"]
        client.get(CONFIGMAPS, "a", namespace)
    calls = [r.connection for r in log.requests if "watch" not in r.query]
    watches = [r.connection for r in log.requests if "watch" in r.query]
    # kubelab's client holds a watch on a connection of its own for the watch's life (as
    # client-go's HTTP/1.1 transport does); every other call shares one.
    assert len(calls) == 4 and len(set(calls)) == 1, log.requests
    assert len(watches) == 1 and watches[0] not in calls, log.requests

    api_client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    core = kubernetes.client.CoreV1Api(api_client)
    with apiserver.record() as log:
        core.list_namespaced_config_map(namespace)
        core.read_namespaced_config_map("a", namespace)
    api_client.close()
    assert len({r.connection for r in log.requests}) == 1, log.requests


def test_requests_are_served_beside_many_open_watches(
    apiserver: Environment, namespace: str, admin: RestClient
) -> None:
    """Each open watch holds a server thread: the pool grows, so more watches than it
    started with, and a request after them, are all served."""
    clients = [RestClient(apiserver.client_config(), qps=None) for _ in range(12)]
    watches = [c.watch(CONFIGMAPS, namespace, timeout_seconds=60) for c in clients]
    try:
        apiserver.wait_for_watches(len(watches), CONFIGMAPS, namespace, timeout=30)
        admin.create(CONFIGMAPS, configmap("a"), namespace)
        for watch in watches:
            assert next(iter(watch)).object["metadata"]["name"] == "a"
    finally:
        for watch in watches:
            watch.close()
        for client in clients:
            client.close()


def test_a_dropped_connection_is_replaced(
    apiserver: Environment, namespace: str, admin: RestClient
) -> None:
    """After the server hangs up on a client (a fault), its next request gets a new
    connection and an answer."""
    admin.list(CONFIGMAPS, namespace)
    apiserver.faults.disconnect(verb="list", namespace=namespace)
    with apiserver.record() as log:
        with pytest.raises(ServerUnreachable):
            admin.list(CONFIGMAPS, namespace)
        assert admin.list(CONFIGMAPS, namespace)["items"] == []
    first, second = (r.connection for r in log.requests)
    assert first != second


# -- faults ------------------------------------------------------------------------------


def test_store_error_is_a_503_once(
    apiserver: Environment, namespace: str, admin: RestClient
) -> None:
    fault = apiserver.faults.store_error(verb="create", resource="configmaps")
    with pytest.raises(StatusError) as info:
        admin.create(CONFIGMAPS, configmap("a"), namespace)
    assert info.value.code == 503 and "etcdserver: no leader" in str(info.value)
    admin.create(CONFIGMAPS, configmap("a"), namespace)
    assert fault.hits == 1


def test_conflict_is_a_409_on_the_object(
    apiserver: Environment, namespace: str, admin: RestClient
) -> None:
    cm = admin.create(CONFIGMAPS, configmap("a"), namespace)
    apiserver.faults.conflict(method="PUT", namespace=namespace, name="a")
    with pytest.raises(StatusError) as info:
        admin.update(CONFIGMAPS, cm)
    assert info.value.code == 409 and info.value.reason == "Conflict"
    assert 'configmaps "a"' in str(info.value)
    admin.update(CONFIGMAPS, cm)


def test_gone_is_a_410(apiserver: Environment, namespace: str, admin: RestClient) -> None:
    apiserver.faults.gone(verb="watch", resource="configmaps")
    with pytest.raises(ResourceExpired):
        admin.watch(CONFIGMAPS, namespace, resource_version="1")


def test_slow_answers_late(apiserver: Environment, namespace: str, admin: RestClient) -> None:
    apiserver.faults.slow(0.3, verb="list", namespace=namespace)
    began = time.monotonic()
    admin.list(CONFIGMAPS, namespace)
    assert time.monotonic() - began >= 0.3


def test_dropped_watch_ends_mid_stream(
    apiserver: Environment, namespace: str, admin: RestClient
) -> None:
    for name in ("a", "b", "c"):
        admin.create(CONFIGMAPS, configmap(name), namespace)
    fault = apiserver.faults.drop_watch(after=1, resource="configmaps", namespace=namespace)
    with admin.watch(CONFIGMAPS, namespace, timeout_seconds=30) as watch:
        seen = [ev.object["metadata"]["name"] for ev in watch]
    assert seen == ["a"] and fault.hits == 1


def test_an_abruptly_dropped_watch_ends_mid_stream(
    apiserver: Environment, namespace: str, admin: RestClient
) -> None:
    """The connection is cut after the first event, without the chunked stream's end:
    the client sees its watch end (and would re-watch), as for a lost apiserver."""
    admin.create(CONFIGMAPS, configmap("a"), namespace)
    admin.create(CONFIGMAPS, configmap("b"), namespace)
    fault = apiserver.faults.drop_watch(after=1, abrupt=True, namespace=namespace)
    with admin.watch(CONFIGMAPS, namespace, timeout_seconds=30) as watch:
        seen = [ev.object["metadata"]["name"] for ev in watch]
    assert seen == ["a"] and fault.hits == 1


def test_held_requests_wait_for_release_and_open_watches_can_be_ended(
    apiserver: Environment, namespace: str, admin: RestClient
) -> None:
    watch = admin.watch(CONFIGMAPS, namespace)
    apiserver.wait_for_watches(1, CONFIGMAPS, namespace)
    assert apiserver.faults.end_watches(CONFIGMAPS, namespace) == 1
    assert list(watch) == [] and apiserver.open_watches(CONFIGMAPS, namespace) == 0

    held = apiserver.faults.hold(verb="create", namespace=namespace)
    creating = threading.Thread(target=admin.create, args=(CONFIGMAPS, configmap("a"), namespace))
    creating.start()
    creating.join(0.3)
    assert creating.is_alive() and admin.list(CONFIGMAPS, namespace)["items"] == []
    held.release()
    creating.join(5)
    assert [cm["metadata"]["name"] for cm in admin.list(CONFIGMAPS, namespace)["items"]] == ["a"]


def test_faults_match_only_their_requests(
    apiserver: Environment, namespace: str, admin: RestClient
) -> None:
    fault = apiserver.faults.store_error(count=None, verb="create", resource="secrets")
    admin.create(CONFIGMAPS, configmap("a"), namespace)
    admin.list(SECRETS, namespace)
    assert fault.hits == 0
