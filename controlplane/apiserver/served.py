"""What one apiserver serves, as far as it changes while the apiserver runs: its
resource table, the strategy of each stored resource, its printers, the schemas it judges
written fields by, and its OpenAPI and discovery documents.

The built-in part of each is a module constant that nothing changes; the custom
resources of the CustomResourceDefinitions the apiserver serves are added and removed by
its CRD controller (`controlplane.apiserver.crds`). Everything that changes lives here,
in the `APIServer` that owns it, as Kubernetes keeps its storage map and CRD handler in
the server instance: two apiservers in one process (tests start one after another, or
side by side) share nothing, and a stopped one leaves nothing behind.
"""

from __future__ import annotations

from kubelab.api.resources import Resource, ResourceTable

from .discovery import Discovery
from .fieldvalidation import FieldSchemas
from .openapi import OpenAPIService
from .strategies import Strategies
from .tables import Printers


class ServedAPI:
    """One apiserver's served resources and what goes with them (see the module doc)."""

    def __init__(self) -> None:
        self.strategies = Strategies()
        self.printers = Printers()
        self.field_schemas = FieldSchemas()
        self.openapi = OpenAPIService()
        self._discovery = Discovery(ResourceTable())

    @property
    def resources(self) -> ResourceTable:
        """The resources served now: routing, RBAC names, discovery."""
        return self._discovery.table

    @property
    def discovery(self) -> Discovery:
        """The discovery documents of `resources`."""
        return self._discovery

    def set_custom(self, custom: tuple[Resource, ...]) -> None:
        """Serve these custom resources (one entry per served version) besides the
        built-in ones. The table and its discovery documents change in one assignment, so
        a request sees either the old pair or the new one."""
        self._discovery = Discovery(ResourceTable(custom))
