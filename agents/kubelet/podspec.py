"""From a pod's spec to what the runtime is asked for: environment (with `valueFrom`, and
the Services' variables such as `KUBERNETES_SERVICE_HOST`), `$(VAR)` expansion, QoS class
and cgroup limits, security settings and DNS. Pure functions over the pod and a `Lookup`
of ConfigMaps and Secrets, so the pod worker's tests need no engine.
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.kubelet.config import byte_count, milli_cpu
from agents.kubelet.runtime import Resources
from kubelab.api.podutil import qos_class

log = logging.getLogger("kubelab.kubelet.podspec")

Object = dict[str, Any]
Lookup = Callable[[str, str, str], Object | None]
"""(kind, namespace, name) -> the object, or None if absent. The kinds: "configmaps",
"secrets", "persistentvolumeclaims", and "persistentvolumes" (cluster-scoped: namespace "")."""

CPU_PERIOD = 100_000
MIN_SHARES = 2
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


class ConfigError(Exception):
    """The container cannot be configured (CreateContainerConfigError); the message says
    what is missing, in Kubernetes' words."""


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: a defined name is replaced, `$$` is a literal `$`,
    an undefined reference is left as it is."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return _VAR.sub(sub, text)


def requests_limits(container: Object) -> tuple[Object, Object]:
    res = container.get("resources") or {}
    return res.get("requests") or {}, res.get("limits") or {}


def cgroup_parent(root: str, pod: Object) -> str:
    """The pod's cgroup under `root` (cgroupfs layout): Guaranteed pods directly under it,
    the others under `burstable`/`besteffort`; "" when `root` is "" (no parent)."""
    if not root:
        return ""
    uid = pod["metadata"]["uid"]
    qos = qos_class(pod)
    middle = "" if qos == "Guaranteed" else f"/{qos.lower()}"
    return f"/{root.strip('/')}{middle}/pod{uid}"


def resources(container: Object) -> Resources:
    """CPU shares from the request (the limit when no request), quota from the limit,
    and the memory limit: what `docker run --cpu-shares --cpu-quota --memory` take."""
    requests, limits = requests_limits(container)
    cpu_request = requests.get("cpu", limits.get("cpu"))
    shares = max(MIN_SHARES, milli_cpu(cpu_request) * 1024 // 1000) if cpu_request else MIN_SHARES
    quota = milli_cpu(limits["cpu"]) * CPU_PERIOD // 1000 if "cpu" in limits else 0
    if quota:
        quota = max(quota, 1000)  # the kernel's minimum quota is 1 ms
    memory = byte_count(limits["memory"]) if "memory" in limits else 0
    return Resources(cpu_shares=shares, cpu_quota=quota, memory_limit=memory)


def field_value(pod: Object, path: str, host_ip: str, pod_ip: str) -> str:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    values = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
    }
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    if path not in values:
        raise ConfigError(f"unsupported fieldRef fieldPath {path!r}")
    return str(values[path])


def resource_field(
    pod: Object, ref: Object, default_container: str, allocatable: dict[str, str]
) -> str:
    """A resourceFieldRef's value: the container's limit (the node's allocatable when
    none is set) or request, divided by `divisor` and rounded up, as Kubernetes does."""
    name = ref.get("containerName") or default_container
    spec = pod.get("spec") or {}
    container = next(
        (
            c
            for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
            if c.get("name") == name
        ),
        None,
    )
    if container is None:
        raise ConfigError(f"resourceFieldRef names unknown container {name!r}")
    requests, limits = requests_limits(container)
    what, _, kind = str(ref.get("resource", "")).partition(".")
    if kind not in ("cpu", "memory", "ephemeral-storage"):
        raise ConfigError(f"unsupported resourceFieldRef resource {ref.get('resource')!r}")
    if what == "limits":
        value = limits.get(kind, allocatable.get(kind, "0"))
    else:
        value = requests.get(kind, "0")
    divisor = ref.get("divisor") or "1"
    if kind == "cpu":
        whole, div = milli_cpu(value), milli_cpu(divisor)
    else:
        whole, div = byte_count(value), byte_count(divisor)
    return str(max(1, -(-whole // max(div, 1))) if whole else 0)


def _key_of(lookup: Lookup, kind: str, namespace: str, ref: Object) -> str | None:
    name, key = ref.get("name", ""), ref.get("key", "")
    obj = lookup(kind, namespace, name)
    singular = "configmap" if kind == "configmaps" else "secret"
    if obj is None:
        if ref.get("optional"):
            return None
        raise ConfigError(f'{singular} "{name}" not found')
    data = obj.get("data") or {}
    if key in data:
        return base64.b64decode(data[key]).decode() if kind == "secrets" else str(data[key])
    binary = obj.get("binaryData") or {}
    if key in binary:
        return base64.b64decode(binary[key]).decode(errors="replace")
    if ref.get("optional"):
        return None
    raise ConfigError(f"couldn't find key {key} in {singular.capitalize()} {namespace}/{name}")


MASTER_SERVICE = ("default", "kubernetes")
"""The apiserver's Service: its variables go into every pod, service links or not."""


def _env_name(name: str) -> str:
    return name.upper().replace("-", "_")


def service_environment(
    services: Iterable[Object], namespace: str, enable_service_links: bool
) -> list[tuple[str, str]]:
    """The variables the kubelet gives every container for the Services it may see: the
    `kubernetes` Service of `default` always (so in-cluster clients find the apiserver:
    `KUBERNETES_SERVICE_HOST`/`_PORT`), and, with `enableServiceLinks` (the default),
    every Service of the pod's own namespace. Per Service, by name: `<NAME>_SERVICE_HOST`,
    `<NAME>_SERVICE_PORT` (its first port), `<NAME>_SERVICE_PORT_<PORTNAME>`, and the
    Docker-links style `<NAME>_PORT`, `<NAME>_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]`.
    Services without a cluster IP (headless, ExternalName) give none."""
    chosen: dict[str, Object] = {}
    for svc in services:
        meta, spec = svc["metadata"], svc.get("spec") or {}
        ip = spec.get("clusterIP") or ""
        if ip in ("", "None"):
            continue
        ns, name = meta.get("namespace", ""), meta["name"]
        if (ns, name) == MASTER_SERVICE:
            chosen.setdefault(name, svc)
        elif ns == namespace and enable_service_links:
            chosen[name] = svc
    env: list[tuple[str, str]] = []
    for name in sorted(chosen):
        spec = chosen[name]["spec"]
        ip, ports = spec["clusterIP"], spec.get("ports") or []
        prefix = _env_name(name)
        env.append((f"{prefix}_SERVICE_HOST", ip))
        if not ports:
            continue
        env.append((f"{prefix}_SERVICE_PORT", str(ports[0]["port"])))
        for port in ports:
            if port.get("name"):
                env.append((f"{prefix}_SERVICE_PORT_{_env_name(port['name'])}", str(port["port"])))
        first = ports[0]
        env.append(
            (f"{prefix}_PORT", f"{first.get('protocol', 'TCP').lower()}://{ip}:{first['port']}")
        )
        for port in ports:
            proto = port.get("protocol", "TCP")
            var = f"{prefix}_PORT_{port['port']}_{proto.upper()}"
            env += [
                (var, f"{proto.lower()}://{ip}:{port['port']}"),
                (f"{var}_PROTO", proto.lower()),
                (f"{var}_PORT", str(port["port"])),
                (f"{var}_ADDR", ip),
            ]
    return env


def environment(
    pod: Object,
    container: Object,
    lookup: Lookup,
    *,
    host_ip: str,
    pod_ip: str,
    allocatable: dict[str, str],
    services: Sequence[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """The container's environment: the Services' variables (`service_environment`),
    then `envFrom`, then `env` in order, each value expanded against the variables
    before it. Raises ConfigError for a missing ConfigMap, Secret or key that is not
    optional."""
    namespace = pod["metadata"].get("namespace", "default")
    env: dict[str, str] = dict(services)
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        for kind, ref_key in (("configmaps", "configMapRef"), ("secrets", "secretRef")):
            ref = source.get(ref_key)
            if ref is None:
                continue
            obj = lookup(kind, namespace, ref.get("name", ""))
            if obj is None:
                if ref.get("optional"):
                    continue
                singular = "configmap" if kind == "configmaps" else "secret"
                raise ConfigError(f'{singular} "{ref.get("name", "")}" not found')
            for key, value in (obj.get("data") or {}).items():
                env[prefix + key] = (
                    base64.b64decode(value).decode() if kind == "secrets" else str(value)
                )
    for item in container.get("env") or []:
        name = item["name"]
        if "valueFrom" not in item:
            env[name] = expand(str(item.get("value", "")), env)
            continue
        source = item["valueFrom"]
        found: str | None
        if "fieldRef" in source:
            found = field_value(pod, source["fieldRef"]["fieldPath"], host_ip, pod_ip)
        elif "resourceFieldRef" in source:
            found = resource_field(pod, source["resourceFieldRef"], container["name"], allocatable)
        elif "configMapKeyRef" in source:
            found = _key_of(lookup, "configmaps", namespace, source["configMapKeyRef"])
        elif "secretKeyRef" in source:
            found = _key_of(lookup, "secrets", namespace, source["secretKeyRef"])
        else:
            raise ConfigError(f"env {name}: unsupported valueFrom {sorted(source)}")
        if found is not None:
            env[name] = found
    return list(env.items())


def command_line(container: Object, env: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`command` and `args` with `$(VAR)` expanded."""
    return (
        tuple(expand(str(a), env) for a in container.get("command") or []),
        tuple(expand(str(a), env) for a in container.get("args") or []),
    )


@dataclass(frozen=True)
class Security:
    user: str
    cap_add: tuple[str, ...]
    cap_drop: tuple[str, ...]
    read_only_rootfs: bool


def security(pod: Object, container: Object) -> Security:
    """runAsUser/runAsGroup (the container's over the pod's), capabilities and a read-only
    root filesystem. `privileged` becomes every capability the node holds: Docker's
    --privileged fails inside a node here (no CAP_SYS_RESOURCE), so the container gets
    `cap_add=ALL` instead, and the kubelet says so in its log."""
    pod_sc = (pod.get("spec") or {}).get("securityContext") or {}
    sc = container.get("securityContext") or {}
    uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
    gid = sc.get("runAsGroup", pod_sc.get("runAsGroup"))
    user = "" if uid is None else str(uid) + (f":{gid}" if gid is not None else "")
    caps = sc.get("capabilities") or {}
    add = tuple(str(c).upper().removeprefix("CAP_") for c in caps.get("add") or [])
    drop = tuple(str(c).upper().removeprefix("CAP_") for c in caps.get("drop") or [])
    if sc.get("privileged"):
        log.warning(
            "pod %s/%s container %s asks for privileged: granting every capability the "
            "node holds instead (docker --privileged is not possible on this node)",
            pod["metadata"].get("namespace"),
            pod["metadata"].get("name"),
            container.get("name"),
        )
        add, drop = ("ALL",), ()
    return Security(user, add, drop, bool(sc.get("readOnlyRootFilesystem")))


@dataclass(frozen=True)
class DNS:
    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


def parse_resolv_conf(text: str) -> DNS:
    """A resolv.conf's nameservers, search domains and options (comments skipped; the
    last `search` line wins, as the resolver reads it)."""
    servers: list[str] = []
    searches: tuple[str, ...] = ()
    options: list[str] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split(";", 1)[0].split()
        if not words:
            continue
        if words[0] == "nameserver" and len(words) > 1:
            servers.append(words[1])
        elif words[0] in ("search", "domain"):
            searches = tuple(words[1:])
        elif words[0] == "options":
            options += words[1:]
    return DNS(tuple(servers), searches, tuple(options))


def _merge_options(base: tuple[str, ...], extra: tuple[str, ...]) -> tuple[str, ...]:
    """Options by name, a later one replacing an earlier one of the same name."""
    merged: dict[str, str] = {}
    for o in base + extra:
        merged[o.split(":", 1)[0]] = o
    return tuple(merged.values())


def dns(pod: Object, cluster_dns: tuple[str, ...], cluster_domain: str, host: DNS) -> DNS:
    """The pod's resolv.conf as Kubernetes' kubelet makes it, by dnsPolicy:

    * ClusterFirst (the default): the cluster DNS, the search path
      `<ns>.svc.<domain> svc.<domain> <domain>` then the node's, `ndots:5`; a pod on the
      host network gets Default instead (unless ClusterFirstWithHostNet), and so does any
      pod when the kubelet has no `--cluster-dns`;
    * Default: the node's resolv.conf (`host`);
    * None: nothing but dnsConfig;

    then dnsConfig's nameservers and searches appended (duplicates dropped) and its
    options merged by name."""
    spec = pod.get("spec") or {}
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    if policy == "ClusterFirst" and spec.get("hostNetwork"):
        policy = "Default"
    if policy in ("ClusterFirst", "ClusterFirstWithHostNet") and not cluster_dns:
        policy = "Default"
    namespace = pod["metadata"].get("namespace", "default")
    if policy in ("ClusterFirst", "ClusterFirstWithHostNet"):
        d = cluster_domain
        out = DNS(
            cluster_dns,
            (f"{namespace}.svc.{d}", f"svc.{d}", d, *host.searches),
            ("ndots:5",),
        )
    elif policy == "None":
        out = DNS()
    else:
        out = host
    extra = spec.get("dnsConfig") or {}
    options = tuple(
        o["name"] + (f":{o['value']}" if o.get("value") is not None else "")
        for o in extra.get("options") or []
    )
    return DNS(
        tuple(dict.fromkeys(out.servers + tuple(extra.get("nameservers") or ()))),
        tuple(dict.fromkeys(out.searches + tuple(extra.get("searches") or ()))),
        _merge_options(out.options, options),
    )


def resolv_conf(d: DNS) -> str:
    """The resolv.conf text of `d`."""
    lines = [f"nameserver {s}" for s in d.servers]
    if d.searches:
        lines.append("search " + " ".join(d.searches))
    if d.options:
        lines.append("options " + " ".join(d.options))
    return "".join(line + "\n" for line in lines)


def pull_policy(container: Object) -> str:
    """imagePullPolicy, defaulted as the API does: Always for `:latest` or no tag."""
    policy = container.get("imagePullPolicy")
    if policy:
        return str(policy)
    image = str(container.get("image", ""))
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    return "Always" if ":" not in last or last.endswith(":latest") else "IfNotPresent"
