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
call `on_started_leading` in a new thread, and renew every `retry_period`. The renew
deadline counts from the start of the last successful renewal (a holder may have written
the renewTime any time after that), and is checked before each attempt: a failed
attempt is retried after `min(retry_period, time left)`, no attempt starts once the
deadline has passed, and a renewal that only succeeds after it counts as lost too. When
the deadline passes, leadership is lost: the event passed to `on_started_leading` is
set, then `on_stopped_leading` is called, and the work must stop.
Timings must keep two leaders from overlapping: the leader gives up at most
`renew_deadline` after its last successful renewal (10 s by default), the others take
over `lease_duration` after they saw that renewal (15 s); the margin is for the work to
notice the event and stop.

A term also ends when `stop` is set or when `on_started_leading` returns (or raises):
nothing would be done with the lease. Then the event is set, and the elector keeps
renewing until `on_started_leading` has returned (at most `stop_timeout`), so that no
successor starts while the term's work still runs; then it releases the lease (empties
holderIdentity, if `release_on_cancel`) so that a successor need not wait for it to
expire. Work that does not stop within `stop_timeout` is left behind: the lease is not
released, and expires.

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


def check_timings(lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    """A ValueError unless the timings can keep two leaders apart (client-go's checks,
    named as component-base's LeaderElectionConfiguration names them): a holder must
    give up before a candidate takes over, and retry within its deadline."""
    if min(lease_duration, renew_deadline, retry_period) <= 0:
        raise ValueError("leaseDuration, renewDeadline and retryPeriod must be positive")
    if lease_duration <= renew_deadline:
        raise ValueError(
            f"leaseDuration ({lease_duration:g}s) must be greater than renewDeadline "
            f"({renew_deadline:g}s)"
        )
    if renew_deadline <= JITTER_FACTOR * retry_period:
        raise ValueError(
            f"renewDeadline ({renew_deadline:g}s) must be greater than {JITTER_FACTOR} * "
            f"retryPeriod ({retry_period:g}s)"
        )


def _micro_time(clock: Clock) -> str:
    """A Kubernetes MicroTime: RFC 3339 with microseconds, in UTC."""
    return clock.utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the Lease `namespace/name` as `identity`; see the module docstring.

    `on_started_leading(leading)` runs in its own thread once the lease is ours;
    `leading` is set when leadership ends, and the term ends when it returns.
    `on_stopped_leading()` is called after that (and after the release, if any), in the
    elector's thread. `on_new_leader(identity)` is called whenever the observed
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
        stop_timeout: float | None = None,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        if not identity:
            raise ValueError("a leader election candidate needs an identity")
        check_timings(lease_duration, renew_deadline, retry_period)
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
        self.stop_timeout = stop_timeout
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
        except Exception:
            # A malformed answer or Lease: a failed attempt like any other.
            log.exception("lease %s/%s: attempt failed", self.namespace, self.name)
        return False

    def run(self, stop: threading.Event) -> None:
        """Campaign, lead, and return when the term is over: leadership lost, `stop` set,
        or `on_started_leading` returned."""
        renewed = self._acquire(stop)
        if renewed is None:
            return
        leading, done = threading.Event(), threading.Event()

        def lead() -> None:
            try:
                self._on_started_leading(leading)
            except Exception:
                log.exception("leading %s/%s failed", self.namespace, self.name)
            finally:
                done.set()

        threading.Thread(
            target=lead, name=f"leading {self.namespace}/{self.name}", daemon=True
        ).start()
        try:
            renewed = self._renew(renewed, stop, done)
            leading.set()
            if renewed is not None and not done.is_set():
                # Keep the lease while the work stops: no successor may start before.
                give_up = None
                if self.stop_timeout is not None:
                    give_up = self._clock.now() + self.stop_timeout
                renewed = self._renew(renewed, done, None, give_up)
            if renewed is not None and done.is_set() and self.release_on_cancel:
                self._release()
            elif renewed is not None and not done.is_set():
                log.error(
                    "the work of lease %s/%s did not stop within %gs; not releasing it",
                    self.namespace,
                    self.name,
                    self.stop_timeout,
                )
        finally:
            leading.set()
            self._on_stopped_leading()

    def _acquire(self, stop: threading.Event) -> float | None:
        """Try until the lease is ours; when the successful attempt started (None: stopped)."""
        while not stop.is_set():
            started = self._clock.now()
            if self.try_acquire_or_renew():
                log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
                return started
            wait = self.retry_period * (1 + self._rng.random() * JITTER_FACTOR)
            if self._clock.sleep(wait, stop):
                break
        return None

    def _renew(
        self,
        renewed: float,
        until: threading.Event,
        also: threading.Event | None,
        give_up: float | None = None,
    ) -> float | None:
        """Renew every retry period until `until` or `also` is set or the clock reaches
        `give_up`; when the last successful renewal started, or None if leadership was
        lost (renewing failed for the renew deadline since then)."""
        while True:
            deadline = renewed + self.renew_deadline
            now = self._clock.now()
            if now >= deadline:
                break
            if self._clock.sleep(min(self.retry_period, deadline - now), until):
                return renewed
            if (also is not None and also.is_set()) or (
                give_up is not None and self._clock.now() >= give_up
            ):
                return renewed
            started = self._clock.now()
            if started >= deadline:
                break
            if not self.try_acquire_or_renew():
                continue
            if self._clock.now() >= deadline:
                log.warning(
                    "lease %s/%s renewed only after the renew deadline", self.namespace, self.name
                )
                break
            renewed = started
        log.warning(
            "could not renew lease %s/%s within %gs: leadership lost",
            self.namespace,
            self.name,
            self.renew_deadline,
        )
        return None

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
        except Exception as exc:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, exc)


class Term:
    """One term of leadership of a component that campaigns again in-process after a
    lost lease (`campaign`): `work(leading)` runs while the lease is ours and must return
    once `leading` is set. `led` is set once the lease was ours (when the work starts, or
    by the elector when the term ends: it may end one before the work's thread began),
    `over` when the work has returned, `failed` if it raised."""

    def __init__(self, work: Callable[[threading.Event], None]) -> None:
        self._work = work
        self.led = threading.Event()
        self.over = threading.Event()
        self.failed = False

    def lead(self, leading: threading.Event) -> None:
        """Run the work (the elector's `on_started_leading`); its failure is logged and
        recorded, never raised: the term ends either way."""
        self.led.set()
        try:
            self._work(leading)
        except Exception:
            self.failed = True
            log.exception("the work of this term failed")
        finally:
            self.over.set()


def campaign(
    client: RestClient,
    *,
    name: str,
    namespace: str,
    identity: str,
    new_term: Callable[[], Term],
    stop: threading.Event,
    lease_duration: float = LEASE_DURATION,
    renew_deadline: float = RENEW_DEADLINE,
    retry_period: float = RETRY_PERIOD,
    stop_timeout: float,
) -> int:
    """Campaign for the Lease `namespace/name`, lead a `new_term()`, and campaign again
    after a lost lease, until `stop` is set; the exit status: 0, or 1 if a term's work
    failed or did not stop within `stop_timeout` (the process must not run a second
    term beside it).

    kube-scheduler and kube-controller-manager exit when they lose their lease and count
    on a supervisor to start them again; a local control plane has none, so both
    components campaign again in-process, each term starting from scratch. `client`
    must time out well within `renew_deadline` (module docstring)."""
    lease = f"{namespace}/{name}"
    while not stop.is_set():
        term = new_term()
        elector = LeaderElector(
            client,
            name=name,
            namespace=namespace,
            identity=identity,
            on_started_leading=term.lead,
            on_stopped_leading=term.led.set,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
            stop_timeout=stop_timeout,
        )
        log.info("campaigning for the lease %s as %s", lease, identity)
        elector.run(stop)
        if not term.led.is_set():
            continue
        if not term.over.wait(stop_timeout):
            log.error("the work of lease %s did not stop within %gs; exiting", lease, stop_timeout)
            return 1
        if term.failed:
            log.error("the work of lease %s failed; exiting", lease)
            return 1
        if not stop.is_set():
            log.warning("lost the lease %s; its work has stopped, campaigning again", lease)
    return 0
