"""labadm without a cluster: the phase runner, `--dry-run` of init, tokens' form, and
join's refusal of a CA whose hash does not match the pin."""

from __future__ import annotations

import stat
import tempfile
from pathlib import Path

import pytest

from kubelab import pki
from lab.labadm import tokens
from lab.labadm.cli import main
from lab.labadm.init import INIT, InitData
from lab.labadm.layout import Layout
from lab.labadm.workflow import Phase, PhaseError, Workflow


def test_runner_runs_phases_in_order_skips_and_runs_one_alone() -> None:
    ran: list[str] = []

    def rec(name: str) -> Phase[None]:
        return Phase(name, name, lambda _: ran.append(name))

    flow = Workflow[None]((rec("a"), Phase("b", "b", phases=(rec("x"), rec("y"))), rec("c")))
    assert flow.names() == ["a", "b", "b/x", "b/y", "c"]
    flow.run(None, skip=["b/x"])
    assert ran == ["a", "y", "c"]
    ran.clear()
    flow.run(None, only="b")
    assert ran == ["x", "y"]
    with pytest.raises(PhaseError, match="the phases are: a, b, b/x"):
        flow.run(None, skip=["nope"])


def init_data(root: Path) -> InitData:
    return InitData(
        layout=Layout(root), node_name="cp1", advertise_address="10.0.0.5", image="img",
        dry_run=True,
    )  # fmt: skip


def test_init_certs_and_manifests_with_private_keys_0600(tmp_path: Path) -> None:
    data = init_data(tmp_path)
    for phase in ("certs", "kubeconfig", "store", "control-plane"):
        INIT.run(data, only=phase)
    p = tmp_path / "etc/kubelab/pki"
    for name in ("ca", "apiserver", "apiserver-kubelet-client", "front-proxy-ca",
                 "front-proxy-client", "apiserver-store-client", "store/ca", "store/server",
                 "store/peer", "store/healthcheck-client"):  # fmt: skip
        assert (p / f"{name}.crt").exists(), name
        assert stat.S_IMODE((p / f"{name}.key").stat().st_mode) == 0o600, name
    assert stat.S_IMODE((p / "sa.key").stat().st_mode) == 0o600
    for conf in ("admin", "super-admin", "kubelet", "controller-manager", "scheduler"):
        assert stat.S_IMODE((tmp_path / f"etc/kubelab/{conf}.conf").stat().st_mode) == 0o600
    store = (tmp_path / "etc/kubelab/manifests/kubelab-store.yaml").read_text()
    assert "--client-cert-auth" in store and "https://127.0.0.1:2379" in store
    apiserver = (tmp_path / "etc/kubelab/manifests/kube-apiserver.yaml").read_text()
    assert "--etcd-certfile=/etc/kubelab/pki/apiserver-store-client.crt" in apiserver
    # Re-running keeps what exists (the CA above all).
    ca = (p / "ca.crt").read_bytes()
    INIT.run(data, only="certs")
    assert (p / "ca.crt").read_bytes() == ca


def test_init_refuses_an_initialized_node(tmp_path: Path) -> None:
    data = init_data(tmp_path)
    INIT.run(data, only="control-plane")
    with pytest.raises(PhaseError, match="labadm reset"):
        INIT.run(data, only="preflight")


def test_dry_run_prints_kubeadm_style_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the dry run writes
    main(["init", "--dry-run", "--apiserver-advertise-address", "10.0.0.5", "--node-name", "n"])
    out = capsys.readouterr().out
    assert '[certs] Generating "ca" certificate and key' in out
    assert '[control-plane] Creating static Pod manifest for "kube-apiserver"' in out
    assert "[kubelet-start] Would start kubelet (sv up kubelet)" in out
    assert "[addons] Would start kubelab-network" in out
    assert '[addons] Creating Deployment "kube-dns" of the cluster DNS add-on' in out
    assert "[addons] Applied essential addon: cluster DNS at 10.96.0.10" in out


def test_token_form_and_hash_pin() -> None:
    token = tokens.generate()
    assert tokens.parse(token)[0] == token[:6]
    with pytest.raises(tokens.TokenError, match=r"\[a-z0-9\]\{6\}"):
        tokens.parse("ABC.def")
    assert pki.ca_cert_hash(pki.new_ca("x").cert).startswith("sha256:")
