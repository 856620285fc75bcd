"""The lab's own bookkeeping, without Docker: the context merged into the user's
kubeconfig as kind merges its own (and taken out again), and the names the registry
mirror serves. (labctl's operands: tests/unit/test_labctl.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubelab import pki
from kubelab.client import load_config, write_kubeconfig
from lab import kubeconfigs
from lab.registry import mirror_path


def admin_conf(path: Path, server: str) -> Path:
    ca = pki.new_ca("kubernetes")
    pair = pki.issue(ca, "kubernetes-admin", organizations=["kubeadm:cluster-admins"], client=True)
    return write_kubeconfig(
        path,
        cluster_name="kubelab",
        server=server,
        ca_data=ca.cert_pem(),
        user_name="kubernetes-admin",
        client_cert_data=pair.cert_pem(),
        client_key_data=pair.key_pem(),
    )


def test_the_context_is_merged_beside_others_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "home" / ".kube" / "config"
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{user}:{tmp_path / 'last'}")
    assert kubeconfigs.user_kubeconfig() == tmp_path / "last"  # none exists: the last
    admin_conf(user, "https://other.example:6443")  # someone else's cluster, kept
    assert kubeconfigs.user_kubeconfig() == user  # the first that exists
    admin = admin_conf(tmp_path / "admin.conf", "https://10.244.255.10:6443")

    assert kubeconfigs.merge(admin, "demo") == user
    assert kubeconfigs.merge(admin, "demo") == user  # again: replaced, not doubled
    doc = yaml.safe_load(user.read_text())
    assert doc["current-context"] == "kubelab-demo"
    assert [c["name"] for c in doc["contexts"]] == ["kubernetes-admin@kubelab", "kubelab-demo"]
    assert user.stat().st_mode & 0o777 == 0o600
    assert load_config(str(user)).server == "https://10.244.255.10:6443"

    assert kubeconfigs.unmerge("demo")
    doc = yaml.safe_load(user.read_text())
    assert doc["current-context"] == ""
    assert [c["name"] for c in doc["clusters"]] == ["kubelab"]
    assert not kubeconfigs.unmerge("demo")


def test_without_kubeconfig_it_is_home_kube_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kubeconfigs.user_kubeconfig() == tmp_path / ".kube" / "config"


@pytest.mark.parametrize(
    ("image", "path"),
    [
        ("nginx:1.21", "library/nginx:1.21"),
        ("busybox", "library/busybox:latest"),
        ("kubelab/node:0123abcd", "kubelab/node:0123abcd"),
        ("docker.io/library/nginx:1.21", "library/nginx:1.21"),
        ("registry.k8s.io/pause:3.9", None),
        ("localhost:5000/app:1", None),
    ],
)
def test_the_mirror_serves_docker_io_names(image: str, path: str | None) -> None:
    assert mirror_path(image) == path
