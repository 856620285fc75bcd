"""The pod lifecycle event generator (the PLEG): what the runtime holds, per pod, and a
wake-up for the pod's worker whenever that changes.

It relists (every sandbox and container of this node, found by their labels) every
`relist_period`, and at once when the engine's event stream says something happened (unless
a relist began after the event, which saw it already: events come in bursts), so
a container that exits is noticed within moments and one whose event was missed (the
stream broke, the engine restarted) within a period. The snapshot is the kubelet's only
view of the runtime: after a kubelet restart the first relist finds what is already
running and the workers adopt it instead of starting copies.

`snapshot(uid, newer_than)` lets a worker that just acted read a state at least as new
as its action (Kubernetes' pod cache has the same `GetNewerThan`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agents.kubelet.runtime import (
    CONTAINER_NAME,
    ContainerStatus,
    Runtime,
    RuntimeFailure,
    SandboxStatus,
)

log = logging.getLogger("kubelab.kubelet.pleg")


@dataclass(frozen=True)
class PodSnapshot:
    sandboxes: tuple[SandboxStatus, ...] = ()
    containers: tuple[ContainerStatus, ...] = ()

    def latest(self, name: str) -> tuple[ContainerStatus | None, list[ContainerStatus]]:
        """The newest container of that name, and the older ones."""
        found = sorted(
            (c for c in self.containers if c.labels.get(CONTAINER_NAME) == name),
            key=lambda c: (c.attempt, c.created_at),
        )
        return (found[-1] if found else None), found[:-1]

    def ready_sandbox(self) -> SandboxStatus | None:
        """The newest ready sandbox, if any."""
        ready = [s for s in self.sandboxes if s.ready]
        return max(ready, key=lambda s: s.attempt) if ready else None

    def fingerprint(self) -> tuple[object, ...]:
        return tuple(
            sorted((s.id, s.ready) for s in self.sandboxes)
            + sorted((c.id, str(c.state)) for c in self.containers)
        )


@dataclass
class PLEG:
    runtime: Runtime
    on_change: Callable[[str], None]
    """Called with a pod uid whose runtime state changed."""
    relist_period: float = 1.0
    _pods: dict[str, PodSnapshot] = field(default_factory=dict)
    _relisted_at: float = 0.0
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _relisting: bool = False
    _wanted: bool = False
    healthy: bool = False
    """Whether the last relist reached the runtime."""

    def uids(self) -> set[str]:
        with self._cond:
            return set(self._pods)

    def snapshot(self, uid: str, newer_than: float = 0.0) -> PodSnapshot:
        """The pod's runtime state, from a relist that started after `newer_than`.

        Raises `RuntimeFailure` when that relist failed: a worker that started a
        container and then read an older state would not see it, and create it a second
        time (Docker refuses the name: "Conflict"); it retries instead."""
        if newer_than and self._relisted_at < newer_than:
            self.relist(newer_than)
        with self._cond:
            if newer_than and self._relisted_at < newer_than:
                raise RuntimeFailure(
                    f"kubelet {self.runtime.node}: no runtime state newer than the pod's "
                    "last change (the relist failed; see the warning before); will retry"
                )
            return self._pods.get(uid, PodSnapshot())

    def relist(self, newer_than: float = 0.0) -> None:
        """List the runtime and notify the pods that changed; callers wanting a state
        newer than `newer_than` share one relist that started late enough."""
        with self._cond:
            while self._relisting:
                self._cond.wait()
                if newer_than and self._relisted_at >= newer_than:
                    return
            self._relisting = True
        started = time.time()
        changed: list[str] = []
        try:
            sandboxes = self.runtime.list_sandboxes()
            containers = self.runtime.list_containers()
            fresh: dict[str, tuple[list[SandboxStatus], list[ContainerStatus]]] = {}
            for s in sandboxes:
                fresh.setdefault(s.pod.uid, ([], []))[0].append(s)
            for c in containers:
                fresh.setdefault(c.pod_uid, ([], []))[1].append(c)
            pods = {uid: PodSnapshot(tuple(s), tuple(c)) for uid, (s, c) in fresh.items()}
            self.healthy = True
        except Exception as exc:
            log.warning("kubelet %s: relisting the runtime failed: %s", self.runtime.node, exc)
            self.healthy = False
            with self._cond:
                self._relisting = False
                self._cond.notify_all()
            return
        with self._cond:
            old = self._pods
            for uid in set(old) | set(pods):
                before, after = old.get(uid), pods.get(uid)
                if (before.fingerprint() if before else None) != (
                    after.fingerprint() if after else None
                ):
                    changed.append(uid)
            self._pods = pods
            self._relisted_at = started
            self._relisting = False
            self._cond.notify_all()
        for uid in changed:
            self.on_change(uid)

    def run(self, stop: threading.Event) -> None:
        """Relist every period, and at once on each engine event, until `stop`."""
        while not stop.is_set():
            deadline = time.monotonic() + self.relist_period
            self.relist()
            try:
                for event in self.runtime.events(max(0.0, deadline - time.monotonic())):
                    if stop.is_set():
                        return
                    # A pod start brings four events (create and start, sandbox and app)
                    # in a burst: one relist that began after an event covers it.
                    if not event.at or event.at >= self._relisted_at:
                        self.relist()
            except Exception as exc:
                log.warning("kubelet %s: runtime events: %s", self.runtime.node, exc)
                stop.wait(max(0.0, deadline - time.monotonic()))
