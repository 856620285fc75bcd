"""A pod's status as the kubelet reports it: phase, conditions and container statuses,
computed from what the runtime holds (the PLEG snapshot) and what the pod's worker knows
(probe results, why a container waits, whether the pod is done).

This is the kubelet's `generateAPIPodStatus` in Kubernetes, with the status manager's
rule for conditions: a condition's `lastTransitionTime` changes only when its status
does, and conditions the kubelet does not own (a scheduler's, a readiness gate's) are
kept as they are. The computation is pure: the caller passes the time, and the worker
(`pods.PodWorkers`) decides whether the result differs from what it last wrote.

* **Container statuses**: the newest container of each name is `state`; the one before
  it is `lastState.terminated` (the restart count is the attempt number in the
  container's labels, so it survives kubelet restarts). A container the worker could not
  start shows why (`ErrImagePull`, `CrashLoopBackOff`, ...); an app container waiting
  for the init containers shows `PodInitializing`.
* **Phase**: Failed once an init container failed under restartPolicy Never; Succeeded
  or Failed once every app container has terminated and none will restart; Running once
  one runs (or ran, and will run again); else Pending. A pod being deleted keeps the phase
  it had while its containers are stopped for it.
* **Conditions**: PodReadyToStartContainers (a ready sandbox), Initialized, and
  ContainersReady and Ready (every app container ready, the pod Running).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Protocol

from agents.kubelet import probes
from agents.kubelet.pleg import PodSnapshot
from agents.kubelet.runtime import ContainerStatus, SandboxStatus, State
from kubelab.api.podutil import qos_class

Object = dict[str, Any]

KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
"""The pod conditions the kubelet owns; it keeps every other one as it finds it."""


class WorkerState(Protocol):
    """What the pod's worker knows beyond the runtime's state (`pods.PodState`)."""

    @property
    def prober(self) -> probes.Prober: ...

    @property
    def waiting(self) -> Mapping[str, tuple[str, str]]:
        """Container -> (reason, message) while it cannot run (ErrImagePull, ...)."""

    @property
    def terminated(self) -> bool:
        """Every container stopped for good (deleted, or the pod finished)."""

    @property
    def start_time(self) -> float | None: ...

    @property
    def evicted(self) -> str:
        """Why the kubelet evicted the pod, if it did."""

    @property
    def last_status(self) -> Object | None:
        """The status last written (its conditions the base of the next ones)."""


def rfc3339(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_ip(pod: Object, sandbox: SandboxStatus, node_ip: str) -> str:
    """The pod's IP: its sandbox's, or for a `hostNetwork` pod (which has none of its
    own) the node's, as Kubernetes reports it (`kubectl get pods -o wide` shows the
    control plane's static pods at their node's address) and probes reach it."""
    if not sandbox.ip and (pod.get("spec") or {}).get("hostNetwork"):
        return node_ip
    return sandbox.ip


def generate(
    pod: Object,
    snap: PodSnapshot,
    st: WorkerState,
    *,
    runtime: str,
    node_ip: str,
    now: float,
) -> Object:
    """The status of `pod`, whose runtime state is `snap`, on the node at `node_ip`
    whose runtime is called `runtime` (the scheme of container IDs), at time `now`."""
    spec = pod.get("spec") or {}
    policy = spec.get("restartPolicy") or "Always"
    sandbox = snap.ready_sandbox()
    inits = [
        container_status(c, snap, st, runtime, init=True) for c in spec.get("initContainers") or []
    ]
    apps = [
        container_status(c, snap, st, runtime, init=False) for c in spec.get("containers") or []
    ]
    init_done = all(
        "terminated" in s["state"] and s["state"]["terminated"].get("exitCode") == 0 for s in inits
    )
    for s in apps:
        if not init_done and s["state"].get("waiting", {}).get("reason") == "ContainerCreating":
            s["state"] = {"waiting": {"reason": "PodInitializing"}}
    phase = _phase(pod, st, policy, inits, apps, init_done)
    containers_ready = bool(apps) and all(s["ready"] for s in apps)
    ip = (
        pod_ip(pod, sandbox, node_ip)
        if sandbox is not None
        else ((pod.get("status") or {}).get("podIP") or "")
    )
    status: Object = {
        "phase": phase,
        "conditions": _conditions(
            pod, st, rfc3339(now), sandbox is not None, init_done, containers_ready, phase
        ),
        "hostIP": node_ip,
        "hostIPs": [{"ip": node_ip}] if node_ip else [],
        "startTime": rfc3339(st.start_time),
        "containerStatuses": apps,
        "qosClass": qos_class(pod),
    }
    if inits:
        status["initContainerStatuses"] = inits
    if ip:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    if st.evicted:
        status.update(phase="Failed", reason="Evicted", message=st.evicted)
    return status


def container_status(
    c: Object, snap: PodSnapshot, st: WorkerState, runtime: str, *, init: bool
) -> Object:
    """The status of container `c` of the pod (an init container if `init`)."""
    name = c["name"]
    latest, older = snap.latest(name)
    out: Object = {
        "name": name,
        "image": c["image"],
        "imageID": "",
        "ready": False,
        "restartCount": latest.attempt if latest else 0,
        "started": False,
        "state": {"waiting": {"reason": "PodInitializing" if not init else "ContainerCreating"}},
        "lastState": {},
    }
    if latest is not None:
        out["imageID"] = latest.image_id
        out["containerID"] = f"{runtime}://{latest.id}"
        if latest.state == State.RUNNING:
            out["state"] = {"running": {"startedAt": rfc3339(latest.started_at)}}
            if older:
                out["lastState"] = {"terminated": _terminated(older[-1], runtime)}
            out["started"] = st.prober.started(c, latest.id)
            out["ready"] = not init and st.prober.ready(c, latest.id)
        elif latest.state == State.EXITED:
            term = _terminated(latest, runtime)
            if name in st.waiting:
                out["state"] = {"waiting": _waiting(st.waiting[name])}
                out["lastState"] = {"terminated": term}
            else:
                out["state"] = {"terminated": term}
                if older:
                    out["lastState"] = {"terminated": _terminated(older[-1], runtime)}
            if init and latest.exit_code == 0:
                out["ready"] = True
        else:
            out["state"] = {"waiting": {"reason": "ContainerCreating"}}
    elif name in st.waiting:
        out["state"] = {"waiting": _waiting(st.waiting[name])}
    else:
        out["state"] = {"waiting": {"reason": "ContainerCreating"}}
    return out


def _phase(
    pod: Object,
    st: WorkerState,
    policy: str,
    inits: list[Object],
    apps: list[Object],
    init_done: bool,
) -> str:
    """The pod's phase from its containers' statuses (Kubernetes' `getPhase`)."""
    init_failed = (
        any(
            "terminated" in s["state"] and s["state"]["terminated"].get("exitCode") != 0
            for s in inits
        )
        and policy == "Never"
    )
    running = [s for s in apps if "running" in s["state"]]
    terminated = [s for s in apps if "terminated" in s["state"]]
    if init_failed:
        phase = "Failed"
    elif apps and len(terminated) == len(apps) and (policy != "Always" or st.terminated):
        failed = any(s["state"]["terminated"].get("exitCode") != 0 for s in terminated)
        phase = "Failed" if failed else "Succeeded"
    elif (
        running
        or (init_done and any(s["restartCount"] or s["lastState"] for s in apps))
        or (terminated and policy == "Always")
    ):
        phase = "Running"
    else:
        phase = "Pending"
    if (
        st.terminated
        and phase in ("Running", "Pending")
        and pod["metadata"].get("deletionTimestamp")
    ):
        phase = (pod.get("status") or {}).get("phase") or phase
    return phase


def _conditions(
    pod: Object,
    st: WorkerState,
    now: str | None,
    sandbox_ready: bool,
    init_done: bool,
    containers_ready: bool,
    phase: str,
) -> list[Object]:
    """The kubelet's four conditions, then the pod's others as they are."""
    previous = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
    # Our own conditions as we last wrote them: while the informer has not brought
    # that write back, the pod's copy would give them new transition times, which
    # would be a change to write again (five writes a pod on a loaded apiserver).
    previous.update(
        (c["type"], c)
        for c in (st.last_status or {}).get("conditions") or []
        if c["type"] in KUBELET_CONDITIONS
    )

    def condition(kind: str, ok: bool, reason: str = "") -> Object:
        status = "True" if ok else "False"
        old = previous.get(kind)
        since = old.get("lastTransitionTime") if old and old.get("status") == status else now
        out: Object = {
            "type": kind,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": since,
        }
        if reason and not ok:
            out["reason"] = reason
        return out

    not_ready = "PodCompleted" if phase in ("Succeeded", "Failed") else "ContainersNotReady"
    conditions = [
        condition("PodReadyToStartContainers", sandbox_ready),
        condition("Initialized", init_done, "ContainersNotInitialized"),
        condition("ContainersReady", containers_ready and phase == "Running", not_ready),
        condition("Ready", containers_ready and phase == "Running", not_ready),
    ]
    conditions += [c for k, c in previous.items() if k not in KUBELET_CONDITIONS]
    return conditions


def _waiting(reason_message: tuple[str, str]) -> Object:
    reason, message = reason_message
    return {"reason": reason, "message": message} if message else {"reason": reason}


def _terminated(c: ContainerStatus, runtime: str) -> Object:
    out: Object = {
        "exitCode": c.exit_code if c.exit_code is not None else 0,
        "reason": c.reason or ("Completed" if c.exit_code == 0 else "Error"),
        "startedAt": rfc3339(c.started_at),
        "finishedAt": rfc3339(c.finished_at),
        "containerID": f"{runtime}://{c.id}",
    }
    if c.message:
        out["message"] = c.message
    return out
