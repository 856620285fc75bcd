"""DefaultTolerationSeconds: pods tolerate ``not-ready`` and ``unreachable`` nodes for
300 s before taint-based eviction, unless they say otherwise."""

from __future__ import annotations

from ..registry import Attributes
from .interfaces import MutationInterface, created_pod


class DefaultTolerationSeconds(MutationInterface):
    NAME = "DefaultTolerationSeconds"
    OPERATIONS = frozenset({"CREATE"})

    def admit(self, attrs: Attributes) -> None:
        pod = created_pod(attrs)
        if pod is None:
            return
        tolerations = pod.setdefault("spec", {}).setdefault("tolerations", [])
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if any(
                t.get("key") == key and t.get("effect") in ("NoExecute", None, "")
                for t in tolerations
            ) or any(t.get("operator") == "Exists" and not t.get("key") for t in tolerations):
                continue
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
