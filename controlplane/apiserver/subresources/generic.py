"""Subresources any resource may have: ``status`` and ``scale`` (custom resources get them
from their CRD's ``subresources``), and the one-field writes ``namespaces/finalize`` and
``certificatesigningrequests/approval``.

* ``status``: GET reads the object; PUT/PATCH change only its status (the registry's
  `STATUS` update strategy).
* ``scale``: an autoscaling/v1 Scale view of a workload's replicas (``kubectl scale``),
  where the resource's strategy keeps them (a custom resource: where its CRD says).
* ``finalize`` writes a Namespace's ``spec.finalizers`` (the namespace controller's last
  step); ``approval`` a CSR's ``status.conditions`` (``kubectl certificate approve``).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from flask import Response, request

from kubelab.api import errors, patch
from kubelab.api.resources import Resource

from ..handlers import dry_run, field_manager, json_response, request_body
from ..registry import MAIN, STATUS, Registry, UpdateStrategy, patch_error
from ..strategies import Strategies
from ..views import ConvertedView
from .rest import Object, SubresourceRequest, SubresourceREST

ServedBy = Callable[[Resource], Registry | ConvertedView]
"""What serves a resource's verbs: the registry, or a conversion view (`APIServer.registry_for`)."""


class StatusREST(SubresourceREST):
    def __init__(self, served_by: ServedBy) -> None:
        self.served_by = served_by

    def get(self, req: SubresourceRequest) -> Response:
        r = req.resource
        return json_response(self.served_by(r).get(r, req.namespace, req.name))

    def update(self, req: SubresourceRequest) -> Response:
        r = req.resource
        updated = self.served_by(r).update(
            r, req.namespace, req.name, request_body(), req.user, STATUS, dry_run()
        )
        return json_response(updated)

    def patch(self, req: SubresourceRequest) -> Response:
        r = req.resource
        patched = self.served_by(r).patch(
            r,
            req.namespace,
            req.name,
            request.get_data(),
            request.content_type or "",
            req.user,
            STATUS,
            dry_run(),
        )
        return json_response(patched)


class ScaleREST(SubresourceREST):
    def __init__(self, served_by: ServedBy, strategies: Strategies) -> None:
        self.served_by = served_by
        # The apiserver's strategies: where each resource keeps its replicas.
        self.strategies = strategies

    def get(self, req: SubresourceRequest) -> Response:
        r = req.resource
        obj = self.served_by(r).get(r, req.namespace, req.name)
        return json_response(self.strategies.for_resource(r).to_scale(obj))

    def update(self, req: SubresourceRequest) -> Response:
        return self._scale(req, request_body())

    def patch(self, req: SubresourceRequest) -> Response:
        r = req.resource
        obj = self.served_by(r).get(r, req.namespace, req.name)
        current = self.strategies.for_resource(r).to_scale(obj)
        # The read's resourceVersion is not the client's: a patch pins one only if it
        # sets it (a controller's status write meanwhile must not make it a 409).
        current["metadata"].pop("resourceVersion", None)
        media = (request.content_type or "").split(";")[0].strip()
        try:
            wanted = patch.apply_patch(
                "Scale",
                current,
                request.get_data(),
                patch.MERGE_PATCH if media == patch.STRATEGIC_MERGE_PATCH else media,
            )
        except patch.PatchError as exc:
            raise patch_error(exc) from None
        return self._scale(req, wanted)

    def _scale(self, req: SubresourceRequest, wanted: Object) -> Response:
        """Write the replicas of the Scale `wanted` into the object."""
        r, strategy = req.resource, self.strategies.for_resource(req.resource)
        spec = wanted.get("spec")
        replicas = spec.get("replicas") if isinstance(spec, dict) else None
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid_object(
                "Scale",
                req.name,
                [errors.invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
                "autoscaling",
            )
        meta = wanted.get("metadata")
        rv = str((meta.get("resourceVersion") if isinstance(meta, dict) else None) or "")
        body = json.dumps(
            {"metadata": {"resourceVersion": rv} if rv else {}, **strategy.scale_patch(replicas)}
        ).encode()
        updated = self.served_by(r).patch(
            r,
            req.namespace,
            req.name,
            body,
            "application/merge-patch+json",
            req.user,
            dry_run=dry_run(),
            manager=field_manager(),
        )
        return json_response(strategy.to_scale(updated))


class FieldREST(SubresourceREST):
    """A subresource that writes one list field of its object on PUT, whatever else the
    sent object holds: ``finalize`` (``spec.finalizers``), ``approval``
    (``status.conditions``, as a status write)."""

    def __init__(
        self, registry: Registry, section: str, field: str, writes_as: UpdateStrategy = MAIN
    ) -> None:
        self.registry, self.section, self.field = registry, section, field
        self.writes_as = writes_as

    def update(self, req: SubresourceRequest) -> Response:
        section = request_body().get(self.section)
        value = section.get(self.field, []) if isinstance(section, dict) else None
        if not isinstance(value, list):
            raise errors.bad_request(f"{self.section}.{self.field} must be a list")
        patch_body = json.dumps({self.section: {self.field: value}}).encode()
        updated = self.registry.patch(
            req.resource,
            req.namespace,
            req.name,
            patch_body,
            "application/merge-patch+json",
            req.user,
            self.writes_as,
            dry_run(),
        )
        return json_response(updated)
