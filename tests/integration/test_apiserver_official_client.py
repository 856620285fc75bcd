"""The official Kubernetes Python client (`kubernetes`) against kubelab's apiserver."""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.informer import SharedInformer

from tests.integration.controlplane_fixture import Lab, lab, namespace

__all__ = ["lab", "namespace"]  # pytest fixtures used below


@pytest.fixture(scope="module")
def api(lab: Lab) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(lab.plane.kubeconfig)) as c:
        yield c


ROOT_CA = "kube-root-ca.crt"
"""The ConfigMap every namespace has (the controller-manager publishes the cluster CA)."""


def _configmap(name: str, labels: dict[str, str] | None = None) -> client.V1ConfigMap:
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels=labels), data={"k": "v"}
    )


def test_crud_of_a_configmap(api: client.ApiClient, namespace: str) -> None:
    v1 = client.CoreV1Api(api)
    created = v1.create_namespaced_config_map(namespace, _configmap("settings"))
    assert created.metadata.uid and created.metadata.resource_version
    got = v1.read_namespaced_config_map("settings", namespace)
    assert got.data == {"k": "v"}
    got.data["k"] = "w"
    replaced = v1.replace_namespaced_config_map("settings", namespace, got)
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    patched = v1.patch_namespaced_config_map("settings", namespace, {"data": {"extra": "1"}})
    assert patched.data == {"k": "w", "extra": "1"}
    v1.delete_namespaced_config_map("settings", namespace)
    with pytest.raises(ApiException) as err:
        v1.read_namespaced_config_map("settings", namespace)
    assert err.value.status == 404


def test_a_stale_update_gets_409_conflict(api: client.ApiClient, namespace: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(namespace, _configmap("contended"))
    mine = v1.read_namespaced_config_map("contended", namespace)
    theirs = v1.read_namespaced_config_map("contended", namespace)
    theirs.data["k"] = "theirs"
    v1.replace_namespaced_config_map("contended", namespace, theirs)
    mine.data["k"] = "mine"
    with pytest.raises(ApiException) as err:
        v1.replace_namespaced_config_map("contended", namespace, mine)
    assert err.value.status == 409
    assert "the object has been modified" in err.value.body
    assert v1.read_namespaced_config_map("contended", namespace).data["k"] == "theirs"


def test_list_with_label_and_field_selectors(api: client.ApiClient, namespace: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(namespace, _configmap("a", {"tier": "web"}))
    v1.create_namespaced_config_map(namespace, _configmap("b", {"tier": "db"}))
    v1.create_namespaced_config_map(namespace, _configmap("c", {"tier": "web", "env": "qa"}))
    web = v1.list_namespaced_config_map(namespace, label_selector="tier=web")
    assert sorted(i.metadata.name for i in web.items) == ["a", "c"]
    not_qa = v1.list_namespaced_config_map(namespace, label_selector="tier=web,!env")
    assert [i.metadata.name for i in not_qa.items] == ["a"]
    by_name = v1.list_namespaced_config_map(namespace, field_selector="metadata.name=b")
    assert [i.metadata.name for i in by_name.items] == ["b"]


def test_paginated_list_with_limit_and_continue(api: client.ApiClient, namespace: str) -> None:
    v1 = client.CoreV1Api(api)
    for i in range(7):
        v1.create_namespaced_config_map(namespace, _configmap(f"page-{i}"))
    names, token = [], None
    while True:
        page = v1.list_namespaced_config_map(namespace, limit=3, _continue=token)
        names += [i.metadata.name for i in page.items if i.metadata.name != ROOT_CA]
        token = page.metadata._continue
        if not token:
            break
    assert names == [f"page-{i}" for i in range(7)]


def test_watch_resumes_from_a_resource_version(api: client.ApiClient, namespace: str) -> None:
    v1 = client.CoreV1Api(api)
    listed = v1.list_namespaced_config_map(namespace)
    start = listed.metadata.resource_version
    v1.create_namespaced_config_map(namespace, _configmap("w1"))
    v1.patch_namespaced_config_map("w1", namespace, {"data": {"k": "2"}})
    v1.delete_namespaced_config_map("w1", namespace)
    seen = []
    for ev in watch.Watch().stream(
        v1.list_namespaced_config_map, namespace, resource_version=start, timeout_seconds=3
    ):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 3:
            break
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]


def test_watch_delivers_live_events(api: client.ApiClient, namespace: str) -> None:
    v1 = client.CoreV1Api(api)
    w = watch.Watch()
    seen: list[str] = []

    def follow() -> None:
        for ev in w.stream(v1.list_namespaced_config_map, namespace, timeout_seconds=10):
            if ev["object"].metadata.name == ROOT_CA:
                continue  # listed first: the watch starts with what exists
            seen.append(f"{ev['type']} {ev['object'].metadata.name}")
            if len(seen) == 2:
                w.stop()

    t = threading.Thread(target=follow)
    t.start()
    time.sleep(1.0)
    v1.create_namespaced_config_map(namespace, _configmap("live"))
    v1.delete_namespaced_config_map("live", namespace)
    t.join(15)
    assert seen == ["ADDED live", "DELETED live"]


def test_deployments_through_the_apps_api(api: client.ApiClient, namespace: str) -> None:
    apps = client.AppsV1Api(api)
    labels = {"app": "web"}
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(name="nginx", image="nginx")]),
            ),
        ),
    )
    created = apps.create_namespaced_deployment(namespace, dep)
    assert created.spec.strategy.type == "RollingUpdate"  # defaulted by the server
    scale = apps.read_namespaced_deployment_scale("web", namespace)
    assert scale.spec.replicas == 2
    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 5}})
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 5


def _read_chunked(lab: Lab, path: str, timeout: float = 20.0) -> tuple[bytes, list[bytes]]:
    """A GET over a raw TLS socket, read to the end of its chunked body: the response
    head and the chunks, the last being the terminating zero-length one. Fails if the
    connection ends first, which is what urllib3 reports as "Response ended
    prematurely"."""
    url = urlsplit(lab.server)
    context = ssl.create_default_context(cafile=str(lab.plane.pki / "ca.crt"))
    context.load_cert_chain(lab.plane.pki / "admin.crt", lab.plane.pki / "admin.key")
    raw = socket.create_connection((url.hostname, url.port), timeout=timeout)
    with context.wrap_socket(raw, server_hostname=url.hostname) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode())
        stream = conn.makefile("rb")
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = stream.readline()
            assert line, f"the connection ended in the response head: {head!r}"
            head += line
        assert b"transfer-encoding: chunked" in head.lower(), head
        chunks = []
        while True:
            size_line = stream.readline()
            assert size_line.endswith(b"\r\n"), f"the body ended after {chunks[-3:]!r}"
            data = stream.read(int(size_line, 16) + 2)
            assert data.endswith(b"\r\n"), f"a chunk was cut short: {data[-40:]!r}"
            chunks.append(data[:-2])
            if not chunks[-1]:
                return head, chunks


def test_a_watch_the_server_ends_ends_its_chunked_body(lab: Lab, namespace: str) -> None:
    """A watch ended by its timeout sends the terminating chunk. (The informer's
    "Response ended prematurely" during the client's e2e suite is its own Watch.stop(),
    which shuts the socket down under the reading thread: see the test below.)"""
    path = f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=1"
    head, chunks = _read_chunked(lab, path)
    assert head.startswith(b"HTTP/1.1 200")
    events = [json.loads(line) for line in b"".join(chunks).splitlines()]
    assert [e["object"]["metadata"]["name"] for e in events] == [ROOT_CA]
    assert chunks[-1] == b""


def test_an_informer_logs_no_error_while_the_server_ends_its_watches(
    api: client.ApiClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Watches the server ends at their timeoutSeconds (the informer's resync period)
    are read to their end and opened again without an error; only the informer's stop,
    which cuts its own connection, logs one (the client's doing, not the server's)."""
    v1 = client.CoreV1Api(api)
    informer = SharedInformer(
        list_func=v1.list_namespaced_config_map, namespace=namespace, resync_period=1
    )
    caplog.set_level(logging.WARNING, logger="kubernetes.informer")
    informer.start()
    try:
        for i in range(4):  # four watches ended by the server
            time.sleep(1.0)
            v1.create_namespaced_config_map(namespace, _configmap(f"inf-{i}"))
        deadline = time.monotonic() + 10
        while informer.cache.get_by_key(f"{namespace}/inf-3") is None:
            assert time.monotonic() < deadline, "the informer never saw inf-3"
            time.sleep(0.1)
        assert caplog.records == []
    finally:
        informer.stop()
