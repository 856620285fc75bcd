"""The ingress controller: informers on Ingresses, Services, EndpointSlices and Secrets,
and one sync (`kubelab.nodeagent.SyncLoop`) that renders the whole nginx.conf from them
(`agents.ingress.nginxconf`), writes it and asks nginx to reload when it changed, then
sets `status.loadBalancer` of every Ingress of its class to the address of its own
LoadBalancer Service (`--publish-service`, as ingress-nginx has it) and records a
Warning Event for each problem a render found, once per Ingress and message.

Which Ingresses are ours: those whose `spec.ingressClassName` is the controller's class
(`nginx`), and those naming no class, the class being the cluster's default.

Tracing: a sync that changes caused is `IngressNginx.sync`, with an
`IngressNginx.updateConfig` per changed object linked to its writer (the module
docstring of `kubelab.nodeagent`); its status patches are `Client.patch` spans inside it.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry import trace

from agents.ingress.nginxconf import Problem, render
from kubelab.api.errors import StatusError
from kubelab.client import Object, RestClient, SharedInformer, object_key, resource_for
from kubelab.client.record import WARNING, EventRecorder
from kubelab.nodeagent import SyncLoop, SyncTracing

log = logging.getLogger("kubelab.ingress")

INGRESSES = resource_for("networking.k8s.io/v1", "Ingress")
SERVICES = resource_for("v1", "Service")
ENDPOINT_SLICES = resource_for("discovery.k8s.io/v1", "EndpointSlice")
SECRETS = resource_for("v1", "Secret")

CLASS_NAME = "nginx"
CONTROLLER_NAME = "k8s.io/ingress-nginx"
"""The IngressClass's `spec.controller`, as ingress-nginx's."""
COMPONENT = "nginx-ingress-controller"
"""The Events' source, as ingress-nginx's."""

Reload = Callable[[], None]


def is_ours(ingress: Object, class_name: str = CLASS_NAME) -> bool:
    """Whether `ingress` is of `class_name` (module docstring)."""
    named = (ingress.get("spec") or {}).get("ingressClassName")
    return named is None or named == class_name


def fifo_reload(path: Path, wait: float = 30.0) -> Reload:
    """A reload that writes a line to the FIFO `path`, which the nginx container's
    script reads to run `nginx -s reload` (docs/architecture.md, "Ingress"). While
    nginx's container is starting there is no FIFO or no reader yet: the reload waits
    for one up to `wait` seconds, then fails (the sync is retried)."""

    def reload() -> None:
        deadline = time.monotonic() + wait
        while True:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ENXIO):
                    raise
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"nobody reads {path} after {wait:.0f} s: is nginx's container "
                        "running (kubectl logs -c nginx)?"
                    ) from None
                time.sleep(0.1)
        try:
            os.write(fd, b"reload\n")
        finally:
            os.close(fd)

    return reload


class IngressController:
    """The controller of the module docstring; `conf_dir` is where nginx.conf and the
    certificates go, `reload` asks nginx to read them again."""

    def __init__(
        self,
        client: RestClient,
        *,
        conf_dir: Path,
        reload: Reload,
        publish_service: str = "",
        class_name: str = CLASS_NAME,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._client = client
        self._conf_dir = conf_dir
        self._reload = reload
        self._publish = publish_service
        self._class = class_name
        self.ingresses = SharedInformer(client, INGRESSES)
        self.services = SharedInformer(client, SERVICES)
        self.slices = SharedInformer(client, ENDPOINT_SLICES)
        self.secrets = SharedInformer(client, SECRETS)
        self._informers = [self.ingresses, self.services, self.slices, self.secrets]
        self._events = EventRecorder(
            client, COMPONENT, object_type=("networking.k8s.io/v1", "Ingress")
        )
        self._reported: set[tuple[str, str]] = set()
        self._written = ""
        self.loop = SyncLoop(
            "ingress",
            self.sync,
            resync=300.0,
            sync_tracing=(
                None
                if tracer is None
                else SyncTracing(tracer, "IngressNginx.sync", "IngressNginx.updateConfig")
            ),
        )
        for informer in self._informers:
            self.loop.watch(informer)
        self.reloads = 0
        """nginx reloads asked for (tests and the benchmark wait on it)."""

    def run(self, stop: threading.Event) -> None:
        """Sync until `stop` is set."""
        for informer in self._informers:
            informer.start(stop)
        with self._events:
            self.loop.run(self._informers, stop)

    def sync(self) -> None:
        ours = [i for i in self.ingresses.indexer.list() if is_ours(i, self._class)]
        rendered = render(
            ours,
            self.services.indexer.list(),
            self.slices.indexer.list(),
            self.secrets.indexer.list(),
            directory=str(self._conf_dir),
        )
        if rendered.conf != self._written:
            for name, content in rendered.files.items():
                _write(self._conf_dir / name, content, mode=0o600)
            _write(self._conf_dir / "nginx.conf", rendered.conf.encode())
            self._reload()
            self._written = rendered.conf
            self.reloads += 1
            log.info(
                "nginx.conf rewritten and nginx reloaded: %d ingresses, %d problems",
                len(ours),
                len(rendered.problems),
            )
        self._report(rendered.problems)
        address = self._address()
        for ingress in ours:
            self._set_status(ingress, address)

    def _report(self, problems: list[Problem]) -> None:
        """A Warning Event per problem not reported before (the set is of problems still
        present, so one that comes back is reported again)."""
        now = set()
        for problem in problems:
            meta = problem.ingress["metadata"]
            key = (str(meta.get("uid")), problem.message)
            now.add(key)
            if key in self._reported:
                continue
            log.warning(
                "ingress %s/%s (uid %s, resourceVersion %s): %s",
                meta.get("namespace"),
                meta.get("name"),
                meta.get("uid"),
                meta.get("resourceVersion"),
                problem.message,
            )
            self._events.event(problem.ingress, WARNING, problem.reason, problem.message)
        self._reported = now

    def _address(self) -> list[dict[str, Any]]:
        """`status.loadBalancer.ingress` of the published Service ([] when unset or not
        yet given an address)."""
        if not self._publish:
            return []
        service = self.services.indexer.get(self._publish)
        if service is None:
            return []
        status = (service.get("status") or {}).get("loadBalancer") or {}
        return [
            {k: v for k, v in entry.items() if k in ("ip", "hostname")}
            for entry in status.get("ingress") or []
        ]

    def _set_status(self, ingress: Object, address: list[dict[str, Any]]) -> None:
        shown = ((ingress.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        if shown == address:
            return
        meta = ingress["metadata"]
        body = {"status": {"loadBalancer": {"ingress": address or None}}}
        try:
            updated = self._client.patch(
                INGRESSES, meta["name"], body, meta["namespace"], subresource="status"
            )
        except StatusError as exc:
            if exc.code == 404:
                return
            raise
        umeta = updated["metadata"]
        log.info(
            "ingress %s (uid %s): status.loadBalancer set to %s (resourceVersion %s)",
            object_key(updated),
            umeta.get("uid"),
            ", ".join(a.get("ip") or a.get("hostname", "") for a in address) or "none",
            umeta.get("resourceVersion"),
        )


def _write(path: Path, content: bytes, mode: int = 0o644) -> None:
    """Replace `path` at once (nginx never reads half a file)."""
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_bytes(content)
    partial.chmod(mode)
    partial.replace(path)
