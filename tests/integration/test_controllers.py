"""The controller-manager in a running control plane, driven by the real kubectl: the
garbage collector's three cascades, namespace deletion, and what every new namespace
gets (the `default` ServiceAccount, the `kube-root-ca.crt` ConfigMap).

The ownership tree the cascades act on is the one the Deployment and ReplicaSet
controllers build: a Deployment, its ReplicaSet, the ReplicaSet's pod, each reference
with `blockOwnerDeletion`.
"""

from __future__ import annotations

import json
import uuid
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


# -- custom resources: found by discovery, as the controllers find them ----------------------


def _crd(lab: Lab, kind: str) -> tuple[str, str]:
    """Serve a namespaced custom resource `kind` (a group of the test's own, so that
    each test gets a CRD the running controllers have never seen); its group/version
    and plural."""
    group = f"{uuid.uuid4().hex[:6]}.example.com"
    plural = kind.lower() + "s"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    lab.kubectl("apply", "-f", "-", input=json.dumps(crd))
    lab.kubectl("wait", "--for=condition=Established", f"crd/{plural}.{group}")
    return f"{group}/v1", plural


def _custom(lab: Lab, namespace: str, api_version: str, kind: str, name: str, *owners: Any) -> Any:
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}
    if owners:
        obj["metadata"]["ownerReferences"] = [_owner_ref(o) for o in owners]
    lab.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(obj))
    return lab.kubectl_json(
        "get", f"{kind.lower()}.{api_version.split('/')[0]}", name, "-n", namespace
    )


def test_deleting_a_namespace_deletes_its_custom_objects(lab: Lab) -> None:
    api_version, plural = _crd(lab, "Widget")
    namespace = lab.new_namespace()
    for name in ("a", "b"):
        _custom(lab, namespace, api_version, "Widget", name)
    _custom(lab, namespace, api_version, "Widget", "held")
    lab.kubectl(
        "patch", f"widget.{api_version.split('/')[0]}", "held", "-n", namespace, "--type=merge",
        "-p", '{"metadata": {"finalizers": ["example.com/hold"]}}',
    )  # fmt: skip
    lab.kubectl("delete", "namespace", namespace, "--wait=false")
    path = f"/apis/{api_version}/namespaces/{namespace}/{plural}"

    def held_alone() -> bool:
        names = [o["metadata"]["name"] for o in lab.api("GET", path).json()["items"]]
        return names == ["held"]

    lab.until(held_alone, "the custom objects without finalizers to go")

    def conditions() -> str:
        """The namespace's conditions (none until the controller has looked once)."""
        found = lab.kubectl_json("get", "namespace", namespace)
        return json.dumps(found["status"].get("conditions", []))

    lab.until(lambda: "widgets." in conditions(), "the namespace to name the custom objects left")
    lab.kubectl(
        "patch", f"widget.{api_version.split('/')[0]}", "held", "-n", namespace, "--type=merge",
        "-p", '{"metadata": {"finalizers": null}}',
    )  # fmt: skip
    lab.wait_gone(f"/api/v1/namespaces/{namespace}", timeout=60)
    assert lab.api("GET", path).json()["items"] == []


def test_custom_objects_owned_by_a_built_in_object_are_collected(lab: Lab, namespace: str) -> None:
    api_version, plural = _crd(lab, "Gadget")
    lab.kubectl("create", "configmap", "owner", "-n", namespace)
    owner = lab.kubectl_json("get", "configmap", "owner", "-n", namespace)
    _custom(lab, namespace, api_version, "Gadget", "dependent", owner)
    lab.kubectl("delete", "configmap", "owner", "-n", namespace)
    lab.wait_gone(f"/apis/{api_version}/namespaces/{namespace}/{plural}/dependent")


def test_custom_owners_cascade_in_the_background_and_the_foreground(
    lab: Lab, namespace: str
) -> None:
    api_version, plural = _crd(lab, "Gizmo")
    group = api_version.split("/")[0]
    base = f"/apis/{api_version}/namespaces/{namespace}/{plural}"
    # Background: a custom owner, a custom dependent and a built-in one.
    parent = _custom(lab, namespace, api_version, "Gizmo", "parent")
    _custom(lab, namespace, api_version, "Gizmo", "child", parent)
    lab.kubectl(
        "create", "-n", namespace, "-f", "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "of-parent", "ownerReferences": [_owner_ref(parent)]},
            }
        ),
    )  # fmt: skip
    lab.kubectl("delete", f"gizmo.{group}", "parent", "-n", namespace)
    lab.wait_gone(f"{base}/child")
    lab.wait_gone(f"/api/v1/namespaces/{namespace}/configmaps/of-parent")

    # Foreground: kubectl waits for the owner, which waits for its blocking dependent,
    # which a finalizer holds until the test lets it go.
    top = _custom(lab, namespace, api_version, "Gizmo", "top")
    _custom(lab, namespace, api_version, "Gizmo", "below", top)
    lab.kubectl(
        "patch", f"gizmo.{group}", "below", "-n", namespace, "--type=merge",
        "-p", '{"metadata": {"finalizers": ["example.com/hold"]}}',
    )  # fmt: skip
    lab.kubectl(
        "delete", f"gizmo.{group}", "top", "-n", namespace, "--cascade=foreground", "--wait=false"
    )
    lab.until(
        lambda: lab.api("GET", f"{base}/below").json()["metadata"].get("deletionTimestamp"),
        "the dependent to be deleted",
    )
    top_now = lab.api("GET", f"{base}/top").json()
    assert top_now["metadata"]["finalizers"] == ["foregroundDeletion"], top_now
    lab.kubectl(
        "patch", f"gizmo.{group}", "below", "-n", namespace, "--type=merge",
        "-p", '{"metadata": {"finalizers": null}}',
    )  # fmt: skip
    lab.wait_gone(f"{base}/below")
    lab.wait_gone(f"{base}/top")
