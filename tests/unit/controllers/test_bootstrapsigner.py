"""The bootstrap signer against the real apiserver: cluster-info gets a verifiable
`jws-kubeconfig-<id>` for each signing token, and loses it when the token goes or
expires."""

from __future__ import annotations

import base64
import datetime

from controlplane.controllers.bootstrapsigner import BootstrapSigner
from kubelab import jws
from kubelab.client import resource_for, rfc3339
from tests.unit.controllers.conftest import Cluster, Harness
from tests.waiting import until

CONFIG_MAPS = resource_for("v1", "ConfigMap")
SECRETS = resource_for("v1", "Secret")
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n"


def token(cluster: Cluster, token_id: str, secret: str, *, expires_in: float | None = None) -> None:
    data = {"token-id": token_id, "token-secret": secret, "usage-bootstrap-signing": "true"}
    if expires_in is not None:
        when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=expires_in)
        data["expiration"] = rfc3339(when)
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": f"bootstrap-token-{token_id}"},
        "stringData": data,
    }
    cluster.create(SECRETS, body, "kube-system")


def signatures(cluster: Cluster) -> dict[str, str]:
    data = cluster.get(CONFIG_MAPS, "kube-public", "cluster-info").get("data") or {}
    return {k: v for k, v in data.items() if k.startswith(jws.SIGNATURE_PREFIX)}


def test_jws_round_trip_and_tampering() -> None:
    signed = jws.sign_detached(KUBECONFIG, "abcdef", "0123456789abcdef")
    header, middle, _ = signed.split(".")
    assert middle == "" and base64.urlsafe_b64decode(header + "==") == (
        b'{"alg":"HS256","kid":"abcdef"}'
    )
    assert jws.verify_detached(signed, KUBECONFIG, "abcdef", "0123456789abcdef")
    assert not jws.verify_detached(signed, KUBECONFIG + " ", "abcdef", "0123456789abcdef")
    assert not jws.verify_detached(signed, KUBECONFIG, "abcdef", "fedcba9876543210")
    assert not jws.verify_detached(signed, KUBECONFIG, "zzzzzz", "0123456789abcdef")
    assert not jws.verify_detached("garbage", KUBECONFIG, "abcdef", "0123456789abcdef")


def test_cluster_info_signed_per_token_and_unsigned_when_it_expires(
    cluster: Cluster, harness: Harness
) -> None:
    cluster.create(
        CONFIG_MAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cluster-info"},
            "data": {"kubeconfig": KUBECONFIG},
        },
        "kube-public",
    )
    token(cluster, "abcdef", "0123456789abcdef")
    token(cluster, "short1", "aaaaaaaaaaaaaaaa", expires_in=3)
    harness.run(BootstrapSigner(harness.ctx))

    until(lambda: len(signatures(cluster)) == 2, "both tokens signed")
    found = signatures(cluster)
    assert jws.verify_detached(
        found["jws-kubeconfig-abcdef"], KUBECONFIG, "abcdef", "0123456789abcdef"
    )
    # The short token's signature goes when it expires, with no event about it.
    until(lambda: set(signatures(cluster)) == {"jws-kubeconfig-abcdef"}, "expired one gone")
    cluster.delete(SECRETS, "kube-system", "bootstrap-token-abcdef")
    until(lambda: signatures(cluster) == {}, "no signature left")
    assert cluster.get(CONFIG_MAPS, "kube-public", "cluster-info")["data"] == {
        "kubeconfig": KUBECONFIG
    }
