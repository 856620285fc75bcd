"""Impersonation (``kubectl --as``), with the real kubectl: the impersonated user's
rights apply, the caller needs the ``impersonate`` verb for each identity it takes, and
the audit log names both."""

from __future__ import annotations

import json
import time
from pathlib import Path

import requests

from kubelab import pki
from kubelab.client import write_kubeconfig
from tests.integration.controlplane_fixture import Lab, lab, namespace

__all__ = ["lab", "namespace"]  # pytest fixtures used below


def _kubeconfig(lab: Lab, tmp: Path, user: str, groups: list[str]) -> Path:
    ca = pki.load_pair(lab.plane.pki, "ca")
    cert = pki.issue(ca, user, organizations=groups, client=True)
    return write_kubeconfig(
        tmp / f"{user}.conf",
        cluster_name="kubelab",
        server=lab.server,
        ca_data=ca.cert_pem(),
        user_name=user,
        client_cert_data=cert.cert_pem(),
        client_key_data=cert.key_pem(),
    )


def _as(lab: Lab, kubeconfig: Path, *args: str) -> tuple[int, str]:
    done = lab.kubectl("--kubeconfig", str(kubeconfig), *args, check=False)
    return done.returncode, done.stdout + done.stderr


def _apply(lab: Lab, obj: dict[str, object]) -> None:
    lab.kubectl("apply", "-f", "-", input=json.dumps(obj))


def test_can_i_as_another_user_answers_for_that_user(lab: Lab, namespace: str) -> None:
    code, out = _as(lab, lab.plane.kubeconfig, "auth", "can-i", "create", "pods", "-n", namespace)
    assert (code, out.strip()) == (0, "yes")  # the admin itself
    done = lab.kubectl(
        "auth", "can-i", "create", "pods", "-n", namespace, "--as", "jane", check=False
    )
    assert (done.returncode, done.stdout.strip()) == (1, "no"), "jane holds no role yet"
    lab.kubectl(
        "create", "rolebinding", "jane-edit", "--clusterrole=edit", "--user=jane", "-n", namespace
    )
    assert (
        lab.kubectl(
            "auth", "can-i", "create", "pods", "-n", namespace, "--as", "jane"
        ).stdout.strip()
        == "yes"
    )
    done = lab.kubectl("get", "nodes", "--as", "jane", check=False)
    assert done.returncode != 0
    assert 'User "jane" cannot list resource "nodes"' in done.stderr


def test_impersonation_needs_the_impersonate_verb(lab: Lab, namespace: str, tmp_path: Path) -> None:
    bob = _kubeconfig(lab, tmp_path, "bob", ["developers"])
    code, out = _as(lab, bob, "get", "pods", "-n", namespace, "--as", "jane")
    assert code != 0
    assert (
        'users "jane" is forbidden: User "bob" cannot impersonate resource "users" in API '
        'group "" at the cluster scope' in out
    )
    _apply(
        lab,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{namespace}-impersonate-jane"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["users"],
                    "verbs": ["impersonate"],
                    "resourceNames": ["jane"],
                }
            ],
        },
    )
    lab.kubectl(
        "create",
        "clusterrolebinding",
        f"{namespace}-bob-as-jane",
        f"--clusterrole={namespace}-impersonate-jane",
        "--user=bob",
    )
    lab.kubectl(
        "create", "rolebinding", "jane-view", "--clusterrole=view", "--user=jane", "-n", namespace
    )

    def allowed() -> bool:
        return _as(lab, bob, "get", "pods", "-n", namespace, "--as", "jane")[0] == 0

    deadline = time.monotonic() + 10  # RBAC is read from the watch cache
    while not allowed():
        assert time.monotonic() < deadline, "bob may impersonate jane by now"
        time.sleep(0.1)
    code, out = _as(lab, bob, "get", "pods", "-n", namespace, "--as", "mary")
    assert code != 0 and 'users "mary" is forbidden: User "bob" cannot impersonate' in out
    # A group is an identity of its own: bob may not add one.
    code, out = _as(
        lab, bob, "get", "pods", "-n", namespace, "--as", "jane", "--as-group", "system:masters"
    )
    assert code != 0
    assert 'groups "system:masters" is forbidden: User "bob" cannot impersonate' in out

    assert _audited(lab, "bob", "jane"), "the audit log names the caller and whom it acted as"


def _audited(lab: Lab, user: str, impersonated: str) -> bool:
    """Whether the audit log has a request `user` made as `impersonated`; the log is
    flushed by the first request a second after the last flush, so keep asking."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in (lab.plane.dir / "audit.log").read_text().splitlines():
            event = json.loads(line)
            if (event["user"]["username"], event.get("impersonatedUser", {}).get("username")) == (
                user,
                impersonated,
            ):
                return True
        time.sleep(0.3)
        lab.kubectl("get", "--raw", "/healthz")
    return False


def test_a_service_account_is_impersonated_with_its_groups(lab: Lab, namespace: str) -> None:
    who = f"system:serviceaccount:{namespace}:default"
    review = lab.kubectl("auth", "whoami", "--as", who, "-o", "json")
    status = json.loads(review.stdout)["status"]["userInfo"]
    assert status["username"] == who
    assert set(status["groups"]) == {
        "system:serviceaccounts",
        f"system:serviceaccounts:{namespace}",
        "system:authenticated",
    }


def test_groups_without_a_user_are_a_bad_request(lab: Lab) -> None:
    s = requests.Session()
    s.trust_env = False
    s.verify = str(lab.plane.pki / "ca.crt")
    admin = pki.load_pair(lab.plane.pki, "admin")
    crt, key = pki.write_pair(admin, lab.plane.dir, "impersonation-test-admin")
    s.cert = (str(crt), str(key))
    r = s.get(lab.server + "/api/v1/namespaces", headers={"Impersonate-Group": "devs"})
    assert r.status_code == 400, r.text
    assert "without impersonating a user" in r.json()["message"]
