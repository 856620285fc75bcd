"""The Pod Security Standards (Kubernetes' `k8s.io/pod-security-admission/policy`): the
checks of the baseline and restricted levels, each a function of a pod's metadata and
spec that says what it violates in Kubernetes' words, and the evaluation of a pod against
a level and version.

A check answers a `Violation`: a reason ("privileged", "host namespaces") and a detail
that names the containers, volumes or values at fault (`container "web" must not set
securityContext.privileged=true`), worded and ordered as Kubernetes' checks word them,
since users grep for these and tutorials quote them. A level is evaluated as Kubernetes
does: the baseline checks, then, for restricted, the restricted ones; a baseline check
that a restricted one supersedes (capabilities, hostPath volumes, seccomp, procMount)
runs at baseline only. A check has the version of the standard it appeared in: a
namespace pinned to `v1.33` is not held to 1.34's probe host check, and the allowed
sysctls grow with the version.

Pods in a user namespace (`hostUsers: false`) are not asked for runAsNonRoot and may
unmask /proc at baseline, as the standard relaxes them since 1.35 (KEP-127).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Object = dict[str, Any]

PRIVILEGED = "privileged"
BASELINE = "baseline"
RESTRICTED = "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
LATEST = "latest"
LATEST_VERSION = (1, 37)
"""The standard's version `latest` means: the apiserver's own (v1.37)."""

_VERSION = re.compile(r"^v1\.(0|[1-9][0-9]*)$")


@dataclass(frozen=True)
class Violation:
    reason: str
    detail: str


@dataclass(frozen=True)
class LevelVersion:
    """A level of the standard at a version ("restricted:latest", "baseline:v1.30")."""

    level: str
    version: str = LATEST

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"

    @property
    def minor(self) -> int:
        if self.version == LATEST:
            return LATEST_VERSION[1]
        return min(int(self.version.split(".")[1]), LATEST_VERSION[1])


def valid_version(text: str) -> bool:
    """Whether a `-version` label's value is one: "latest" or "v1.<minor>"."""
    return text == LATEST or bool(_VERSION.match(text))


# -- what the checks share ---------------------------------------------------------------


def _quote(items: list[str] | set[str]) -> str:
    return ", ".join(f'"{item}"' for item in items)


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _containers(spec: Object) -> Iterator[Object]:
    """Every container of the pod: init, regular, then ephemeral ones."""
    for field in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(field) or []


def _context(container: Object) -> Object:
    return container.get("securityContext") or {}


def _pod_context(spec: Object) -> Object:
    return spec.get("securityContext") or {}


def _windows(spec: Object) -> bool:
    return (spec.get("os") or {}).get("name") == "windows"


def _user_namespace(spec: Object) -> bool:
    return spec.get("hostUsers") is False


def _setters(pod: bool, containers: list[str]) -> list[str]:
    """ "pod", 'containers "a", "b"': who set a forbidden value."""
    who = ["pod"] if pod else []
    if containers:
        who.append(_named(containers))
    return who


def _named(containers: list[str]) -> str:
    return f"{_plural('container', 'containers', len(containers))} {_quote(containers)}"


Check = Callable[[Object, Object, int], Violation | None]
"""(pod metadata, pod spec, the standard's minor version) -> its violation, if any."""


# -- baseline ----------------------------------------------------------------------------


def host_namespaces(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    shared = [f"{f}=true" for f in ("hostNetwork", "hostPID", "hostIPC") if spec.get(f)]
    return Violation("host namespaces", ", ".join(shared)) if shared else None


def privileged(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    bad = [c["name"] for c in _containers(spec) if _context(c).get("privileged")]
    if not bad:
        return None
    return Violation("privileged", f"{_named(bad)} must not set securityContext.privileged=true")


_DEFAULT_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


def capabilities_baseline(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    bad: list[str] = []
    added: set[str] = set()
    for c in _containers(spec):
        extra = [
            str(cap)
            for cap in (_context(c).get("capabilities") or {}).get("add") or []
            if cap not in _DEFAULT_CAPABILITIES
        ]
        if extra:
            bad.append(c["name"])
            added.update(extra)
    if not bad:
        return None
    return Violation(
        "non-default capabilities",
        f"{_named(bad)} must not include {_quote(sorted(added))} in "
        "securityContext.capabilities.add",
    )


def host_path_volumes(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    bad = [v["name"] for v in spec.get("volumes") or [] if "hostPath" in v]
    if not bad:
        return None
    return Violation("hostPath volumes", f"{_plural('volume', 'volumes', len(bad))} {_quote(bad)}")


def host_ports(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    bad: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        used = [str(p["hostPort"]) for p in c.get("ports") or [] if p.get("hostPort")]
        if used:
            bad.append(c["name"])
            ports.update(used)
    if not bad:
        return None
    return Violation(
        "hostPort",
        f"{_named(bad)} {_plural('uses', 'use', len(bad))} "
        f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}",
    )


def _hosts(handler: Object | None) -> list[str]:
    handler = handler or {}
    return [
        str(handler[kind]["host"])
        for kind in ("httpGet", "tcpSocket")
        if (handler.get(kind) or {}).get("host")
    ]


def host_probes_and_lifecycle(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    bad: list[str] = []
    hosts: set[str] = set()
    for c in _containers(spec):
        lifecycle = c.get("lifecycle") or {}
        handlers = [c.get(p) for p in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [lifecycle.get("postStart"), lifecycle.get("preStop")]
        found = [host for handler in handlers for host in _hosts(handler)]
        if found:
            bad.append(c["name"])
            hosts.update(found)
    if not bad:
        return None
    return Violation(
        "probe or lifecycle host",
        f"{_named(sorted(set(bad)))} {_plural('uses', 'use', len(set(bad)))} "
        f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
        f"{_quote(sorted(hosts))}",
    )


_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def apparmor_profile(meta: Object, spec: Object, _minor: int) -> Violation | None:
    def bad_type(context: Object) -> str | None:
        kind = (context.get("appArmorProfile") or {}).get("type")
        return None if kind in (None, "RuntimeDefault", "Localhost") else str(kind)

    values: set[str] = set()
    pod_value = bad_type(_pod_context(spec))
    if pod_value:
        values.add(pod_value)
    containers = []
    for c in _containers(spec):
        value = bad_type(_context(c))
        if value:
            containers.append(c["name"])
            values.add(value)
    annotations = sorted(
        f'{key}="{value}"'
        for key, value in (meta.get("annotations") or {}).items()
        if key.startswith(_APPARMOR_ANNOTATION)
        and value
        and value != "runtime/default"
        and not str(value).startswith("localhost/")
    )
    setters = _setters(pod_value is not None, containers)
    if annotations:
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    bad = sorted(values) + annotations
    return Violation(
        _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad)),
        f"{' and '.join(setters)} must not set securityContext.appArmorProfile.type to "
        f"{_quote(bad)}",
    )


_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})


def selinux_options(_meta: Object, spec: Object, minor: int) -> Violation | None:
    allowed = _SELINUX_TYPES | ({"container_engine_t"} if minor >= 31 else set())
    types: set[str] = set()
    user = role = False

    def bad(context: Object) -> bool:
        nonlocal user, role
        options = context.get("seLinuxOptions")
        if options is None:
            return False
        wrong = False
        if str(options.get("type") or "") not in allowed:
            types.add(str(options.get("type")))
            wrong = True
        if options.get("user"):
            user = wrong = True
        if options.get("role"):
            role = wrong = True
        return wrong

    pod = bad(_pod_context(spec))
    containers = [c["name"] for c in _containers(spec) if bad(_context(c))]
    setters = _setters(pod, containers)
    if not setters:
        return None
    what = []
    if types:
        what.append(f"{_plural('type', 'types', len(types))} {_quote(sorted(types))}")
    if user:
        what.append("user may not be set")
    if role:
        what.append("role may not be set")
    return Violation(
        "seLinuxOptions",
        f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(what)}",
    )


def proc_mount_restricted(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    bad: list[str] = []
    kinds: set[str] = set()
    for c in _containers(spec):
        kind = _context(c).get("procMount")
        if kind is not None and kind != "Default":
            bad.append(c["name"])
            kinds.add(str(kind))
    if not bad:
        return None
    return Violation(
        "procMount",
        f"{_named(bad)} must not set securityContext.procMount to {_quote(sorted(kinds))}",
    )


def proc_mount_baseline(meta: Object, spec: Object, minor: int) -> Violation | None:
    if minor >= 35 and _user_namespace(spec):
        return None
    return proc_mount_restricted(meta, spec, minor)


def _seccomp_setters(
    spec: Object, allowed: Callable[[str], bool]
) -> tuple[bool, list[str], set[str]]:
    """Whether the pod, and which containers, set a seccomp type not `allowed`; the
    types they set."""
    values: set[str] = set()

    def bad(context: Object) -> bool:
        profile = context.get("seccompProfile")
        if profile is None or allowed(str(profile.get("type"))):
            return False
        values.add(str(profile.get("type")))
        return True

    pod = bad(_pod_context(spec))
    return pod, [c["name"] for c in _containers(spec) if bad(_context(c))], values


def seccomp_profile_baseline(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    pod, containers, values = _seccomp_setters(spec, lambda kind: kind != "Unconfined")
    setters = _setters(pod, containers)
    if not setters:
        return None
    return Violation(
        "seccompProfile",
        f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
        f"{_quote(sorted(values))}",
    )


_SYSCTLS = {
    0: {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    },
    27: {"net.ipv4.ip_local_reserved_ports"},
    29: {
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    },
    32: {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"},
}
"""The safe sysctls, by the minor version that allowed them."""


def sysctls(_meta: Object, spec: Object, minor: int) -> Violation | None:
    allowed = set().union(*(names for since, names in _SYSCTLS.items() if since <= minor))
    bad = [
        str(s.get("name"))
        for s in _pod_context(spec).get("sysctls") or []
        if s.get("name") not in allowed
    ]
    return Violation("forbidden sysctls", ", ".join(bad)) if bad else None


def windows_host_process(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    def host(context: Object) -> bool:
        return bool((context.get("windowsOptions") or {}).get("hostProcess"))

    setters = _setters(
        host(_pod_context(spec)), [c["name"] for c in _containers(spec) if host(_context(c))]
    )
    if not setters:
        return None
    return Violation(
        "hostProcess",
        f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true",
    )


# -- restricted --------------------------------------------------------------------------


def allow_privilege_escalation(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    if _windows(spec):
        return None
    bad = [
        c["name"]
        for c in _containers(spec)
        if _context(c).get("allowPrivilegeEscalation") is not False
    ]
    if not bad:
        return None
    return Violation(
        "allowPrivilegeEscalation != false",
        f"{_named(bad)} must set securityContext.allowPrivilegeEscalation=false",
    )


def capabilities_restricted(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    if _windows(spec):
        return None
    missing_drop: list[str] = []
    adding: list[str] = []
    added: set[str] = set()
    for c in _containers(spec):
        caps = _context(c).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            missing_drop.append(c["name"])
        extra = [str(cap) for cap in caps.get("add") or [] if cap != "NET_BIND_SERVICE"]
        if extra:
            adding.append(c["name"])
            added.update(extra)
    details = []
    if missing_drop:
        details.append(f'{_named(missing_drop)} must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(
            f"{_named(adding)} must not include {_quote(sorted(added))} in "
            "securityContext.capabilities.add"
        )
    return Violation("unrestricted capabilities", "; ".join(details)) if details else None


_RESTRICTED_VOLUME_SOURCES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)


def restricted_volumes(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    bad: list[str] = []
    kinds: set[str] = set()
    for volume in spec.get("volumes") or []:
        sources = [k for k in volume if k != "name"]
        if any(k in _RESTRICTED_VOLUME_SOURCES for k in sources):
            continue
        bad.append(volume["name"])
        kinds.update(sources or ["unknown"])
    if not bad:
        return None
    return Violation(
        "restricted volume types",
        f"{_plural('volume', 'volumes', len(bad))} {_quote(bad)} "
        f"{_plural('uses', 'use', len(bad))} "
        f"{_plural('restricted volume type', 'restricted volume types', len(kinds))} "
        f"{_quote(sorted(kinds))}",
    )


def run_as_non_root(_meta: Object, spec: Object, minor: int) -> Violation | None:
    if minor >= 35 and _user_namespace(spec):
        return None
    pod_value = _pod_context(spec).get("runAsNonRoot")
    explicit: list[str] = []
    implicit: list[str] = []
    for c in _containers(spec):
        value = _context(c).get("runAsNonRoot")
        if value is False:
            explicit.append(c["name"])
        elif value is None and pod_value is not True:
            implicit.append(c["name"])
    setters = _setters(pod_value is False, explicit)
    if setters:
        return Violation(
            "runAsNonRoot != true",
            f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return Violation(
            "runAsNonRoot != true",
            f"pod or {_named(implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def run_as_user(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    setters = _setters(
        _pod_context(spec).get("runAsUser") == 0,
        [c["name"] for c in _containers(spec) if _context(c).get("runAsUser") == 0],
    )
    if not setters:
        return None
    return Violation("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0")


def seccomp_profile_restricted(_meta: Object, spec: Object, _minor: int) -> Violation | None:
    if _windows(spec):
        return None
    pod, containers, values = _seccomp_setters(
        spec, lambda kind: kind in ("RuntimeDefault", "Localhost")
    )
    setters = _setters(pod, containers)
    if setters:
        return Violation(
            "seccompProfile",
            f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
            f"{_quote(sorted(values))}",
        )
    pod_set = _pod_context(spec).get("seccompProfile") is not None
    implicit = [
        c["name"]
        for c in _containers(spec)
        if _context(c).get("seccompProfile") is None and not pod_set
    ]
    if not implicit:
        return None
    return Violation(
        "seccompProfile",
        f"pod or {_named(implicit)} must set securityContext.seccompProfile.type to "
        '"RuntimeDefault" or "Localhost"',
    )


# -- levels ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Registered:
    check: Check
    since: int
    """The minor version of the standard the check belongs to from."""
    baseline_only: bool = False
    """A baseline check a restricted one supersedes."""


_BASELINE = [
    _Registered(apparmor_profile, 0),
    _Registered(capabilities_baseline, 0, baseline_only=True),
    _Registered(host_namespaces, 0),
    _Registered(host_path_volumes, 0, baseline_only=True),
    _Registered(host_ports, 0),
    _Registered(host_probes_and_lifecycle, 34),
    _Registered(privileged, 0),
    _Registered(proc_mount_baseline, 0, baseline_only=True),
    _Registered(selinux_options, 0),
    _Registered(seccomp_profile_baseline, 0, baseline_only=True),
    _Registered(sysctls, 0),
    _Registered(windows_host_process, 0),
]
_RESTRICTED = [
    _Registered(allow_privilege_escalation, 8),
    _Registered(capabilities_restricted, 22),
    _Registered(proc_mount_restricted, 0),
    _Registered(restricted_volumes, 0),
    _Registered(run_as_non_root, 0),
    _Registered(run_as_user, 23),
    _Registered(seccomp_profile_restricted, 19),
]
"""In Kubernetes' order (its checks' files, baseline then restricted): the order in
which a refusal lists the violations."""


def evaluate(policy: LevelVersion, meta: Object, spec: Object) -> list[Violation]:
    """What the pod (its metadata and spec) violates of the level at its version."""
    if policy.level == PRIVILEGED:
        return []
    minor = policy.minor
    checks = [r for r in _BASELINE if not (r.baseline_only and policy.level == RESTRICTED)]
    if policy.level == RESTRICTED:
        checks += _RESTRICTED
    found = (r.check(meta, spec, minor) for r in checks if r.since <= minor)
    return [v for v in found if v is not None]


def describe(violations: list[Violation]) -> str:
    """The violations as a refusal or warning lists them: "reason (detail), ..."."""
    return ", ".join(f"{v.reason} ({v.detail})" if v.detail else v.reason for v in violations)
