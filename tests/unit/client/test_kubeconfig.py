"""Kubeconfig and in-cluster configuration: kubectl's loading and merging rules, and
errors that name the file and what is missing."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubelab.client import kubeconfig as kubeconfig_module
from kubelab.client.kubeconfig import (
    ClientConfig,
    KubeconfigError,
    load_config,
    load_incluster_config,
    load_kubeconfig,
    write_kubeconfig,
)

CA = b"-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"
CERT = b"-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
    current: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in (clusters or {}).items()],
        "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
        "contexts": [{"name": n, "context": c} for n, c in (contexts or {}).items()],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


def write(path: Path, doc: dict[str, Any] | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No KUBECONFIG, no pod environment, and a home directory of our own."""
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


LAB = kubeconfig(
    clusters={"lab": {"server": "https://10.0.0.1:6443", "certificate-authority": "pki/ca.crt"}},
    users={"admin": {"client-certificate": "pki/admin.crt", "client-key": "/abs/admin.key"}},
    contexts={"admin@lab": {"cluster": "lab", "user": "admin", "namespace": "prod"}},
    current="admin@lab",
)


def test_file_paths_are_read_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    doc = kubeconfig(
        clusters={"lab": {"server": "https://10.0.0.1:6443/", "certificate-authority": "pki/ca"}},
        users={"admin": {"client-certificate": "pki/crt", "client-key": str(tmp_path / "key")}},
        contexts={"admin@lab": {"cluster": "lab", "user": "admin", "namespace": "prod"}},
        current="admin@lab",
    )
    path = write(tmp_path / "conf" / "config", doc)
    (tmp_path / "conf" / "pki").mkdir()
    (tmp_path / "conf" / "pki" / "ca").write_bytes(CA)
    (tmp_path / "conf" / "pki" / "crt").write_bytes(CERT)
    (tmp_path / "key").write_bytes(KEY)

    config = load_kubeconfig(path)
    assert config == ClientConfig(
        server="https://10.0.0.1:6443",
        ca_data=CA,
        client_cert_data=CERT,
        client_key_data=KEY,
        namespace="prod",
        context="admin@lab",
        source=f'context "admin@lab" in {path}',
    )


def test_inline_data_wins_over_paths(tmp_path: Path) -> None:
    doc = kubeconfig(
        clusters={
            "lab": {
                "server": "https://lab:6443",
                "certificate-authority": "missing-ca",
                "certificate-authority-data": b64(CA),
            }
        },
        users={
            "admin": {
                "client-certificate-data": b64(CERT),
                "client-key-data": b64(KEY),
                "client-key": "missing-key",
                "token": "inline",
                "tokenFile": "missing-token",
            }
        },
        contexts={"c": {"cluster": "lab", "user": "admin"}},
        current="c",
    )
    config = load_kubeconfig(write(tmp_path / "config", doc))
    assert (config.ca_data, config.client_cert_data, config.client_key_data) == (CA, CERT, KEY)
    assert (config.token, config.token_file, config.namespace) == ("inline", None, "default")


def test_a_token_file_is_kept_as_a_path_for_rereading(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("abc\n")
    doc = kubeconfig(
        clusters={"lab": {"server": "https://lab:6443", "insecure-skip-tls-verify": True}},
        users={"sa": {"tokenFile": "token"}},
        contexts={"c": {"cluster": "lab", "user": "sa"}},
        current="c",
    )
    config = load_kubeconfig(write(tmp_path / "config", doc))
    assert config.token_file == tmp_path / "token"
    assert config.token is None and config.insecure_skip_tls_verify


def test_a_context_is_chosen_by_name_over_the_current_one(tmp_path: Path) -> None:
    doc = kubeconfig(
        clusters={"a": {"server": "https://a"}, "b": {"server": "https://b"}},
        contexts={"a": {"cluster": "a"}, "b": {"cluster": "b"}},
        current="a",
    )
    path = write(tmp_path / "config", doc)
    assert load_kubeconfig(path).server == "https://a"
    assert load_kubeconfig(path, context="b").server == "https://b"


def test_kubeconfig_files_merge_first_definition_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write(
        tmp_path / "one" / "config",
        kubeconfig(
            clusters={"lab": {"server": "https://first", "certificate-authority": "ca"}},
            contexts={"ctx": {"cluster": "lab", "user": "admin"}},
            current="ctx",
        ),
    )
    (tmp_path / "one" / "ca").write_bytes(CA)
    second = write(
        tmp_path / "two" / "config",
        kubeconfig(
            clusters={"lab": {"server": "https://second"}},
            users={"admin": {"client-certificate": "crt", "client-key": "key"}},
            contexts={"ctx": {"cluster": "other"}},
            current="ignored",
        ),
    )
    (tmp_path / "two" / "crt").write_bytes(CERT)
    (tmp_path / "two" / "key").write_bytes(KEY)
    missing = tmp_path / "nowhere" / "config"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(missing), str(second)]))

    config = load_kubeconfig()
    assert config.server == "https://first"  # cluster and context from the first file
    assert config.ca_data == CA
    assert (config.client_cert_data, config.client_key_data) == (CERT, KEY)  # user: second


def test_kubeconfig_env_with_no_existing_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "a") + os.pathsep + str(tmp_path / "b"))
    with pytest.raises(KubeconfigError, match="none of the files in KUBECONFIG exists"):
        load_kubeconfig()


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (kubeconfig(), "no current-context is set in {path}"),
        (
            kubeconfig(contexts={"a": {}, "b": {}}, current="c"),
            'context "c" is not defined in {path} \\(defined: a, b\\)',
        ),
        (
            kubeconfig(contexts={"c": {"cluster": "lab"}}, current="c"),
            'context "c" \\({path}\\) refers to cluster "lab", which is not defined',
        ),
        (
            kubeconfig(
                clusters={"lab": {"server": "https://lab"}},
                contexts={"c": {"cluster": "lab", "user": "bob"}},
                current="c",
            ),
            'refers to user "bob", which is not defined in {path}',
        ),
        (
            kubeconfig(clusters={"lab": {}}, contexts={"c": {"cluster": "lab"}}, current="c"),
            '{path}: cluster "lab" has no server',
        ),
        (
            kubeconfig(
                clusters={"lab": {"server": "https://lab"}},
                users={"u": {"client-certificate-data": b64(CERT)}},
                contexts={"c": {"cluster": "lab", "user": "u"}},
                current="c",
            ),
            "client-key \\(or client-key-data\\) is missing",
        ),
        (
            kubeconfig(
                clusters={"lab": {"server": "https://lab", "certificate-authority": "gone.crt"}},
                contexts={"c": {"cluster": "lab"}},
                current="c",
            ),
            "{path}: lab: cannot read certificate-authority {dir}/gone.crt: No such file",
        ),
        (
            kubeconfig(
                clusters={"lab": {"server": "https://lab", "certificate-authority-data": "!!"}},
                contexts={"c": {"cluster": "lab"}},
                current="c",
            ),
            "{path}: lab: certificate-authority-data is not valid base64",
        ),
        (
            kubeconfig(
                clusters={"lab": {"server": "https://lab"}},
                users={"u": {"exec": {"command": "aws"}}},
                contexts={"c": {"cluster": "lab", "user": "u"}},
                current="c",
            ),
            'user "u" authenticates with exec, which kubelab\'s client does not support',
        ),
        (
            kubeconfig(
                clusters={
                    "lab": {
                        "server": "https://lab",
                        "certificate-authority-data": b64(CA),
                        "insecure-skip-tls-verify": True,
                    }
                },
                contexts={"c": {"cluster": "lab"}},
                current="c",
            ),
            "a certificate authority and insecure-skip-tls-verify were both given",
        ),
        (
            kubeconfig(
                clusters={"lab": {"server": "lab:6443"}},
                contexts={"c": {"cluster": "lab"}},
                current="c",
            ),
            "server 'lab:6443' .* must be a URL starting with https://",
        ),
        ("clusters: [", "kubeconfig {path} is not valid YAML"),
        ("- just\n- a list\n", "kubeconfig {path} must be a YAML mapping"),
        ("clusters:\n- cluster: {}\n", "{path}: clusters\\[0\\] has no name"),
    ],
)
def test_errors_name_the_file_and_what_is_wrong(
    tmp_path: Path, doc: dict[str, Any] | str, message: str
) -> None:
    path = write(tmp_path / "config", doc)
    with pytest.raises(KubeconfigError, match=message.format(path=path, dir=tmp_path)):
        load_kubeconfig(path)


def test_an_explicit_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match=f"cannot read kubeconfig {tmp_path}/nope"):
        load_kubeconfig(tmp_path / "nope")


def test_secrets_stay_out_of_the_repr() -> None:
    config = ClientConfig(
        server="https://lab", token="s3cret", client_cert_data=CERT, client_key_data=KEY
    )
    assert "s3cret" not in repr(config) and "PRIVATE" not in repr(config)


# -- in-cluster --------------------------------------------------------------------------


def service_account(directory: Path, namespace: str | None = "team-a") -> Path:
    directory.mkdir(parents=True)
    (directory / "token").write_text("sa-token")
    (directory / "ca.crt").write_bytes(CA)
    if namespace is not None:
        (directory / "namespace").write_text(namespace)
    return directory


def test_in_cluster_config_uses_the_service_and_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sa = service_account(tmp_path / "sa")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = load_incluster_config(sa)
    assert (config.server, config.ca_data, config.namespace) == (
        "https://10.96.0.1:443",
        CA,
        "team-a",
    )
    assert config.token_file == sa / "token" and config.token is None

    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    assert load_incluster_config(sa).server == "https://[fd00::1]:443"


def test_in_cluster_errors_say_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(KubeconfigError, match="not running in a pod"):
        load_incluster_config(tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(KubeconfigError, match=f"cannot read {tmp_path}/token"):
        load_incluster_config(tmp_path)


def test_load_config_prefers_kubeconfig_then_the_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(KubeconfigError, match="no configuration found"):
        load_config()

    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    sa = service_account(tmp_path / "sa")
    monkeypatch.setattr(kubeconfig_module, "SERVICE_ACCOUNT_DIR", sa)
    assert load_config().token_file == sa / "token"  # in a pod, without a kubeconfig

    simple = kubeconfig(
        clusters={"h": {"server": "https://home"}}, contexts={"c": {"cluster": "h"}}, current="c"
    )
    write(tmp_path / "home" / ".kube" / "config", simple)
    assert load_config().server == "https://home"

    env_file = write(
        tmp_path / "env",
        {**simple, "clusters": [{"name": "h", "cluster": {"server": "https://env"}}]},
    )
    monkeypatch.setenv("KUBECONFIG", str(env_file))
    assert load_config().server == "https://env"

    explicit = write(
        tmp_path / "explicit",
        {**simple, "clusters": [{"name": "h", "cluster": {"server": "https://explicit"}}]},
    )
    assert load_config(explicit).server == "https://explicit"


# -- writing -----------------------------------------------------------------------------


def test_write_kubeconfig_round_trips_with_mode_0600(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / ".kube" / "config",
        cluster_name="kubelab",
        server="https://192.168.56.10:6443",
        ca_data=CA,
        user_name="kubernetes-admin",
        client_cert_data=CERT,
        client_key_data=KEY,
        namespace="default",
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    doc = yaml.safe_load(path.read_text())
    assert doc["current-context"] == "kubernetes-admin@kubelab"
    config = load_kubeconfig(path)
    assert (config.server, config.ca_data, config.client_cert_data, config.client_key_data) == (
        "https://192.168.56.10:6443",
        CA,
        CERT,
        KEY,
    )


def test_write_kubeconfig_with_a_token_and_a_context_name(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "config",
        cluster_name="lab",
        server="https://lab:6443",
        ca_data=CA,
        user_name="bootstrap",
        token="abcdef.0123456789abcdef",
        context_name="join",
    )
    config = load_kubeconfig(path)
    assert config.token == "abcdef.0123456789abcdef"
    assert config.source == f'context "join" in {path}'


def test_write_kubeconfig_needs_a_credential(tmp_path: Path) -> None:
    common: dict[str, Any] = {
        "cluster_name": "lab",
        "server": "https://lab",
        "ca_data": CA,
        "user_name": "u",
    }
    with pytest.raises(ValueError, match="needs a client certificate or a token"):
        write_kubeconfig(tmp_path / "c", **common)
    with pytest.raises(ValueError, match="must be given together"):
        write_kubeconfig(tmp_path / "c", client_cert_data=CERT, **common)
