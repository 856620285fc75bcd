"""Pod Security admission: the standard's checks as tables, in Kubernetes' words; and the
plugin in the real apiserver (in-process) driven with the real kubectl: a restricted
namespace refusing `kubectl run` with every violation named, warnings for pods and
workload templates, audit annotations, namespace labels checked and their change warning
about existing pods."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.apiserver.admission.pod_security_standards import (
    BASELINE,
    RESTRICTED,
    LevelVersion,
    Violation,
    describe,
    evaluate,
)
from lab.testenv import Environment

KUBECTL = str(Path(sys.executable).parent / "kubectl")

RESTRICTED_OK: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "app",
            "image": "nginx",
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
            },
        }
    ],
}


def c(name: str = "app", **security: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "nginx"}
    if security:
        container["securityContext"] = security
    return container


@pytest.mark.parametrize(
    ("spec", "meta", "reason", "detail"),
    [
        (
            {"hostNetwork": True, "hostPID": True, "containers": [c()]},
            {},
            "host namespaces",
            "hostNetwork=true, hostPID=true",
        ),
        (
            {"containers": [c("a", privileged=True), c("b", privileged=True)]},
            {},
            "privileged",
            'containers "a", "b" must not set securityContext.privileged=true',
        ),
        (
            {"containers": [c(capabilities={"add": ["NET_ADMIN", "CHOWN", "SYS_TIME"]})]},
            {},
            "non-default capabilities",
            'container "app" must not include "NET_ADMIN", "SYS_TIME" in '
            "securityContext.capabilities.add",
        ),
        (
            {"containers": [c()], "volumes": [{"name": "h", "hostPath": {"path": "/"}}]},
            {},
            "hostPath volumes",
            'volume "h"',
        ),
        (
            {"containers": [{**c(), "ports": [{"containerPort": 80, "hostPort": 8080}]}]},
            {},
            "hostPort",
            'container "app" uses hostPort 8080',
        ),
        (
            {
                "containers": [
                    {**c(), "livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}}}
                ]
            },
            {},
            "probe or lifecycle host",
            'container "app" uses probe or lifecycle host "10.0.0.1"',
        ),
        (
            {"containers": [c(appArmorProfile={"type": "Unconfined"})]},
            {},
            "forbidden AppArmor profile",
            'container "app" must not set securityContext.appArmorProfile.type to "Unconfined"',
        ),
        (
            {"containers": [c()]},
            {"annotations": {"container.apparmor.security.beta.kubernetes.io/app": "unconfined"}},
            "forbidden AppArmor profile",
            "annotation must not set securityContext.appArmorProfile.type to "
            '"container.apparmor.security.beta.kubernetes.io/app="unconfined""',
        ),
        (
            {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}, "containers": [c()]},
            {},
            "seLinuxOptions",
            'pod set forbidden securityContext.seLinuxOptions: type "spc_t"',
        ),
        (
            {"containers": [c(procMount="Unmasked")]},
            {},
            "procMount",
            'container "app" must not set securityContext.procMount to "Unmasked"',
        ),
        (
            {"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [c()]},
            {},
            "seccompProfile",
            'pod must not set securityContext.seccompProfile.type to "Unconfined"',
        ),
        (
            {
                "securityContext": {
                    "sysctls": [
                        {"name": "kernel.msgmax", "value": "1"},
                        {"name": "net.ipv4.tcp_syncookies", "value": "1"},
                    ]
                },
                "containers": [c()],
            },
            {},
            "forbidden sysctls",
            "kernel.msgmax",
        ),
        (
            {"containers": [c(windowsOptions={"hostProcess": True})]},
            {},
            "hostProcess",
            'container "app" must not set securityContext.windowsOptions.hostProcess=true',
        ),
    ],
)
def test_baseline_checks(spec: Any, meta: Any, reason: str, detail: str) -> None:
    assert evaluate(LevelVersion(BASELINE), meta, spec) == [Violation(reason, detail)]


def test_a_restricted_pod_passes_and_each_restricted_check_words_its_violation() -> None:
    assert evaluate(LevelVersion(RESTRICTED), {}, RESTRICTED_OK) == []
    spec = {
        "securityContext": {"runAsUser": 0},
        "containers": [
            c("a", runAsNonRoot=False, capabilities={"add": ["SYS_ADMIN"], "drop": ["ALL"]}),
            c("b", seccompProfile={"type": "Unconfined"}, allowPrivilegeEscalation=False),
        ],
        "volumes": [
            {"name": "n", "nfs": {"server": "x", "path": "/"}},
            {"name": "e", "emptyDir": {}},
        ],
    }
    assert describe(evaluate(LevelVersion(RESTRICTED), {}, spec)) == (
        'allowPrivilegeEscalation != false (container "a" must set '
        "securityContext.allowPrivilegeEscalation=false), "
        'unrestricted capabilities (container "b" must set '
        'securityContext.capabilities.drop=["ALL"]; container "a" must not include "SYS_ADMIN" '
        "in securityContext.capabilities.add), "
        'restricted volume types (volume "n" uses restricted volume type "nfs"), '
        'runAsNonRoot != true (container "a" must not set securityContext.runAsNonRoot=false), '
        "runAsUser=0 (pod must not set runAsUser=0), "
        'seccompProfile (container "b" must not set securityContext.seccompProfile.type to '
        '"Unconfined")'
    )
    # Baseline knows none of these but SYS_ADMIN and the seccomp one.
    assert [v.reason for v in evaluate(LevelVersion(BASELINE), {}, spec)] == [
        "non-default capabilities",
        "seccompProfile",
    ]


def test_versions_pin_the_standard() -> None:
    probe = {"containers": [{**c(), "readinessProbe": {"tcpSocket": {"host": "h", "port": 1}}}]}
    assert evaluate(LevelVersion(BASELINE, "v1.33"), {}, probe) == []
    assert evaluate(LevelVersion(BASELINE, "v1.34"), {}, probe)
    sysctl = {
        "securityContext": {"sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "1"}]},
        "containers": [c()],
    }
    assert evaluate(LevelVersion(BASELINE, "v1.31"), {}, sysctl)
    assert evaluate(LevelVersion(BASELINE, "latest"), {}, sysctl) == []
    user_ns = {
        **RESTRICTED_OK,
        "hostUsers": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }
    assert evaluate(LevelVersion(RESTRICTED), {}, user_ns) == []  # runAsNonRoot relaxed
    assert evaluate(LevelVersion(RESTRICTED, "v1.30"), {}, user_ns)


# -- the plugin in the apiserver, with the real kubectl -----------------------------------


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    audit_log = tmp_path_factory.mktemp("audit") / "audit.log"
    with Environment.start(audit_log_path=audit_log) as e:
        yield e


def kubectl(
    env: Environment, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(env.kubeconfig), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
    )


def namespace(env: Environment, name: str, **labels: str) -> None:
    kubectl(env, "create", "namespace", name).check_returncode()
    kubectl(env, "create", "serviceaccount", "default", "-n", name).check_returncode()
    if labels:
        pairs = [f"pod-security.kubernetes.io/{k.replace('_', '-')}={v}" for k, v in labels.items()]
        kubectl(env, "label", "namespace", name, *pairs).check_returncode()


RUN_REFUSED = (
    'Error from server (Forbidden): pods "web" is forbidden: violates PodSecurity '
    '"restricted:latest": allowPrivilegeEscalation != false (container "web" must set '
    "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "
    '"web" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or '
    'container "web" must set securityContext.runAsNonRoot=true), seccompProfile (pod or '
    'container "web" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
    '"Localhost")'
)


def test_kubectl_run_in_a_restricted_namespace_is_refused_with_every_violation(
    env: Environment,
) -> None:
    namespace(env, "locked", enforce="restricted")
    run = kubectl(env, "run", "web", "--image=nginx", "-n", "locked")
    assert run.returncode == 1
    assert run.stderr.strip() == RUN_REFUSED
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ok"}, "spec": RESTRICTED_OK}
    created = kubectl(env, "apply", "-n", "locked", "-f", "-", stdin=json.dumps(pod))
    assert created.returncode == 0, created.stderr
    assert "Warning" not in created.stderr
    # An image change is not evaluated again (a pod's spec may change little else).
    image = kubectl(env, "set", "image", "pod/ok", "app=nginx:1.27", "-n", "locked")
    assert image.returncode == 0, image.stderr


def test_warnings_for_pods_and_workloads_and_audit_annotations(env: Environment) -> None:
    namespace(env, "loose", enforce="baseline", warn="restricted", audit="restricted")
    run = kubectl(env, "run", "web", "--image=nginx", "-n", "loose")
    assert run.returncode == 0, run.stderr
    warning = RUN_REFUSED.split(": violates ", 1)[1]
    assert run.stderr.strip() == f"Warning: would violate {warning}"
    deploy = kubectl(env, "create", "deployment", "app", "--image=nginx", "-n", "loose")
    assert deploy.returncode == 0, deploy.stderr
    assert 'Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation' in (
        deploy.stderr
    )
    assert 'container "nginx" must set' in deploy.stderr
    # The enforce level still refuses (baseline), naming its own violations only.
    host = {"spec": {"hostPID": True, "containers": [{"name": "h", "image": "nginx"}]}}
    refused = kubectl(
        env, "run", "h", "--image=nginx", "-n", "loose", "--overrides", json.dumps(host)
    )
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): pods "h" is forbidden: violates PodSecurity '
        '"baseline:latest": host namespaces (hostPID=true)'
    )
    env.server.audit.close()  # flush what the log holds so far (no more lines are kept)
    lines = env.server.config.audit_log_path.read_text().splitlines()  # type: ignore[union-attr]
    created = [json.loads(line) for line in lines]
    web = next(
        e
        for e in created
        if e["verb"] == "create"
        and e.get("objectRef", {}).get("namespace") == "loose"
        and e["objectRef"]["resource"] == "pods"
        and e["responseStatus"]["code"] == 201
    )
    assert web["annotations"]["pod-security.kubernetes.io/enforce-policy"] == "baseline:latest"
    assert web["annotations"]["pod-security.kubernetes.io/audit-violations"] == (
        f"would violate {warning}"
    )
    refused_event = next(
        e
        for e in created
        if e.get("objectRef", {}).get("namespace") == "loose" and e["responseStatus"]["code"] == 403
    )
    annotations = refused_event["annotations"]
    assert annotations["pod-security.kubernetes.io/enforce-policy"] == "baseline:latest"
    assert annotations["pod-security.kubernetes.io/audit-violations"].startswith(
        'would violate PodSecurity "restricted:latest": host namespaces (hostPID=true), '
    )


def test_namespace_labels_are_checked_and_a_stricter_level_warns_about_existing_pods(
    env: Environment,
) -> None:
    namespace(env, "moving")
    for name in ("a", "b"):
        kubectl(env, "run", name, "--image=nginx", "-n", "moving").check_returncode()
    bad = kubectl(env, "label", "ns", "moving", "pod-security.kubernetes.io/enforce=strict")
    assert bad.returncode == 1
    assert bad.stderr.strip() == (
        'The Namespace "moving" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: '
        'Invalid value: "strict": must be one of privileged, baseline, restricted'
    )
    stricter = kubectl(
        env, "label", "ns", "moving", "pod-security.kubernetes.io/enforce=restricted"
    )
    assert stricter.returncode == 0, stricter.stderr
    assert stricter.stderr.strip().splitlines() == [
        'Warning: existing pods in namespace "moving" violate the new PodSecurity enforce level '
        '"restricted:latest"',
        "Warning: a (and 1 other pods): allowPrivilegeEscalation != false, unrestricted "
        "capabilities, runAsNonRoot != true, seccompProfile",
    ]
    assert kubectl(env, "get", "pod", "a", "-n", "moving").returncode == 0  # left running
    relaxed = kubectl(
        env, "label", "ns", "moving", "pod-security.kubernetes.io/enforce=baseline", "--overwrite"
    )
    assert relaxed.returncode == 0 and "Warning" not in relaxed.stderr, relaxed.stderr
