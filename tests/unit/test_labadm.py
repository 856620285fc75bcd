"""labadm without a cluster: the phase runner, `--dry-run` of init, tokens' form, and
join's refusal of a CA whose hash does not match the pin; join's TLS bootstrap (the
kubelet's certificate request) against the real apiserver and CSR controllers."""

from __future__ import annotations

import dataclasses
import stat
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from controlplane.controllers import certificates
from controlplane.controllers.manager import ControllerManager, Options, parse_args
from kubelab import pki
from kubelab.client import RestClient, load_config
from lab.labadm import tokens
from lab.labadm.cli import main
from lab.labadm.init import INIT, InitData
from lab.labadm.join import JoinData, tls_bootstrap
from lab.labadm.layout import Layout
from lab.labadm.workflow import Phase, PhaseError, Workflow
from lab.testenv import Environment


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


def test_the_store_and_the_kubelet_trace_only_when_the_lab_has_a_collector(
    tmp_path: Path,
) -> None:
    collector = "http://10.0.0.5:4318"
    for root, endpoint in ((tmp_path / "off", ""), (tmp_path / "on", collector)):
        data = dataclasses.replace(init_data(root), tracing_endpoint=endpoint)
        INIT.run(data, only="store")
        INIT.run(data, only="kubelet-start")
    flag = f"--tracing-endpoint={collector}"
    for root, expected in ((tmp_path / "off", False), (tmp_path / "on", True)):
        store = (root / "etc/kubelab/manifests/kubelab-store.yaml").read_text()
        kubelet = (root / "etc/default/kubelet").read_text()
        assert (flag in store, flag in kubelet) == (expected, expected), root
        assert ("--tracing-endpoint" in store + kubelet) == expected


def test_the_collector_is_a_static_pod_and_every_component_traces_to_it(
    tmp_path: Path,
) -> None:
    data = dataclasses.replace(init_data(tmp_path), collector=True)
    assert data.tracing_endpoint == "http://10.0.0.5:4318"
    for phase in ("store", "collector", "control-plane", "kubelet-start"):
        INIT.run(data, only=phase)
    manifests = tmp_path / "etc/kubelab/manifests"
    collector = yaml.safe_load((manifests / "kubelab-collector.yaml").read_text())
    (container,) = collector["spec"]["containers"]
    assert container["command"][1:3] == ["-m", "controlplane.collector"]
    assert "--port=4318" in container["command"] and "--max-traces=10000" in container["command"]
    assert collector["spec"]["volumes"][0]["hostPath"]["path"] == "/var/lib/kubelab/collector"
    flag = "--tracing-endpoint=http://10.0.0.5:4318"
    for name in ("kubelab-store", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert flag in (manifests / f"{name}.yaml").read_text(), name
    assert flag in (tmp_path / "etc/default/kubelet").read_text()
    # Without --collector, no collector.
    INIT.run(init_data(tmp_path / "off"), only="collector")
    assert not (tmp_path / "off/etc/kubelab/manifests/kubelab-collector.yaml").exists()


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
    assert "[addons] Applied essential addon: default StorageClass standard" in out
    assert '[addons] Creating IngressClass "nginx" of the ingress add-on' in out
    assert "[addons] Applied addon: ingress-nginx, IngressClass nginx (default)" in out


def test_token_form_and_hash_pin() -> None:
    token = tokens.generate()
    assert tokens.parse(token)[0] == token[:6]
    with pytest.raises(tokens.TokenError, match=r"\[a-z0-9\]\{6\}"):
        tokens.parse("ABC.def")
    assert pki.ca_cert_hash(pki.new_ca("x").cert).startswith("sha256:")


# -- join's TLS bootstrap, against the real apiserver and controllers -----------------------


@pytest.fixture
def csr_controllers(apiserver: Environment) -> Iterator[None]:
    """The controller-manager's csrapproving and csrsigning, in-process, signing with the
    test cluster's CA."""
    ca = apiserver.directory
    args = parse_args(
        [
            f"--cluster-signing-cert-file={ca / 'ca.crt'}",
            f"--cluster-signing-key-file={ca / 'ca.key'}",
        ]
    )
    options = Options(
        controllers=(certificates.APPROVING, certificates.SIGNING),
        root_ca=b"",
        workers={},
        qps=100.0,
        burst=100,
        args=args,
    )
    stop = threading.Event()
    runner = threading.Thread(
        target=ControllerManager(apiserver.client_config(), options).run, args=(stop,), daemon=True
    )
    runner.start()
    try:
        yield
    finally:
        stop.set()
        runner.join(30)


def join_data(apiserver: Environment, root: Path, token: str, node: str) -> JoinData:
    """What `labadm join` knows once discovery has pinned the cluster's CA."""
    return JoinData(
        layout=Layout(root),
        endpoint=apiserver.url,
        token=token,
        ca_cert_hashes=(),
        node_name=node,
        node_ip="10.0.0.9",
        timeout=30.0,
        ca_pem=(apiserver.directory / "ca.crt").read_bytes(),
    )


def test_join_gets_the_kubelet_a_certificate_with_the_bootstrap_token(
    apiserver: Environment, csr_controllers: None, tmp_path: Path
) -> None:
    with RestClient(apiserver.client_config(), qps=None) as admin:
        token = tokens.create(admin)  # what `labadm init` sets up for joining nodes
        tokens.allow_node_bootstrap(admin)
        tokens.upload_cluster_config(admin, {"podSubnet": "10.250.0.0/16"})
    node = f"joiner-{uuid.uuid4().hex[:6]}"
    data = join_data(apiserver, tmp_path, token, node)
    tls_bootstrap(data)
    assert data.pod_subnet == "10.250.0.0/16", "read with the token"
    kubeconfig = tmp_path / "etc/kubelab/kubelet.conf"
    assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
    with RestClient(load_config(kubeconfig), qps=None) as kubelet:
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        answer = kubelet.request(
            "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review
        )
    user = answer["status"]["userInfo"]
    assert user["username"] == f"system:node:{node}"
    assert "system:nodes" in user["groups"]


def test_join_with_a_token_the_apiserver_refuses_says_to_make_a_new_one(
    apiserver: Environment, tmp_path: Path
) -> None:
    data = join_data(apiserver, tmp_path, "abcdef.0123456789abcdef", "refused")
    with pytest.raises(PhaseError, match="labadm token create --print-join-command"):
        tls_bootstrap(data)
    assert not (tmp_path / "etc/kubelab/kubelet.conf").exists()
