"""The pod status the kubelet reports (`agents.kubelet.podstatus`), from runtime states
written out by hand: phase, conditions and container statuses, with no runtime and no
apiserver."""

from __future__ import annotations

from typing import Any

from agents.kubelet import podstatus
from agents.kubelet.pleg import PodSnapshot
from agents.kubelet.pods import PodState
from agents.kubelet.probes import ProbeState
from agents.kubelet.runtime import CONTAINER_NAME, ContainerStatus, PodRef, SandboxStatus, State

NOW = 1_800_000_000.0
NOW_TEXT = "2027-01-15T08:00:00Z"
EARLIER = "2027-01-01T00:00:00Z"
REF = PodRef("default", "web", "uid-1")


def _pod(
    containers: list[str],
    inits: tuple[str, ...] = (),
    policy: str = "Always",
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "restartPolicy": policy,
        "containers": [{"name": n, "image": f"{n}:1"} for n in containers],
        **spec,
    }
    if inits:
        pod_spec["initContainers"] = [{"name": n, "image": f"{n}:1"} for n in inits]
    return {"metadata": {"name": "web", "uid": "uid-1"}, "spec": pod_spec, "status": status or {}}


def _sandbox(ip: str = "10.244.1.5", ready: bool = True) -> SandboxStatus:
    return SandboxStatus("sb1", REF, 0, ready, ip, NOW - 60, {})


def _container(
    name: str,
    state: State,
    attempt: int = 0,
    exit_code: int | None = None,
    reason: str = "",
) -> ContainerStatus:
    exited = state == State.EXITED
    return ContainerStatus(
        id=f"{name}-{attempt}",
        sandbox_id="sb1",
        name=name,
        attempt=attempt,
        image=f"{name}:1",
        image_id=f"sha256:{name}",
        state=state,
        labels={CONTAINER_NAME: name},
        created_at=NOW - 50 + attempt,
        started_at=NOW - 40 + attempt,
        finished_at=NOW - 30 + attempt if exited else None,
        exit_code=exit_code,
        reason=reason,
    )


def _status(
    pod: dict[str, Any],
    containers: list[ContainerStatus],
    st: PodState | None = None,
    sandbox: SandboxStatus | None = None,
) -> dict[str, Any]:
    snap = PodSnapshot((sandbox or _sandbox(),), tuple(containers))
    return podstatus.generate(
        pod,
        snap,
        st or PodState(pod, start_time=NOW - 60),
        runtime="memory",
        node_ip="192.168.1.10",
        now=NOW,
    )


def _conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_a_running_pod_is_running_and_ready_with_its_addresses() -> None:
    status = _status(_pod(["app"]), [_container("app", State.RUNNING)])
    assert status["phase"] == "Running"
    assert _conditions(status) == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }
    (app,) = status["containerStatuses"]
    assert app["state"] == {"running": {"startedAt": podstatus.rfc3339(NOW - 40)}}
    assert app["containerID"] == "memory://app-0"
    assert app["imageID"] == "sha256:app"
    assert (app["ready"], app["started"], app["restartCount"]) == (True, True, 0)
    assert status["podIP"] == "10.244.1.5" and status["podIPs"] == [{"ip": "10.244.1.5"}]
    assert status["hostIP"] == "192.168.1.10"
    assert status["startTime"] == podstatus.rfc3339(NOW - 60)
    assert status["qosClass"] == "BestEffort"
    assert "initContainerStatuses" not in status


def test_a_readiness_probe_not_yet_passed_keeps_the_pod_not_ready() -> None:
    pod = _pod(["app"])
    pod["spec"]["containers"][0]["readinessProbe"] = {"exec": {"command": ["true"]}}
    st = PodState(pod)
    status = _status(pod, [_container("app", State.RUNNING)], st)
    assert status["phase"] == "Running"
    assert _conditions(status)["Ready"] == "False"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ContainersNotReady"
    st.prober.states[("app", "readinessProbe")] = ProbeState("app-0", NOW, ok=True)
    assert _conditions(_status(pod, [_container("app", State.RUNNING)], st))["Ready"] == "True"


def test_a_restarted_container_shows_its_last_termination() -> None:
    dead = _container("app", State.EXITED, attempt=2, exit_code=1)
    status = _status(_pod(["app"]), [dead, _container("app", State.RUNNING, attempt=3)])
    (app,) = status["containerStatuses"]
    assert app["restartCount"] == 3
    assert app["lastState"]["terminated"] == {
        "exitCode": 1,
        "reason": "Error",
        "startedAt": podstatus.rfc3339(NOW - 38),
        "finishedAt": podstatus.rfc3339(NOW - 28),
        "containerID": "memory://app-2",
    }


def test_a_container_in_back_off_waits_with_the_workers_reason() -> None:
    pod = _pod(["app"])
    st = PodState(pod)
    st.waiting["app"] = ("CrashLoopBackOff", "back-off 20s restarting failed container")
    status = _status(pod, [_container("app", State.EXITED, attempt=1, exit_code=2)], st)
    (app,) = status["containerStatuses"]
    assert app["state"] == {
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": "back-off 20s restarting failed container",
        }
    }
    assert app["lastState"]["terminated"]["exitCode"] == 2
    assert status["phase"] == "Running"  # it ran, and will run again


def test_a_container_that_never_started_shows_why() -> None:
    pod = _pod(["app"])
    st = PodState(pod)
    st.waiting["app"] = ("ErrImagePull", "")
    (app,) = _status(pod, [], st)["containerStatuses"]
    assert app["state"] == {"waiting": {"reason": "ErrImagePull"}}
    (app,) = _status(pod, [])["containerStatuses"]
    assert app["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert "containerID" not in app


def test_app_containers_wait_for_the_init_containers() -> None:
    pod = _pod(["app"], inits=("setup",))
    status = _status(pod, [_container("setup", State.RUNNING)])
    assert status["phase"] == "Pending"
    (app,) = status["containerStatuses"]
    assert app["state"] == {"waiting": {"reason": "PodInitializing"}}
    initialized = next(c for c in status["conditions"] if c["type"] == "Initialized")
    assert (initialized["status"], initialized["reason"]) == ("False", "ContainersNotInitialized")
    (setup,) = status["initContainerStatuses"]
    assert "running" in setup["state"] and setup["ready"] is False

    done = [_container("setup", State.EXITED, exit_code=0)]
    status = _status(pod, done)
    assert _conditions(status)["Initialized"] == "True"
    assert status["initContainerStatuses"][0]["ready"] is True
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}


def test_a_failed_init_container_fails_the_pod_only_under_restart_policy_never() -> None:
    failed = [_container("setup", State.EXITED, exit_code=1)]
    assert _status(_pod(["app"], ("setup",), policy="Never"), failed)["phase"] == "Failed"
    assert _status(_pod(["app"], ("setup",), policy="OnFailure"), failed)["phase"] == "Pending"


def test_finished_containers_end_the_pod_unless_they_restart() -> None:
    ok = [_container("a", State.EXITED, exit_code=0), _container("b", State.EXITED, exit_code=0)]
    status = _status(_pod(["a", "b"], policy="OnFailure"), ok)
    assert status["phase"] == "Succeeded"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PodCompleted")
    assert status["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"

    one_failed = [ok[0], _container("b", State.EXITED, exit_code=3)]
    assert _status(_pod(["a", "b"], policy="Never"), one_failed)["phase"] == "Failed"
    assert _status(_pod(["a", "b"]), ok)["phase"] == "Running"  # Always: they restart


def test_a_pod_being_deleted_keeps_its_phase_while_its_containers_stop() -> None:
    pod = _pod(["app"], status={"phase": "Running"})
    pod["metadata"]["deletionTimestamp"] = EARLIER
    st = PodState(pod, terminated=True)
    status = _status(pod, [_container("app", State.CREATED)], st)
    assert status["phase"] == "Running"


def test_an_evicted_pod_is_failed_with_the_reason() -> None:
    pod = _pod(["app"])
    st = PodState(pod, evicted="The node was low on resource: memory.")
    status = _status(pod, [_container("app", State.RUNNING)], st)
    assert (status["phase"], status["reason"]) == ("Failed", "Evicted")
    assert status["message"] == "The node was low on resource: memory."


def test_transition_times_change_only_with_the_status_and_other_conditions_stay() -> None:
    previous = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": EARLIER},
        {"type": "Ready", "status": "False", "lastTransitionTime": EARLIER},
        {"type": "Initialized", "status": "True", "lastTransitionTime": EARLIER},
    ]
    pod = _pod(["app"], status={"conditions": previous})
    status = _status(pod, [_container("app", State.RUNNING)])
    since = {c["type"]: c["lastTransitionTime"] for c in status["conditions"]}
    assert since == {
        "PodReadyToStartContainers": NOW_TEXT,
        "Initialized": EARLIER,  # unchanged
        "ContainersReady": NOW_TEXT,
        "Ready": NOW_TEXT,  # False -> True
        "PodScheduled": EARLIER,  # the scheduler's, kept as it is
    }


def test_the_last_written_conditions_win_over_the_informers_older_copy() -> None:
    """Until the informer brings the kubelet's write back, the pod's copy is older: the
    status written last gives the transition times, or every sync would write again."""
    pod = _pod(["app"], status={"conditions": []})
    st = PodState(pod)
    st.last_status = {
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": EARLIER}]
    }
    status = _status(pod, [_container("app", State.RUNNING)], st)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == EARLIER


def test_pod_ips_without_a_sandbox_address() -> None:
    host = _pod(["app"], hostNetwork=True)
    status = _status(host, [_container("app", State.RUNNING)], sandbox=_sandbox(ip=""))
    assert status["podIP"] == "192.168.1.10"
    gone = _pod(["app"], status={"podIP": "10.244.1.9"})
    status = _status(gone, [], sandbox=_sandbox(ready=False))
    assert status["podIP"] == "10.244.1.9"
    assert _conditions(status)["PodReadyToStartContainers"] == "False"
    assert "podIP" not in _status(_pod(["app"]), [], sandbox=_sandbox(ready=False))
