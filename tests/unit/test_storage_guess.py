"""`Storage.guaranteed_update` with a first guess (the watch cache's copy, which may be
stale): a stale guess never loses or blocks a change, it only costs a retry."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from controlplane.apiserver.storage import Storage
from kubelab.client.rest import Object
from lab.memstore import MemStore

KEY = "/registry/configmaps/default/cm"


@pytest.fixture
def storage() -> Iterator[Storage]:
    store = MemStore()
    yield Storage(store)
    store.close()


def labelled(obj: Object, value: str) -> Object:
    return {**obj, "metadata": {**obj["metadata"], "labels": {"v": value}}}


def set_label(value: str) -> Callable[[Object], Object | None]:
    def mutate(obj: Object) -> Object | None:
        if (obj["metadata"].get("labels") or {}).get("v") == value:
            return None
        return labelled(obj, value)

    return mutate


def test_a_current_guess_is_written_without_a_read(storage: Storage) -> None:
    first = storage.create(KEY, {"metadata": {"name": "cm", "namespace": "default"}})
    stored, written = storage.guaranteed_update(KEY, set_label("a"), guess=first)
    assert written and stored["metadata"]["labels"] == {"v": "a"}


def test_a_stale_guess_retries_on_the_current_object(storage: Storage) -> None:
    first = storage.create(KEY, {"metadata": {"name": "cm", "namespace": "default"}})
    storage.guaranteed_update(KEY, set_label("b"))
    stored, written = storage.guaranteed_update(KEY, set_label("c"), guess=first)
    assert written and stored["metadata"]["labels"] == {"v": "c"}
    assert int(stored["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


def test_a_change_empty_on_a_stale_guess_is_tried_on_the_current_object(
    storage: Storage,
) -> None:
    """The guess already has v=a, the store moved on to v=b: setting v=a is no change on
    the guess, but is one on the current object, and must be written."""
    first = storage.create(KEY, {"metadata": {"name": "cm", "namespace": "default"}})
    stale = storage.guaranteed_update(KEY, set_label("a"))[0]
    storage.guaranteed_update(KEY, set_label("b"))
    stored, written = storage.guaranteed_update(KEY, set_label("a"), guess=stale)
    assert written and stored["metadata"]["labels"] == {"v": "a"}
    current = storage.get(KEY)
    assert current is not None and current["metadata"]["labels"] == {"v": "a"}
    assert first["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]


class Pinned(Exception):
    """What a precondition raises (the registry's 409 for a pinned resourceVersion)."""


def pinned_to(revision: str) -> Callable[[Object], Object | None]:
    """A client's PUT with the resourceVersion it read: refused unless it is current."""

    def mutate(obj: Object) -> Object | None:
        if obj["metadata"]["resourceVersion"] != revision:
            raise Pinned(obj["metadata"]["resourceVersion"])
        return labelled(obj, "pinned")

    return mutate


def test_a_write_pinned_to_the_current_version_passes_a_stale_guess(storage: Storage) -> None:
    """The client read the current object; the cache still holds an older one. The
    precondition fails on the guess alone, so it is checked again on a fresh read, and
    one attempt (a pinned write's `retries=1`) is enough."""
    first = storage.create(KEY, {"metadata": {"name": "cm", "namespace": "default"}})
    current = storage.guaranteed_update(KEY, set_label("b"))[0]
    revision = current["metadata"]["resourceVersion"]
    stored, written = storage.guaranteed_update(KEY, pinned_to(revision), guess=first, retries=1)
    assert written and stored["metadata"]["labels"] == {"v": "pinned"}


def test_a_write_pinned_to_an_old_version_is_refused_on_the_current_object(
    storage: Storage,
) -> None:
    first = storage.create(KEY, {"metadata": {"name": "cm", "namespace": "default"}})
    storage.guaranteed_update(KEY, set_label("b"))
    with pytest.raises(Pinned):
        storage.guaranteed_update(
            KEY, pinned_to(first["metadata"]["resourceVersion"]), guess=first, retries=1
        )
