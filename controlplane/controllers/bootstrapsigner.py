"""kube-controller-manager's bootstrap-signer-controller: `kube-public/cluster-info`
signed with every signing bootstrap token.

A joining node reads cluster-info before it trusts anything (the ConfigMap is public).
Besides pinning the CA by its public key's hash, it checks the ConfigMap's
`jws-kubeconfig-<token-id>` entry: a detached JWS of the `kubeconfig` value made with
the token's secret (`kubelab.jws`), which only holders of the token can make. This
controller keeps those entries true: one per bootstrap token Secret in kube-system
with `usage-bootstrap-signing: "true"` that has not expired, none for any other. It
looks again when a token expires (the sync returns the time left), so an expired
token's signature goes even without an event. Keyed by "kube-public/cluster-info".
"""

from __future__ import annotations

import base64
import copy
import threading

from kubelab import jws
from kubelab.api.errors import StatusError
from kubelab.api.taints import parse_time
from kubelab.client import (
    REAL_CLOCK,
    Clock,
    DeletedFinalStateUnknown,
    Object,
    WorkQueue,
    object_key,
    resource_for,
)

from .base import ControllerContext, SyncResult, Workers, controller_logger
from .certificates import is_bootstrap_token

NAME = "bootstrap-signer-controller"
CONFIG_MAPS = resource_for("v1", "ConfigMap")
SECRETS = resource_for("v1", "Secret")
CLUSTER_INFO = "kube-public/cluster-info"


def _decoded(secret: Object) -> dict[str, str]:
    data = secret.get("data") or {}
    return {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}


class BootstrapSigner:
    """Signs cluster-info with the signing bootstrap tokens (module docstring)."""

    name = NAME

    def __init__(self, ctx: ControllerContext, clock: Clock = REAL_CLOCK) -> None:
        self._tracer = ctx.tracer
        self._clock = clock
        self._client = ctx.client_for(NAME)
        self._log = controller_logger(NAME)
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        self._config_maps = ctx.informers.informer(CONFIG_MAPS)
        self._config_maps.add_event_handler(
            on_add=self._config_map, on_update=lambda _old, new: self._config_map(new)
        )
        self._secrets = ctx.informers.informer(SECRETS)
        self._secrets.add_event_handler(
            on_add=self._secret,
            on_update=lambda _old, new: self._secret(new),
            on_delete=self._secret,
        )

    def _config_map(self, config_map: Object) -> None:
        if object_key(config_map) == CLUSTER_INFO:
            self.queue.add(CLUSTER_INFO)

    def _secret(self, secret: Object | DeletedFinalStateUnknown) -> None:
        obj = secret.obj if isinstance(secret, DeletedFinalStateUnknown) else secret
        if isinstance(obj, dict) and is_bootstrap_token(obj):
            self.queue.add(CLUSTER_INFO)

    def run(self, workers: int, stop: threading.Event) -> None:
        Workers(
            NAME, self.queue, self.sync, self._log, tracer=self._tracer, objects=self._config_maps
        ).run(workers, stop)

    def signatures(self, content: str) -> tuple[dict[str, str], float | None]:
        """The entries cluster-info should carry, and the seconds until the first of
        their tokens expires (None: none expires)."""
        now = self._clock.utcnow()
        wanted: dict[str, str] = {}
        soonest: float | None = None
        for secret in self._secrets.indexer.list():
            if not is_bootstrap_token(secret):
                continue
            data = _decoded(secret)
            token_id, token_secret = data.get("token-id", ""), data.get("token-secret", "")
            if data.get("usage-bootstrap-signing") != "true" or not token_id or not token_secret:
                continue
            if data.get("expiration"):
                try:
                    left = (parse_time(data["expiration"]) - now).total_seconds()
                except ValueError:
                    self._log.info("bootstrap token %s: unreadable expiration", token_id)
                    continue
                if left <= 0:
                    continue
                soonest = left if soonest is None else min(soonest, left)
            key = f"{jws.SIGNATURE_PREFIX}{token_id}"
            wanted[key] = jws.sign_detached(content, token_id, token_secret)
        return wanted, soonest

    def sync(self, key: str) -> SyncResult:
        config_map = self._config_maps.indexer.get(key)
        if config_map is None:
            return None
        data = config_map.get("data") or {}
        content = data.get("kubeconfig")
        if content is None:
            return None
        wanted, soonest = self.signatures(content)
        kept = {k: v for k, v in data.items() if not k.startswith(jws.SIGNATURE_PREFIX)}
        if {**kept, **wanted} != data:
            updated = copy.deepcopy(config_map)
            updated["data"] = {**kept, **wanted}
            try:
                self._client.update(CONFIG_MAPS, updated)
            except StatusError as exc:
                if exc.code == 404:
                    return None
                raise  # a conflict: the workers retry with the newer object
            self._log.info(
                "signed %s with %d bootstrap token(s): %s",
                key,
                len(wanted),
                ", ".join(sorted(k.removeprefix(jws.SIGNATURE_PREFIX) for k in wanted)) or "none",
            )
        return soonest
