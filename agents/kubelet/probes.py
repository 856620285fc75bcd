"""Container probes (liveness, readiness, startup) and lifecycle hooks: exec in the
container, HTTP GET or a TCP connect to the pod's IP, with Kubernetes' timing fields.

`Prober` holds, per container and probe kind, the counters that the thresholds need, and
says when the next probe is due; the pod worker runs the due ones on each sync and asks
to be woken for the next. A container's results start over when its id changes (a
restarted container is probed from its initialDelaySeconds again).

* startup: until it succeeds, liveness and readiness are not run; `failureThreshold`
  failures kill the container (restarted by its restartPolicy).
* liveness: `failureThreshold` consecutive failures kill the container.
* readiness: the container is ready after `successThreshold` consecutive successes,
  unready after `failureThreshold` failures; not ready until the first success.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import Any

import requests

from agents.kubelet.runtime import Runtime

Object = dict[str, Any]
KINDS = ("startupProbe", "livenessProbe", "readinessProbe")


def _port(value: object, container: Object) -> int:
    """A port number, or the number of the container's port with that name."""
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return int(value)
    for p in container.get("ports") or []:
        if p.get("name") == value:
            return int(p["containerPort"])
    raise ValueError(f"no port named {value!r} in container {container.get('name')}")


def run_handler(
    handler: Object,
    runtime: Runtime,
    container_id: str,
    container: Object,
    pod_ip: str,
    timeout: float,
) -> tuple[bool, str]:
    """Run one probe or hook action; (succeeded, what went wrong)."""
    try:
        if "exec" in handler:
            result = runtime.exec_sync(
                container_id, list(handler["exec"].get("command") or []), timeout
            )
            if result.exit_code != 0:
                out = result.output.decode(errors="replace").strip()
                return False, f"command exited {result.exit_code}" + (f": {out}" if out else "")
            return True, ""
        if "httpGet" in handler:
            get = handler["httpGet"]
            host = get.get("host") or pod_ip or "127.0.0.1"
            scheme = str(get.get("scheme", "HTTP")).lower()
            path = get.get("path", "/")
            url = f"{scheme}://{host}:{_port(get.get('port'), container)}{path}"
            headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
            headers.setdefault("User-Agent", "kube-probe/1.31")
            r = requests.get(url, headers=headers, timeout=timeout, verify=False)
            if not 200 <= r.status_code < 400:
                return False, f"HTTP probe failed with statuscode: {r.status_code}"
            return True, ""
        if "tcpSocket" in handler:
            tcp = handler["tcpSocket"]
            host = tcp.get("host") or pod_ip or "127.0.0.1"
            with socket.create_connection((host, _port(tcp.get("port"), container)), timeout):
                return True, ""
        if "sleep" in handler:
            time.sleep(min(float(handler["sleep"].get("seconds", 0)), timeout))
            return True, ""
    except (OSError, requests.RequestException, TimeoutError, ValueError) as exc:
        return False, str(exc)
    except Exception as exc:  # the runtime's errors: the container went away meanwhile
        return False, str(exc)
    return False, f"unsupported handler {sorted(handler)}"


@dataclass
class ProbeState:
    container_id: str
    next_at: float
    successes: int = 0
    failures: int = 0
    ok: bool | None = None
    """None until the probe has reached a verdict."""


@dataclass
class Prober:
    """Probe bookkeeping for one pod (module docstring)."""

    states: dict[tuple[str, str], ProbeState] = field(default_factory=dict)

    def state(self, container: str, kind: str) -> ProbeState | None:
        return self.states.get((container, kind))

    def started(self, container: Object, container_id: str) -> bool:
        """Whether the startup probe (if any) of this container has succeeded."""
        if "startupProbe" not in container:
            return True
        st = self.states.get((container["name"], "startupProbe"))
        return st is not None and st.container_id == container_id and st.ok is True

    def ready(self, container: Object, container_id: str) -> bool:
        if not self.started(container, container_id):
            return False
        if "readinessProbe" not in container:
            return True
        st = self.states.get((container["name"], "readinessProbe"))
        return st is not None and st.container_id == container_id and st.ok is True

    def due(
        self, container: Object, container_id: str, started_at: float, now: float
    ) -> list[tuple[str, Object]]:
        """The probes of a running container to run now."""
        out = []
        for kind in KINDS:
            probe = container.get(kind)
            if probe is None:
                continue
            if kind != "startupProbe" and not self.started(container, container_id):
                continue
            if kind == "startupProbe" and self.started(container, container_id):
                continue
            st = self.states.get((container["name"], kind))
            if st is None or st.container_id != container_id:
                st = ProbeState(container_id, started_at + probe.get("initialDelaySeconds", 0))
                self.states[(container["name"], kind)] = st
            if now >= st.next_at:
                out.append((kind, probe))
        return out

    def record(self, container: str, kind: str, probe: Object, ok: bool, now: float) -> bool:
        """Count a result; True when it crossed a threshold into failure (for liveness
        and startup: the container must be killed)."""
        st = self.states[(container, kind)]
        st.next_at = now + probe.get("periodSeconds", 10)
        if ok:
            st.successes, st.failures = st.successes + 1, 0
            threshold = probe.get("successThreshold", 1)
            if st.successes >= threshold:
                st.ok = True
            return False
        st.failures, st.successes = st.failures + 1, 0
        if st.failures >= probe.get("failureThreshold", 3):
            st.ok = False
            return kind != "readinessProbe"
        return False

    def forget(self, container: str) -> None:
        for key in [k for k in self.states if k[0] == container]:
            del self.states[key]

    def next_due(self) -> float | None:
        times = [st.next_at for st in self.states.values()]
        return min(times) if times else None
