"""Pod workers: the seeds' write flows end here. A pod bound to this node (or a static pod
from the manifest folder) gets a sandbox, its init containers in order, then its app
containers; its status (computed by `podstatus`) goes back to the apiserver; on deletion
its containers get their grace period and the kubelet confirms the deletion.

One worker per pod, in Kubernetes' sense: the pod's uid is a key in a work queue that
never hands one key to two threads, so a pod's syncs never overlap, while a few threads
serve all pods. A sync is level-triggered: it compares the pod's spec with what the PLEG
snapshot says the runtime holds and does the next steps (`_sync`), then writes the
status if it changed. It is queued again on any change of the pod, of its containers
(the PLEG), and when something is due: a back-off expiring, a probe, a token refresh.

Restarts follow restartPolicy with the crash-loop back-off (10 s doubling to 5 min, reset
after a container ran 10 min). A container's restart count is the attempt number in its
labels, so it survives kubelet restarts; the last dead container of each name is kept
(for `lastState` and `kubectl logs --previous`), older ones are removed.

With a tracer, a sync that takes a step continues the pod's trace: `podtrace`.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import datetime
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]
from opentelemetry import trace

from agents.kubelet import podspec, podstatus, podtrace, probes
from agents.kubelet.config import KubeletConfig
from agents.kubelet.pleg import PLEG, PodSnapshot
from agents.kubelet.runtime import (
    CONTAINER_NAME,
    ContainerConfig,
    ContainerStatus,
    ImageNotFound,
    Mount,
    PodRef,
    RegistryUnreachable,
    Runtime,
    RuntimeFailure,
    SandboxConfig,
    SandboxStatus,
    State,
)
from agents.kubelet.volumes import MountError, VolumeManager, container_mounts
from kubelab.api.errors import StatusError
from kubelab.client import (
    Preconditions,
    RestClient,
    ServerUnreachable,
    ShutDown,
    WorkQueue,
    resource_for,
)
from kubelab.client.record import NORMAL, WARNING, EventRecorder
from kubelab.client.rest import PatchType

log = logging.getLogger("kubelab.kubelet.pods")

PODS = resource_for("v1", "Pod")
CONFIGMAPS = resource_for("v1", "ConfigMap")
SECRETS = resource_for("v1", "Secret")
LOOKUP_RESOURCES = {
    "configmaps": CONFIGMAPS,
    "secrets": SECRETS,
    "persistentvolumeclaims": resource_for("v1", "PersistentVolumeClaim"),
    "persistentvolumes": resource_for("v1", "PersistentVolume"),
}
"""What a pod's spec refers to that the kubelet reads (`podspec.Lookup`'s kinds)."""
Object = dict[str, Any]
MIRROR = "kubernetes.io/config.mirror"
CONFIG_SOURCE = "kubernetes.io/config.source"
CONFIG_HASH = "kubernetes.io/config.hash"
PRESENT, PULLED = "present", "pulled"
"""`_ensure_image`'s outcomes when the image is there (the others: the waiting reason)."""
BACKOFF_RESET = 600.0
"""A container that ran this long without crashing has its back-off reset (10 min)."""


@dataclass
class Backoff:
    until: float = 0.0
    delay: float = 0.0


@dataclass
class PodState:
    """What the kubelet keeps about one pod between syncs."""

    pod: Object | None
    """The pod as last seen (None: gone from every source; only cleanup is left)."""
    gone: Object | None = None
    """The pod as last seen before it left its sources: the trace its clean-up continues."""
    static: bool = False
    backoff: dict[str, Backoff] = field(default_factory=dict)
    waiting: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Container -> (reason, message) while it cannot run (ErrImagePull, ...)."""
    prober: probes.Prober = field(default_factory=probes.Prober)
    start_time: float | None = None
    terminated: bool = False
    """Every container stopped for good (deleted, or the pod reached Succeeded/Failed)."""
    last_status: Object | None = None
    """The status this kubelet last wrote ("_json": its comparable form): the base for
    the next one (Kubernetes' status manager cache), not the pod as the informer last
    saw it, which lags our own writes."""
    wake_at: float | None = None
    mount_error: str = ""
    evicted: str = ""
    """Why the kubelet evicted the pod (node pressure); it then stays Failed."""
    acted_at: float = 0.0
    """When the worker last started something of the pod: its next sync reads a runtime
    state relisted after that."""


def _desired(pod: Object) -> tuple[object, ...]:
    """What a sync acts on: the pod less its status and bookkeeping (resourceVersion,
    managedFields), as Kubernetes' `podsDifferSemantically`."""
    meta = pod["metadata"]
    return (
        pod.get("spec"),
        meta.get("labels"),
        meta.get("annotations"),
        meta.get("deletionTimestamp"),
        meta.get("deletionGracePeriodSeconds"),
    )


def _pull_failure(image: str, exc: RuntimeFailure) -> str:
    """The Event's and the waiting container's message for a failed pull. A lab's network
    has no way out, so a pull that reached no registry means the image is not in the lab:
    the message says how to add it rather than repeat the engine's dial error (which the
    kubelet's log keeps)."""
    if isinstance(exc, RegistryUnreachable):
        return (
            f'image "{image}" is not in the lab: this lab has no internet access; '
            f'load it with "labctl load-image {image}"'
        )
    return f'Failed to pull image "{image}": {exc}'


def _restarts(policy: str, exit_code: int | None) -> bool:
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


class PodWorkers:
    """The pods of one node (module docstring)."""

    def __init__(
        self,
        config: KubeletConfig,
        client: RestClient,
        runtime: Runtime,
        recorder: EventRecorder,
        volumes: VolumeManager | None,
        allocatable: dict[str, str],
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.config = config
        self.tracer = tracer
        self.client = client
        self.runtime = runtime
        self.recorder = recorder
        self.volumes = volumes
        self.allocatable = allocatable
        self.queue: WorkQueue[str] = WorkQueue()
        self.pods: dict[str, PodState] = {}
        self._lock = threading.Lock()
        self.pleg = PLEG(runtime, self.queue.add, config.relist_period)
        self.services: Callable[[], Iterable[Object]] = tuple
        """The Services known (the kubelet's informer), for the containers' variables."""
        self.sources_ready = threading.Event()
        """Set once the API pods and the static pods are known: only then may the
        kubelet remove containers of pods it does not know (else it would kill pods a
        restarted kubelet has not read yet)."""

    # -- sources -------------------------------------------------------------------------

    def upsert(self, pod: Object, static: bool = False) -> None:
        """A pod from a source (API or manifest folder) was added or changed."""
        if not static and MIRROR in (pod["metadata"].get("annotations") or {}):
            return  # a mirror pod stands for a static pod the kubelet runs from its file
        uid = pod["metadata"]["uid"]
        with self._lock:
            st = self.pods.get(uid)
            if st is None:
                self.pods[uid] = PodState(pod, static=static)
                changed = True
            else:
                changed = st.pod is None or _desired(st.pod) != _desired(pod)
                st.pod = pod
        # The kubelet's own status writes come back through the watch: they change
        # nothing to do (Kubernetes' config source drops them the same way).
        if changed:
            self.queue.add(uid)

    def remove(self, uid: str, final: Object | None = None) -> None:
        """A pod is gone from its source: stop and remove what is left of it. `final` is
        its last state, when the source has it (the watch's deletion): the teardown is
        attributed to it, in the trace its annotation names, since the pod object is gone
        by the time the worker tears down (module `podtrace`)."""
        with self._lock:
            st = self.pods.get(uid)
            if st is not None:
                st.gone, st.pod = final or st.pod or st.gone, None
        self.queue.add(uid)

    def known_uids(self) -> set[str]:
        with self._lock:
            return set(self.pods)

    # -- workers -------------------------------------------------------------------------

    def run_worker(self) -> None:
        while True:
            try:
                uid = self.queue.get()
            except ShutDown:
                return
            try:
                self.sync(uid)
            except (StatusError, ServerUnreachable, RuntimeFailure) as exc:
                log.warning(
                    "kubelet %s: syncing pod %s failed: %s", self.config.node_name, uid, exc
                )
                self.queue.add_after(uid, 1.0)
            except Exception:
                log.exception("kubelet %s: syncing pod %s", self.config.node_name, uid)
                self.queue.add_after(uid, 5.0)
            finally:
                self.queue.done(uid)

    def sync(self, uid: str) -> None:
        with self._lock:
            st = self.pods.get(uid)
        if st is None:
            if self.sources_ready.is_set():
                self._remove_orphan(uid)
            return
        pod = st.pod
        if pod is None:
            with podtrace.syncing(self.tracer, podtrace.SYNC_TERMINATED_POD, st.gone):
                self._kill_pod(uid, st, grace=0)
                self._cleanup(uid)
            with self._lock:
                self.pods.pop(uid, None)
            return
        if pod["metadata"].get("deletionTimestamp"):
            with podtrace.syncing(self.tracer, podtrace.SYNC_TERMINATING_POD, pod):
                self._terminate(uid, st, pod)
            return
        if st.evicted:
            with podtrace.syncing(self.tracer, podtrace.SYNC_TERMINATING_POD, pod):
                if not st.terminated:
                    self._kill_pod(uid, st, grace=0)
                    st.terminated = True
                self._write_status(uid, st, pod)
            return
        st.wake_at = None
        acted_at = st.acted_at
        with podtrace.syncing(self.tracer, podtrace.SYNC_POD, pod):
            self._sync(uid, st, pod)
            if st.acted_at != acted_at:
                # It started something: the status it writes shows that (Running), from
                # a relist after the start, rather than Pending and then Running from
                # another sync that would wait in the queue behind other pods' starts.
                self.pleg.snapshot(uid, newer_than=st.acted_at)
            self._write_status(uid, st, pod)
        self._gc_containers(uid, pod)
        wake = min(
            (t for t in (st.wake_at, st.prober.next_due(), self._token_due(uid)) if t), default=None
        )
        if wake is not None:
            self.queue.add_after(uid, max(0.0, wake - time.time()))
        self.queue.add_after(uid, self.config.sync_frequency)

    def evictable(self) -> list[tuple[str, Object]]:
        """(uid, pod) of the pods node pressure may evict: running or about to, and not
        static (the control plane's own)."""
        with self._lock:
            return [
                (uid, st.pod)
                for uid, st in self.pods.items()
                if st.pod is not None and not (st.terminated or st.evicted or st.static)
            ]

    def evict(self, uid: str, message: str) -> None:
        """Node-pressure eviction: the pod's worker stops it at once (grace 0, as for a
        hard threshold) and reports it Failed with reason Evicted; it is not restarted,
        and the pod object stays for its owner to replace (as in Kubernetes)."""
        with self._lock:
            st = self.pods.get(uid)
            if st is None or st.pod is None or st.evicted:
                return
            st.evicted = message
            pod = st.pod
        meta = pod["metadata"]
        log.warning(
            "kubelet %s: evicting pod %s/%s (uid %s): %s",
            self.config.node_name,
            meta.get("namespace"),
            meta["name"],
            uid,
            message,
        )
        self.recorder.event(pod, WARNING, "Evicted", message)
        self.queue.add(uid)

    def _token_due(self, uid: str) -> float | None:
        return self.volumes.next_refresh(uid) if self.volumes else None

    def _wake(self, st: PodState, at: float) -> None:
        st.wake_at = at if st.wake_at is None else min(st.wake_at, at)

    # -- one sync --------------------------------------------------------------------------

    def _sync(self, uid: str, st: PodState, pod: Object) -> None:
        spec = pod.get("spec") or {}
        policy = spec.get("restartPolicy") or "Always"
        # Never older than this worker's own last change, or it would act on a runtime
        # state from before it (a second sandbox), as Kubernetes' GetNewerThan.
        snap = self.pleg.snapshot(uid, newer_than=st.acted_at)
        if st.terminated:
            return
        if st.start_time is None:
            st.start_time = time.time()
        sandbox = snap.ready_sandbox()
        if sandbox is None:
            if self._pod_done(pod, snap, policy):
                st.terminated = True
                return
            sandbox = self._new_sandbox(uid, st, pod, snap)
            if sandbox is None:
                return
        try:
            volumes = (
                self.volumes.setup(
                    pod,
                    self.config.node_ip,
                    podstatus.pod_ip(pod, sandbox, self.config.node_ip),
                    self.allocatable,
                )
                if self.volumes
                else {}
            )
            st.mount_error = ""
        except MountError as exc:
            if st.mount_error != str(exc):
                self.recorder.event(pod, WARNING, "FailedMount", str(exc))
            st.mount_error = str(exc)
            self._wake(st, time.time() + 2.0)
            return
        # Init containers, in order, each to completion.
        for c in spec.get("initContainers") or []:
            latest, _ = snap.latest(c["name"])
            if latest is not None and latest.sandbox_id == sandbox.id:
                if latest.state in (State.RUNNING, State.CREATED):
                    return
                if latest.exit_code == 0:
                    continue
                if policy == "Never":
                    st.terminated = True
                    return
            self._start(uid, st, pod, c, sandbox, latest, volumes, init=True)
            return
        # App containers.
        for c in spec.get("containers") or []:
            latest, _ = snap.latest(c["name"])
            if latest is not None and latest.sandbox_id == sandbox.id:
                if latest.state == State.RUNNING:
                    self._probe(st, pod, c, latest, sandbox)
                    continue
                if latest.state == State.CREATED:
                    continue
                if not _restarts(policy, latest.exit_code):
                    st.waiting.pop(c["name"], None)  # done for good: it waits for nothing
                    continue
            elif latest is not None and not _restarts(policy, latest.exit_code):
                st.waiting.pop(c["name"], None)
                continue  # from an older sandbox, done for good
            self._start(uid, st, pod, c, sandbox, latest, volumes, init=False)
        if self._pod_done(pod, self.pleg.snapshot(uid), policy):
            st.terminated = True
            with podtrace.step("Kubelet.stopPodSandbox"):
                self.runtime.stop_sandbox(sandbox.id)  # a finished pod holds no sandbox

    def _pod_done(self, pod: Object, snap: PodSnapshot, policy: str) -> bool:
        """Whether every app container has finished and none will restart."""
        if policy == "Always":
            return False
        containers = (pod.get("spec") or {}).get("containers") or []
        for c in containers:
            latest, _ = snap.latest(c["name"])
            if latest is None or latest.state != State.EXITED:
                return False
            if _restarts(policy, latest.exit_code):
                return False
        return bool(containers)

    def _new_sandbox(
        self, uid: str, st: PodState, pod: Object, snap: PodSnapshot
    ) -> SandboxStatus | None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        for c in snap.containers:
            if c.state == State.RUNNING:
                self.runtime.stop_container(c.id, 0)
        for s in snap.sandboxes:
            self.runtime.stop_sandbox(s.id)
        ref = PodRef(meta.get("namespace", "default"), meta["name"], uid)
        attempt = max((s.attempt + 1 for s in snap.sandboxes), default=0)
        config = SandboxConfig(
            pod=ref,
            attempt=attempt,
            hostname=spec.get("hostname") or meta["name"],
            labels=ref.labels(),
            host_network=bool(spec.get("hostNetwork")),
            cgroup_parent=podspec.cgroup_parent(self.config.cgroup_root, pod),
        )
        try:
            with podtrace.step("Kubelet.runPodSandbox", {podtrace.ATTEMPT: attempt}):
                started = self.runtime.run_sandbox(config)
        except RuntimeFailure as exc:
            self.recorder.event(
                pod, WARNING, "FailedCreatePodSandBox", f"Failed to create pod sandbox: {exc}"
            )
            self._wake(st, time.time() + 5.0)
            return None
        st.acted_at = time.time()
        if attempt > 0:
            self.recorder.event(
                pod,
                NORMAL,
                "SandboxChanged",
                "Pod sandbox changed, it will be killed and re-created.",
            )
        return started if started.ready else None

    def _ensure_image(self, st: PodState, pod: Object, c: Object) -> bool:
        """Pull the image as imagePullPolicy says; False (with the waiting reason set)
        while it is not there."""
        attributes = {podtrace.CONTAINER: c["name"], podtrace.IMAGE: c["image"]}
        with podtrace.step("Kubelet.ensureImage", attributes) as span:
            outcome = self._pull_image(st, pod, c)
            if span is not None:
                span.set_attribute(podtrace.IMAGE_OUTCOME, outcome)
        return outcome in (PRESENT, PULLED)

    def _pull_image(self, st: PodState, pod: Object, c: Object) -> str:
        """`_ensure_image`'s work; the outcome: `PRESENT`, `PULLED` or the reason the
        container waits for its image (ErrImagePull, ...)."""
        image, name = c["image"], c["name"]
        path = f"spec.containers{{{name}}}"
        policy = podspec.pull_policy(c)
        present = self.runtime.image_status(image)
        if present is not None and policy != "Always":
            self.recorder.event(
                pod,
                NORMAL,
                "Pulled",
                f'Container image "{image}" already present on machine',
                field_path=path,
            )
            return PRESENT
        if policy == "Never":
            message = f'Container image "{image}" is not present with pull policy of Never'
            st.waiting[name] = ("ErrImageNeverPull", message)
            self.recorder.event(pod, WARNING, "ErrImageNeverPull", message, field_path=path)
            self._wake(st, time.time() + self.config.image_pull_backoff)
            return "ErrImageNeverPull"
        backoff = st.backoff.setdefault(f"pull:{name}", Backoff())
        now = time.time()
        if now < backoff.until:
            st.waiting[name] = ("ImagePullBackOff", f'Back-off pulling image "{image}"')
            self.recorder.event(
                pod, NORMAL, "BackOff", f'Back-off pulling image "{image}"', field_path=path
            )
            self._wake(st, backoff.until)
            return "ImagePullBackOff"
        self.recorder.event(pod, NORMAL, "Pulling", f'Pulling image "{image}"', field_path=path)
        began = time.monotonic()
        try:
            self.runtime.pull_image(image)
        except RuntimeFailure as exc:
            if present is not None:  # Always, and the pull failed: use what is there
                return PRESENT
            backoff.delay = min(
                self.config.crash_loop_backoff_cap,
                backoff.delay * 2 if backoff.delay else self.config.image_pull_backoff,
            )
            backoff.until = now + backoff.delay
            message = _pull_failure(image, exc)
            meta = pod["metadata"]
            log.warning(
                "kubelet %s: pod %s/%s (uid %s, resourceVersion %s): pulling %s failed: %s",
                self.config.node_name,
                meta.get("namespace"),
                meta["name"],
                meta.get("uid"),
                meta.get("resourceVersion"),
                image,
                exc,
            )
            st.waiting[name] = ("ErrImagePull", message)
            self.recorder.event(pod, WARNING, "Failed", message, field_path=path)
            self._wake(st, backoff.until)
            return "ErrImagePull"
        st.backoff.pop(f"pull:{name}", None)
        self.recorder.event(
            pod,
            NORMAL,
            "Pulled",
            f'Successfully pulled image "{image}" in {time.monotonic() - began:.3f}s',
            field_path=path,
        )
        return PULLED

    def _start(
        self,
        uid: str,
        st: PodState,
        pod: Object,
        c: Object,
        sandbox: SandboxStatus,
        latest: ContainerStatus | None,
        volumes: dict[str, Path],
        *,
        init: bool,
    ) -> None:
        name = c["name"]
        path = f"spec.{'initContainers' if init else 'containers'}{{{name}}}"
        now = time.time()
        backoff = st.backoff.setdefault(name, Backoff())
        if latest is not None and latest.state == State.EXITED:
            ran = (latest.finished_at or now) - (latest.started_at or now)
            if ran >= BACKOFF_RESET:
                backoff.delay = 0.0
            if now < backoff.until:
                message = (
                    f"back-off {backoff.delay:g}s restarting failed container={name} "
                    f"pod={pod['metadata']['name']}_{pod['metadata'].get('namespace')}({uid})"
                )
                st.waiting[name] = ("CrashLoopBackOff", message)
                self.recorder.event(
                    pod, WARNING, "BackOff", "Back-off restarting failed container", field_path=path
                )
                self._wake(st, backoff.until)
                return
        if not self._ensure_image(st, pod, c):
            return
        try:
            config = self._container_config(pod, c, sandbox, latest, volumes)
        except (podspec.ConfigError, MountError) as exc:
            st.waiting[name] = ("CreateContainerConfigError", str(exc))
            self.recorder.event(pod, WARNING, "Failed", f"Error: {exc}", field_path=path)
            self._wake(st, now + 2.0)
            return
        cid = ""
        container = {podtrace.CONTAINER: name}
        try:
            with podtrace.step("Kubelet.createContainer", container):
                cid = self.runtime.create_container(sandbox.id, config)
            # It exists from now on, started or not: the next sync must see it.
            st.acted_at = time.time()
            self.recorder.event(
                pod, NORMAL, "Created", f"Created container {name}", field_path=path
            )
            with podtrace.step("Kubelet.startContainer", container):
                self.runtime.start_container(cid)
            st.acted_at = time.time()
        except ImageNotFound as exc:
            st.waiting[name] = ("ErrImagePull", str(exc))
            self._wake(st, now + self.config.image_pull_backoff)
            return
        except RuntimeFailure as exc:
            st.waiting[name] = ("RunContainerError", str(exc))
            self.recorder.event(pod, WARNING, "Failed", f"Error: {exc}", field_path=path)
            if cid:
                # Created but never started: a sync skips a created container (its start
                # is this worker's own, in flight), so one left behind would hold the
                # container's place for ever. Removed, the next sync makes it anew.
                self._discard(cid)
            self._wake(st, now + 2.0)
            return
        st.waiting.pop(name, None)
        st.prober.forget(name)
        if latest is not None:
            # The next crash waits twice as long (10 s, 20 s, ... 5 min).
            backoff.delay = min(
                self.config.crash_loop_backoff_cap,
                backoff.delay * 2 if backoff.delay else self.config.crash_loop_backoff,
            )
        else:
            backoff.delay = self.config.crash_loop_backoff
        backoff.until = 0.0
        self.recorder.event(pod, NORMAL, "Started", f"Started container {name}", field_path=path)

    def _discard(self, container_id: str) -> None:
        """Remove a container that failed to start; a failure here leaves it to the
        pod's clean-up, and is only logged."""
        try:
            self.runtime.remove_container(container_id)
        except RuntimeFailure as exc:
            log.warning(
                "kubelet: removing container %s that failed to start: %s", container_id, exc
            )

    def note_exit(self, st: PodState, name: str, finished_at: float) -> None:
        backoff = st.backoff.setdefault(name, Backoff(delay=self.config.crash_loop_backoff))
        backoff.until = max(backoff.until, finished_at + backoff.delay)

    def _container_config(
        self,
        pod: Object,
        c: Object,
        sandbox: SandboxStatus,
        latest: ContainerStatus | None,
        volumes: dict[str, Path],
    ) -> ContainerConfig:
        meta = pod["metadata"]
        ref = PodRef(meta.get("namespace", "default"), meta["name"], meta["uid"])
        env = podspec.environment(
            pod,
            c,
            self._lookup,
            host_ip=self.config.node_ip,
            pod_ip=podstatus.pod_ip(pod, sandbox, self.config.node_ip),
            allocatable=self.allocatable,
            services=podspec.service_environment(
                self.services(),
                ref.namespace,
                pod["spec"].get("enableServiceLinks", True) is not False,
            ),
        )
        command, args = podspec.command_line(c, dict(env))
        sec = podspec.security(pod, c)
        mounts = container_mounts(c, volumes, pod) if self.volumes else []
        mounts.append(Mount(str(self._resolv_conf(pod)), "/etc/resolv.conf", read_only=True))
        return ContainerConfig(
            name=c["name"],
            attempt=latest.attempt + 1 if latest is not None else 0,
            image=c["image"],
            labels={**ref.labels(), CONTAINER_NAME: c["name"]},
            command=command,
            args=args,
            env=tuple(env),
            working_dir=c.get("workingDir", ""),
            mounts=tuple(mounts),
            user=sec.user,
            cap_add=sec.cap_add,
            cap_drop=sec.cap_drop,
            read_only_rootfs=sec.read_only_rootfs,
            tty=bool(c.get("tty")),
            stdin=bool(c.get("stdin")),
            stdin_once=bool(c.get("stdinOnce")),
            resources=podspec.resources(c),
            cgroup_parent=podspec.cgroup_parent(self.config.cgroup_root, pod),
        )

    def _resolv_conf(self, pod: Object) -> Path:
        """The pod's resolv.conf (`podspec.dns`), written under
        `<root-dir>/pods/<uid>/resolv.conf` for its containers to mount, as Kubernetes'
        kubelet has the runtime do through the sandbox: the containers then ask the
        cluster DNS itself, not the engine's embedded resolver (Docker's 127.0.0.11)."""
        host = podspec.DNS()
        if self.config.resolv_conf is not None:
            try:
                host = podspec.parse_resolv_conf(self.config.resolv_conf.read_text())
            except OSError as exc:
                log.warning(
                    "kubelet %s: reading --resolv-conf %s: %s (pods get no node DNS)",
                    self.config.node_name,
                    self.config.resolv_conf,
                    exc,
                )
        d = podspec.dns(pod, self.config.cluster_dns, self.config.cluster_domain, host)
        path = self.config.root_dir / "pods" / str(pod["metadata"]["uid"]) / "resolv.conf"
        text = podspec.resolv_conf(d)
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(".resolv.conf.tmp")
            partial.write_text(text)
            partial.replace(path)
        return path

    def _lookup(self, kind: str, namespace: str, name: str) -> Object | None:
        try:
            return self.client.get(LOOKUP_RESOURCES[kind], name, namespace)
        except StatusError as exc:
            if exc.code == 404:
                return None
            raise

    def _probe(
        self, st: PodState, pod: Object, c: Object, running: ContainerStatus, sandbox: SandboxStatus
    ) -> None:
        now = time.time()
        for kind, probe in st.prober.due(c, running.id, running.started_at or now, now):
            began = time.time_ns()
            before = st.prober.state(c["name"], kind)
            was_ok = before.ok if before is not None else None
            ok, why = probes.run_handler(
                probe,
                self.runtime,
                running.id,
                c,
                podstatus.pod_ip(pod, sandbox, self.config.node_ip),
                float(probe.get("timeoutSeconds", 1)),
            )
            what = {
                "startupProbe": "Startup",
                "livenessProbe": "Liveness",
                "readinessProbe": "Readiness",
            }[kind]
            path = f"spec.containers{{{c['name']}}}"
            if not ok:
                self.recorder.event(
                    pod, WARNING, "Unhealthy", f"{what} probe failed: {why}", field_path=path
                )
            killing = st.prober.record(c["name"], kind, probe, ok, time.time())
            after = st.prober.state(c["name"], kind)
            if after is not None and after.ok is True and was_ok is not True:
                # Its verdict turned to success: started, ready, alive.
                attributes = {podtrace.CONTAINER: c["name"], podtrace.PROBE: kind}
                podtrace.record("Kubelet.probe", began, attributes)
            if killing:
                self.recorder.event(
                    pod,
                    NORMAL,
                    "Killing",
                    f"Container {c['name']} failed {what.lower()} probe, will be restarted",
                    field_path=path,
                )
                grace = probe.get("terminationGracePeriodSeconds") or (pod.get("spec") or {}).get(
                    "terminationGracePeriodSeconds", 30
                )
                self._stop_container(pod, c, running.id, float(grace))
                st.prober.forget(c["name"])
                self.queue.add(pod["metadata"]["uid"])
                return

    # -- termination -------------------------------------------------------------------

    def _stop_container(self, pod: Object, c: Object | None, cid: str, grace: float) -> None:
        """preStop (within the grace period), then SIGTERM, then SIGKILL at the end."""
        attributes = {podtrace.CONTAINER: (c or {}).get("name", ""), podtrace.GRACE_PERIOD: grace}
        with podtrace.step("Kubelet.stopContainer", attributes):
            self._stop_within(pod, c, cid, grace)

    def _stop_within(self, pod: Object, c: Object | None, cid: str, grace: float) -> None:
        deadline = time.monotonic() + grace
        pre_stop = ((c or {}).get("lifecycle") or {}).get("preStop")
        if pre_stop:
            ok, why = probes.run_handler(pre_stop, self.runtime, cid, c or {}, "", grace)
            if not ok:
                self.recorder.event(pod, WARNING, "FailedPreStopHook", f"PreStopHook failed: {why}")
        try:
            self.runtime.stop_container(cid, max(0.0, deadline - time.monotonic()))
        except RuntimeFailure as exc:
            log.warning("kubelet: stopping container %s: %s", cid[:12], exc)

    def _kill_pod(self, uid: str, st: PodState, grace: float) -> None:
        """Stop every running container of the pod at once (each with the grace period),
        then its sandbox."""
        snap = self.pleg.snapshot(uid, newer_than=time.time())
        pod = st.pod
        spec = (pod or {}).get("spec") or {}
        by_name = {
            c["name"]: c
            for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
        }
        running = [c for c in snap.containers if c.state == State.RUNNING]
        ready = [s for s in snap.sandboxes if s.ready]
        if not (running or ready):
            return
        with podtrace.step("Kubelet.killPod", {podtrace.GRACE_PERIOD: grace}):
            if running:
                with concurrent.futures.ThreadPoolExecutor(len(running)) as pool:
                    for c in running:
                        name = c.labels.get(CONTAINER_NAME, "")
                        if pod is not None:
                            self.recorder.event(
                                pod,
                                NORMAL,
                                "Killing",
                                f"Stopping container {name}",
                                field_path=f"spec.containers{{{name}}}",
                            )
                        # Each in this sync's context: its span is the kill's child.
                        pool.submit(
                            contextvars.copy_context().run,
                            self._stop_container,
                            pod or {},
                            by_name.get(name),
                            c.id,
                            grace,
                        )
            for s in ready:
                with podtrace.step("Kubelet.stopPodSandbox"):
                    self.runtime.stop_sandbox(s.id)

    def _terminate(self, uid: str, st: PodState, pod: Object) -> None:
        """The pod is being deleted: stop it within its grace period, report the final
        status, then confirm the deletion (grace 0, for this uid only)."""
        meta = pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        self._kill_pod(uid, st, float(grace))
        st.terminated = True
        self._write_status(uid, st, pod)
        if st.static:
            return
        try:
            with podtrace.step("Kubelet.deletePod"):
                self.client.delete(
                    PODS,
                    meta["name"],
                    meta.get("namespace", "default"),
                    grace_period_seconds=0,
                    preconditions=Preconditions(uid=uid),
                )
            log.info(
                "kubelet %s: pod %s/%s (uid %s) stopped and deleted",
                self.config.node_name,
                meta.get("namespace"),
                meta["name"],
                uid,
            )
        except StatusError as exc:
            if exc.code not in (404, 409):
                raise

    def _cleanup(self, uid: str) -> None:
        snap = self.pleg.snapshot(uid, newer_than=time.time())
        for c in snap.containers:
            with podtrace.step(
                "Kubelet.removeContainer", {podtrace.CONTAINER: c.labels.get(CONTAINER_NAME, "")}
            ):
                self.runtime.remove_container(c.id)
        for s in snap.sandboxes:
            with podtrace.step("Kubelet.removePodSandbox"):
                self.runtime.remove_sandbox(s.id)
        (self.config.root_dir / "pods" / uid / "resolv.conf").unlink(missing_ok=True)
        if self.volumes:
            self.volumes.teardown(uid)

    def _remove_orphan(self, uid: str) -> None:
        """Containers of a pod no source knows (deleted while the kubelet was down)."""
        snap = self.pleg.snapshot(uid)
        if not snap.containers and not snap.sandboxes:
            return
        log.info(
            "kubelet %s: removing containers of unknown pod uid %s", self.config.node_name, uid
        )
        for c in snap.containers:
            if c.state == State.RUNNING:
                self.runtime.stop_container(c.id, 2)
        self._cleanup(uid)

    def _gc_containers(self, uid: str, pod: Object) -> None:
        """Keep the newest container of each name and the one before it (lastState,
        `logs --previous`); remove older dead ones."""
        snap = self.pleg.snapshot(uid)
        names = {c.labels.get(CONTAINER_NAME, "") for c in snap.containers}
        for name in names:
            _, older = snap.latest(name)
            for c in older[:-1]:
                if c.state == State.EXITED:
                    self.runtime.remove_container(c.id)
        ready = snap.ready_sandbox()
        for s in snap.sandboxes:
            if (
                ready is not None
                and s.id != ready.id
                and not any(c.sandbox_id == s.id for c in snap.containers)
            ):
                self.runtime.remove_sandbox(s.id)

    # -- status --------------------------------------------------------------------------

    def _write_status(self, uid: str, st: PodState, pod: Object) -> None:
        """Write the pod's status if it differs from the one this kubelet wrote last (the
        status manager's cache), noting container exits for the crash-loop back-off."""
        status = podstatus.generate(
            pod,
            self.pleg.snapshot(uid),
            st,
            runtime=self.runtime.name,
            node_ip=self.config.node_ip,
            now=time.time(),
        )
        for name, s in (
            (s["name"], s)
            for s in status["containerStatuses"] + status.get("initContainerStatuses", [])
        ):
            term = s["state"].get("terminated") or (s["lastState"] or {}).get("terminated")
            if term and term.get("finishedAt"):
                fin = datetime.datetime.fromisoformat(term["finishedAt"].replace("Z", "+00:00"))
                self.note_exit(st, name, fin.timestamp())
        comparable = json.dumps(status, sort_keys=True)
        if st.last_status is not None and st.last_status.get("_json") == comparable:
            return
        meta = pod["metadata"]
        target = meta["name"]
        # Its PATCH carries this span's traceparent (the REST client's propagation).
        with podtrace.step("Kubelet.updateStatus", {podtrace.PHASE: status["phase"]}):
            try:
                self.client.patch(
                    PODS,
                    target,
                    {"status": status},
                    meta.get("namespace", "default"),
                    patch_type=PatchType.MERGE,
                    subresource="status",
                )
            except StatusError as exc:
                if exc.code in (404, 409):
                    return
                raise
        st.last_status = {"_json": comparable, "conditions": status["conditions"]}


# -- static pods ---------------------------------------------------------------------------


def static_pods(folder: Path, node: str) -> list[Object]:
    """The pods of the manifest folder (YAML or JSON, one pod a file), named
    `<name>-<node>`, bound to this node, with a uid from their content: a changed file is
    a new pod, as the kubelet's file source does."""
    out: list[Object] = []
    if not folder.is_dir():
        return out
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        try:
            pod = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            log.warning("kubelet %s: static pod %s unreadable: %s", node, path, exc)
            continue
        if not isinstance(pod, dict) or pod.get("kind") != "Pod":
            log.warning("kubelet %s: %s is not a Pod manifest; skipped", node, path)
            continue
        digest = hashlib.md5(
            (json.dumps(pod, sort_keys=True) + node + str(path)).encode(), usedforsecurity=False
        ).hexdigest()
        meta = pod.setdefault("metadata", {})
        meta["name"] = f"{meta.get('name', path.stem)}-{node}"
        meta.setdefault("namespace", "default")
        meta["uid"] = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        annotations = meta.setdefault("annotations", {})
        annotations.update({CONFIG_SOURCE: "file", CONFIG_HASH: digest, MIRROR: digest})
        spec = pod.setdefault("spec", {})
        spec["nodeName"] = node
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("tolerations", [{"operator": "Exists", "effect": "NoExecute"}])
        out.append(pod)
    return out


def mirror_pod(pod: Object, node_uid: str) -> Object:
    """The API's copy of a static pod, owned by the Node."""
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": meta.get("labels") or {},
            "annotations": meta["annotations"],
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": pod["spec"]["nodeName"],
                    "uid": node_uid,
                    "controller": True,
                }
            ],
        },
        "spec": pod["spec"],
    }
