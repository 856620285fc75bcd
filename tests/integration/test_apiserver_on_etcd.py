"""The apiserver's storage layer against a real etcd 3.4 (`--etcd-servers` pointing at
it): the same API, the same behaviour, because the store speaks etcd's v3 API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelab.storeclient import StoreClient
from lab.localplane import LocalControlPlane
from tests.integration.controlplane_fixture import Lab
from tests.integration.etcd_fixture import ETCD, start_etcd_cluster

pytestmark = pytest.mark.skipif(ETCD is None, reason="etcd is not installed")

CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
"""


@pytest.fixture(scope="module")
def etcd_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    directory: Path = tmp_path_factory.mktemp("etcd-plane")
    etcd = start_etcd_cluster(directory / "etcd", members=1)
    plane = LocalControlPlane(directory / "plane", etcd_servers=etcd.endpoints)
    try:
        plane.start(timeout=90)
        yield Lab(plane)
    finally:
        plane.stop()
        etcd.stop()


def test_kubectl_works_with_etcd_as_the_store(etcd_lab: Lab) -> None:
    ns = etcd_lab.new_namespace()
    etcd_lab.kubectl("apply", "-n", ns, "-f", "-", input=CONFIGMAP)
    changed = CONFIGMAP.replace("mode: fast", "mode: safe")
    assert "configured" in etcd_lab.kubectl("apply", "-n", ns, "-f", "-", input=changed).stdout
    cm = etcd_lab.kubectl_json("get", "configmap", "settings", "-n", ns)
    assert cm["data"] == {"mode": "safe"}
    listed = etcd_lab.kubectl_json("get", "configmaps", "-n", ns)
    # Besides the cluster CA that the controller-manager publishes in every namespace.
    names = [i["metadata"]["name"] for i in listed["items"]]
    assert names == ["kube-root-ca.crt", "settings"]


def test_watch_resumes_and_old_versions_get_410_after_compaction(etcd_lab: Lab) -> None:
    ns = etcd_lab.new_namespace()
    path = f"/api/v1/namespaces/{ns}/configmaps"
    first = etcd_lab.api(
        "POST", path, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    ).json()
    rv = int(first["metadata"]["resourceVersion"])
    for i in range(3):
        etcd_lab.api(
            "POST",
            path,
            json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"b{i}"}},
        )
    r = etcd_lab.api("GET", f"{path}?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    names = [line for line in r.text.splitlines() if line]
    assert len(names) == 3
    page = etcd_lab.api("GET", f"{path}?limit=2").json()
    token = page["metadata"]["continue"]
    etcd_lab.api(
        "POST", path, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later"}}
    )
    with StoreClient(etcd_lab.plane.etcd_servers) as store:
        store.compact(store.get("/registry/", prefix=True, count_only=True).header.revision)
    gone = etcd_lab.api("GET", f"{path}?limit=2&continue={token}")
    assert gone.status_code == 410
    assert gone.json()["reason"] == "Expired"


def test_a_restarted_apiserver_finds_everything_again(etcd_lab: Lab) -> None:
    ns = etcd_lab.new_namespace()
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "np"},
        "spec": {"type": "NodePort", "ports": [{"port": 80}]},
    }
    created = etcd_lab.api("POST", f"/api/v1/namespaces/{ns}/services", json=svc).json()
    etcd_lab.plane.stop_apiserver()
    etcd_lab.plane.start_apiserver(timeout=60)  # relists a store holding allocation keys
    again = etcd_lab.api("GET", f"/api/v1/namespaces/{ns}/services/np").json()
    assert again["spec"]["clusterIP"] == created["spec"]["clusterIP"]
    taken = {
        **svc,
        "metadata": {"name": "np2"},
        "spec": {
            **svc["spec"],
            "ports": [{"port": 80, "nodePort": created["spec"]["ports"][0]["nodePort"]}],
        },
    }
    r = etcd_lab.api("POST", f"/api/v1/namespaces/{ns}/services", json=taken)
    assert r.status_code == 422 and "already allocated" in r.text
