"""Resources served from another resource's objects through a conversion.

``events.k8s.io/v1`` Events are the core Events in another shape (see
`kubelab.api.conversion`): one object, stored once, listed and watched through either
API. `ConvertedView` answers the REST verbs for the view by calling the registry on the
storage resource and converting on the way in and out; selectors apply to the view's
form (``regarding.name``, not ``involvedObject.name``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kubelab import fastjson
from kubelab.api import errors
from kubelab.api.resources import Resource

from .registry import (
    MAIN,
    DeleteOptions,
    EventStream,
    ListOptions,
    Registry,
    UpdateStrategy,
    decode_body,
    patcher,
)

Object = dict[str, Any]
Convert = Callable[[Object], Object]


class ConvertedStream:
    """A watch stream whose objects are converted to the view's form."""

    def __init__(self, stream: EventStream, view: Resource, to_view: Convert) -> None:
        self.stream, self.view, self.to_view = stream, view, to_view

    def __iter__(self) -> Iterator[Object]:
        for ev in self.stream:
            obj = ev["object"]
            if ev["type"] == "BOOKMARK":
                obj = {**obj, "apiVersion": self.view.api_version, "kind": self.view.kind}
            elif ev["type"] != "ERROR":
                obj = self.to_view(obj)
            yield {"type": ev["type"], "object": obj}

    def close(self) -> None:
        self.stream.close()


class ConvertedView:
    def __init__(
        self,
        registry: Registry,
        view: Resource,
        storage: Resource,
        to_view: Convert,
        from_view: Convert,
    ) -> None:
        self.registry, self.view, self.storage = registry, view, storage
        self.to_view, self.from_view = to_view, from_view

    def _matches(self, opts: ListOptions) -> Callable[[Object], bool]:
        selected = self.registry.matcher(self.view, opts)
        return lambda obj: selected(self.to_view(obj))

    def _incoming(self, obj: Object) -> Object:
        if (
            obj.get("apiVersion", self.view.api_version) != self.view.api_version
            or obj.get("kind", self.view.kind) != self.view.kind
        ):
            raise errors.bad_request(
                f"the object is {obj.get('apiVersion')}/{obj.get('kind')}; expected "
                f"{self.view.api_version}/{self.view.kind}"
            )
        return self.from_view(obj)

    def get(self, r: Resource, namespace: str, name: str, resource_version: str = "") -> Object:
        return self.to_view(self.registry.get(self.storage, namespace, name, resource_version))

    def list_objects(self, r: Resource, namespace: str, opts: ListOptions) -> Object:
        listed = self.registry.list_objects(self.storage, namespace, opts, self._matches(opts))
        return {
            **listed,
            "apiVersion": self.view.api_version,
            "kind": self.view.list_kind,
            "items": [self.to_view(o) for o in listed["items"]],
        }

    def watch(self, r: Resource, namespace: str, opts: ListOptions) -> ConvertedStream:
        stream = self.registry.watch(self.storage, namespace, opts, matches=self._matches(opts))
        return ConvertedStream(stream, self.view, self.to_view)

    def create(
        self,
        r: Resource,
        namespace: str,
        obj: Object,
        user: Any,
        dry_run: bool = False,
    ) -> Object:
        stored = self.registry.create(self.storage, namespace, self._incoming(obj), user, dry_run)
        return self.to_view(stored)

    def update(
        self,
        r: Resource,
        namespace: str,
        name: str,
        obj: Object,
        user: Any,
        update: UpdateStrategy = MAIN,
        dry_run: bool = False,
        manager: str = "",
    ) -> Object:
        stored = self.registry.update(
            self.storage,
            namespace,
            name,
            self._incoming(obj),
            user,
            update,
            dry_run,
            manager,
        )
        return self.to_view(stored)

    def patch(
        self,
        r: Resource,
        namespace: str,
        name: str,
        body: bytes,
        content_type: str,
        user: Any,
        update: UpdateStrategy = MAIN,
        dry_run: bool = False,
        manager: str = "",
    ) -> Object:
        kind = self.registry.api.strategies.for_resource(self.view).patch_kind
        patched = patcher(kind, body, content_type)

        def change(old: Object) -> Object:
            return self._incoming(patched(self.to_view(old)))

        stored = self.registry.update_with(
            self.storage, namespace, name, change, user, update, dry_run, manager
        )
        return self.to_view(stored)

    def apply(
        self,
        r: Resource,
        namespace: str,
        name: str,
        body: bytes,
        user: Any,
        manager: str,
        dry_run: bool = False,
        force: bool = False,
    ) -> Object:
        """Server-side apply of the view's form: the applied configuration is converted,
        so field ownership is recorded on the stored form's fields."""
        config = self._incoming(decode_body(body, "application/yaml"))
        stored = self.registry.apply(
            self.storage, namespace, name, fastjson.dumps(config), user, manager, dry_run, force
        )
        return self.to_view(stored)

    def delete(
        self, r: Resource, namespace: str, name: str, opts: DeleteOptions, user: Any
    ) -> Object:
        return self.to_view(self.registry.delete(self.storage, namespace, name, opts, user))

    def delete_collection(
        self, r: Resource, namespace: str, lopts: ListOptions, dopts: DeleteOptions, user: Any
    ) -> Object:
        done = self.registry.delete_collection(
            self.storage, namespace, lopts, dopts, user, self._matches(lopts)
        )
        return {
            **done,
            "apiVersion": self.view.api_version,
            "kind": self.view.list_kind,
            "items": [self.to_view(o) for o in done["items"]],
        }
