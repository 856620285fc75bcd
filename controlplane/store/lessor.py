"""Lease expiry: when each lease runs out, as seen from this member's clock.

Leases themselves (id, TTL, attached keys) are replicated state in the MVCC store; their
*deadlines* are not, because clocks differ between members and a replicated deadline
would be meaningless after a restart. Every member keeps deadlines here:

* a grant or a keep-alive, when applied, sets the deadline to now + TTL;
* only the leader acts on them: it proposes a revoke for each expired lease;
* a member that becomes leader first extends every deadline to now + TTL, so leases do
  not expire merely because leadership moved (etcd's lessor "promote" does the same);
  the cost is that a lease may outlive its TTL by up to one TTL across a failover.

Keep-alives go through Raft (a small "renew" command), so a client may send them to any
member and every member, the future leader included, learns of them. etcd instead sends
them to the leader outside Raft; we trade one log entry per keep-alive for not having to
forward client requests between members.

TTLs below the minimum (1.5 election timeouts, rounded up, as etcd computes it) are
raised to it: a shorter lease could expire during an ordinary leader election.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable


def minimum_ttl(election_timeout_s: float) -> int:
    return max(1, math.ceil(1.5 * election_timeout_s))


class Lessor:
    def __init__(self, min_ttl: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_ttl = min_ttl
        self._clock = clock
        self._ttl: dict[int, int] = {}
        self._deadline: dict[int, float] = {}
        self._revoking: set[int] = set()

    def effective_ttl(self, requested: int) -> int:
        return max(requested, self.min_ttl)

    def granted(self, lease_id: int, ttl: int) -> None:
        self._ttl[lease_id] = ttl
        self._deadline[lease_id] = self._clock() + ttl

    renewed = granted

    def revoked(self, lease_id: int) -> None:
        self._ttl.pop(lease_id, None)
        self._deadline.pop(lease_id, None)
        self._revoking.discard(lease_id)

    def reset(self, leases: Iterable[tuple[int, int]]) -> None:
        """Start over from the replicated leases (start-up, snapshot install)."""
        self._ttl.clear()
        self._deadline.clear()
        self._revoking.clear()
        for lease_id, ttl in leases:
            self.granted(lease_id, ttl)

    def promote(self) -> None:
        """This member became leader: give every lease a full TTL from now."""
        now = self._clock()
        for lease_id, ttl in self._ttl.items():
            self._deadline[lease_id] = now + ttl
        self._revoking.clear()

    def remaining(self, lease_id: int) -> int:
        """Whole seconds left (truncated, as etcd's TimeToLive reports them: 9 right after
        granting a 10 s lease), -1 for an unknown lease."""
        deadline = self._deadline.get(lease_id)
        if deadline is None:
            return -1
        return max(0, int(deadline - self._clock()))

    def ttl(self, lease_id: int) -> int:
        return self._ttl.get(lease_id, -1)

    def expired(self) -> list[int]:
        """Leases past their deadline that no revoke has been started for yet; they are
        marked as being revoked, so a slow revoke is not proposed twice."""
        now = self._clock()
        out = [
            lid
            for lid, deadline in self._deadline.items()
            if deadline <= now and lid not in self._revoking
        ]
        self._revoking.update(out)
        return sorted(out)

    def retry(self, lease_id: int) -> None:
        """A revoke failed (e.g. leadership lost): allow it to be proposed again."""
        self._revoking.discard(lease_id)
