"""Admission webhooks against the real apiserver (in-process), with the real kubectl: a
webhook served by the test over HTTPS (a certificate from a throwaway CA, given to the
apiserver in ``caBundle``) labels ConfigMaps, another refuses them with its message,
and a webhook nobody answers fails the request or is skipped by its failurePolicy."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lab.testenv import Environment
from tests.integration.https_server import json_over_https

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"
Review = dict[str, Any]
Answer = Callable[[Review, str], dict[str, Any]]
"""(the review's request, the URL path it was posted to) -> the response's fields."""


@dataclass
class WebhookServer:
    """An HTTPS server answering AdmissionReviews with `answer`; records what it got."""

    url: str
    ca_bundle: str
    answer: Answer = field(default=lambda request, path: {"allowed": True})
    reviews: list[Review] = field(default_factory=list)


@pytest.fixture
def webhook_server(tmp_path: Path) -> Iterator[WebhookServer]:
    state = WebhookServer("", "")

    def respond(review: Review, path: str) -> Review:
        state.reviews.append(review)
        answer = state.answer(review["request"], path)
        response = {"uid": review["request"]["uid"], **answer}
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        }

    with json_over_https(tmp_path, respond) as (base, ca_bundle):
        state.url, state.ca_bundle = f"{base}/admit", ca_bundle
        yield state


def _kubectl(env: Environment, *args: str, body: object = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(env.kubeconfig), *args],
        input=None if body is None else json.dumps(body),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _configuration(
    kind: str, name: str, namespace: str, client: dict[str, Any], **hook: Any
) -> Any:
    webhook = {
        "name": f"{name}.webhooks.kubelab.test",
        "clientConfig": client,
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["configmaps"],
                "scope": "Namespaced",
            }
        ],
        # Only this test's namespace: the session's apiserver is shared.
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
        **hook,
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [webhook],
    }


def _config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}}


def _until(
    attempt: Callable[[], subprocess.CompletedProcess[str]],
    done: Callable[[subprocess.CompletedProcess[str]], bool],
) -> subprocess.CompletedProcess[str]:
    """A configuration takes effect once the watch cache has it: retry for a few seconds."""
    deadline = time.monotonic() + 10
    while True:
        result = attempt()
        if done(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


@pytest.fixture
def created(apiserver: Environment) -> Iterator[Callable[[Any], None]]:
    names: list[tuple[str, str]] = []

    def create(configuration: Any) -> None:
        done = _kubectl(apiserver, "create", "-f", "-", body=configuration)
        assert done.returncode == 0, done.stderr
        names.append((configuration["kind"].lower(), configuration["metadata"]["name"]))

    yield create
    for kind, name in names:
        _kubectl(apiserver, "delete", kind, name)


def _label_namespace(env: Environment, namespace: str) -> None:
    """Kubernetes labels every namespace with its name; the selector above relies on it."""
    done = _kubectl(
        env,
        "label",
        "namespace",
        namespace,
        f"kubernetes.io/metadata.name={namespace}",
        "--overwrite",
    )
    assert done.returncode == 0, done.stderr


def test_a_mutating_webhook_labels_and_a_validating_one_refuses(
    apiserver: Environment,
    namespace: str,
    webhook_server: WebhookServer,
    created: Callable[[Any], None],
) -> None:
    _label_namespace(apiserver, namespace)

    def answer(request: Review, path: str) -> dict[str, Any]:
        """Mutating webhooks run first: label what has no labels; the validating one
        then sees the labelled object and refuses by name."""
        meta = request["object"]["metadata"]
        if "labels" not in meta:
            patch = [{"op": "add", "path": "/metadata/labels", "value": {"mutated-by": "webhook"}}]
            encoded = base64.b64encode(json.dumps(patch).encode()).decode()
            return {"allowed": True, "patchType": "JSONPatch", "patch": encoded}
        if meta["name"].startswith("refused"):
            status = {"code": 403, "reason": "Forbidden", "message": "refused names are refused"}
            return {"allowed": False, "status": status}
        return {"allowed": True}

    webhook_server.answer = answer
    client = {"url": webhook_server.url, "caBundle": webhook_server.ca_bundle}
    created(_configuration("MutatingWebhookConfiguration", f"label-{namespace}", namespace, client))
    created(
        _configuration("ValidatingWebhookConfiguration", f"refuse-{namespace}", namespace, client)
    )

    labelled = _until(
        lambda: _kubectl(
            apiserver,
            "create",
            "-n",
            namespace,
            "-f",
            "-",
            "-o",
            "json",
            body=_config_map(f"cm-{len(webhook_server.reviews)}"),
        ),
        lambda done: done.returncode == 0 and "mutated-by" in done.stdout,
    )
    assert labelled.returncode == 0, labelled.stderr
    assert json.loads(labelled.stdout)["metadata"]["labels"] == {"mutated-by": "webhook"}
    request = webhook_server.reviews[-1]["request"]
    assert request["operation"] == "CREATE" and request["namespace"] == namespace
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["userInfo"]["username"] == "kubernetes-admin"

    refused = _until(
        lambda: _kubectl(
            apiserver, "create", "-n", namespace, "-f", "-", body=_config_map("refused-1")
        ),
        lambda done: done.returncode != 0,
    )
    assert refused.returncode != 0
    assert (
        f'admission webhook "refuse-{namespace}.webhooks.kubelab.test" denied the request: '
        "refused names are refused" in refused.stderr
    ), refused.stderr
    assert "(Forbidden)" in refused.stderr
    missing = _kubectl(apiserver, "get", "configmap", "refused-1", "-n", namespace)
    assert missing.returncode != 0, "a refused object is not stored"


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_an_unreachable_webhook_fails_or_is_ignored_by_its_failure_policy(
    apiserver: Environment,
    namespace: str,
    webhook_server: WebhookServer,
    created: Callable[[Any], None],
    policy: str,
) -> None:
    _label_namespace(apiserver, namespace)
    client = {
        "url": f"https://127.0.0.1:{_unused_port()}/admit",
        "caBundle": webhook_server.ca_bundle,
    }
    config = _configuration(
        "ValidatingWebhookConfiguration",
        f"down-{namespace}",
        namespace,
        client,
        failurePolicy=policy,
    )
    created(config)
    if policy == "Fail":
        failed = _until(
            lambda: _kubectl(
                apiserver,
                "create",
                "-n",
                namespace,
                "-f",
                "-",
                body=_config_map(f"cm-{time.monotonic_ns()}"),
            ),
            lambda done: done.returncode != 0,
        )
        assert failed.returncode != 0
        assert f'failed calling webhook "down-{namespace}.webhooks.kubelab.test"' in failed.stderr
        assert "connection refused" in failed.stderr.lower() or "refused" in failed.stderr
    else:
        # Give the cache time to hold the configuration, so "allowed" means "ignored".
        time.sleep(1)
        done = _kubectl(
            apiserver, "create", "-n", namespace, "-f", "-", body=_config_map("ignored")
        )
        assert done.returncode == 0, done.stderr


def test_a_webhook_configuration_is_validated_and_defaulted(
    apiserver: Environment, namespace: str, created: Callable[[Any], None]
) -> None:
    bad = _configuration(
        "ValidatingWebhookConfiguration",
        f"bad-{namespace}",
        namespace,
        {"url": "http://127.0.0.1/x"},
        timeoutSeconds=60,
    )
    del bad["webhooks"][0]["sideEffects"]
    refused = _kubectl(apiserver, "create", "-f", "-", body=bad)
    assert refused.returncode != 0
    assert "'https' is the only allowed URL scheme" in refused.stderr
    assert "webhooks[0].timeoutSeconds: Invalid value: 60" in refused.stderr
    assert "webhooks[0].sideEffects: Required value" in refused.stderr

    good = _configuration(
        "MutatingWebhookConfiguration",
        f"good-{namespace}",
        namespace,
        {"url": "https://127.0.0.1/x"},
    )
    created(good)
    got = json.loads(
        _kubectl(
            apiserver, "get", "mutatingwebhookconfiguration", f"good-{namespace}", "-o", "json"
        ).stdout
    )
    hook = got["webhooks"][0]
    assert (hook["failurePolicy"], hook["matchPolicy"], hook["reinvocationPolicy"]) == (
        "Fail",
        "Equivalent",
        "Never",
    )
    table = _kubectl(apiserver, "get", "mutatingwebhookconfiguration", f"good-{namespace}")
    assert table.stdout.split("\n")[0].split() == ["NAME", "WEBHOOKS", "AGE"]


def test_a_webhook_slower_than_its_timeout_fails_the_request(
    apiserver: Environment,
    namespace: str,
    webhook_server: WebhookServer,
    created: Callable[[Any], None],
) -> None:
    _label_namespace(apiserver, namespace)

    def slow(request: Review, path: str) -> dict[str, Any]:
        time.sleep(2)
        return {"allowed": True}

    webhook_server.answer = slow
    client = {"url": webhook_server.url, "caBundle": webhook_server.ca_bundle}
    created(
        _configuration(
            "ValidatingWebhookConfiguration",
            f"slow-{namespace}",
            namespace,
            client,
            timeoutSeconds=1,
        )
    )
    started = time.monotonic()
    failed = _until(
        lambda: _kubectl(
            apiserver,
            "create",
            "-n",
            namespace,
            "-f",
            "-",
            body=_config_map(f"cm-{time.monotonic_ns()}"),
        ),
        lambda done: done.returncode != 0,
    )
    assert failed.returncode != 0
    assert "context deadline exceeded" in failed.stderr, failed.stderr
    assert "?timeout=1s" in failed.stderr
    assert time.monotonic() - started < 10


def _add_label(key: str) -> dict[str, Any]:
    patch = [{"op": "add", "path": f"/metadata/labels/{key.replace('/', '~1')}", "value": "1"}]
    return {
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
    }


def test_a_webhook_that_asks_is_called_again_after_a_later_change(
    apiserver: Environment,
    namespace: str,
    webhook_server: WebhookServer,
    created: Callable[[Any], None],
) -> None:
    _label_namespace(apiserver, namespace)
    seen: list[tuple[str, list[str]]] = []

    def answer(request: Review, path: str) -> dict[str, Any]:
        labels = sorted(request["object"]["metadata"].get("labels") or {})
        seen.append((path, labels))
        key = path.strip("/")
        return {"allowed": True} if key in labels else _add_label(key)

    webhook_server.answer = answer
    for key, policy in (("a", "IfNeeded"), ("b", "Never")):
        client = {
            "url": webhook_server.url.replace("/admit", f"/{key}"),
            "caBundle": webhook_server.ca_bundle,
        }
        created(
            _configuration(
                "MutatingWebhookConfiguration",
                f"{key}-{namespace}",
                namespace,
                client,
                reinvocationPolicy=policy,
            )
        )

    def labelled() -> dict[str, Any]:
        body = _config_map(f"cm-{time.monotonic_ns()}")
        body["metadata"]["labels"] = {"app": "test"}
        return body

    created_map = _until(
        lambda: _kubectl(
            apiserver, "create", "-n", namespace, "-f", "-", "-o", "json", body=labelled()
        ),
        lambda done: (
            done.returncode == 0 and '"b": "1"' in done.stdout and '"a": "1"' in done.stdout
        ),
    )
    assert json.loads(_ok_stdout(created_map))["metadata"]["labels"] == {
        "app": "test",
        "a": "1",
        "b": "1",
    }
    assert seen[-3:] == [("/a", ["app"]), ("/b", ["a", "app"]), ("/a", ["a", "app", "b"])]


def _ok_stdout(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_webhook_s_warnings_reach_the_client_as_warning_headers(
    apiserver: Environment,
    namespace: str,
    webhook_server: WebhookServer,
    created: Callable[[Any], None],
) -> None:
    """AdmissionReview `warnings` come back as `Warning` headers, which kubectl prints
    and the official client receives, also with a denial; a warning given twice is
    sent once."""
    from kubernetes import client, config

    _label_namespace(apiserver, namespace)

    def answer(request: Review, path: str) -> dict[str, Any]:
        name = request["object"]["metadata"]["name"]
        warnings = [f"{name} is deprecated", f"{name} is deprecated", "use a Secret instead"]
        if name.startswith("refused"):
            status = {"code": 403, "message": "refused names are refused"}
            return {"allowed": False, "status": status, "warnings": warnings[:1]}
        return {"allowed": True, "warnings": warnings}

    webhook_server.answer = answer
    hook = {"url": webhook_server.url, "caBundle": webhook_server.ca_bundle}
    created(_configuration("ValidatingWebhookConfiguration", f"warn-{namespace}", namespace, hook))

    warned = _until(
        lambda: _kubectl(
            apiserver,
            "create",
            "-n",
            namespace,
            "-f",
            "-",
            body=_config_map(f"cm-{len(webhook_server.reviews)}"),
        ),
        lambda done: done.returncode == 0 and "Warning" in done.stderr,
    )
    assert warned.returncode == 0, warned.stderr
    name = webhook_server.reviews[-1]["request"]["object"]["metadata"]["name"]
    assert warned.stderr.splitlines() == [
        f"Warning: {name} is deprecated",
        "Warning: use a Secret instead",
    ], warned.stderr

    refused = _kubectl(
        apiserver, "create", "-n", namespace, "-f", "-", body=_config_map("refused-1")
    )
    assert refused.returncode != 0
    assert "Warning: refused-1 is deprecated" in refused.stderr, refused.stderr
    assert "refused names are refused" in refused.stderr

    api = client.CoreV1Api(config.new_client_from_config(str(apiserver.kubeconfig)))
    _, status, headers = api.create_namespaced_config_map_with_http_info(
        namespace, _config_map("official")
    )
    assert status == 201
    assert headers.get("Warning") == (
        '299 - "official is deprecated", 299 - "use a Secret instead"'
    ), headers
