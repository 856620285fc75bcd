"""Deletion as Kubernetes does it: finalizers hold an object back, a pod bound to a node
waits for its kubelet's confirmation, preconditions guard against deleting the wrong
incarnation; plus dry runs and generated names, which must store nothing or something
new."""

from __future__ import annotations

from tests.integration.controlplane_fixture import Lab, lab, namespace

__all__ = ["lab", "namespace"]  # pytest fixtures used below


def _configmap(name: str, **meta: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, **meta},
        "data": {"k": "v"},
    }


def test_a_finalizer_holds_the_object_until_it_is_removed(lab: Lab, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    lab.api("POST", path, json=_configmap("held", finalizers=["example.com/hold"]))
    marked = lab.api("DELETE", f"{path}/held").json()
    assert marked["metadata"]["deletionTimestamp"]
    assert lab.api("GET", f"{path}/held").status_code == 200
    refused = lab.api(
        "PATCH",
        f"{path}/held",
        data='{"metadata":{"finalizers":["x.io/new"]}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert refused.status_code == 422  # no new finalizers once deletion started
    r = lab.api(
        "PATCH",
        f"{path}/held",
        data='{"metadata":{"finalizers":null}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    assert lab.api("GET", f"{path}/held").status_code == 404


def test_a_pod_on_a_node_waits_for_its_kubelet_to_confirm(lab: Lab, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bound"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
    }
    assert lab.api("POST", path, json=pod).status_code == 201
    graceful = lab.api("DELETE", f"{path}/bound").json()
    assert graceful["metadata"]["deletionGracePeriodSeconds"] == 30
    assert lab.api("GET", f"{path}/bound").status_code == 200
    confirmed = lab.api("DELETE", f"{path}/bound", json={"gracePeriodSeconds": 0})
    assert confirmed.status_code == 200, confirmed.text
    assert lab.api("GET", f"{path}/bound").status_code == 404
    unbound = {
        **pod,
        "metadata": {"name": "unbound"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    lab.api("POST", path, json=unbound)
    lab.api("DELETE", f"{path}/unbound")  # nobody to wait for: gone at once
    assert lab.api("GET", f"{path}/unbound").status_code == 404


def test_preconditions_guard_a_delete(lab: Lab, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = lab.api("POST", path, json=_configmap("guarded")).json()
    wrong = lab.api("DELETE", f"{path}/guarded", json={"preconditions": {"uid": "not-the-uid"}})
    assert wrong.status_code == 409 and "Precondition failed" in wrong.json()["message"]
    right = lab.api(
        "DELETE", f"{path}/guarded", json={"preconditions": {"uid": created["metadata"]["uid"]}}
    )
    assert right.status_code == 200


def test_dry_run_stores_nothing_and_generate_name_makes_a_new_name(
    lab: Lab, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    dry = lab.api("POST", f"{path}?dryRun=All", json=_configmap("ghost"))
    assert dry.status_code == 201 and dry.json()["metadata"]["uid"]
    assert lab.api("GET", f"{path}/ghost").status_code == 404
    bad = lab.api("POST", f"{path}?dryRun=Yes", json=_configmap("ghost"))
    assert bad.status_code == 400
    names = set()
    for _ in range(3):
        made = lab.api(
            "POST",
            path,
            json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "job-"}},
        ).json()
        names.add(made["metadata"]["name"])
    assert len(names) == 3 and all(n.startswith("job-") and len(n) == 9 for n in names)
