"""labadm's pieces for a highly available control plane, against the real apiserver
in-process: the uploaded certs (encrypted, readable with a bootstrap token, decrypted
only with the certificate key) and token discovery's signature check."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelab import jws, pki
from kubelab.client import ClientConfig, RestClient, StatusError
from lab.labadm import certs_upload, tokens
from lab.labadm.join import JoinData, signed_cluster_info
from lab.labadm.layout import Layout
from lab.labadm.workflow import PhaseError
from lab.testenv import Environment

CONFIG_MAPS = tokens.CONFIG_MAPS


@pytest.fixture
def env() -> Iterator[Environment]:
    with Environment.start() as started:
        yield started


def admin(env: Environment) -> RestClient:
    return RestClient(env.client_config(), qps=None)


def shared_pki(directory: Path) -> None:
    """The files `labadm init` makes and control-plane nodes share."""
    pki.write_pair(pki.new_ca("kubernetes"), directory, "ca")
    pki.write_pair(pki.new_ca("front-proxy-ca"), directory, "front-proxy-ca")
    pki.write_pair(pki.new_ca("store-ca"), directory / "store", "ca")
    (directory / "sa.key").write_bytes(b"-- the service-account key --\n")
    (directory / "sa.pub").write_bytes(b"-- its public half --\n")


def test_upload_then_download_with_a_bootstrap_token(env: Environment, tmp_path: Path) -> None:
    client = admin(env)
    shared_pki(tmp_path / "first")
    key = certs_upload.new_key()
    certs_upload.upload(client, tmp_path / "first", key)
    join_token = tokens.create(client)

    secret = client.get(tokens.SECRETS, certs_upload.SECRET_NAME, "kube-system")
    stored = base64.b64decode(secret["data"]["ca.key"])
    assert b"PRIVATE KEY" not in stored  # encrypted at rest in the cluster
    (owner,) = secret["metadata"]["ownerReferences"]
    token_secret = client.get(tokens.SECRETS, owner["name"], "kube-system")
    token_data = {k: tokens.decode(v) for k, v in token_secret["data"].items()}
    assert "expiration" in token_data and "usage-bootstrap-authentication" not in token_data

    # A joining node reads the Secret with its bootstrap token alone.
    joining = RestClient(
        ClientConfig(server=env.url, ca_data=client.config.ca_data, token=join_token), qps=None
    )
    with pytest.raises(PhaseError, match="not the one it was uploaded with"):
        certs_upload.download(joining, tmp_path / "wrong", certs_upload.new_key())
    certs_upload.download(joining, tmp_path / "second", key)
    for relative in certs_upload.SHARED_FILES:
        assert (tmp_path / "second" / relative).read_bytes() == (
            tmp_path / "first" / relative
        ).read_bytes()
    assert (tmp_path / "second/store/ca.key").stat().st_mode & 0o777 == 0o600
    # ... and nothing else of kube-system.
    with pytest.raises(StatusError) as denied:
        joining.get(tokens.SECRETS, owner["name"], "kube-system")
    assert denied.value.code == 403
    # A second upload replaces the first.
    certs_upload.upload(client, tmp_path / "first", certs_upload.new_key())
    with pytest.raises(PhaseError, match="not the one"):
        certs_upload.download(joining, tmp_path / "third", key)


def test_certificate_key_form() -> None:
    with pytest.raises(PhaseError, match="64 hex characters"):
        certs_upload.encrypt(b"x", "abc")


def test_discovery_checks_the_signature_of_cluster_info(env: Environment, tmp_path: Path) -> None:
    client = admin(env)
    token = tokens.create(client)
    tokens.publish_cluster_info(client, env.url, pki.load_cert(env.directory / "ca.crt"))
    token_id, token_secret = tokens.parse(token)
    info = client.get(CONFIG_MAPS, "cluster-info", "kube-public")

    def join_data(with_token: str) -> JoinData:
        return JoinData(
            layout=Layout(tmp_path),
            endpoint=env.url,
            token=with_token,
            ca_cert_hashes=("sha256:unused",),
            node_name="n1",
            node_ip="127.0.0.1",
            timeout=1.0,
        )

    with pytest.raises(PhaseError, match="no signature for token id"):
        signed_cluster_info(join_data(token))
    # What the controller-manager's bootstrap signer adds (tested on its own).
    content = info["data"]["kubeconfig"]
    info["data"][f"jws-kubeconfig-{token_id}"] = jws.sign_detached(content, token_id, token_secret)
    client.update(CONFIG_MAPS, info)
    assert signed_cluster_info(join_data(token)) == content
    # An unknown token gets no signature ever: said at once, not after the wait.
    unknown = join_data("zzzzzz.0123456789abcdef")
    unknown.timeout = 600
    with pytest.raises(PhaseError, match="refused the bootstrap token 'zzzzzz'"):
        signed_cluster_info(unknown)
    forged = f"{token_id}.{'x' * 16}"
    with pytest.raises(PhaseError, match="does not verify"):
        signed_cluster_info(join_data(forged))
