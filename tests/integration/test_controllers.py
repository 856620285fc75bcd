"""The controller-manager in a running control plane, driven by the real kubectl: the
garbage collector's three cascades, namespace deletion, and what every new namespace
gets (the `default` ServiceAccount, the `kube-root-ca.crt` ConfigMap).

The ownership tree the cascades act on is the one the Deployment and ReplicaSet
controllers build: a Deployment, its ReplicaSet, the ReplicaSet's pod, each reference
with `blockOwnerDeletion`.
"""

from __future__ import annotations

import json
from typing import Any

from tests.integration.controlplane_fixture import Lab, lab, namespace

__all__ = ["lab", "namespace"]  # pytest fixtures used below

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
"""


def _owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _apply(lab: Lab, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))
    kind = obj["kind"].lower()
    result: dict[str, Any] = lab.kubectl_json("get", kind, obj["metadata"]["name"], "-n", namespace)
    return result


def _deployment_tree(lab: Lab, namespace: str) -> tuple[str, str]:
    """Deployment web -> its ReplicaSet -> its pod, as the controllers make them; the
    names of the ReplicaSet and the pod."""
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=DEPLOYMENT)
    found: dict[str, str] = {}

    def built() -> bool:
        pods = lab.api("GET", f"/api/v1/namespaces/{namespace}/pods").json()["items"]
        if len(pods) != 1:
            return False
        found["pod"] = pods[0]["metadata"]["name"]
        found["rs"] = pods[0]["metadata"]["ownerReferences"][0]["name"]
        return True

    lab.until(built, "the deployment's ReplicaSet and pod")
    return found["rs"], found["pod"]


def _exists(lab: Lab, namespace: str, what: str) -> bool:
    done = lab.kubectl("get", what, "-n", namespace, "-o", "name", check=False)
    if done.returncode != 0:
        assert "NotFound" in done.stderr, done.stderr
    return done.returncode == 0


def test_foreground_deletion_returns_once_the_dependents_are_gone(lab: Lab, namespace: str) -> None:
    rs, pod = _deployment_tree(lab, namespace)
    lab.kubectl("delete", "deployment", "web", "-n", namespace, "--cascade=foreground")
    # kubectl waited for the Deployment, which waited for its blocking dependents.
    for what in ("deployment/web", f"replicaset/{rs}", f"pod/{pod}"):
        assert not _exists(lab, namespace, what), what


def test_orphan_deletion_keeps_the_dependents_without_their_owner(lab: Lab, namespace: str) -> None:
    rs_name, pod_name = _deployment_tree(lab, namespace)
    lab.kubectl("delete", "deployment", "web", "-n", namespace, "--cascade=orphan")
    assert not _exists(lab, namespace, "deployment/web")
    rs = lab.kubectl_json("get", "replicaset", rs_name, "-n", namespace)
    assert not rs["metadata"].get("ownerReferences")
    assert not rs["metadata"].get("deletionTimestamp")
    pod = lab.kubectl_json("get", "pod", pod_name, "-n", namespace)
    assert [r["name"] for r in pod["metadata"]["ownerReferences"]] == [rs_name]


def test_background_deletion_collects_the_dependents_afterwards(lab: Lab, namespace: str) -> None:
    rs, pod = _deployment_tree(lab, namespace)
    lab.kubectl("delete", "deployment", "web", "-n", namespace)
    lab.wait_gone(f"/apis/apps/v1/namespaces/{namespace}/replicasets/{rs}")
    lab.wait_gone(f"/api/v1/namespaces/{namespace}/pods/{pod}")


def test_a_dependent_of_an_owner_with_the_same_name_but_another_uid_is_collected(
    lab: Lab, namespace: str
) -> None:
    lab.kubectl("apply", "-n", namespace, "-f", "-", input=DEPLOYMENT)
    deploy = lab.kubectl_json("get", "deployment", "web", "-n", namespace)
    predecessor = {**_owner_ref(deploy), "uid": "00000000-0000-0000-0000-000000000001"}
    lab.kubectl(
        "create", "-n", namespace, "-f", "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "of-the-old-web", "ownerReferences": [predecessor]},
            }
        ),
    )  # fmt: skip
    lab.wait_gone(f"/api/v1/namespaces/{namespace}/configmaps/of-the-old-web")
    assert _exists(lab, namespace, "deployment/web")


def test_deleting_a_namespace_deletes_its_content(lab: Lab) -> None:
    namespace = lab.new_namespace()
    _deployment_tree(lab, namespace)
    lab.kubectl("create", "configmap", "settings", "-n", namespace, "--from-literal=k=v")
    lab.kubectl("create", "secret", "generic", "token", "-n", namespace, "--from-literal=k=v")
    lab.kubectl("delete", "namespace", namespace)  # waits until the namespace is gone
    assert "NotFound" in lab.kubectl("get", "namespace", namespace, check=False).stderr
    for resource in ("configmaps", "secrets", "pods", "serviceaccounts"):
        listed = lab.api("GET", f"/api/v1/namespaces/{namespace}/{resource}").json()
        assert listed["items"] == [], resource
    for resource in ("deployments", "replicasets"):
        listed = lab.api("GET", f"/apis/apps/v1/namespaces/{namespace}/{resource}").json()
        assert listed["items"] == [], resource


def test_a_new_namespace_gets_its_service_account_and_the_cluster_ca(lab: Lab) -> None:
    lab.kubectl("create", "namespace", "fresh")
    account = lab.wait_for("/api/v1/namespaces/fresh/serviceaccounts/default")
    # No account created by hand, yet a pod can run as "default".
    lab.kubectl("run", "box", "-n", "fresh", "--image=busybox:1.36", "--", "sleep", "1")
    pod = lab.kubectl_json("get", "pod", "box", "-n", "fresh")
    assert pod["spec"]["serviceAccountName"] == "default"

    ca = lab.wait_for("/api/v1/namespaces/fresh/configmaps/kube-root-ca.crt")
    assert ca["data"] == {"ca.crt": (lab.plane.pki / "ca.crt").read_text()}

    lab.kubectl("delete", "serviceaccount", "default", "-n", "fresh")
    again = lab.wait_for("/api/v1/namespaces/fresh/serviceaccounts/default")
    assert again["metadata"]["uid"] != account["metadata"]["uid"]
    lab.kubectl(
        "patch", "configmap", "kube-root-ca.crt", "-n", "fresh", "--type=merge",
        "-p", '{"data": {"ca.crt": "tampered"}}',
    )  # fmt: skip
    path = "/api/v1/namespaces/fresh/configmaps/kube-root-ca.crt"
    lab.until(lambda: lab.api("GET", path).json()["data"] == ca["data"], "the CA to be put back")
