"""Leader election on a `coordination.k8s.io/v1` Lease, as the controller manager and the
scheduler run it (client-go's `tools/leaderelection`): several replicas run, one leads
and does the work, the others wait to take over.

The Lease is the lock. Its spec says who holds it (`holderIdentity`), for how long a
holder that stops renewing keeps it (`leaseDurationSeconds`), when the current holder
took it (`acquireTime`), when it last renewed (`renewTime`) and how many times the lock
changed hands (`leaseTransitions`).

One attempt (`try_acquire_or_renew`):

1. Read the Lease; create it, held by us, if there is none.
2. If it is held by someone else whose lease has not expired, give up for now.
3. Otherwise write it back held by us, with a fresh renewTime. The write carries the
   resourceVersion that was read, so if two candidates try at once the apiserver accepts
   one and answers the other 409 Conflict: that one lost this round, and tries again.

Expiry is judged on our own clock, never by comparing the holder's renewTime with our
time: machines' clocks differ. A candidate notes when it *observed* the record change;
the lease is expired when it has not changed for leaseDurationSeconds since then. This is
safe because a candidate that saw the record later than it was written only waits longer.

The loop (`run`): try every `retry_period` (with jitter) until the lease is ours; then
call `on_started_leading` in a new thread, and renew every `retry_period`. If renewals
keep failing for `renew_deadline`, leadership is lost: the event passed to
`on_started_leading` is set, then `on_stopped_leading` is called, and the work must stop.
Timings must keep two leaders from overlapping: the leader gives up at most
`retry_period + renew_deadline` after its last renewal (12 s by default), the others
take over `lease_duration` after they saw that renewal (15 s). When stopped
deliberately, the leader releases the lease (empties holderIdentity) so that a successor
need not wait for it to expire.

The defaults are client-go's: lease 15 s, renew deadline 10 s, retry period 2 s. The REST
client used must time out well within the renew deadline.
"""

from __future__ import annotations

import copy
import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from kubelab.api.errors import StatusError
from kubelab.client.clock import REAL_CLOCK, Clock
from kubelab.client.rest import Object, RestClient, ServerUnreachable, resource_for

log = logging.getLogger(__name__)

LEASES = resource_for("coordination.k8s.io/v1", "Lease")

LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
JITTER_FACTOR = 1.2
"""Retries while acquiring wait retry_period * (1 + up to 1.2), so that candidates that
started together spread out."""


def _micro_time(clock: Clock) -> str:
    """A Kubernetes MicroTime: RFC 3339 with microseconds, in UTC."""
    return clock.utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the Lease `namespace/name` as `identity`; see the module docstring.

    `on_started_leading(leading)` runs in its own thread once the lease is ours;
    `leading` is set when leadership ends. `on_stopped_leading()` is called after that,
    in the elector's thread. `on_new_leader(identity)` is called whenever the observed
    holder changes (including to us).
    """

    def __init__(
        self,
        client: RestClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        on_started_leading: Callable[[threading.Event], None],
        on_stopped_leading: Callable[[], None],
        on_new_leader: Callable[[str], None] | None = None,
        lease_duration: float = LEASE_DURATION,
        renew_deadline: float = RENEW_DEADLINE,
        retry_period: float = RETRY_PERIOD,
        release_on_cancel: bool = True,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        if not identity:
            raise ValueError("a leader election candidate needs an identity")
        if min(lease_duration, renew_deadline, retry_period) <= 0:
            raise ValueError("lease_duration, renew_deadline and retry_period must be positive")
        if lease_duration <= renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError(f"renew_deadline must be greater than {JITTER_FACTOR} * retry_period")
        self._client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self._clock = clock
        self._rng = rng or random.Random()
        # The Lease as last read or written, and when (our clock) its spec last changed.
        self._lease: Object | None = None
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._reported_leader = ""

    def leader(self) -> str:
        """The holder of the lease as last observed ("" if none)."""
        return str((self._observed_spec or {}).get("holderIdentity") or "")

    def is_leader(self) -> bool:
        return self.leader() == self.identity

    def _observe(self, lease: Object) -> None:
        self._lease = lease
        spec = lease.get("spec") or {}
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = self._clock.now()
        holder = self.leader()
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            log.info("lease %s/%s is held by %s", self.namespace, self.name, holder)
            if self._on_new_leader is not None:
                try:
                    self._on_new_leader(holder)
                except Exception:
                    log.exception("on_new_leader(%r) failed", holder)

    def _spec(self, old: dict[str, Any] | None) -> dict[str, Any]:
        """The spec that makes us the holder, continuing `old` (None: a new Lease)."""
        now = _micro_time(self._clock)
        if old is not None and old.get("holderIdentity") == self.identity:
            acquired, transitions = old.get("acquireTime"), int(old.get("leaseTransitions") or 0)
        else:
            acquired = now
            transitions = 0 if old is None else int(old.get("leaseTransitions") or 0) + 1
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": acquired,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the lease; True if we hold it now."""
        try:
            try:
                lease = self._client.get(LEASES, self.name, self.namespace)
            except StatusError as exc:
                if exc.code != 404:
                    raise
                new = {
                    "apiVersion": LEASES.api_version,
                    "kind": LEASES.kind,
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(None),
                }
                self._observe(self._client.create(LEASES, new))
                return True
            self._observe(lease)
            spec = self._observed_spec or {}
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            holder = self.leader()
            if holder and holder != self.identity:
                if self._observed_at + duration > self._clock.now():
                    return False
                log.info("lease %s/%s held by %s expired", self.namespace, self.name, holder)
            updated = copy.deepcopy(lease)
            updated["spec"] = self._spec(spec)
            self._observe(self._client.update(LEASES, updated))
            return True
        except StatusError as exc:
            if exc.code == 409:
                log.info("lease %s/%s: another candidate wrote first", self.namespace, self.name)
            else:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
        except ServerUnreachable as exc:
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
        return False

    def run(self, stop: threading.Event) -> None:
        """Campaign, lead, and return when leadership is lost or `stop` is set."""
        if not self._acquire(stop):
            return
        leading = threading.Event()
        threading.Thread(
            target=self._on_started_leading,
            args=(leading,),
            name=f"leading {self.namespace}/{self.name}",
            daemon=True,
        ).start()
        try:
            self._renew(stop)
        finally:
            leading.set()
            if stop.is_set() and self.release_on_cancel:
                self._release()
            self._on_stopped_leading()

    def _acquire(self, stop: threading.Event) -> bool:
        while not stop.is_set():
            if self.try_acquire_or_renew():
                log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
                return True
            wait = self.retry_period * (1 + self._rng.random() * JITTER_FACTOR)
            if self._clock.sleep(wait, stop):
                break
        return False

    def _renew(self, stop: threading.Event) -> None:
        """Renew every retry period until stopped, or until renewing has failed for the
        renew deadline."""
        while not self._clock.sleep(self.retry_period, stop):
            deadline = self._clock.now() + self.renew_deadline
            while not self.try_acquire_or_renew():
                if self._clock.sleep(self.retry_period, stop):
                    return
                if self._clock.now() >= deadline:
                    log.warning(
                        "could not renew lease %s/%s within %gs: leadership lost",
                        self.namespace,
                        self.name,
                        self.renew_deadline,
                    )
                    return

    def _release(self) -> None:
        """Hand the lease back, so that a successor need not wait for it to expire."""
        if not self.is_leader() or self._lease is None:
            return
        released = copy.deepcopy(self._lease)
        now = _micro_time(self._clock)
        released["spec"] = {
            **released.get("spec", {}),
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
        }
        try:
            self._observe(self._client.update(LEASES, released))
        except (StatusError, ServerUnreachable) as exc:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, exc)
