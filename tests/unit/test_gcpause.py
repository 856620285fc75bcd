"""The GC pause policy: survivors of a full collection are frozen, and a periodic sweep
unfreezes and collects so that garbage cycles among them are not kept forever."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kubelab.gcpause import PausePolicy


@pytest.fixture
def clean_gc() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_full_collection_freezes_its_survivors(clean_gc: None) -> None:
    seen: list[tuple[int, float]] = []
    policy = PausePolicy(600.0, lambda gen, s: seen.append((gen, s)), clock=lambda: 0.0)
    keep = [[i] for i in range(1000)]
    policy("start", {"generation": 2})
    policy("stop", {"generation": 2})
    assert gc.get_freeze_count() >= len(keep)
    assert seen and seen[0][0] == 2 and seen[0][1] >= 0


def test_young_collections_freeze_nothing(clean_gc: None) -> None:
    policy = PausePolicy(600.0, None, clock=lambda: 0.0)
    policy("start", {"generation": 0})
    policy("stop", {"generation": 0})
    assert gc.get_freeze_count() == 0


def test_a_sweep_collects_cycles_that_died_while_frozen(clean_gc: None) -> None:
    now = [0.0]
    policy = PausePolicy(10.0, None, clock=lambda: now[0])

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only the collector can free it
    alive = weakref.ref(a)
    policy("start", {"generation": 2})
    policy("stop", {"generation": 2})  # frozen, cycle included
    del a, b
    assert alive() is not None  # frozen: the collector does not look at it
    now[0] = 11.0
    policy("start", {"generation": 2})
    policy("stop", {"generation": 2})  # the sweep: unfreeze, collect, freeze again
    assert alive() is None
