"""Authentication and authorization at the apiserver's door, with real TLS clients."""

from __future__ import annotations

from pathlib import Path

import requests

from kubelab import pki
from tests.integration.controlplane_fixture import Lab, lab, namespace
from tests.waiting import until

__all__ = ["lab", "namespace"]  # pytest fixtures used below


def _client(
    lab: Lab, tmp: Path, cn: str, orgs: list[str], ca: pki.CertKey | None = None
) -> requests.Session:
    issuer = ca or pki.load_pair(lab.plane.pki, "ca")
    cert = pki.issue(issuer, cn, organizations=orgs, client=True)
    crt, key = pki.write_pair(cert, tmp, cn.replace(":", "_"))
    s = requests.Session()
    s.trust_env = False  # REQUESTS_CA_BUNDLE would replace the cluster CA
    s.verify = str(lab.plane.pki / "ca.crt")
    s.cert = (str(crt), str(key))
    return s


def _node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def test_no_credentials_get_401_except_health(lab: Lab) -> None:
    anonymous = requests.Session()
    anonymous.trust_env = False
    anonymous.verify = str(lab.plane.pki / "ca.crt")
    r = anonymous.get(lab.server + "/api/v1/namespaces")
    assert r.status_code == 401
    assert r.json()["kind"] == "Status" and r.json()["reason"] == "Unauthorized"
    assert anonymous.get(lab.server + "/healthz").text == "ok"
    assert anonymous.get(lab.server + "/version").json()["major"] == "1"


def test_a_certificate_from_another_ca_is_refused(lab: Lab, tmp_path: Path) -> None:
    """As in kube-apiserver: the handshake completes and the request gets 401, even where
    anonymous could read (a client that presented a credential meant to use it)."""
    stranger = _client(lab, tmp_path, "mallory", ["system:masters"], ca=pki.new_ca("evil"))
    for path in ("/api/v1/namespaces", "/healthz"):
        r = stranger.get(lab.server + path)
        assert r.status_code == 401, (path, r.text)
        status = r.json()
        assert status["kind"] == "Status" and status["reason"] == "Unauthorized"
        assert "x509: certificate signed by unknown authority" in status["message"]
    assert "Unable to authenticate the request: x509: certificate signed by unknown" in (
        lab.plane.log_tail(200)
    )
    admin = _client(lab, tmp_path, "carol", ["system:masters"])
    assert admin.get(lab.server + "/api/v1/namespaces").status_code == 200


def test_a_bearer_token_wins_over_a_bad_certificate(lab: Lab, tmp_path: Path) -> None:
    """kube-apiserver tries its authenticators in turn and takes the first that succeeds;
    here the token says who the client is, whatever its certificate."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    r = lab.api("POST", "/api/v1/namespaces/default/serviceaccounts/default/token", json=request)
    assert r.status_code == 201, r.text
    stranger = _client(lab, tmp_path, "mallory", ["system:masters"], ca=pki.new_ca("evil"))
    r = stranger.get(
        lab.server + "/api/v1/namespaces",
        headers={"Authorization": f"Bearer {r.json()['status']['token']}"},
    )
    assert r.status_code == 403, r.text
    assert 'User "system:serviceaccount:default:default"' in r.json()["message"]


def test_a_bad_bearer_token_gets_401(lab: Lab) -> None:
    s = requests.Session()
    s.trust_env = False  # REQUESTS_CA_BUNDLE would replace the cluster CA
    s.verify = str(lab.plane.pki / "ca.crt")
    r = s.get(lab.server + "/api/v1/pods", headers={"Authorization": "Bearer abc.def.ghi"})
    assert r.status_code == 401


def test_a_user_without_a_role_gets_403(lab: Lab, tmp_path: Path, namespace: str) -> None:
    alice = _client(lab, tmp_path, "alice", ["developers"])
    r = alice.get(f"{lab.server}/api/v1/namespaces/{namespace}/pods")
    assert r.status_code == 403
    assert r.json()["message"] == (
        f'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the '
        f'namespace "{namespace}"'
    )
    grant = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "devs-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}
        ],
    }
    r = lab.api(
        "POST",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        json=grant,
    )
    assert r.status_code == 201, r.text
    # The binding reaches the authorizer through the watch cache, and edit's rules come
    # from the controller-manager's aggregation (a loaded machine may still be starting it).
    until(
        lambda: alice.get(f"{lab.server}/api/v1/namespaces/{namespace}/pods").status_code == 200,
        "alice allowed to list pods through the edit binding",
    )
    assert alice.get(f"{lab.server}/api/v1/namespaces/default/pods").status_code == 403


def test_a_kubelet_cannot_touch_another_nodes_objects(lab: Lab, tmp_path: Path) -> None:
    kubelet = _client(lab, tmp_path, "system:node:n1", ["system:nodes"])
    assert kubelet.post(lab.server + "/api/v1/nodes", json=_node("n1")).status_code == 201
    assert lab.api("POST", "/api/v1/nodes", json=_node("n2")).status_code == 201
    r = kubelet.patch(
        lab.server + "/api/v1/nodes/n2",
        json={"metadata": {"labels": {"x": "y"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 403
    r = kubelet.patch(
        lab.server + "/api/v1/nodes/n1",
        json={"metadata": {"labels": {"x": "y"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    r = kubelet.get(lab.server + "/api/v1/namespaces/kube-system/secrets/anything")
    assert r.status_code == 403


def test_a_kubelet_sets_only_the_labels_kubernetes_lets_kubelets_set(
    lab: Lab, tmp_path: Path
) -> None:
    """NodeRestriction's label rules: node-restriction.kubernetes.io/ labels and other
    kubernetes.io or k8s.io labels than a kubelet's own cannot be added, changed or
    removed by the kubelet, on create or update; an administrator's stay put."""
    kubelet = _client(lab, tmp_path, "system:node:n3", ["system:nodes"])
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n3",
            "labels": {"node-restriction.kubernetes.io/pci": "true", "kubernetes.io/os": "linux"},
        },
    }
    r = kubelet.post(lab.server + "/api/v1/nodes", json=node)
    assert r.status_code == 403
    assert r.json()["message"] == (
        'nodes "n3" is forbidden: node "n3" is not allowed to set the following labels: '
        "node-restriction.kubernetes.io/pci"
    )
    assert r.json()["details"] == {"name": "n3", "kind": "nodes"}
    node["metadata"]["labels"] = {  # type: ignore[index]
        "kubernetes.io/hostname": "n3",
        "kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/zone": "a",
        "node.kubernetes.io/instance-type": "small",
        "kubelet.kubernetes.io/x": "1",
        "team.node.kubernetes.io/y": "2",
        "example.com/z": "3",
    }
    r = kubelet.post(lab.server + "/api/v1/nodes", json=node)
    assert r.status_code == 201, r.text
    admin = {"node-restriction.kubernetes.io/pci": "true", "node-role.kubernetes.io/worker": ""}
    r = lab.api(
        "PATCH",
        "/api/v1/nodes/n3",
        json={"metadata": {"labels": admin}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text

    def label(labels: dict[str, str | None]) -> requests.Response:
        return kubelet.patch(
            lab.server + "/api/v1/nodes/n3",
            json={"metadata": {"labels": labels}},
            headers={"Content-Type": "application/merge-patch+json"},
        )

    for refused in (
        {"node-restriction.kubernetes.io/pci": None},
        {"node-restriction.kubernetes.io/pci": "false"},
        {"sub.node-restriction.kubernetes.io/x": "1"},
        {"node-role.kubernetes.io/control-plane": ""},
        {"node-role.kubernetes.io/worker": None},
        {"example.k8s.io/x": "1"},
    ):
        r = label(refused)
        assert r.status_code == 403, refused
        assert r.json()["message"] == (
            f'nodes "n3" is forbidden: is not allowed to modify labels: {next(iter(refused))}'
        )
    r = label(
        {"kubernetes.io/os": "windows", "example.com/z": None, "kubelet.kubernetes.io/x": "9"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["labels"]["node-restriction.kubernetes.io/pci"] == "true"


def _bind(lab: Lab, namespace: str, name: str, role: str, group: str) -> None:
    r = lab.api(
        "POST",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        json={
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
        },
    )
    assert r.status_code == 201, r.text


def test_a_namespace_path_cannot_reach_cluster_scoped_objects(
    lab: Lab, tmp_path: Path, namespace: str
) -> None:
    _bind(lab, namespace, "owners-admin", "admin", "owners")
    owner = _client(lab, tmp_path, "olga", ["owners"])
    for path in (
        f"/api/v1/namespaces/{namespace}/nodes",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/clusterroles",
    ):
        r = owner.get(lab.server + path)
        assert r.status_code == 404, (path, r.text)
        assert "cluster-scoped" in r.json()["message"]


def test_nobody_grants_what_they_do_not_hold(lab: Lab, tmp_path: Path, namespace: str) -> None:
    _bind(lab, namespace, "owners-admin", "admin", "owners")
    owner = _client(lab, tmp_path, "olga", ["owners"])
    path = f"{lab.server}/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings"
    # the binding reaches the authorizer, and admin's rules come from the aggregation
    until(lambda: owner.get(path).status_code == 200, "olga allowed to list rolebindings")
    escalate = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "me-cluster-admin"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "olga"}],
    }
    r = owner.post(path, json=escalate)
    assert r.status_code == 403, r.text
    assert "attempting to grant RBAC permissions not currently held" in r.json()["message"]
    allowed = dict(
        escalate, metadata={"name": "friend-view"}, roleRef={**escalate["roleRef"], "name": "view"}
    )  # type: ignore[dict-item]
    # admin holds view's rules once the aggregation has filled view, then edit, then admin
    until(lambda: owner.post(path, json=allowed).status_code == 201, "olga granting view")


def test_a_kubelet_writes_only_its_own_lease(lab: Lab, tmp_path: Path) -> None:
    kubelet = _client(lab, tmp_path, "system:node:n7", ["system:nodes"])
    path = f"{lab.server}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

    def lease(name: str) -> dict[str, object]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name},
            "spec": {"holderIdentity": name},
        }

    assert kubelet.post(path, json=lease("n7")).status_code == 201
    assert kubelet.post(path, json=lease("n8")).status_code == 403
    token = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    r = kubelet.post(
        f"{lab.server}/api/v1/namespaces/kube-system/serviceaccounts/default/token", json=token
    )
    assert r.status_code == 403  # no pod of that account runs on n7


def test_the_default_policy_is_reconciled_at_start(lab: Lab) -> None:
    """A restarted apiserver adds back the default rules a role lacks, keeps the rules an
    operator added, and leaves alone a role annotated autoupdate=false. (The roles that
    hold view's and edit's rules: those two are aggregated.)"""
    path = "/apis/rbac.authorization.k8s.io/v1/clusterroles/"
    view = lab.api("GET", path + "system:aggregate-to-view").json()
    edit = lab.api("GET", path + "system:aggregate-to-edit").json()
    dropped_view, dropped_edit = view["rules"][0], edit["rules"][0]
    custom = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}
    changed_view = {**view, "rules": [*view["rules"][1:], custom]}
    pinned_edit = {
        **edit,
        "metadata": {
            **edit["metadata"],
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "false"},
        },
        "rules": edit["rules"][1:],
    }
    assert lab.api("PUT", path + "system:aggregate-to-view", json=changed_view).status_code == 200
    assert lab.api("PUT", path + "system:aggregate-to-edit", json=pinned_edit).status_code == 200

    lab.plane.stop_apiserver()
    lab.plane.start_apiserver(timeout=60)

    rules = lab.api("GET", path + "system:aggregate-to-view").json()["rules"]
    assert dropped_view in rules and custom in rules
    pinned = lab.api("GET", path + "system:aggregate-to-edit").json()
    assert dropped_edit not in pinned["rules"]
    # Put edit back as it was, for the module's other tests.
    restored = {**edit, "metadata": {**pinned["metadata"], "annotations": {}}}
    assert lab.api("PUT", path + "system:aggregate-to-edit", json=restored).status_code == 200
    unchanged = {
        **view,
        "metadata": lab.api("GET", path + "system:aggregate-to-view").json()["metadata"],
    }
    assert lab.api("PUT", path + "system:aggregate-to-view", json=unchanged).status_code == 200
