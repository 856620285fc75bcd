"""kubelab.serving: the HTTPS /healthz, /readyz and /metrics of a component, with a
self-signed certificate made once in its --cert-dir, and /metrics only for whom the
apiserver authenticates and authorizes (delegated, against the real in-process
apiserver: `lab.testenv`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client import CollectorRegistry, Counter

from controlplane.controllers.manager import parse_args
from kubelab import pki
from kubelab.client import RestClient, resource_for
from kubelab.delegatedauth import Delegation, User
from kubelab.serving import HealthServer, ServingError, serve, serving_context
from lab.localcluster import free_port
from lab.testenv import Environment
from tests.waiting import until

SERVICE_ACCOUNTS = resource_for("v1", "ServiceAccount")
CLUSTER_ROLE_BINDINGS = resource_for("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("syncs", "Syncs done.", registry=registry).inc(3)
    return registry


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, dict[str, str | None], tuple[str, str]]]:
    """An endpoint with no apiserver to delegate to; its caller is in system:masters."""
    problems: dict[str, str | None] = {"cache": None}
    clients_ca = pki.new_ca("clients")
    ca_file, _ = pki.write_pair(clients_ca, tmp_path, "clients-ca")
    admin = pki.issue(clients_ca, "admin", organizations=["system:masters"], client=True)
    admin_cert = tuple(str(p) for p in pki.write_pair(admin, tmp_path, "admin"))
    context = serving_context(None, None, tmp_path, "kube-thing", ca_file)
    server = HealthServer(
        ("127.0.0.1", 0),
        context,
        _registry(),
        healthz={"ping": lambda: None},
        readyz={"cache": lambda: problems["cache"]},
        delegation=Delegation(None, None),
    )
    server.start()
    try:
        yield (
            f"https://127.0.0.1:{server.port}",
            tmp_path / "kube-thing-ca.crt",
            problems,
            (admin_cert[0], admin_cert[1]),
        )
    finally:
        server.stop()


def test_health_readiness_and_metrics(
    served: tuple[str, Path, dict[str, str | None], tuple[str, str]],
) -> None:
    base, ca, problems, admin = served

    def get(path: str) -> requests.Response:
        return requests.get(base + path, verify=str(ca), cert=admin, timeout=5)

    assert (get("/healthz").status_code, get("/healthz").text) == (200, "ok")
    assert get("/readyz").text == "ok"
    assert "syncs_total 3.0" in get("/metrics").text
    problems["cache"] = "not synced"
    r = get("/readyz?verbose")
    assert r.status_code == 500
    assert "[+]ping ok" in r.text and "[-]cache failed" in r.text
    assert get("/healthz").status_code == 200  # readiness is not liveness
    assert get("/readyz/ping").status_code == 200
    assert get("/readyz/nothing").status_code == 404
    assert get("/nothing").status_code == 404


def test_without_an_apiserver_to_ask_only_health_and_system_masters_are_served(
    served: tuple[str, Path, dict[str, str | None], tuple[str, str]],
) -> None:
    base, ca, _, _ = served
    for path in ("/healthz", "/readyz", "/livez"):
        assert requests.get(base + path, verify=str(ca), timeout=5).status_code == 200, path
    for path in ("/metrics", "/readyz/ping", "/nothing"):
        r = requests.get(base + path, verify=str(ca), timeout=5)
        assert r.status_code == 403, path
    # A bearer token is not looked at without --authentication-kubeconfig: anonymous.
    token = requests.get(
        base + "/metrics", verify=str(ca), headers={"Authorization": "Bearer x"}, timeout=5
    )
    assert token.status_code == 403


def test_the_self_signed_certificate_is_kept_for_the_next_start(tmp_path: Path) -> None:
    serving_context(None, None, tmp_path, "kube-thing")
    first = (tmp_path / "kube-thing.crt").read_bytes()
    serving_context(None, None, tmp_path, "kube-thing")
    assert (tmp_path / "kube-thing.crt").read_bytes() == first


# -- delegated to the real apiserver -------------------------------------------------------


@pytest.fixture
def delegating(apiserver: Environment, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The controller-manager's endpoint as its flags set it up (labadm's flags: its own
    kubeconfig for both reviews, the cluster CA for client certificates); its URL and the
    CA of its serving certificate."""
    kubeconfig = apiserver.kubeconfig_for("system:kube-controller-manager")
    args = parse_args(
        [
            f"--secure-port={free_port()}",
            "--bind-address=127.0.0.1",
            f"--cert-dir={tmp_path}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--client-ca-file={apiserver.directory / 'ca.crt'}",
        ]
    )
    server = serve(args, "kube-controller-manager", _registry(), {"ping": lambda: None}, {})
    assert server is not None
    try:
        yield f"https://127.0.0.1:{server.port}", str(tmp_path / "kube-controller-manager-ca.crt")
    finally:
        server.stop()


def _token(admin: RestClient, namespace: str, name: str) -> str:
    """A bearer token of a new ServiceAccount (a TokenRequest, as `kubectl create token`)."""
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
    admin.create(SERVICE_ACCOUNTS, account, namespace)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    path = SERVICE_ACCOUNTS.path(namespace, name) + "/token"
    return str(admin.request("POST", path, body=request)["status"]["token"])


def test_metrics_are_for_whom_the_apiserver_authorizes_health_is_for_anyone(
    apiserver: Environment, namespace: str, delegating: tuple[str, str], tmp_path: Path
) -> None:
    base, ca = delegating

    def get(path: str, token: str = "", cert: tuple[str, str] | None = None) -> requests.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return requests.get(base + path, verify=ca, headers=headers, cert=cert, timeout=10)

    def client_cert(user: str, groups: list[str]) -> tuple[str, str]:
        config = apiserver.client_config(user, groups)
        (tmp_path / f"{user}.crt").write_bytes(config.client_cert_data or b"")
        (tmp_path / f"{user}.key").write_bytes(config.client_key_data or b"")
        return str(tmp_path / f"{user}.crt"), str(tmp_path / f"{user}.key")

    for path in ("/healthz", "/readyz", "/livez"):
        assert (get(path).status_code, get(path).text) == (200, "ok"), path

    anonymous = get("/metrics")
    assert anonymous.status_code == 403, "anonymous is judged by RBAC, as in Kubernetes"
    assert anonymous.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'forbidden: User "system:anonymous" cannot get path "/metrics"',
        "reason": "Forbidden",
        "code": 403,
    }

    unknown = get("/metrics", token="not-a-token-the-apiserver-issued")
    assert unknown.status_code == 401
    assert (unknown.json()["reason"], unknown.json()["message"]) == ("Unauthorized", "Unauthorized")
    assert get("/healthz", token="not-a-token-the-apiserver-issued").status_code == 401

    with RestClient(apiserver.client_config(), qps=None) as admin:
        denied = _token(admin, namespace, "no-metrics")
        allowed = _token(admin, namespace, "scraper")
        admin.create(
            CLUSTER_ROLE_BINDINGS,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{namespace}-scraper"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:monitoring",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}],
            },
        )
    refused = get("/metrics", token=denied)
    assert refused.status_code == 403
    assert refused.json()["message"] == (
        f'forbidden: User "system:serviceaccount:{namespace}:no-metrics" cannot get path "/metrics"'
    )
    scraped = get("/metrics", token=allowed)
    assert scraped.status_code == 200 and "syncs_total 3.0" in scraped.text

    monitoring = client_cert("prometheus", ["system:monitoring"])
    assert "syncs_total 3.0" in get("/metrics", cert=monitoring).text
    assert get("/readyz/ping", cert=monitoring).status_code == 200
    assert get("/metrics", cert=client_cert("someone", [])).status_code == 403


def test_a_revoked_binding_stops_working_once_the_cached_answer_expires(
    apiserver: Environment, namespace: str
) -> None:
    now = [0.0]
    user = User(f"viewer-of-{namespace}")
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{namespace}-viewer"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:monitoring",
        },
        "subjects": [{"kind": "User", "name": user.name}],
    }
    metrics = {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    with RestClient(apiserver.client_config(), qps=None) as admin:
        admin.create(CLUSTER_ROLE_BINDINGS, binding)
        delegation = Delegation(admin, admin, ttl=10.0, clock=lambda: now[0])

        def fresh_answer() -> bool:
            """Asked again: past every cached answer's ttl."""
            now[0] += 100.0
            return delegation.authorize(user, metrics)

        # The apiserver's authorizer sees bindings through its watch cache, which may lag.
        until(fresh_answer, "the binding reaching the apiserver's authorizer")
        granted = now[0]
        admin.delete(CLUSTER_ROLE_BINDINGS, binding["metadata"]["name"])
        now[0] = granted + 9.0
        assert delegation.authorize(user, metrics), "the answer is kept for its ttl"
        until(lambda: not fresh_answer(), "the revoked binding refused once asked again")


def test_a_kubeconfig_that_cannot_be_read_is_an_error_that_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.conf"
    args = parse_args(
        ["--secure-port=1", f"--cert-dir={tmp_path}", f"--authorization-kubeconfig={missing}"]
    )
    with pytest.raises(ServingError, match=r"nothing\.conf"):
        serve(args, "kube-controller-manager", _registry(), {}, {})
