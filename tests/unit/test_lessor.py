"""Lease deadlines: set on grant and renew, extended on promotion, revoked once."""

from controlplane.store.lessor import Lessor, minimum_ttl


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_expires_ttl_seconds_after_its_last_renewal() -> None:
    clock = FakeClock()
    lessor = Lessor(min_ttl=2, clock=clock)
    lessor.granted(7, 5)
    clock.now += 4
    assert lessor.expired() == []
    assert lessor.remaining(7) == 1
    lessor.renewed(7, 5)
    clock.now += 4.5
    assert lessor.expired() == []
    clock.now += 1
    assert lessor.expired() == [7]
    assert lessor.expired() == [], "an expiry is reported once until retried"
    lessor.retry(7)
    assert lessor.expired() == [7]
    lessor.revoked(7)
    assert lessor.remaining(7) == -1 and lessor.expired() == []


def test_a_new_leader_gives_every_lease_a_full_ttl() -> None:
    clock = FakeClock()
    lessor = Lessor(min_ttl=2, clock=clock)
    lessor.reset([(1, 10), (2, 3)])
    clock.now += 9
    lessor.promote()
    assert lessor.remaining(1) == 10 and lessor.remaining(2) == 3
    assert lessor.expired() == []


def test_ttl_is_raised_to_the_minimum_etcd_computes() -> None:
    assert minimum_ttl(1.0) == 2  # 1.5 x the 1 s default election timeout, rounded up
    assert Lessor(min_ttl=2).effective_ttl(1) == 2
    assert Lessor(min_ttl=2).effective_ttl(60) == 60
